/**
 * `least-connections` (SPEC 3): send the request to the upstream with the fewest active requests
 * relative to its weight, so slow upstreams (whose requests pile up) get less new work.
 *
 * Steps. State: a round-robin cursor for ties. Per pick:
 *   1. Walk all upstreams once, starting at the cursor (wrapping), skipping unavailable ones and
 *      those with effective weight 0 (unless all available ones have 0: then they count as weight 1).
 *   2. Keep the one with the smallest active ÷ effectiveWeight; a later one wins only if strictly
 *      smaller, compared as activeᵢ·wⱼ < activeⱼ·wᵢ so no division or rounding is involved.
 *   3. Pick it; move the cursor just past it, so equal loads are served in round-robin order.
 *
 * Worked example: a and b, weight 1. A long request is held open on a (active a=1, b=0).
 *   | pick | active a, b | cursor | ratios a, b | picked |
 *   | 1    | 1, 0        | a      | 1, 0        | b      |
 *   | 2    | 1, 0        | a      | 1, 0        | b      |   … the next 10 all go to b.
 *   With no load (every request ends before the next): ratios 0, 0, ties in round-robin order →
 *   a b a b …, 10 requests split 5/5. With weights a=3, b=1 and requests never ending: each pick
 *   evens out active/weight, so after 40 picks a has 30 and b 10.
 *
 * A changing set (DNS discovery, the registry): the loads live on the upstreams, so they carry
 * over by themselves; the tie cursor continues at the upstream it pointed at (or the next one of
 * the old order that stayed).
 *
 * Properties: adapts to upstream speed without measuring it; O(n) per pick (every upstream's count is
 * read), the one strategy here besides smooth weighted round robin that cannot avoid it; one
 * integer of state. Counts are per proxy process, so with several workers each balances its own share.
 *
 * Why not the naive way: a pure minimum without the cursor always sends ties to the first upstream,
 * so with light load (everything at 0) a takes all the traffic.
 *
 * References: nginx's least_conn (ngx_http_upstream_least_conn_module.c, which compares
 * `conns * best->weight < best->conns * weight` the same way, and breaks ties by weighted round robin);
 * HAProxy's `leastconn`; Caddy's `least_conn`.
 */
import type { AvailabilityPredicate, Balancer, PickContext, StrategyOptions } from './balancer.js';
import { availableFor } from './balancer.js';
import type { Upstream } from '../upstream.js';
import { firstStayingPlace, placesOf } from './carried-position.js';

export class LeastConnectionsBalancer implements Balancer {
  readonly name = 'least-connections';
  readonly #upstreams: readonly Upstream[];
  readonly #now: () => number;
  /** Where the next walk starts, for round-robin order among ties. */
  #cursor = 0;

  /** @param previous the strategy this one replaces: its tie cursor carries over */
  constructor(upstreams: readonly Upstream[], options: StrategyOptions, previous?: Balancer) {
    this.#upstreams = upstreams;
    this.#now = options.now;
    if (previous instanceof LeastConnectionsBalancer) {
      this.#cursor = firstStayingPlace(previous.#upstreams, previous.#cursor, placesOf(upstreams)) ?? 0;
    }
  }

  pick(context: PickContext): Upstream | undefined {
    const isAvailable = availableFor(context, this.#now());
    const best =
      this.#leastLoaded(isAvailable, (upstream) => upstream.effectiveWeight) ??
      this.#leastLoaded(isAvailable, () => 1); // every available one has effective weight 0
    if (best === undefined) return undefined;
    this.#cursor = (best + 1) % this.#upstreams.length;
    return this.#upstreams[best];
  }

  /** Index of the available upstream with the least active ÷ weightOf, first from the cursor on ties. */
  #leastLoaded(isAvailable: AvailabilityPredicate, weightOf: (upstream: Upstream) => number): number | undefined {
    const count = this.#upstreams.length;
    let best: number | undefined;
    let bestActive = 0;
    let bestWeight = 0;
    for (let step = 0; step < count; step++) {
      const index = (this.#cursor + step) % count;
      const upstream = this.#upstreams[index]!;
      if (!isAvailable(upstream)) continue;
      const weight = weightOf(upstream);
      if (weight <= 0) continue;
      const active = upstream.activeRequests;
      if (best === undefined || active * bestWeight < bestActive * weight) {
        best = index;
        bestActive = active;
        bestWeight = weight;
      }
    }
    return best;
  }

  /** `{ active, ew, next }`: active requests, effective weight, and 'yes' where the cursor is. */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    return this.#upstreams.map((upstream, i) => ({
      active: upstream.activeRequests,
      ew: upstream.effectiveWeight,
      next: i === this.#cursor ? 'yes' : 'no',
    }));
  }
}
