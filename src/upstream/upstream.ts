/**
 * An upstream's runtime state, kept apart from its config (Caddy's split of `Upstream` config and
 * `Host` counters; nginx's `ngx_http_upstream_rr_peer_t` grouped by concern). Config is readonly and
 * shared; this object holds what changes while the proxy runs: active requests, effective weight,
 * health and passive-failure accounting. Counters change only through small methods that refuse to go
 * below zero and report whether a state *changed*, so logs fire on transitions only.
 *
 * Passive health (SPEC 4) lives here per upstream; the route-level rules (a lone upstream is never
 * ejected, all failed → reset) live in `upstream-group.ts`, which is what the request path calls.
 */
import type { UpstreamConfig } from '../config/config.js';

/** Active health state (SPEC 4): UP until `health_fall` consecutive failed probes, then DOWN until `health_rise` successes. */
export type HealthState = 'up' | 'down';

/** The route's passive-health knobs (SPEC 1.2 `max_fails`, `fail_timeout`, `fail_factor`). */
export interface PassiveHealthParams {
  /** Failures within `failTimeoutMs` that eject the upstream; 0 disables passive health. */
  readonly maxFails: number;
  /** Length of the counting window and of the ejection, ms. */
  readonly failTimeoutMs: number;
  /** Each failure costs max(1, floor(weight / failFactor)) effective weight. At least 1. */
  readonly failFactor: number;
}

/** The last active health probe, as the status page and `/status.json` show it. */
export interface ProbeRecord {
  readonly ok: boolean;
  /** HTTP status of the probe's response, when one arrived. */
  readonly status?: number;
  /** Time from sending the probe to its response head (or its failure), ms. */
  readonly latencyMs: number;
  /** One-line reason for a failed probe: `connect ECONNREFUSED`, `timeout after 2000ms`, `status 500`. */
  readonly error?: string;
  /** Clock time (ms, the checker's `now()`) when the result arrived. */
  readonly atMs: number;
}

export class Upstream {
  // identity
  /** Replaced only by `reconfigure` (reload keeps the runtime state of an unchanged address). */
  config: UpstreamConfig;
  /** `host:port` of this upstream for logs, status and metrics (`upstreamAddress`); fixed with the origin. */
  readonly address: string;
  /** Name of the route this upstream belongs to, for logs. */
  readonly routeName: string;

  // load
  /** Requests dispatched and not yet ended (SPEC 3). Never below zero. */
  activeRequests = 0;

  // weight
  /** Weight after failures (SPEC 4 weight degradation), 0..config.weight. Starts at config.weight. */
  get effectiveWeight(): number {
    return this.#effectiveWeight;
  }
  set effectiveWeight(weight: number) {
    const isLowered = weight < this.#effectiveWeight;
    this.#effectiveWeight = weight;
    if (isLowered) this.onWeightLowered?.(this);
  }
  #effectiveWeight: number;
  /**
   * Told whenever the effective weight goes down, whoever lowers it. The route's balancer sets it,
   * so its per-pick regain sweeps only the degraded upstreams instead of all of them.
   */
  onWeightLowered: ((upstream: Upstream) => void) | undefined = undefined;

  // health
  healthState: HealthState = 'up';
  /** The last active probe, undefined until the first one (or when `health_check` is off). */
  lastProbe: ProbeRecord | undefined = undefined;
  /** Clock time (ms) until which the upstream is passively ejected; 0 = not ejected. */
  ejectedUntilMs = 0;
  /** Set by the admin `drain` action: no new requests, in-flight ones finish. */
  isDraining = false;
  /**
   * Set when its address left the route's set (a DNS answer without it, the registry, a reload): no
   * new requests, and a retry of one in flight never picks it again; in-flight ones finish.
   */
  hasLeft = false;

  // passive failure accounting (see recordFailure)
  /** Failures counted in the current window; 0 when no window is open. */
  recentFailures = 0;
  /** Clock time (ms) when the current counting window closes (first failure + fail_timeout). */
  failureWindowEndMs = 0;

  // totals, for logs, status and metrics
  requestsTotal = 0;
  failuresTotal = 0;

  constructor(config: UpstreamConfig, routeName: string) {
    this.config = config;
    this.routeName = routeName;
    this.address = upstreamAddress(config);
    this.#effectiveWeight = config.weight;
  }

  /**
   * Takes the config of the same address from a reloaded file (weight, backup, down may differ).
   * Counters, health and in-flight accounting stay; effective weight is capped at the new weight,
   * or set to it when the weight changed.
   */
  reconfigure(config: UpstreamConfig): void {
    if (config.origin !== this.config.origin) throw new Error(`reconfigure: ${config.origin} is not ${this.config.origin}`);
    const hasWeightChanged = config.weight !== this.config.weight;
    this.config = config;
    this.effectiveWeight = hasWeightChanged ? config.weight : Math.min(this.effectiveWeight, config.weight);
  }

  /** `http://host:port`. */
  get origin(): string {
    return this.config.origin;
  }

  /**
   * True when a balancer may pick this upstream: not marked `down`, health UP, not ejected at
   * `nowMs`, not draining, still in its route's set. The single availability predicate every strategy goes through.
   */
  isAvailable(nowMs: number): boolean {
    return !this.config.isDown && this.healthState === 'up' && !this.isEjected(nowMs) && !this.isDraining && !this.hasLeft;
  }

  /** True while passive health keeps this upstream out (SPEC 4), i.e. `nowMs < ejectedUntilMs`. */
  isEjected(nowMs: number): boolean {
    return nowMs < this.ejectedUntilMs;
  }

  /**
   * Gives back one unit of effective weight, up to the configured weight. The route balancer calls
   * it on every pick for each degraded upstream that was a candidate (nginx), so none is starved.
   */
  regainWeight(): void {
    if (this.effectiveWeight < this.config.weight) this.effectiveWeight++;
  }

  /** Restores the full configured weight at once: what a successful active probe does (SPEC 4). */
  restoreWeight(): void {
    this.effectiveWeight = this.config.weight;
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

  /**
   * Passive health: records one failed attempt (connect error, timeout, reset) at `nowMs` and
   * reports whether this failure ejected the upstream. Call it through `UpstreamGroup.recordFailure`,
   * which adds the route-level rules.
   *
   * Steps:
   * 1. `failuresTotal++` (always, for metrics).
   * 2. With `maxFails = 0` passive health is off: stop here (nginx guards the rest with
   *    `if (peer->max_fails)` too, weight degradation included).
   * 3. Weight degradation: `effectiveWeight -= max(1, floor(weight / failFactor))`, floor 0.
   *    weight 5, fail_factor 5 → 5 − 1 = 4; weight 10, fail_factor 5 → 10 − 2 = 8.
   *    (nginx subtracts `weight / max_fails`; SPEC 4 keeps the tutorial's FailFactor, and the
   *    max(1, …) makes every failure count even when weight < fail_factor.)
   * 4. While already ejected, stop: failures of requests still in flight neither extend the
   *    ejection nor start a new window.
   * 5. Counting window: the first failure opens a window of `failTimeoutMs`; failures inside it
   *    add up, whatever successes happen in between (successes do not reset the count); a failure
   *    after the window closed forgets the old ones and opens a new window.
   * 6. The `maxFails`-th failure inside one window ejects the upstream until
   *    `nowMs + failTimeoutMs` and closes the window, so it comes back with a clean count.
   *
   * Worked example, max_fails 3, fail_timeout 10 000 ms (the test fixture):
   *   t=0 fail → 1 (window until 10 000); t=1 ok; t=2 ok; t=3 fail → 2; t=4 ok; t=5 fail → 3 → ejected
   *   until 10 005. With t=0 fail, t=10 000 fail (window closed: count restarts at 1), t=10 001 fail → 2:
   *   not ejected.
   *
   * Why a window from the first failure: it is what SPEC 4 and nginx's documentation say ("the number
   * of unsuccessful attempts … that should happen in the duration set by fail_timeout") and it needs
   * only the clock. nginx's source is looser: it stamps `checked` on every failure and clears `fails`
   * only on a success after fail_timeout, so failures spaced 9 s apart also add up there. Ours ejects
   * only when nginx would too. After an ejection nginx keeps `fails` and re-ejects on a single new
   * failure; ours starts a fresh count (simpler to explain; the weight degradation still applies).
   *
   * @param nowMs clock time, ms (the same clock as `isAvailable`).
   * @returns `{ ejected: true }` exactly when this failure started an ejection.
   */
  recordFailure(nowMs: number, params: PassiveHealthParams): { ejected: boolean } {
    this.failuresTotal++;
    if (params.maxFails <= 0) return { ejected: false };

    const weightLoss = Math.max(1, Math.floor(this.config.weight / params.failFactor));
    this.effectiveWeight = Math.max(0, this.effectiveWeight - weightLoss);

    if (this.isEjected(nowMs)) return { ejected: false };

    if (this.recentFailures === 0 || nowMs >= this.failureWindowEndMs) {
      this.recentFailures = 0;
      this.failureWindowEndMs = nowMs + params.failTimeoutMs;
    }
    this.recentFailures++;
    if (this.recentFailures < params.maxFails) return { ejected: false };

    this.ejectedUntilMs = nowMs + params.failTimeoutMs;
    this.recentFailures = 0;
    this.failureWindowEndMs = 0;
    return { ejected: true };
  }

  /**
   * Passive health: records a successful attempt at `nowMs`. As nginx ("mark peer live if check
   * passed"), a success clears the failure count only once `fail_timeout` has passed since the window
   * opened; a success inside the window changes nothing, so failures are not required to be
   * consecutive. Effective weight is not touched here: it climbs back by one per pick.
   */
  recordSuccess(nowMs: number): void {
    if (this.recentFailures > 0 && nowMs >= this.failureWindowEndMs) {
      this.recentFailures = 0;
      this.failureWindowEndMs = 0;
    }
  }

  /**
   * Forgets passive failures and ends any ejection at once ("mark them as live for quick recovery",
   * nginx). Used by `UpstreamGroup` when every upstream of a route has failed. Weight is left as is.
   */
  resetFailures(): void {
    this.recentFailures = 0;
    this.failureWindowEndMs = 0;
    this.ejectedUntilMs = 0;
  }
}

/**
 * `host:port` naming an upstream in the access log, on `/status` and in `/metrics`: the `pass` URL's authority for a
 * configured upstream (`localhost:9001`), the address for a discovered one (`10.0.0.7:8080`,
 * `[fd00::7]:8080`), whose `hostHeader` is its line's name and the same for all of the line's addresses.
 */
export function upstreamAddress(config: UpstreamConfig): string {
  if (config.discoveredFrom === undefined) return config.hostHeader;
  return `${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
}
