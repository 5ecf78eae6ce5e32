/**
 * The strategy table: one visible table from the `strategy` names of SPEC 3 to the classes that
 * implement them (Caddy registers its selection policies the same way), and `createBalancer`, which
 * builds a route's balancer from its config: the strategy over the primaries, again over the backups
 * (route-balancer.ts), with the route's `hash` and `virtual_nodes` and injected `random` and `now`.
 */
import type { RouteConfig, StrategyName } from '../../config/config.js';
import type { Balancer, StrategyOptions } from './balancer.js';
import { ConsistentHashBalancer } from './consistent-hash.js';
import { HASH_FUNCTIONS } from './hash.js';
import { IpHashBalancer } from './ip-hash.js';
import { LeastConnectionsBalancer } from './least-connections.js';
import { PowerOfTwoChoicesBalancer } from './power-of-two-choices.js';
import { RandomBalancer } from './random.js';
import { RoundRobinBalancer } from './round-robin.js';
import { RouteBalancer } from './route-balancer.js';
import { SmoothWeightedRoundRobinBalancer } from './smooth-weighted-round-robin.js';
import { WeightedRandomBalancer } from './weighted-random.js';
import { WeightedRoundRobinBalancer } from './weighted-round-robin.js';
import type { Upstream } from '../upstream.js';
import { formatPlace } from '../../errors.js';

export { hashKeyFor } from './hash-key.js';

/**
 * A strategy class: built over a fixed list of upstreams. `previous` is the strategy it replaces
 * when the set changed under traffic (discovery, registry): one of the same class takes over its
 * private state for the upstreams that stay (see each strategy's `adopt` rule); any other is ignored.
 */
export type StrategyConstructor = new (upstreams: readonly Upstream[], options: StrategyOptions, previous?: Balancer) => Balancer;

/** Every strategy of SPEC 3, by its config name. */
export const STRATEGIES: Readonly<Record<StrategyName, StrategyConstructor>> = {
  'random': RandomBalancer,
  'weighted-random': WeightedRandomBalancer,
  'round-robin': RoundRobinBalancer,
  'weighted-round-robin': WeightedRoundRobinBalancer,
  'smooth-weighted-round-robin': SmoothWeightedRoundRobinBalancer,
  'ip-hash': IpHashBalancer,
  'least-connections': LeastConnectionsBalancer,
  'consistent-hash': ConsistentHashBalancer,
  'power-of-two-choices': PowerOfTwoChoicesBalancer,
};

/** The strategies that read an upstream's `weight`; the others give every available upstream the same share. */
export const WEIGHTED_STRATEGIES: ReadonlySet<StrategyName> = new Set<StrategyName>([
  'weighted-random',
  'weighted-round-robin',
  'smooth-weighted-round-robin',
  'least-connections',
  'consistent-hash',
]);

/**
 * `--check`: one warning per route whose strategy reads no weight while a `pass` line sets one
 * (`env.ini:7:8: [proxy.a] weight=5 has no effect with strategy round-robin …`), at the first such
 * line. nginx's round robin, `ip_hash` and `least_conn` all weigh, so a user coming from it would
 * expect 5:1 and get 1:1.
 */
export function weightWarnings(routes: readonly RouteConfig[]): string[] {
  return routes.flatMap((route) => {
    if (WEIGHTED_STRATEGIES.has(route.strategy)) return [];
    const weighted = route.upstreams.find((upstream) => upstream.weight !== 1);
    if (weighted === undefined) return [];
    return [
      `${formatPlace(weighted.place)}: [proxy.${route.name}] weight=${weighted.weight} has no effect with strategy ${route.strategy}, which gives every available upstream the same share ` +
        `(weights count with ${[...WEIGHTED_STRATEGIES].join(', ')})`,
    ];
  });
}

/** Injected randomness and clock; defaults Math.random and Date.now. */
export interface BalancerDeps {
  /** Uniform in [0, 1). Default Math.random. */
  readonly random?: () => number;
  /** Clock in ms. Default Date.now. */
  readonly now?: () => number;
}

/**
 * The balancer of one route: `route.strategy` over the primary upstreams, and over the backups for
 * when no primary is available; every pick also lets each upstream that was a candidate regain one
 * unit of effective weight (SPEC 4, as nginx).
 *
 * @param route the route's config (strategy, hash, virtual_nodes)
 * @param upstreams the route's runtime upstreams, in config order (one per `pass` line)
 * @param deps injected `random` (uniform in [0, 1)) and `now` (ms)
 * @param previous the route's balancer before its upstream set changed: its strategies' state is
 *   taken over for the upstreams that stay (primaries from its primaries, backups from its backups)
 * @returns a RouteBalancer (a Balancer that also lists its upstreams in config order)
 */
export function createBalancer(route: RouteConfig, upstreams: readonly Upstream[], deps: BalancerDeps = {}, previous?: RouteBalancer): RouteBalancer {
  const options: StrategyOptions = {
    random: deps.random ?? Math.random,
    now: deps.now ?? Date.now,
    hash: HASH_FUNCTIONS[route.hash],
    virtualNodes: route.virtualNodes,
  };
  const Strategy = STRATEGIES[route.strategy];
  return new RouteBalancer(route.strategy, upstreams, (list, previousStrategy) => new Strategy(list, options, previousStrategy), options.now, previous);
}
