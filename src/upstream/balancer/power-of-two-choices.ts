/**
 * `power-of-two-choices` (SPEC 3): draw two distinct available upstreams at random and send the
 * request to the one with fewer active requests (the first drawn on a tie).
 *
 * Steps, per pick:
 *   1. first = a uniformly random available upstream (rejection method, sample-available.ts).
 *   2. second = a uniformly random available upstream other than first. If there is none, pick first.
 *   3. Pick whichever has fewer active requests; on a tie, first.
 *
 * Worked example: a b c d with active requests 4, 0, 2, 1; random() returns 0.05, 0.60 →
 *   first = floor(0.05·4) = 0 → a (4 active); second = floor(0.60·4) = 2 → c (2 active); c wins.
 *   Next, random() = 0.30, 0.90 → b (0) and d (1); b wins.
 *
 * Properties: O(1) per pick and no shared scan, yet nearly as good as least-connections. Mitzenmacher
 * showed that with n bins, placing each ball in the less loaded of two random bins cuts the maximum
 * load from Θ(log n / log log n) (one random choice) to Θ(log log n), an exponential improvement; a
 * third choice adds only a constant factor. Because the choice is random, many proxies that each see
 * a stale load picture do not all stampede to the same "least loaded" upstream, which a global
 * minimum (least-connections) can do. Weights are not used.
 *
 * Why not the naive way: least-connections over all n upstreams is O(n) per pick; a single random
 * choice ignores load entirely.
 *
 * References: M. Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing", IEEE TPDS
 * 12(10), 2001 (PhD thesis 1996); Azar, Broder, Karlin, Upfal, "Balanced Allocations", STOC 1994;
 * nginx's `random two least_conn`; Caddy's `random_choose 2`.
 */
import type { Balancer, PickContext, StrategyOptions } from './balancer.js';
import { availableFor } from './balancer.js';
import { sampleAvailable } from './sample-available.js';
import type { Upstream } from '../upstream.js';

export class PowerOfTwoChoicesBalancer implements Balancer {
  readonly name = 'power-of-two-choices';
  readonly #upstreams: readonly Upstream[];
  readonly #random: () => number;
  readonly #now: () => number;

  constructor(upstreams: readonly Upstream[], options: StrategyOptions) {
    this.#upstreams = upstreams;
    this.#random = options.random;
    this.#now = options.now;
  }

  pick(context: PickContext): Upstream | undefined {
    const isAvailable = availableFor(context, this.#now());
    const first = sampleAvailable(this.#upstreams, isAvailable, this.#random);
    if (first === undefined) return undefined;
    const second = sampleAvailable(this.#upstreams, isAvailable, this.#random, first);
    if (second === undefined) return first;
    return second.activeRequests < first.activeRequests ? second : first;
  }

  /** `{ active }`: active requests per upstream, the only thing the choice compares. */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    return this.#upstreams.map((upstream) => ({ active: upstream.activeRequests }));
  }
}
