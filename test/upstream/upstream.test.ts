/**
 * Upstream passive health: failures counted within the fail_timeout window (not consecutively),
 * ejection for fail_timeout, max_fails = 0, and weight degradation with its recovery (SPEC 4).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PassiveHealthParams } from '../../src/upstream/upstream.js';
import { makeUpstream } from './upstream-fixtures.js';

const params: PassiveHealthParams = { maxFails: 3, failTimeoutMs: 10_000, failFactor: 5 };

/** Replays `events` ("fail@t" / "ok@t") and returns, for each failure, whether it ejected. */
function replay(events: readonly string[], p: PassiveHealthParams = params, weight = 1) {
  const upstream = makeUpstream(9001, { weight });
  const ejections: boolean[] = [];
  for (const event of events) {
    const [kind, at] = event.split('@');
    const nowMs = Number(at);
    if (kind === 'fail') ejections.push(upstream.recordFailure(nowMs, p).ejected);
    else upstream.recordSuccess(nowMs);
  }
  return { upstream, ejections };
}

describe('Upstream passive health: failures within the window', () => {
  const table: { name: string; events: string[]; want: boolean[]; wantEjectedUntil: number }[] = [
    {
      name: 'fail, ok, ok, fail, ok, fail within 10s → ejected at the 3rd failure',
      events: ['fail@0', 'ok@1', 'ok@2', 'fail@3', 'ok@4', 'fail@5'],
      want: [false, false, true],
      wantEjectedUntil: 10_005,
    },
    {
      name: 'three failures in a row → ejected at the 3rd',
      events: ['fail@100', 'fail@200', 'fail@300'],
      want: [false, false, true],
      wantEjectedUntil: 10_300,
    },
    {
      name: 'fail_timeout passes between the 1st and 2nd failure → count restarts, not ejected',
      events: ['fail@0', 'ok@1', 'fail@10000', 'ok@10001', 'fail@10002'],
      want: [false, false, false],
      wantEjectedUntil: 0,
    },
    {
      name: 'the window starts at the first failure: 0, 9s, 18s is never 3 within 10s',
      events: ['fail@0', 'fail@9000', 'fail@18000'],
      want: [false, false, false],
      wantEjectedUntil: 0,
    },
    {
      name: 'the last failure at window end − 1 ms still counts',
      events: ['fail@0', 'fail@5000', 'fail@9999'],
      want: [false, false, true],
      wantEjectedUntil: 19_999,
    },
  ];
  for (const row of table) {
    it(row.name, () => {
      const { upstream, ejections } = replay(row.events);
      assert.deepEqual(ejections, row.want, `got ejections ${JSON.stringify(ejections)}, want ${JSON.stringify(row.want)}`);
      assert.equal(upstream.ejectedUntilMs, row.wantEjectedUntil, `got ejectedUntilMs ${upstream.ejectedUntilMs}, want ${row.wantEjectedUntil}`);
    });
  }

  it('is unavailable while ejected and available again at ejectedUntilMs', () => {
    const { upstream } = replay(['fail@0', 'fail@1', 'fail@2']);
    assert.equal(upstream.isAvailable(10_001), false, 'got available at 10001, want ejected until 10002');
    assert.equal(upstream.isAvailable(10_002), true, 'got unavailable at 10002, want available');
    assert.equal(upstream.isEjected(10_001), true, 'got isEjected false at 10001, want true');
  });

  it('comes back from an ejection with a fresh count', () => {
    const { upstream, ejections } = replay(['fail@0', 'fail@1', 'fail@2', 'fail@10002', 'fail@10003']);
    assert.deepEqual(ejections, [false, false, true, false, false], `got ${JSON.stringify(ejections)}`);
    assert.equal(upstream.isAvailable(10_004), true, 'got unavailable after two fresh failures, want available');
  });

  it('failures while already ejected neither extend the ejection nor count', () => {
    const { upstream, ejections } = replay(['fail@0', 'fail@1', 'fail@2', 'fail@5000', 'fail@5001', 'fail@5002']);
    assert.deepEqual(ejections, [false, false, true, false, false, false], `got ${JSON.stringify(ejections)}`);
    assert.equal(upstream.ejectedUntilMs, 10_002, `got ejectedUntilMs ${upstream.ejectedUntilMs}, want 10002`);
    assert.equal(upstream.recentFailures, 0, `got recentFailures ${upstream.recentFailures}, want 0`);
    assert.equal(upstream.failuresTotal, 6, `got failuresTotal ${upstream.failuresTotal}, want 6`);
  });

  it('a success after the window has closed resets the count (nginx "mark peer live")', () => {
    const { upstream } = replay(['fail@0', 'fail@1']);
    assert.equal(upstream.recentFailures, 2, `got ${upstream.recentFailures}, want 2`);
    upstream.recordSuccess(9_999);
    assert.equal(upstream.recentFailures, 2, `got ${upstream.recentFailures} after an in-window success, want 2`);
    upstream.recordSuccess(10_000);
    assert.equal(upstream.recentFailures, 0, `got ${upstream.recentFailures} after the window, want 0`);
  });

  it('max_fails = 0 disables passive health: never ejected, weight kept, failures still totalled', () => {
    const { upstream, ejections } = replay(['fail@0', 'fail@1', 'fail@2', 'fail@3'], { ...params, maxFails: 0 }, 5);
    assert.deepEqual(ejections, [false, false, false, false]);
    assert.equal(upstream.isAvailable(4), true, 'got unavailable, want available');
    assert.equal(upstream.effectiveWeight, 5, `got effectiveWeight ${upstream.effectiveWeight}, want 5`);
    assert.equal(upstream.failuresTotal, 4, `got failuresTotal ${upstream.failuresTotal}, want 4`);
  });

  it('max_fails = 1 ejects on the first failure', () => {
    const { ejections } = replay(['fail@0'], { ...params, maxFails: 1 });
    assert.deepEqual(ejections, [true]);
  });
});

describe('Upstream weight degradation', () => {
  const noEject: PassiveHealthParams = { maxFails: 1000, failTimeoutMs: 10_000, failFactor: 5 };
  const table: { weight: number; failFactor: number; failures: number; want: number }[] = [
    { weight: 5, failFactor: 5, failures: 1, want: 4 },
    { weight: 10, failFactor: 5, failures: 1, want: 8 },
    { weight: 10, failFactor: 5, failures: 3, want: 4 },
    { weight: 3, failFactor: 5, failures: 1, want: 2 }, // max(1, floor(3/5) = 0) = 1
    { weight: 1, failFactor: 5, failures: 1, want: 0 },
    { weight: 10, failFactor: 5, failures: 6, want: 0 }, // floor 0, never negative
    { weight: 100, failFactor: 1, failures: 1, want: 0 },
  ];
  for (const row of table) {
    it(`weight ${row.weight}, fail_factor ${row.failFactor}, ${row.failures} failure(s) → effective ${row.want}`, () => {
      const upstream = makeUpstream(9001, { weight: row.weight });
      for (let i = 0; i < row.failures; i++) upstream.recordFailure(i, { ...noEject, failFactor: row.failFactor });
      assert.equal(upstream.effectiveWeight, row.want, `got ${upstream.effectiveWeight}, want ${row.want}`);
    });
  }

  it('regains 1 per regainWeight() up to the configured weight', () => {
    const upstream = makeUpstream(9001, { weight: 10 });
    upstream.recordFailure(0, noEject);
    upstream.recordFailure(1, noEject);
    const seen: number[] = [upstream.effectiveWeight];
    for (let i = 0; i < 6; i++) {
      upstream.regainWeight();
      seen.push(upstream.effectiveWeight);
    }
    assert.deepEqual(seen, [6, 7, 8, 9, 10, 10, 10], `got ${JSON.stringify(seen)}`);
  });

  it('restoreWeight() gives back the full weight at once', () => {
    const upstream = makeUpstream(9001, { weight: 5 });
    upstream.recordFailure(0, noEject);
    upstream.recordFailure(1, noEject);
    upstream.restoreWeight();
    assert.equal(upstream.effectiveWeight, 5, `got ${upstream.effectiveWeight}, want 5`);
  });
});
