/**
 * The limits of one process (`workers = 1`, the default `LimitsProvider`): each route's buckets
 * (rate-limiter.ts) and in-flight counts (conn-limiter.ts) in this process's memory, answered
 * synchronously, so the request path never waits for a limit.
 *
 * Across a reload (SIGHUP), a route is known by its name:
 *   - its buckets are kept when its `rate_limit` settings (rate, period, burst) did not change; new
 *     settings start with fresh (full) buckets, as the old levels mean nothing under another rate;
 *     `rate_limit = off` forgets them;
 *   - its in-flight counts are always kept: they count requests running now, which a reload lets
 *     finish, and a new `conn_limit` applies to them at once.
 * A route that a reload removes keeps its state here (bounded by the cap) in case a later reload
 * brings it back under the same settings.
 */
import type { ConnLimitConfig, RateLimitConfig } from '../config/config.js';
import { ConnLimiter } from './conn-limiter.js';
import type { LimitsProvider, LimitVerdict, RouteLimits } from './limits.js';
import { ALLOWED, DEFAULT_MAX_CLIENTS, RateLimiter } from './rate-limiter.js';

export interface LocalLimitsOptions {
  /** Monotonic clock, ms. Default `performance.now`. */
  readonly now?: () => number;
  /** Hard cap of buckets per route. Default DEFAULT_MAX_CLIENTS (100 000). */
  readonly maxClientsPerRoute?: number;
}

/** One route's limits under one set of settings. */
export class LocalRouteLimits implements RouteLimits {
  readonly rateLimiter: RateLimiter | undefined;
  readonly connLimiter: ConnLimiter;
  readonly #maxInFlight: number;

  /** @param maxInFlight `conn_limit`; Infinity when it is off */
  constructor(rateLimiter: RateLimiter | undefined, connLimiter: ConnLimiter, maxInFlight: number) {
    this.rateLimiter = rateLimiter;
    this.connLimiter = connLimiter;
    this.#maxInFlight = maxInFlight;
  }

  acquireSlot(clientIp: string): (() => void) | undefined {
    return this.connLimiter.acquire(clientIp, this.#maxInFlight);
  }

  takeToken(clientIp: string): LimitVerdict {
    return this.rateLimiter?.takeToken(clientIp) ?? ALLOWED;
  }
}

export class LocalLimits implements LimitsProvider {
  readonly #now: () => number;
  readonly #maxClients: number;
  /** Route name → its buckets and the settings they were made for. */
  readonly #rateLimiters = new Map<string, RateLimiter>();
  /** Route name → its in-flight counts (kept across every change of settings). */
  readonly #connLimiters = new Map<string, ConnLimiter>();

  constructor(options: LocalLimitsOptions = {}) {
    this.#now = options.now ?? (() => performance.now());
    this.#maxClients = options.maxClientsPerRoute ?? DEFAULT_MAX_CLIENTS;
  }

  limitsFor(routeName: string, rateLimit: RateLimitConfig | undefined, connLimit: ConnLimitConfig | undefined): LocalRouteLimits | undefined {
    const rateLimiter = this.#rateLimiterFor(routeName, rateLimit);
    if (rateLimit === undefined && connLimit === undefined) return undefined;
    let connLimiter = this.#connLimiters.get(routeName);
    if (connLimiter === undefined) {
      connLimiter = new ConnLimiter();
      this.#connLimiters.set(routeName, connLimiter);
    }
    return new LocalRouteLimits(rateLimiter, connLimiter, connLimit?.maxInFlight ?? Infinity);
  }

  /** The route's buckets: the ones it has when the settings are the same, else new ones; none when off. */
  #rateLimiterFor(routeName: string, rateLimit: RateLimitConfig | undefined): RateLimiter | undefined {
    if (rateLimit === undefined) {
      this.#rateLimiters.delete(routeName);
      return undefined;
    }
    const existing = this.#rateLimiters.get(routeName);
    const { requests, periodMs, burst } = rateLimit;
    if (existing !== undefined && existing.rate.requests === requests && existing.rate.periodMs === periodMs && existing.rate.burst === burst) return existing;
    const created = new RateLimiter({ requests, periodMs, burst }, this.#now, this.#maxClients);
    this.#rateLimiters.set(routeName, created);
    return created;
  }
}
