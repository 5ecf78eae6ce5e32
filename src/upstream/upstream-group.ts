/**
 * The upstreams of one route, with the passive-health rules that need to see all of them at once
 * (SPEC 4, both as nginx `ngx_http_upstream_round_robin.c`):
 *
 * - A route's only upstream is never ejected and its weight never degraded: with nothing to fail over
 *   to, keeping it out would turn every request into a 503 (nginx's `peers->single`, whose
 *   `free_peer` skips the failure accounting).
 * - When every upstream of the route has failed (none is available any more), all failure counts and
 *   ejections are reset, so they recover at once instead of a whole `fail_timeout` later (nginx:
 *   "all peers failed, mark them as live for quick recovery"). Passive ejection alone therefore never
 *   empties a route; active health DOWN and the config's `down` still can, and that is a 503.
 *
 * This is the object the request path reports to, nginx's get/free pair: after an attempt it calls
 * `recordFailure(upstream, now)` or `recordSuccess(upstream, now)`. (The per-pick regain of effective
 * weight is the route balancer's: src/upstream/balancer/route-balancer.ts.)
 */
import type { RouteConfig } from '../config/config.js';
import type { PassiveHealthParams, Upstream } from './upstream.js';

/** What the group needs from a route's config. A whole `RouteConfig` fits. */
export type GroupRouteConfig = Pick<RouteConfig, 'name' | 'maxFails' | 'failTimeoutMs' | 'failFactor'>;

/** What a failure did, for the log line the caller writes. */
export interface FailureOutcome {
  /** This failure ejected the upstream for `fail_timeout` (false for a lone upstream, always). */
  readonly ejected: boolean;
  /** No upstream of the route was available after it, so every failure count and ejection was reset. */
  readonly wasGroupReset: boolean;
}

export class UpstreamGroup {
  readonly routeName: string;
  readonly params: PassiveHealthParams;
  readonly #upstreams: Upstream[];

  /** @param upstreams in config order; the group keeps its own copy of the list, not of the upstreams. */
  constructor(route: GroupRouteConfig, upstreams: readonly Upstream[]) {
    this.routeName = route.name;
    this.params = { maxFails: route.maxFails, failTimeoutMs: route.failTimeoutMs, failFactor: route.failFactor };
    this.#upstreams = [...upstreams];
  }

  /** The route's upstreams, in order (backups included). */
  get upstreams(): readonly Upstream[] {
    return this.#upstreams;
  }

  /** True when the route has exactly one upstream (nginx's `single`: backups count, `down` ones too). */
  get isLone(): boolean {
    return this.#upstreams.length === 1;
  }

  /** Adds an upstream (admin registry). Adding one already present does nothing. */
  add(upstream: Upstream): void {
    if (!this.#upstreams.includes(upstream)) this.#upstreams.push(upstream);
  }

  /** Removes an upstream (admin registry). Returns false when it was not in the group. */
  remove(upstream: Upstream): boolean {
    const index = this.#upstreams.indexOf(upstream);
    if (index < 0) return false;
    this.#upstreams.splice(index, 1);
    return true;
  }

  /**
   * Records a failed attempt (connect error, timeout, reset) on `upstream` at `nowMs` (ms): counts it
   * in the upstream's window, degrades its weight and ejects it at `max_fails` (`Upstream.recordFailure`),
   * except for a lone upstream, which is only counted in `failuresTotal`. If that leaves no upstream
   * of the route available, resets them all (`recoverIfAllFailed`).
   */
  recordFailure(upstream: Upstream, nowMs: number): FailureOutcome {
    const params = this.isLone ? { ...this.params, maxFails: 0 } : this.params;
    const { ejected } = upstream.recordFailure(nowMs, params);
    const wasGroupReset = ejected && this.recoverIfAllFailed(nowMs);
    return { ejected, wasGroupReset };
  }

  /** Records a successful attempt on `upstream` at `nowMs` (ms). See `Upstream.recordSuccess`. */
  recordSuccess(upstream: Upstream, nowMs: number): void {
    upstream.recordSuccess(nowMs);
  }


  /** True when at least one upstream (primary or backup) may be picked at `nowMs`. */
  isAnyAvailable(nowMs: number): boolean {
    return this.#upstreams.some((upstream) => upstream.isAvailable(nowMs));
  }

  /**
   * nginx's quick recovery: when no upstream is available at `nowMs` and at least one of them is
   * out because of passive ejection, forgets every upstream's failures and ejection. Returns true when
   * it reset. `recordFailure` calls it; the request path may also call it when a pick finds nothing
   * (an active DOWN can empty a route whose other upstreams are ejected), then pick again.
   */
  recoverIfAllFailed(nowMs: number): boolean {
    if (this.isAnyAvailable(nowMs)) return false;
    if (!this.#upstreams.some((upstream) => upstream.isEjected(nowMs))) return false;
    for (const upstream of this.#upstreams) upstream.resetFailures();
    return true;
  }
}
