/**
 * The balancer interface: one `pick(context)` that returns an upstream or nothing. It stands alone so
 * each strategy (one file each, listed in `strategies.ts`) can be read on its own, and one shared
 * conformance suite (test/upstream/balancer/conformance.test.ts) runs against all of them.
 *
 * Strategies never judge health: they ask `isAvailable(upstream)`, which folds together health,
 * `down`, passive ejection, draining and the request's `tried` set (Caddy's `available()` predicate).
 * Shared facts (active requests, effective weight) live on the Upstream; cursors, current weights and
 * hash rings stay private to the strategy.
 */
import type { Upstream } from '../upstream.js';

/** What a strategy may know about the request. */
export interface PickContext {
  /** Client IP without port, `::ffff:` prefix removed. */
  readonly clientIp: string;
  /** Key for `consistent-hash` (from `hash_key`); the client IP when the header/cookie is missing; '' for the other strategies (the request path builds it only for `consistent-hash`). */
  readonly hashKey: string;
  /** Upstreams this request already tried (never picked again). */
  readonly tried: ReadonlySet<Upstream>;
}

/** One balancing decision's inputs besides the context: which upstreams may be picked right now. */
export type AvailabilityPredicate = (upstream: Upstream) => boolean;

export interface Balancer {
  /** The strategy name, as in the config (`smooth-weighted-round-robin`, …). */
  readonly name: string;
  /**
   * Picks an upstream that is available and not in `context.tried`, or undefined when none is.
   * Backups are used only when no primary is available.
   */
  pick(context: PickContext): Upstream | undefined;
  /**
   * The strategy's private state per upstream, for `simulate`, `trace` and the status page
   * (e.g. `{ current: 3 }` for smooth weighted round robin), in upstream order.
   */
  describeState(): readonly Readonly<Record<string, number | string>>[];
}

/**
 * The one availability predicate every strategy goes through for one pick (Caddy's `available()`):
 * the upstream is available at `nowMs` (health UP, not `down`, not ejected, not draining, see
 * `Upstream.isAvailable`) and this request has not tried it yet. Build it once per pick.
 */
export function availableFor(context: PickContext, nowMs: number): AvailabilityPredicate {
  const { tried } = context;
  if (tried.size === 0) return (upstream) => upstream.isAvailable(nowMs); // first attempt: skip the set lookup
  return (upstream) => upstream.isAvailable(nowMs) && !tried.has(upstream);
}

/** What a strategy is built from besides its upstreams: injected randomness and clock, route options. */
export interface StrategyOptions {
  /** Uniform in [0, 1), like Math.random. Injected so tests are exact. */
  readonly random: () => number;
  /** Clock in ms (Date.now by default), for passive ejection deadlines. */
  readonly now: () => number;
  /** `hash` of the route: text → unsigned 32-bit integer (crc32 or fnv1a). */
  readonly hash: (text: string) => number;
  /** `virtual_nodes` of the route: ring points per unit of weight (consistent-hash). */
  readonly virtualNodes: number;
}
