/**
 * The seam between the request path and the per-client limits of a route (`rate_limit`,
 * `conn_limit`): the proxy asks a `LimitsProvider` for each route's `RouteLimits` at start and at
 * every reload, and asks those limits once per request. One process answers from its own memory;
 * a cluster can answer from state the primary owns. Synchronous answers are the common case (no
 * promise on the hot path); a promise is allowed when a worker has to ask the primary.
 */
import type { RateLimitConfig, ConnLimitConfig } from '../config/config.js';

/** A limit's answer for one request. */
export type LimitVerdict = { readonly isAllowed: true } | { readonly isAllowed: false; readonly retryAfterSeconds: number };

/** The limits of one route (a route without rate_limit and conn_limit has none). */
export interface RouteLimits {
  /** conn_limit: takes one in-flight slot of `clientIp`; returns the function that gives it back (idempotent), or undefined when the client already has maxInFlight (→ 429, Retry-After: 1). */
  acquireSlot(clientIp: string): (() => void) | undefined | Promise<(() => void) | undefined>;
  /** rate_limit: takes one token of `clientIp`'s bucket. */
  takeToken(clientIp: string): LimitVerdict | Promise<LimitVerdict>;
}

/** Makes the limits of the routes in force; ProxyServer asks it at start and at every reload. */
export interface LimitsProvider {
  /** The limits of `routeName` under these settings; undefined when both are off. Same name and same settings as before → the same state (buckets, counts) kept. */
  limitsFor(routeName: string, rateLimit: RateLimitConfig | undefined, connLimit: ConnLimitConfig | undefined): RouteLimits | undefined;
}
