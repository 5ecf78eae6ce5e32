/**
 * `weighted-random` (SPEC 3): each available upstream is picked with probability
 * effectiveWeight ÷ (sum of the available effective weights), by prefix sums and binary search.
 *
 * Steps. Once, when built: prefix[i] = w₀ + … + wᵢ over the configured weights (a Float64Array, one
 * number per upstream, exact up to 2^53). Per pick:
 *   1. r = random() × total; binary-search the first i with prefix[i] > r (O(log n)).
 *   2. Accept upstreams[i] if it is available, and, when its effective weight is below its weight
 *      (it failed recently, SPEC 4), only with probability effectiveWeight ÷ weight (one more draw).
 *   3. Otherwise repeat, at most REJECTION_TRIES times; then scan once, exactly, over the available
 *      effective weights (if they are all 0, the available upstreams are treated as equal).
 *
 * Worked example: a weight 5, b weight 15 → prefix = [5, 20], total 20.
 *   | random() | r = random()·20 | first prefix > r | pick |
 *   | 0.10     | 2               | prefix[0] = 5    | a    |
 *   | 0.25     | 5               | prefix[1] = 20   | b    |
 *   | 0.90     | 18              | prefix[1] = 20   | b    |
 *   Over 100 000 picks a gets 25% and b 75% (1:3), each within a fraction of a percent.
 *
 * Why this keeps O(log n) without watching for changes. Effective weights and availability change
 * underneath us (failures, health probes, ejection deadlines passing on the clock) and nothing tells
 * the balancer. Rebuilding the sums when something changed would need an O(n) check per pick to know
 * it did. Instead the sums are over the *configured* weights, which never change and are never below
 * the effective ones, and step 2 thins them to the effective weights: the rejection method, exact
 * because P(pick i) ∝ wᵢ · (ewᵢ/wᵢ) · [available] = ewᵢ · [available]. When every upstream is up at
 * full weight (the steady state) the first draw is always accepted: one binary search, no extra
 * random number. A Fenwick tree would make updates O(log n) too, but still needs to be told of every
 * change, which the upstream objects do not do.
 *
 * Why not the naive way: the tutorials' first version expands the upstreams into an index array with
 * each one repeated `weight` times and draws an index. Its memory grows with the weights: weights up to
 * 1 000 000 (SPEC 1.2) over 10 000 upstreams would be 10^10 entries. Prefix sums are n numbers,
 * whatever the weights.
 *
 * Properties: O(n) memory independent of weight size; O(log n) per pick in the steady state; the
 * O(n) scan runs only when most of the weight is unavailable or degraded.
 *
 * References: nginx's `random` (ngx_http_upstream_random_module.c keeps `ranges` of cumulative
 * weights and binary-searches them); Walker's alias method (1977) is O(1) per pick but needs a rebuild
 * on every weight change.
 */
import type { Balancer, PickContext, StrategyOptions } from './balancer.js';
import { availableFor } from './balancer.js';
import type { AvailabilityPredicate } from './balancer.js';
import { REJECTION_TRIES } from './sample-available.js';
import type { Upstream } from '../upstream.js';

export class WeightedRandomBalancer implements Balancer {
  readonly name = 'weighted-random';
  readonly #upstreams: readonly Upstream[];
  readonly #random: () => number;
  readonly #now: () => number;
  /** prefix[i] = configured weights of upstreams 0..i. */
  readonly #prefix: Float64Array;
  readonly #total: number;

  constructor(upstreams: readonly Upstream[], options: StrategyOptions) {
    this.#upstreams = upstreams;
    this.#random = options.random;
    this.#now = options.now;
    this.#prefix = new Float64Array(upstreams.length);
    let sum = 0;
    upstreams.forEach((upstream, i) => {
      sum += upstream.config.weight;
      this.#prefix[i] = sum;
    });
    this.#total = sum;
  }

  pick(context: PickContext): Upstream | undefined {
    if (this.#upstreams.length === 0) return undefined;
    const isAvailable = availableFor(context, this.#now());
    for (let attempt = 0; attempt < REJECTION_TRIES; attempt++) {
      const upstream = this.#upstreams[this.#indexAt(this.#random() * this.#total)]!;
      if (!isAvailable(upstream)) continue;
      const { effectiveWeight } = upstream;
      const { weight } = upstream.config;
      if (effectiveWeight >= weight || this.#random() * weight < effectiveWeight) return upstream;
    }
    return this.#pickByScan(isAvailable);
  }

  /** The first index whose prefix sum exceeds `r` (0 ≤ r < total): binary search, O(log n). */
  #indexAt(r: number): number {
    let low = 0;
    let high = this.#prefix.length - 1;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#prefix[middle]! > r) high = middle;
      else low = middle + 1;
    }
    return low;
  }

  /** Exact O(n) fallback over the available effective weights; all zero → uniform among available. */
  #pickByScan(isAvailable: AvailabilityPredicate): Upstream | undefined {
    const available = this.#upstreams.filter(isAvailable);
    if (available.length === 0) return undefined;
    const total = available.reduce((sum, upstream) => sum + upstream.effectiveWeight, 0);
    if (total === 0) return available[Math.floor(this.#random() * available.length)];
    let r = this.#random() * total;
    for (const upstream of available) {
      r -= upstream.effectiveWeight;
      if (r < 0) return upstream;
    }
    return available[available.length - 1];
  }

  /** `{ w, ew, share }`: configured weight, effective weight, share of the total effective weight. */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    const total = this.#upstreams.reduce((sum, upstream) => sum + upstream.effectiveWeight, 0);
    return this.#upstreams.map((upstream) => ({
      w: upstream.config.weight,
      ew: upstream.effectiveWeight,
      share: total === 0 ? '0%' : `${((100 * upstream.effectiveWeight) / total).toFixed(2)}%`,
    }));
  }
}
