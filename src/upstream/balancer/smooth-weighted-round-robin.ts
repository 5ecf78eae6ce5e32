/**
 * `smooth-weighted-round-robin` (SPEC 3): nginx's algorithm. Every upstream gets exactly its share
 * of each cycle of Σweights picks, like the interval method, but interleaved instead of in bursts.
 *
 * Steps. State: a current weight cw per upstream, all 0 at the start. Per pick, over the available
 * upstreams only:
 *   1. Each one's cw += its effective weight ew; total = Σ ew.
 *   2. Pick the one with the largest cw (ties go to the earlier upstream in the list).
 *   3. The picked one's cw −= total.
 * Σ cw over the available upstreams is 0 after every pick, so no counter drifts.
 *
 * Worked example 1, the tutorial's {a=3, b=1, c=1}, total 5:
 *   | pick | cw before | cw + ew   | picked | cw after (picked −5) |
 *   | 1    | 0, 0, 0   | 3, 1, 1   | a      | -2, 1, 1             |
 *   | 2    | -2, 1, 1  | 1, 2, 2   | b      | 1, -3, 2             |
 *   | 3    | 1, -3, 2  | 4, -2, 3  | a      | -1, -2, 3            |
 *   | 4    | -1, -2, 3 | 2, -1, 4  | c      | 2, -1, -1            |
 *   | 5    | 2, -1, -1 | 5, 0, 0   | a      | 0, 0, 0              |   → a b a c a, back to 0 0 0
 *
 * Worked example 2, nginx's commit message {a=5, b=1, c=1}, total 7:
 *   | pick | cw before  | cw + ew   | picked | cw after (picked −7) |
 *   | 1    | 0, 0, 0    | 5, 1, 1   | a      | -2, 1, 1             |
 *   | 2    | -2, 1, 1   | 3, 2, 2   | a      | -4, 2, 2             |
 *   | 3    | -4, 2, 2   | 1, 3, 3   | b      | 1, -4, 3             |
 *   | 4    | 1, -4, 3   | 6, -3, 4  | a      | -1, -3, 4            |
 *   | 5    | -1, -3, 4  | 4, -2, 5  | c      | 4, -2, -2            |
 *   | 6    | 4, -2, -2  | 9, -1, -1 | a      | 2, -1, -1            |
 *   | 7    | 2, -1, -1  | 7, 0, 0   | a      | 0, 0, 0              |   → a a b a c a a
 *   The interval method would give a a a a a b c. Other fixtures: {1,2,5} → c b c a c c b c;
 *   {2,3} → b a b a b; {4,2,1} → a b a c a b a (test/upstream/balancer/sequences.test.ts).
 *
 * Effective weight (SPEC 4): step 1 adds the *effective* weight, which drops after failures and
 * climbs back by 1 per pick, so a failing upstream's share shrinks at once and recovers smoothly. An
 * unavailable upstream is skipped: its cw is frozen, it adds nothing to the total, and it rejoins
 * with that cw when it is back. If every available upstream has effective weight 0, nothing beats
 * the first one and it is picked — exactly what nginx's loop does (`best == NULL` takes the first
 * peer), and the effective weights have climbed back by the next pick.
 *
 * A changing set (DNS discovery, the registry): the new balancer takes over `previous`'s current
 * weights for the upstreams that stay; new ones start at cw 0, as a new peer does in nginx's `zone`.
 * Σ cw is then no longer 0 when a member with a nonzero cw left, but the offset only shifts the
 * first picks: each member still gains its effective weight per pick and pays `total` when picked,
 * so the shares per cycle stay exact from then on (test/upstream/balancer/changing-set.test.ts
 * traces one change row by row).
 *
 * Properties: exact shares per cycle, the most even interleaving (no upstream waits longer than
 * needed), deterministic. O(n) per pick (every upstream's cw changes), so it is the one weighted
 * round robin to avoid with thousands of upstreams; n numbers of state, independent of weight size.
 *
 * Why not the naive way: expanding a×5 b×1 c×1 into an array is memory that grows with the weights,
 * and cycling over it gives the burst order a a a a a b c of the interval method.
 *
 * References: nginx commit 52327e0627f49dbda1e8db695e63a4b0af4448b1 "Upstream: smooth weighted round-robin balancing" (Maxim
 * Dounin, 2012) and ngx_http_upstream_get_peer() in src/http/ngx_http_upstream_round_robin.c;
 * LVS's ip_vs_wrr.c for the older threshold method.
 */
import type { Balancer, PickContext, StrategyOptions } from './balancer.js';
import { availableFor } from './balancer.js';
import type { Upstream } from '../upstream.js';
import { placesOf } from './carried-position.js';

export class SmoothWeightedRoundRobinBalancer implements Balancer {
  readonly name = 'smooth-weighted-round-robin';
  readonly #upstreams: readonly Upstream[];
  readonly #now: () => number;
  /** Current weight per upstream (can be negative; Float64 holds Σweights up to 10^10 exactly). */
  readonly #currentWeights: Float64Array;

  /** @param previous the strategy this one replaces: its upstreams that stay keep their cw */
  constructor(upstreams: readonly Upstream[], options: StrategyOptions, previous?: Balancer) {
    this.#upstreams = upstreams;
    this.#now = options.now;
    this.#currentWeights = new Float64Array(upstreams.length);
    if (previous instanceof SmoothWeightedRoundRobinBalancer) this.#adopt(previous);
  }

  /** Copies the current weight of every upstream of `previous` that is in this one too. */
  #adopt(previous: SmoothWeightedRoundRobinBalancer): void {
    const places = placesOf(this.#upstreams);
    previous.#upstreams.forEach((upstream, i) => {
      const place = places.get(upstream);
      if (place !== undefined) this.#currentWeights[place] = previous.#currentWeights[i]!;
    });
  }

  pick(context: PickContext): Upstream | undefined {
    const isAvailable = availableFor(context, this.#now());
    const currentWeights = this.#currentWeights;
    let best = -1;
    let total = 0;
    for (let i = 0; i < this.#upstreams.length; i++) {
      const upstream = this.#upstreams[i]!;
      if (!isAvailable(upstream)) continue;
      currentWeights[i]! += upstream.effectiveWeight;
      total += upstream.effectiveWeight;
      if (best === -1 || currentWeights[i]! > currentWeights[best]!) best = i; // strict: ties → earlier
    }
    if (best === -1) return undefined;
    currentWeights[best]! -= total;
    return this.#upstreams[best];
  }

  /** `{ cw, ew }`: current weight and effective weight per upstream. */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    return this.#upstreams.map((upstream, i) => ({ cw: this.#currentWeights[i]!, ew: upstream.effectiveWeight }));
  }
}
