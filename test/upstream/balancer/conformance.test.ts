/**
 * The conformance suite every strategy must pass (Hono's pattern: one interface, one shared suite).
 * Each case runs for all nine strategies, through createBalancer as the proxy uses them.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { STRATEGY_NAMES } from '../../../src/config/config.js';
import type { StrategyName } from '../../../src/config/config.js';
import { createBalancer } from '../../../src/upstream/balancer/strategies.js';
import type { Balancer } from '../../../src/upstream/balancer/balancer.js';
import type { Upstream } from '../../../src/upstream/upstream.js';
import { contextFor, pickCounts, routeConfig, seededRandom, upstreamsOf, weights } from './helpers.js';
import type { UpstreamSpec } from './helpers.js';

const NOW_MS = 1_000_000;

function build(strategy: StrategyName, specs: readonly UpstreamSpec[], seed = 1) {
  const route = routeConfig({ strategy, upstreams: specs });
  const upstreams = upstreamsOf(route);
  const balancer = createBalancer(route, upstreams, { random: seededRandom(seed), now: () => NOW_MS });
  return { route, upstreams, balancer };
}

/** Varied contexts so the hash strategies land on different upstreams. */
function variedContext(i: number, tried?: ReadonlySet<Upstream>) {
  const clientIp = `10.0.${(i >> 8) & 255}.${i & 255}`;
  return contextFor({ clientIp, hashKey: `/page/${i}`, ...(tried === undefined ? {} : { tried }) });
}

/** Every way an upstream can be unavailable, one per upstream b..f (a stays available). */
function makeUnavailableInEveryWay(upstreams: readonly Upstream[]): void {
  upstreams[1]!.healthState = 'down';
  upstreams[2]!.ejectedUntilMs = NOW_MS + 1; // ejected until just after now
  upstreams[3]!.isDraining = true;
  // upstreams[4] is `down` in the config (see specs below); upstreams[5] is tried by the request.
}

/** Strategies whose weights decide shares; the others state why they ignore them. */
const IGNORES_WEIGHTS: Partial<Record<StrategyName, string>> = {
  'random': 'uniform by definition (SPEC 3)',
  'round-robin': 'list order by definition (SPEC 3)',
  'ip-hash': 'hash mod n, as the tutorial (SPEC 3)',
  'power-of-two-choices': 'compares active requests only (SPEC 3)',
};

for (const strategy of STRATEGY_NAMES) {
  describe(`conformance: ${strategy}`, () => {
    test('never returns a DOWN, `down`, ejected, draining or already-tried upstream', () => {
      const specs = [{}, {}, {}, {}, { isDown: true }, {}, {}];
      const { upstreams, balancer } = build(strategy, specs);
      makeUnavailableInEveryWay(upstreams);
      const tried = new Set([upstreams[5]!]);
      const allowed = new Set([upstreams[0], upstreams[6]]);
      const seen = new Set<Upstream>();
      for (let i = 0; i < 2000; i++) {
        const picked = balancer.pick(variedContext(i, tried));
        assert.ok(picked !== undefined, `pick ${i}: got undefined, want a or g`);
        assert.ok(allowed.has(picked), `pick ${i}: got ${picked.origin}, want one of a, g`);
        seen.add(picked);
      }
      assert.equal(seen.size, 2, `distinct picks over 2000 requests: got ${seen.size}, want 2`);
    });

    test('an ejection that has expired makes the upstream available again', () => {
      const { upstreams, balancer } = build(strategy, [{}]);
      upstreams[0]!.ejectedUntilMs = NOW_MS + 1;
      assert.equal(balancer.pick(contextFor()), undefined, 'while ejected: got an upstream, want undefined');
      upstreams[0]!.ejectedUntilMs = NOW_MS;
      assert.equal(balancer.pick(contextFor()), upstreams[0], 'at the deadline: got undefined, want a');
    });

    test('returns undefined for an empty pool', () => {
      const { balancer } = build(strategy, []);
      assert.equal(balancer.pick(contextFor()), undefined);
      assert.deepEqual(balancer.describeState(), []);
    });

    test('returns undefined when every upstream is unavailable or tried', () => {
      const specs = [{}, {}, {}, {}, { isDown: true }, {}];
      const { upstreams, balancer } = build(strategy, specs);
      makeUnavailableInEveryWay(upstreams);
      const tried = new Set([upstreams[0]!, upstreams[5]!]);
      for (let i = 0; i < 50; i++) {
        const picked = balancer.pick(variedContext(i, tried));
        assert.equal(picked, undefined, `pick ${i}: got ${picked?.origin}, want undefined`);
      }
    });

    test('each retry of one request gets a different upstream until none is left', () => {
      const { upstreams, balancer } = build(strategy, [{}, {}, {}, {}]);
      const tried = new Set<Upstream>();
      const context = variedContext(7, tried);
      for (let attempt = 1; attempt <= 4; attempt++) {
        const picked = balancer.pick(context);
        assert.ok(picked !== undefined && !tried.has(picked), `attempt ${attempt}: got ${picked?.origin}, want an untried upstream`);
        tried.add(picked);
      }
      assert.equal(tried.size, upstreams.length);
      assert.equal(balancer.pick(context), undefined, 'after trying all: got an upstream, want undefined');
    });

    test('uses backups only when no primary is available', () => {
      const { upstreams, balancer } = build(strategy, [{}, { isBackup: true }, {}, { isBackup: true }]);
      const [a, b, c, d] = upstreams as [Upstream, Upstream, Upstream, Upstream];
      for (let i = 0; i < 200; i++) {
        const picked = balancer.pick(variedContext(i));
        assert.ok(picked === a || picked === c, `pick ${i} with primaries up: got ${picked?.origin}, want a or c`);
      }
      a.healthState = 'down';
      for (let i = 0; i < 200; i++) {
        const picked = balancer.pick(variedContext(i));
        assert.equal(picked, c, `pick ${i} with a down: got ${picked?.origin}, want c`);
      }
      c.ejectedUntilMs = NOW_MS + 5000;
      const seen = new Set<Upstream | undefined>();
      for (let i = 0; i < 200; i++) seen.add(balancer.pick(variedContext(i)));
      assert.ok([...seen].every((u) => u === b || u === d), 'no primary left: got a non-backup, want b or d only');
      // A request that already tried the last primary goes to a backup too.
      c.ejectedUntilMs = 0;
      const picked = balancer.pick(variedContext(1, new Set([c])));
      assert.ok(picked === b || picked === d, `c tried: got ${picked?.origin}, want a backup`);
    });

    test('describeState has one record per upstream, in config order', () => {
      const { balancer } = build(strategy, [{}, { isBackup: true }, {}]);
      balancer.pick(contextFor());
      assert.equal(balancer.describeState().length, 3);
    });

    const ignoresWeights = IGNORES_WEIGHTS[strategy];
    test('honours weights (3:1)', { skip: ignoresWeights }, () => {
      const { upstreams, balancer } = build(strategy, weights(3, 1));
      const picks = 4000;
      const counts =
        strategy === 'least-connections'
          ? pickCountsHoldingRequests(balancer, upstreams, picks) // shares follow active ÷ weight
          : pickCounts(balancer, upstreams, picks, (i) => variedContext(i));
      const share = counts[0]! / picks;
      const tolerance = strategy === 'consistent-hash' ? 0.05 : 0.02; // ring arcs vary by a few percent
      assert.ok(Math.abs(share - 0.75) <= tolerance, `share of a: got ${share}, want 0.75 ± ${tolerance}`);
    });

    test('an upstream at effective weight 0 gets nothing while others are available', { skip: ignoresWeights ?? (strategy === 'consistent-hash' ? 'the ring uses configured weights, so keys do not move on failures' : undefined) }, () => {
      const { upstreams, balancer } = build(strategy, weights(5, 5));
      for (let i = 0; i < 100; i++) {
        upstreams[0]!.effectiveWeight = 0; // keep it at 0 despite the regain after each pick
        const picked = balancer.pick(variedContext(i));
        assert.equal(picked, upstreams[1], `pick ${i}: got ${picked?.origin}, want b`);
      }
    });

    test('when every available upstream has effective weight 0, they are still picked', () => {
      const { upstreams, balancer } = build(strategy, weights(5, 5));
      for (let i = 0; i < 20; i++) {
        for (const upstream of upstreams) upstream.effectiveWeight = 0;
        assert.notEqual(balancer.pick(variedContext(i)), undefined, `pick ${i}: got undefined, want an upstream`);
      }
    });
  });
}

/** Picks while never ending a request, so active counts grow with each pick (least-connections). */
function pickCountsHoldingRequests(balancer: Balancer, upstreams: readonly Upstream[], picks: number): number[] {
  const counts = upstreams.map(() => 0);
  for (let i = 0; i < picks; i++) {
    const picked = balancer.pick(contextFor());
    assert.ok(picked !== undefined);
    picked.beginRequest();
    counts[upstreams.indexOf(picked)]!++;
  }
  return counts;
}
