/**
 * Exact sequences of the deterministic strategies, as data tables (undici's style): the SPEC 3
 * "must reproduce" column, and the worked examples of the doc comments row by row.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { StrategyName } from '../../../src/config/config.js';
import { createBalancer } from '../../../src/upstream/balancer/strategies.js';
import { contextFor, labelOf, pickSequence, routeConfig, upstreamsOf, weights } from './helpers.js';

interface SequenceCase {
  readonly strategy: StrategyName;
  readonly weights: readonly number[];
  readonly want: string;
}

const SEQUENCES: readonly SequenceCase[] = [
  { strategy: 'round-robin', weights: [1, 1, 1], want: 'a b c a b c' },
  { strategy: 'round-robin', weights: [5, 1, 1], want: 'a b c a b c' }, // weights ignored
  { strategy: 'weighted-round-robin', weights: [3, 1], want: 'a a a b a a a b' },
  { strategy: 'weighted-round-robin', weights: [1, 2, 3], want: 'a b b c c c a b b c c c' },
  { strategy: 'smooth-weighted-round-robin', weights: [5, 1, 1], want: 'a a b a c a a' },
  { strategy: 'smooth-weighted-round-robin', weights: [3, 1, 1], want: 'a b a c a' },
  { strategy: 'smooth-weighted-round-robin', weights: [1, 2, 5], want: 'c b c a c c b c' },
  { strategy: 'smooth-weighted-round-robin', weights: [2, 3], want: 'b a b a b' },
  { strategy: 'smooth-weighted-round-robin', weights: [4, 2, 1], want: 'a b a c a b a' },
  { strategy: 'smooth-weighted-round-robin', weights: [1, 1, 1], want: 'a b c a b c' },
  { strategy: 'least-connections', weights: [1, 1, 1], want: 'a b c a b c' }, // no load: ties in round-robin order
];

describe('exact sequences (SPEC 3)', () => {
  for (const { strategy, weights: values, want } of SEQUENCES) {
    test(`${strategy} {${values.join(',')}} → ${want}`, () => {
      const route = routeConfig({ strategy, upstreams: weights(...values) });
      const upstreams = upstreamsOf(route);
      const balancer = createBalancer(route, upstreams);
      const got = pickSequence(balancer, upstreams, want.split(' ').length);
      assert.equal(got, want, `got ${got}, want ${want}`);
    });
  }

  test('smooth-weighted-round-robin repeats its cycle: {5,1,1} three times over', () => {
    const route = routeConfig({ strategy: 'smooth-weighted-round-robin', upstreams: weights(5, 1, 1) });
    const upstreams = upstreamsOf(route);
    const got = pickSequence(createBalancer(route, upstreams), upstreams, 21);
    const want = 'a a b a c a a a a b a c a a a a b a c a a';
    assert.equal(got, want, `got ${got}, want ${want}`);
  });
});

/** The doc comment's tables: current weights after each pick. */
const SWRR_TRACES = [
  {
    name: "the tutorial's {3,1,1}",
    weights: [3, 1, 1],
    rows: [
      { picked: 'a', after: [-2, 1, 1] },
      { picked: 'b', after: [1, -3, 2] },
      { picked: 'a', after: [-1, -2, 3] },
      { picked: 'c', after: [2, -1, -1] },
      { picked: 'a', after: [0, 0, 0] },
    ],
  },
  {
    name: "nginx's {5,1,1}",
    weights: [5, 1, 1],
    rows: [
      { picked: 'a', after: [-2, 1, 1] },
      { picked: 'a', after: [-4, 2, 2] },
      { picked: 'b', after: [1, -4, 3] },
      { picked: 'a', after: [-1, -3, 4] },
      { picked: 'c', after: [4, -2, -2] },
      { picked: 'a', after: [2, -1, -1] },
      { picked: 'a', after: [0, 0, 0] },
    ],
  },
];

describe('smooth-weighted-round-robin worked examples, row by row', () => {
  for (const { name, weights: values, rows } of SWRR_TRACES) {
    test(name, () => {
      const route = routeConfig({ strategy: 'smooth-weighted-round-robin', upstreams: weights(...values) });
      const upstreams = upstreamsOf(route);
      const balancer = createBalancer(route, upstreams);
      rows.forEach(({ picked, after }, i) => {
        const got = labelOf(upstreams, balancer.pick(contextFor()));
        assert.equal(got, picked, `pick ${i + 1}: got ${got}, want ${picked}`);
        const currentWeights = balancer.describeState().map((state) => state['cw']);
        assert.deepEqual(currentWeights, after, `pick ${i + 1} cw: got ${currentWeights}, want ${after}`);
      });
    });
  }
});

describe('smooth-weighted-round-robin after an upstream goes DOWN and comes back', () => {
  const CASES = [
    { weights: [5, 1, 1], before: 3, whileDown: 5 },
    { weights: [5, 1, 1], before: 4, whileDown: 3 },
    { weights: [1, 2, 5], before: 3, whileDown: 4 },
    { weights: [4, 2, 1], before: 2, whileDown: 6 },
    { weights: [3, 1, 1], before: 1, whileDown: 9 },
  ];
  for (const { weights: values, before, whileDown } of CASES) {
    test(`{${values.join(',')}}: b down after ${before} picks for ${whileDown}, then each full cycle holds the weights`, () => {
      const route = routeConfig({ strategy: 'smooth-weighted-round-robin', upstreams: weights(...values) });
      const upstreams = upstreamsOf(route);
      const balancer = createBalancer(route, upstreams);
      const b = upstreams[1]!;
      pickSequence(balancer, upstreams, before);
      b.healthState = 'down';
      const whileDownPicks = pickSequence(balancer, upstreams, whileDown);
      assert.ok(!whileDownPicks.includes('b'), `while down: got ${whileDownPicks}, want no b`);
      b.healthState = 'up';
      const cycle = values.reduce((sum, weight) => sum + weight, 0);
      for (let round = 1; round <= 3; round++) {
        const picks = pickSequence(balancer, upstreams, cycle).split(' ');
        const counts = ['a', 'b', 'c'].map((label) => picks.filter((picked) => picked === label).length);
        assert.deepEqual(counts, values, `cycle ${round} (${picks.join(' ')}): got ${counts}, want ${values}`);
      }
    });
  }
});

describe('effective weight (SPEC 4) in the weighted round robins', () => {
  test('smooth-weighted-round-robin: a failed upstream loses share at once and regains 1 per pick', () => {
    const route = routeConfig({ strategy: 'smooth-weighted-round-robin', upstreams: weights(5, 5) });
    const upstreams = upstreamsOf(route);
    const balancer = createBalancer(route, upstreams);
    const a = upstreams[0]!;
    a.effectiveWeight = 0; // as after failures
    const got = pickSequence(balancer, upstreams, 12);
    // ew of a at picks 1..6: 0 1 2 3 4 5; b stays 5. cw (a, b) after each pick:
    // (0,0) (1,-1) (3,-3) (-2,2) (2,-6) (-3,-1) then alternating: a has its share back.
    const want = 'b b b a b a b a b a b a';
    assert.equal(got, want, `got ${got}, want ${want}`);
    assert.equal(a.effectiveWeight, 5, `ew of a after 12 picks: got ${a.effectiveWeight}, want 5`);
  });

  test('weighted-round-robin uses the effective weight as the interval length', () => {
    const route = routeConfig({ strategy: 'weighted-round-robin', upstreams: weights(3, 1) });
    const upstreams = upstreamsOf(route);
    const balancer = createBalancer(route, upstreams);
    upstreams[0]!.effectiveWeight = 1; // regains to 2 after the first pick, 3 after the second
    const got = pickSequence(balancer, upstreams, 8);
    const want = 'a a a b a a a b';
    assert.equal(got, want, `got ${got}, want ${want}`);
  });
});
