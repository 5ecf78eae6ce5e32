/**
 * The balancer of one route: a strategy over the primary upstreams, the same strategy over the
 * `backup` ones, and the per-pick bookkeeping every strategy shares. Backups are written once here
 * rather than in nine strategies (nginx keeps backups as a second peer list the same way,
 * `peers->next` in ngx_http_upstream_round_robin.c).
 *
 * Per pick:
 *   1. Ask the primaries' strategy. Backups are asked only when it returns nothing: no primary is
 *      available (DOWN, `down`, ejected, draining) or not yet tried by this request.
 *   2. Every upstream that was a candidate for this pick regains one unit of effective weight
 *      (SPEC 4), after the pick, as nginx's loop raises `effective_weight` after adding it to
 *      `current_weight`: an upstream whose effective weight fell to 0 gets no share on this pick
 *      and climbs back from the next. Like nginx's loop, upstreams that were not candidates —
 *      already tried by this request, DOWN, ejected, draining, `down` — regain nothing, so the
 *      retry after a failure does not hand the failed upstream its weight straight back.
 *
 * Cost note: only upstreams below their weight need step 2. Each upstream tells the balancer when
 * its effective weight goes down (`Upstream.onWeightLowered`), the balancer keeps those in a set and
 * sweeps only the set, dropping each one once it is whole again: a pick costs O(degraded upstreams)
 * on top of the strategy, not O(n) (scripts/bench-balancers.ts).
 */
import { availableFor, type Balancer, type PickContext } from './balancer.js';
import type { Upstream } from '../upstream.js';

export class RouteBalancer implements Balancer {
  readonly name: string;
  /** Every upstream of the route, in config order (primaries and backups mixed as written). */
  readonly upstreams: readonly Upstream[];
  readonly #primary: Balancer;
  readonly #backup: Balancer;
  /** Position of each upstream (route order) in its strategy's list, for describeState. */
  readonly #placeInStrategy: readonly number[];
  /** Upstreams below their configured weight: the only ones the per-pick regain has to visit. */
  readonly #degraded = new Set<Upstream>();
  readonly #now: () => number;

  /**
   * @param upstreams every upstream of the route, config order
   * @param build the strategy constructor, called once for the primaries and once for the backups,
   *   with the strategy of the same tier in `previous` (undefined without one)
   * @param now the clock (ms) availability is judged by
   * @param previous the balancer this one replaces when the route's set changed under traffic
   */
  constructor(
    name: string,
    upstreams: readonly Upstream[],
    build: (upstreams: readonly Upstream[], previous: Balancer | undefined) => Balancer,
    now: () => number = Date.now,
    previous?: RouteBalancer,
  ) {
    this.#now = now;
    this.name = name;
    this.upstreams = upstreams;
    const primaries = upstreams.filter((upstream) => !upstream.config.isBackup);
    const backups = upstreams.filter((upstream) => upstream.config.isBackup);
    for (const upstream of upstreams) {
      upstream.onWeightLowered = (lowered) => this.#degraded.add(lowered);
      if (upstream.effectiveWeight < upstream.config.weight) this.#degraded.add(upstream);
    }
    this.#primary = build(primaries, previous === undefined ? undefined : previous.#primary);
    this.#backup = build(backups, previous === undefined ? undefined : previous.#backup);
    this.#placeInStrategy = upstreams.map((upstream) =>
      upstream.config.isBackup ? backups.indexOf(upstream) : primaries.indexOf(upstream),
    );
  }

  pick(context: PickContext): Upstream | undefined {
    const picked = this.#primary.pick(context) ?? this.#backup.pick(context);
    if (this.#degraded.size === 0) return picked;
    const isCandidate = availableFor(context, this.#now());
    for (const upstream of this.#degraded) {
      if (!isCandidate(upstream)) continue;
      upstream.regainWeight();
      if (upstream.effectiveWeight >= upstream.config.weight) this.#degraded.delete(upstream);
    }
    return picked;
  }

  /** The strategies' states merged back into route order. */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    const primaryStates = this.#primary.describeState();
    const backupStates = this.#backup.describeState();
    return this.upstreams.map((upstream, i) => {
      const states = upstream.config.isBackup ? backupStates : primaryStates;
      return states[this.#placeInStrategy[i]!] ?? {};
    });
  }
}
