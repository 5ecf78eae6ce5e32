/**
 * UpstreamGroup: the route-level passive-health rules of SPEC 4 (both as nginx): a lone upstream is
 * never ejected, and when every upstream has failed the counters reset for quick recovery.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UpstreamGroup } from '../../src/upstream/upstream-group.js';
import { makeUpstream, routeConfig } from './upstream-fixtures.js';

const route = routeConfig({ maxFails: 1, failTimeoutMs: 10_000, failFactor: 5 });

describe('UpstreamGroup', () => {
  it('never ejects a lone upstream, nor degrades its weight', () => {
    const a = makeUpstream(9001, { weight: 5 });
    const group = new UpstreamGroup(route, [a]);
    for (let t = 0; t < 5; t++) {
      const outcome = group.recordFailure(a, t);
      assert.deepEqual(outcome, { ejected: false, wasGroupReset: false }, `got ${JSON.stringify(outcome)} at t=${t}`);
    }
    assert.equal(a.isAvailable(5), true, 'got the lone upstream unavailable, want available');
    assert.equal(a.effectiveWeight, 5, `got effectiveWeight ${a.effectiveWeight}, want 5`);
    assert.equal(a.failuresTotal, 5, `got failuresTotal ${a.failuresTotal}, want 5`);
  });

  it('ejects one of two upstreams while the other is available', () => {
    const a = makeUpstream(9001);
    const b = makeUpstream(9002);
    const group = new UpstreamGroup(route, [a, b]);
    const outcome = group.recordFailure(a, 0);
    assert.deepEqual(outcome, { ejected: true, wasGroupReset: false }, `got ${JSON.stringify(outcome)}`);
    assert.equal(a.isAvailable(1), false, 'got a available, want ejected');
    assert.equal(group.isAnyAvailable(1), true, 'got nothing available, want b');
  });

  it('resets every counter when all upstreams have failed, so they recover at once', () => {
    const a = makeUpstream(9001);
    const b = makeUpstream(9002);
    const group = new UpstreamGroup(route, [a, b]);
    group.recordFailure(a, 0);
    const outcome = group.recordFailure(b, 1);
    assert.deepEqual(outcome, { ejected: true, wasGroupReset: true }, `got ${JSON.stringify(outcome)}`);
    assert.equal(a.isAvailable(2), true, 'got a still ejected after the reset, want available');
    assert.equal(b.isAvailable(2), true, 'got b still ejected after the reset, want available');
    assert.equal(a.ejectedUntilMs, 0, `got a.ejectedUntilMs ${a.ejectedUntilMs}, want 0`);
  });

  it('counts an active-DOWN upstream as failed: ejecting the last available one resets', () => {
    const a = makeUpstream(9001);
    const b = makeUpstream(9002);
    const c = makeUpstream(9003);
    const group = new UpstreamGroup(route, [a, b, c]);
    b.healthState = 'down';
    group.recordFailure(a, 0);
    const outcome = group.recordFailure(c, 1);
    assert.deepEqual(outcome, { ejected: true, wasGroupReset: true }, `got ${JSON.stringify(outcome)}`);
    assert.equal(group.isAnyAvailable(2), true, 'got nothing available after the reset, want a and c');
    assert.equal(b.isAvailable(2), false, 'got b available, want it still DOWN (active health is not reset)');
  });

  it('does not reset while a backup is still available', () => {
    const a = makeUpstream(9001);
    const b = makeUpstream(9002);
    const backup = makeUpstream(9003, { isBackup: true });
    const group = new UpstreamGroup(route, [a, b, backup]);
    group.recordFailure(a, 0);
    const outcome = group.recordFailure(b, 1);
    assert.deepEqual(outcome, { ejected: true, wasGroupReset: false }, `got ${JSON.stringify(outcome)}`);
    assert.equal(b.isAvailable(2), false, 'got b available, want ejected (the backup serves)');
  });

  it('recoverIfAllFailed: resets when an active DOWN empties a route whose others are ejected', () => {
    const a = makeUpstream(9001);
    const b = makeUpstream(9002);
    const group = new UpstreamGroup(route, [a, b]);
    group.recordFailure(a, 0);
    b.healthState = 'down';
    assert.equal(group.isAnyAvailable(1), false, 'got something available, want none');
    assert.equal(group.recoverIfAllFailed(1), true, 'got no reset, want one');
    assert.equal(a.isAvailable(1), true, 'got a still ejected, want available');
  });

  it('recoverIfAllFailed: no reset when nothing is ejected (all DOWN is a real 503)', () => {
    const a = makeUpstream(9001);
    const b = makeUpstream(9002);
    const group = new UpstreamGroup(route, [a, b]);
    a.healthState = 'down';
    b.healthState = 'down';
    assert.equal(group.recoverIfAllFailed(0), false, 'got a reset, want none');
    assert.equal(group.isAnyAvailable(0), false, 'got something available, want none');
  });

  it('recordSuccess passes to the upstream (clears the count after the window)', () => {
    const a = makeUpstream(9001);
    const b = makeUpstream(9002);
    const group = new UpstreamGroup(routeConfig({ maxFails: 3, failTimeoutMs: 10_000 }), [a, b]);
    group.recordFailure(a, 0);
    group.recordSuccess(a, 10_000);
    assert.equal(a.recentFailures, 0, `got recentFailures ${a.recentFailures}, want 0`);
  });

  it('add/remove change the members and the lone rule follows', () => {
    const a = makeUpstream(9001);
    const b = makeUpstream(9002);
    const group = new UpstreamGroup(route, [a]);
    assert.equal(group.isLone, true);
    group.add(b);
    group.add(b);
    assert.deepEqual(group.upstreams, [a, b], 'got a duplicate or a missing upstream');
    assert.equal(group.isLone, false);
    assert.equal(group.recordFailure(a, 0).ejected, true, 'got a not ejected with two upstreams');
    assert.equal(group.remove(b), true);
    assert.equal(group.remove(b), false, 'got true removing an absent upstream, want false');
    assert.equal(group.isLone, true);
  });
});
