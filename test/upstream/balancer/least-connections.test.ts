/** least-connections and power-of-two-choices: the load-aware strategies, with held requests. */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createBalancer } from '../../../src/upstream/balancer/strategies.js';
import type { Upstream } from '../../../src/upstream/upstream.js';
import { contextFor, labelOf, pickSequence, routeConfig, scriptedRandom, seededRandom, upstreamsOf, weights } from './helpers.js';

function leastConnections(...values: number[]) {
  const route = routeConfig({ strategy: 'least-connections', upstreams: weights(...values) });
  const upstreams = upstreamsOf(route);
  return { upstreams, balancer: createBalancer(route, upstreams) };
}

/** Picks `count` times; each request is dispatched and ended at once (no lasting load). */
function pickAndEnd(balancer: { pick: (c: ReturnType<typeof contextFor>) => Upstream | undefined }, upstreams: readonly Upstream[], count: number): string {
  const labels: string[] = [];
  for (let i = 0; i < count; i++) {
    const picked = balancer.pick(contextFor())!;
    const end = picked.beginRequest();
    labels.push(labelOf(upstreams, picked));
    end();
  }
  return labels.join(' ');
}

describe('least-connections', () => {
  test('one long request held on a → the next 10 go to b', () => {
    const { upstreams, balancer } = leastConnections(1, 1);
    const first = balancer.pick(contextFor());
    assert.equal(first, upstreams[0], 'first pick: got b, want a');
    const endLong = first!.beginRequest(); // held open
    const got = pickAndEnd(balancer, upstreams, 10);
    assert.equal(got, 'b b b b b b b b b b', `got ${got}, want ten b`);
    endLong();
    assert.equal(upstreams[0]!.activeRequests, 0);
  });

  test('no load: 10 requests split 5/5 in round-robin order', () => {
    const { upstreams, balancer } = leastConnections(1, 1);
    const got = pickAndEnd(balancer, upstreams, 10);
    assert.equal(got, 'a b a b a b a b a b', `got ${got}`);
  });

  test('ties are served in round-robin order among the least loaded only', () => {
    const { upstreams, balancer } = leastConnections(1, 1, 1, 1);
    upstreams[1]!.beginRequest(); // b busy
    const got = pickSequence(balancer, upstreams, 6); // picks only, no requests dispatched
    assert.equal(got, 'a c d a c d', `got ${got}`);
  });

  test('active ÷ weight: with 3:1 and requests held open, a carries three times b', () => {
    const { upstreams, balancer } = leastConnections(3, 1);
    for (let i = 0; i < 40; i++) balancer.pick(contextFor())!.beginRequest();
    const active = upstreams.map((upstream) => upstream.activeRequests);
    assert.deepEqual(active, [30, 10], `active: got ${active}, want 30,10`);
  });

  test('the ratio is compared exactly: 2 of weight 3 beats 1 of weight 1', () => {
    const { upstreams, balancer } = leastConnections(3, 1);
    upstreams[0]!.beginRequest();
    upstreams[0]!.beginRequest(); // 2/3
    upstreams[1]!.beginRequest(); // 1/1
    assert.equal(balancer.pick(contextFor()), upstreams[0]);
  });

  test('describeState shows active requests, effective weight and the cursor', () => {
    const { upstreams, balancer } = leastConnections(2, 1);
    upstreams[0]!.beginRequest();
    balancer.pick(contextFor()); // b
    assert.deepEqual(balancer.describeState(), [
      { active: 1, ew: 2, next: 'yes' },
      { active: 0, ew: 1, next: 'no' },
    ]);
  });
});

describe('power-of-two-choices', () => {
  function powerOfTwo(random: () => number, count = 4) {
    const route = routeConfig({ strategy: 'power-of-two-choices', upstreams: weights(...Array.from({ length: count }, () => 1)) });
    const upstreams = upstreamsOf(route);
    return { upstreams, balancer: createBalancer(route, upstreams, { random }) };
  }

  test('the worked example: a(4) vs c(2) → c; b(0) vs d(1) → b', () => {
    const { upstreams, balancer } = powerOfTwo(scriptedRandom([0.05, 0.6, 0.3, 0.9]));
    const load = [4, 0, 2, 1];
    upstreams.forEach((upstream, i) => {
      for (let k = 0; k < load[i]!; k++) upstream.beginRequest();
    });
    assert.equal(labelOf(upstreams, balancer.pick(contextFor())), 'c');
    assert.equal(labelOf(upstreams, balancer.pick(contextFor())), 'b');
  });

  test('the two choices are distinct: a second draw of the same upstream is redrawn', () => {
    // 0.1 → a, 0.1 → a again (rejected as the same), 0.6 → c; c has fewer active → c.
    const { upstreams, balancer } = powerOfTwo(scriptedRandom([0.1, 0.1, 0.6]));
    upstreams[0]!.beginRequest();
    assert.equal(labelOf(upstreams, balancer.pick(contextFor())), 'c');
  });

  test('ties go to the first drawn', () => {
    const { upstreams, balancer } = powerOfTwo(scriptedRandom([0.8, 0.1]));
    assert.equal(labelOf(upstreams, balancer.pick(contextFor())), 'd');
  });

  test('with one upstream available it is returned', () => {
    const { upstreams, balancer } = powerOfTwo(seededRandom(3));
    for (const upstream of upstreams.slice(1)) upstream.healthState = 'down';
    for (let i = 0; i < 20; i++) assert.equal(balancer.pick(contextFor()), upstreams[0]);
  });

  test('under held load it keeps the maximum low (10 000 requests, 100 upstreams)', () => {
    const { upstreams, balancer } = powerOfTwo(seededRandom(11), 100);
    for (let i = 0; i < 10_000; i++) balancer.pick(contextFor())!.beginRequest();
    const max = Math.max(...upstreams.map((upstream) => upstream.activeRequests));
    // One random choice (`random`) gives a maximum of 122–131 with seeds 11–13; two choices give 102.
    assert.ok(max <= 104, `max active: got ${max}, want ≤ 104`);
  });
});
