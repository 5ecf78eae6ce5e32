/**
 * The balancer of one route: a strategy over the primary upstreams, the same strategy over the
 * `backup` ones, and the per-pick bookkeeping every strategy shares. Backups are written once here
 * rather than in nine strategies (nginx keeps backups as a second peer list the same way,
 * `peers->next` in ngx_http_upstream_round_robin.c).
 *
 * Per pick:
 *   1. Ask the primaries' strategy. Backups are asked only when it returns nothing: no primary is
 *      available (DOWN, `down`, ejected, draining) or not yet tried by this request.
 *   2. Every upstream of the route regains one unit of effective weight (SPEC 4), after the pick,
 *      as nginx's loop raises `effective_weight` after adding it to `current_weight`: an upstream
 *      whose effective weight fell to 0 gets no share on this pick and climbs back from the next.
 *
 * Cost note: step 2 touches every upstream, so every route pick is O(n) whatever the strategy (a few
 * ns per upstream; tens of µs at 10 000 upstreams, see scripts/bench-balancers.ts). nginx pays the
 * same only inside its O(n) round robin. Nothing tells the balancer when an effective weight drops,
 * so it cannot sweep only the degraded ones; a hook from the failure accounting (e.g. the route
 * reporting `weightLost(upstream)`) would make it O(degraded upstreams).
 */
import type { Balancer, PickContext } from './balancer.js';
import type { Upstream } from '../upstream/upstream.js';

export class RouteBalancer implements Balancer {
  readonly name: string;
  /** Every upstream of the route, in config order (primaries and backups mixed as written). */
  readonly upstreams: readonly Upstream[];
  readonly #primary: Balancer;
  readonly #backup: Balancer;
  /** Position of each upstream (route order) in its strategy's list, for describeState. */
  readonly #placeInStrategy: readonly number[];

  /**
   * @param upstreams every upstream of the route, config order
   * @param build the strategy constructor, called once for the primaries and once for the backups
   */
  constructor(name: string, upstreams: readonly Upstream[], build: (upstreams: readonly Upstream[]) => Balancer) {
    this.name = name;
    this.upstreams = upstreams;
    const primaries = upstreams.filter((upstream) => !upstream.config.isBackup);
    const backups = upstreams.filter((upstream) => upstream.config.isBackup);
    this.#primary = build(primaries);
    this.#backup = build(backups);
    this.#placeInStrategy = upstreams.map((upstream) =>
      upstream.config.isBackup ? backups.indexOf(upstream) : primaries.indexOf(upstream),
    );
  }

  pick(context: PickContext): Upstream | undefined {
    const picked = this.#primary.pick(context) ?? this.#backup.pick(context);
    const { upstreams } = this;
    for (let i = 0; i < upstreams.length; i++) upstreams[i]!.regainWeight(); // O(n): see the note above
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
