/**
 * Shares of the random strategies over 100 000 picks with a seeded PRNG injected (SPEC 3: within 2%),
 * including the rejection paths (unavailable upstreams, degraded effective weights).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { StrategyName } from '../../../src/config/config.js';
import { createBalancer } from '../../../src/upstream/balancer/strategies.js';
import type { Upstream } from '../../../src/upstream/upstream.js';
import { pickCounts, routeConfig, scriptedRandom, seededRandom, upstreamsOf, weights } from './helpers.js';
import type { UpstreamSpec } from './helpers.js';

const PICKS = 100_000;

interface DistributionCase {
  readonly name: string;
  readonly strategy: StrategyName;
  readonly upstreams: readonly UpstreamSpec[];
  /** Applied to the runtime upstreams before picking (and again before every pick if `isSticky`). */
  readonly setUp?: (upstreams: readonly Upstream[]) => void;
  readonly isSticky?: boolean;
  /** Expected shares, in upstream order. */
  readonly want: readonly number[];
}

const CASES: readonly DistributionCase[] = [
  { name: 'random, 4 ways', strategy: 'random', upstreams: weights(1, 1, 1, 1), want: [0.25, 0.25, 0.25, 0.25] },
  { name: 'random ignores weights', strategy: 'random', upstreams: weights(9, 1), want: [0.5, 0.5] },
  {
    name: 'random, c DOWN: a third each for a b d',
    strategy: 'random',
    upstreams: weights(1, 1, 1, 1),
    setUp: (u) => (u[2]!.healthState = 'down'),
    want: [1 / 3, 1 / 3, 0, 1 / 3],
  },
  {
    name: 'random, 9 of 10 DOWN (linear fallback path)',
    strategy: 'random',
    upstreams: weights(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    setUp: (u) => u.slice(0, 8).forEach((upstream) => (upstream.healthState = 'down')),
    want: [0, 0, 0, 0, 0, 0, 0, 0, 0.5, 0.5],
  },
  { name: 'weighted-random 5:15 → 1:3', strategy: 'weighted-random', upstreams: weights(5, 15), want: [0.25, 0.75] },
  { name: 'weighted-random 1:2:7', strategy: 'weighted-random', upstreams: weights(1, 2, 7), want: [0.1, 0.2, 0.7] },
  {
    name: 'weighted-random, b DOWN: 1:3 between a and c',
    strategy: 'weighted-random',
    upstreams: weights(1, 2, 3),
    setUp: (u) => (u[1]!.healthState = 'down'),
    want: [0.25, 0, 0.75],
  },
  {
    name: 'weighted-random uses effective weights (rejection step): ew 5:5 of weights 5:15 → 1:1',
    strategy: 'weighted-random',
    upstreams: weights(5, 15),
    setUp: (u) => (u[1]!.effectiveWeight = 5),
    isSticky: true,
    want: [0.5, 0.5],
  },
  {
    name: 'weighted-random, heavy upstream DOWN (linear fallback path)',
    strategy: 'weighted-random',
    upstreams: weights(1, 1, 1_000_000),
    setUp: (u) => (u[2]!.healthState = 'down'),
    want: [0.5, 0.5, 0],
  },
  { name: 'power-of-two-choices with no load is uniform', strategy: 'power-of-two-choices', upstreams: weights(1, 1, 1, 1), want: [0.25, 0.25, 0.25, 0.25] },
];

describe('distributions over 100 000 picks (SPEC 3: within 2%)', () => {
  for (const { name, strategy, upstreams: specs, setUp, isSticky, want } of CASES) {
    test(name, () => {
      const route = routeConfig({ strategy, upstreams: specs });
      const upstreams = upstreamsOf(route);
      const balancer = createBalancer(route, upstreams, { random: seededRandom(20240601) });
      setUp?.(upstreams);
      const counts = pickCounts(balancer, upstreams, PICKS, (i) => {
        if (isSticky === true && i > 0) setUp?.(upstreams);
        return { clientIp: '10.0.0.1', hashKey: '10.0.0.1', tried: new Set() };
      });
      const shares = counts.map((count) => count / PICKS);
      shares.forEach((share, i) => {
        assert.ok(Math.abs(share - want[i]!) <= 0.02, `upstream ${i}: got share ${share.toFixed(4)}, want ${want[i]!.toFixed(4)} ± 0.02`);
      });
    });
  }
});

describe('weighted-random, step by step', () => {
  test('the worked example: random() 0.10, 0.25, 0.90 over 5:15 → a b b', () => {
    const route = routeConfig({ strategy: 'weighted-random', upstreams: weights(5, 15) });
    const upstreams = upstreamsOf(route);
    const balancer = createBalancer(route, upstreams, { random: scriptedRandom([0.1, 0.25, 0.9]) });
    const got = [0, 1, 2].map(() => balancer.pick({ clientIp: '', hashKey: '', tried: new Set() })?.origin);
    const want = [upstreams[0]!.origin, upstreams[1]!.origin, upstreams[1]!.origin];
    assert.deepEqual(got, want, `got ${got}, want ${want}`);
  });

  test('weights up to 1 000 000: memory is per upstream, the pick lands by prefix sums', () => {
    const route = routeConfig({ strategy: 'weighted-random', upstreams: weights(1_000_000, 1) });
    const upstreams = upstreamsOf(route);
    // r = 0.9999995 · 1 000 001 ≈ 1 000 000.5 ≥ prefix[a] = 1 000 000 → b; 0.999998 · 1 000 001 ≈ 999 999.998 → a.
    const balancer = createBalancer(route, upstreams, { random: scriptedRandom([0.9999995, 0.999998]) });
    const context = { clientIp: '', hashKey: '', tried: new Set<Upstream>() };
    assert.equal(balancer.pick(context), upstreams[1], 'r ≥ 1 000 000: got a, want b');
    assert.equal(balancer.pick(context), upstreams[0], 'r < 1 000 000: got b, want a');
  });
});
