/**
 * `weighted-round-robin` (SPEC 3), the interval method: upstreams take turns in list order and each
 * keeps its turn for `weight` consecutive picks (its effective weight, SPEC 4).
 *
 * Steps. State: a cursor (the upstream whose interval is running) and `served`, the picks it has had
 * in this interval. Per pick:
 *   1. If the cursor's upstream is available and served < its effective weight: served += 1, pick it.
 *   2. Otherwise walk on (wrapping) to the next available upstream with effective weight > 0; it starts
 *      a new interval: served = 1, pick it. (If every available one has effective weight 0, each is
 *      treated as weight 1 rather than returning nothing.)
 *
 * Worked example: a weight 3, b weight 1.
 *   | pick | cursor, served before | rule                | picked | cursor, served after |
 *   | 1    | a, 0                  | 0 < 3, stay          | a      | a, 1                 |
 *   | 2    | a, 1                  | 1 < 3, stay          | a      | a, 2                 |
 *   | 3    | a, 2                  | 2 < 3, stay          | a      | a, 3                 |
 *   | 4    | a, 3                  | interval over → b    | b      | b, 1                 |
 *   | 5    | b, 1                  | interval over → a    | a      | a, 1                 |
 *   → a a a b a a a b
 *
 * A changing set (DNS discovery, the registry): if the upstream whose interval runs stayed, its
 * interval goes on (`served` kept); if it left, the next upstream of the old order that stayed
 * starts a fresh interval. The other upstreams wait for their turns as before.
 *
 * Properties: exact shares over every cycle of Σweights picks; O(1) per pick in the steady state, two
 * integers of state, memory independent of the weights.
 *
 * Why not this one for real traffic: it sends bursts. With weights 1000 and 1, a receives 1000
 * requests in a row before b sees one; a slow upstream gets a whole burst at once. Smooth weighted
 * round robin (nginx) interleaves the same shares (a a b a c a a instead of a a a a a b c for 5:1:1).
 * Why not the naive way to implement it: repeating each upstream `weight` times in an array and
 * cycling over it — its memory grows with the weights (10^6 entries for one weight of 1 000 000).
 *
 * References: the tutorials' weighted round robin; LVS's `wrr` scheduler (ip_vs_wrr.c) interleaves by
 * a decreasing weight threshold instead; nginx's smooth variant (see smooth-weighted-round-robin.ts).
 */
import type { AvailabilityPredicate, Balancer, PickContext, StrategyOptions } from './balancer.js';
import { availableFor } from './balancer.js';
import type { Upstream } from '../upstream.js';
import { firstStayingPlace, placesOf } from './carried-position.js';

export class WeightedRoundRobinBalancer implements Balancer {
  readonly name = 'weighted-round-robin';
  readonly #upstreams: readonly Upstream[];
  readonly #now: () => number;
  /** Index of the upstream whose interval is running. */
  #cursor = 0;
  /** Picks the cursor's upstream has had in its current interval. */
  #served = 0;

  /** @param previous the strategy this one replaces: its running interval carries over (see the file comment) */
  constructor(upstreams: readonly Upstream[], options: StrategyOptions, previous?: Balancer) {
    this.#upstreams = upstreams;
    this.#now = options.now;
    if (previous instanceof WeightedRoundRobinBalancer) this.#adopt(previous);
  }

  #adopt(previous: WeightedRoundRobinBalancer): void {
    const places = placesOf(this.#upstreams);
    const running = previous.#upstreams[previous.#cursor];
    const runningPlace = running === undefined ? undefined : places.get(running);
    if (runningPlace !== undefined) {
      this.#cursor = runningPlace;
      this.#served = previous.#served;
    } else {
      this.#cursor = firstStayingPlace(previous.#upstreams, previous.#cursor + 1, places) ?? 0;
      this.#served = 0;
    }
  }

  pick(context: PickContext): Upstream | undefined {
    const isAvailable = availableFor(context, this.#now());
    const current = this.#upstreams[this.#cursor];
    if (current !== undefined && isAvailable(current) && this.#served < current.effectiveWeight) {
      this.#served++;
      return current;
    }
    const next =
      this.#startInterval(isAvailable, (upstream) => upstream.effectiveWeight > 0) ??
      this.#startInterval(isAvailable, () => true); // every available one has effective weight 0
    return next;
  }

  /** Walks past the cursor (wrapping, itself last) to the first available upstream passing `hasTurn`. */
  #startInterval(isAvailable: AvailabilityPredicate, hasTurn: (upstream: Upstream) => boolean): Upstream | undefined {
    const count = this.#upstreams.length;
    for (let step = 1; step <= count; step++) {
      const index = (this.#cursor + step) % count;
      const upstream = this.#upstreams[index]!;
      if (isAvailable(upstream) && hasTurn(upstream)) {
        this.#cursor = index;
        this.#served = 1;
        return upstream;
      }
    }
    return undefined;
  }

  /** `{ ew, served }`: effective weight, and picks in the running interval (0 except at the cursor). */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    return this.#upstreams.map((upstream, i) => ({
      ew: upstream.effectiveWeight,
      served: i === this.#cursor ? this.#served : 0,
    }));
  }
}
