/**
 * An upstream's runtime state, kept apart from its config (Caddy's split of `Upstream` config and
 * `Host` counters; nginx's `ngx_http_upstream_rr_peer_t` grouped by concern). Config is readonly and
 * shared; this object holds what changes while the proxy runs: active requests, effective weight,
 * health and passive-failure accounting. Counters change only through small methods that refuse to go
 * below zero and report whether a state *changed*, so logs fire on transitions only.
 */
import type { UpstreamConfig } from '../config/config.js';

/** Active health state (SPEC 4): UP until `health_fall` consecutive failed probes, then DOWN until `health_rise` successes. */
export type HealthState = 'up' | 'down';

export class Upstream {
  // identity
  readonly config: UpstreamConfig;
  /** Name of the route this upstream belongs to, for logs. */
  readonly routeName: string;

  // load
  /** Requests dispatched and not yet ended (SPEC 3). Never below zero. */
  activeRequests = 0;

  // weight
  /** Weight after failures (SPEC 4 weight degradation), 0..config.weight. Starts at config.weight. */
  effectiveWeight: number;

  // health
  healthState: HealthState = 'up';
  /** Clock time (ms) until which the upstream is passively ejected; 0 = not ejected. */
  ejectedUntilMs = 0;
  /** Set by the admin `drain` action: no new requests, in-flight ones finish. */
  isDraining = false;

  // totals, for logs, status and metrics
  requestsTotal = 0;
  failuresTotal = 0;

  constructor(config: UpstreamConfig, routeName: string) {
    this.config = config;
    this.routeName = routeName;
    this.effectiveWeight = config.weight;
  }

  /** `http://host:port`. */
  get origin(): string {
    return this.config.origin;
  }

  /**
   * True when a balancer may pick this upstream: not marked `down`, health UP, not ejected at
   * `nowMs`, not draining. The single availability predicate every strategy goes through.
   */
  isAvailable(nowMs: number): boolean {
    return !this.config.isDown && this.healthState === 'up' && nowMs >= this.ejectedUntilMs && !this.isDraining;
  }

  /**
   * Gives back one unit of effective weight, up to the configured weight. Called for every upstream
   * of a route on every pick of that route (nginx), so a degraded upstream is never starved.
   */
  regainWeight(): void {
    if (this.effectiveWeight < this.config.weight) this.effectiveWeight++;
  }

  /**
   * Counts a dispatched request. Returns the function that ends it; calling that more than once
   * has no further effect, so "down exactly once however the request ends" holds by construction.
   */
  beginRequest(): () => void {
    this.activeRequests++;
    this.requestsTotal++;
    let isEnded = false;
    return () => {
      if (isEnded) return;
      isEnded = true;
      if (this.activeRequests > 0) this.activeRequests--;
    };
  }
}
