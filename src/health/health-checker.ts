/**
 * The active health-check scheduler (SPEC 4): a thin loop of timers around two pure pieces, the
 * probe (`probe.ts`) and the rise/fall state machine (`rise-fall.ts`). It is the tutorial's
 * "setInterval that sends HEAD to every backend", with the holes closed:
 *
 * - The first probe of every upstream goes out at `start()`, not one interval later.
 * - Each upstream has its own timer at a fixed rate of `health_interval`; a tick whose previous probe
 *   is still out is skipped, so probes of one upstream never overlap. With `health_timeout` below the
 *   interval (the default 2 s < 3 s), a dead upstream is DOWN within interval × fall + timeout.
 * - Timers are `unref()`ed: health checks alone never keep the process alive.
 * - `stop()` clears every timer, aborts probes in flight and ignores any result that still arrives.
 * - Transitions are logged once ("upstream http://h:p of route a is DOWN after 3 failed checks:
 *   connect ECONNREFUSED"), never every probe.
 * - A successful probe restores the upstream's full effective weight (SPEC 4 weight degradation).
 *   It does not end a passive ejection: that lasts its `fail_timeout`, as SPEC 4 says.
 *
 * Time is injected (`timers`, `now`) and so is the probe, so the tests drive it exactly.
 */
import type { HealthCheckConfig, RouteConfig } from '../config/config.js';
import type { Upstream } from '../upstream/upstream.js';
import { probe as realProbe, type ProbeFunction, type ProbeResult } from './probe.js';
import { initialHealth, nextHealth, type RiseFallState } from './rise-fall.js';

/** The timer functions the checker uses; the global ones by default. Handles are opaque. */
export interface Timers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** A route and the runtime upstreams to check for it. */
export interface HealthCheckTarget {
  readonly route: RouteConfig;
  readonly upstreams: readonly Upstream[];
}

export interface HealthCheckerOptions {
  /** Routes whose `health.isEnabled` is false are skipped. */
  readonly routes: readonly HealthCheckTarget[];
  /** Default: the real `probe` of probe.ts. */
  readonly probe?: ProbeFunction;
  /** Default: the global setTimeout/clearTimeout. */
  readonly timers?: Timers;
  /** Clock for `lastProbe.atMs`, ms. Default `Date.now`. */
  readonly now?: () => number;
  /** Where transition lines go (one line, no newline). Default: nowhere. */
  readonly log?: (line: string) => void;
}

/** One upstream under watch. */
interface Watch {
  readonly route: RouteConfig;
  readonly upstream: Upstream;
  riseFall: RiseFallState;
  timer: unknown;
  /** The probe in flight, if any; aborting it ends it early. */
  inFlight: AbortController | undefined;
  isActive: boolean;
}

const globalTimers: Timers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export class HealthChecker {
  readonly #probe: ProbeFunction;
  readonly #timers: Timers;
  readonly #now: () => number;
  readonly #log: (line: string) => void;
  readonly #watches = new Map<Upstream, Watch>();
  #isRunning = false;

  constructor(options: HealthCheckerOptions) {
    this.#probe = options.probe ?? realProbe;
    this.#timers = options.timers ?? globalTimers;
    this.#now = options.now ?? Date.now;
    this.#log = options.log ?? (() => {});
    for (const { route, upstreams } of options.routes) {
      for (const upstream of upstreams) this.addUpstream(route, upstream);
    }
  }

  /** True between `start()` and `stop()`. */
  get isRunning(): boolean {
    return this.#isRunning;
  }

  /** Sends the first probe of every watched upstream now and arms the interval timers. Idempotent. */
  start(): void {
    if (this.#isRunning) return;
    this.#isRunning = true;
    for (const watch of this.#watches.values()) this.#tick(watch);
  }

  /** Clears every timer and aborts probes in flight; results that still arrive are ignored. */
  stop(): void {
    if (!this.#isRunning) return;
    this.#isRunning = false;
    for (const watch of this.#watches.values()) this.#quiet(watch);
  }

  /**
   * Starts watching `upstream` of `route` (admin registry, or the constructor). Does nothing when the
   * route's `health_check` is off or the upstream is already watched. If the checker is running, the
   * first probe goes out at once. The rise/fall state starts from `upstream.healthState`.
   */
  addUpstream(route: RouteConfig, upstream: Upstream): void {
    if (!route.health.isEnabled || this.#watches.has(upstream)) return;
    const watch: Watch = {
      route,
      upstream,
      riseFall: initialHealth(upstream.healthState),
      timer: undefined,
      inFlight: undefined,
      isActive: true,
    };
    this.#watches.set(upstream, watch);
    if (this.#isRunning) this.#tick(watch);
  }

  /** Stops watching `upstream`: clears its timer, aborts its probe. Returns false if it was not watched. */
  removeUpstream(upstream: Upstream): boolean {
    const watch = this.#watches.get(upstream);
    if (watch === undefined) return false;
    watch.isActive = false;
    this.#quiet(watch);
    this.#watches.delete(upstream);
    return true;
  }

  /** The upstreams being watched, in the order they were added. */
  get upstreams(): readonly Upstream[] {
    return [...this.#watches.keys()];
  }

  /** One interval: arm the next tick first (fixed rate), then probe unless the last probe is still out. */
  #tick(watch: Watch): void {
    const check = watch.route.health;
    const timer = this.#timers.setTimeout(() => this.#tick(watch), check.intervalMs);
    (timer as { unref?: () => void } | undefined)?.unref?.();
    watch.timer = timer;
    if (watch.inFlight === undefined) this.#sendProbe(watch, check);
  }

  #sendProbe(watch: Watch, check: HealthCheckConfig): void {
    const controller = new AbortController();
    watch.inFlight = controller;
    let probing: Promise<ProbeResult>;
    try {
      probing = this.#probe(watch.upstream.config, check, { timeoutMs: check.timeoutMs, signal: controller.signal });
    } catch (error) {
      probing = Promise.reject(error);
    }
    probing
      .catch((error: unknown): ProbeResult => ({ ok: false, latencyMs: 0, error: `probe failed: ${String(error)}` }))
      .then((result) => {
        if (watch.inFlight !== controller) return; // stopped or removed meanwhile
        watch.inFlight = undefined;
        if (!this.#isRunning || !watch.isActive) return;
        this.#apply(watch, result);
      });
  }

  /** Runs the state machine on one result and writes what follows onto the upstream. */
  #apply(watch: Watch, result: ProbeResult): void {
    const { upstream, route } = watch;
    upstream.lastProbe = { ...result, atMs: this.#now() };
    const { state, changed } = nextHealth(watch.riseFall, result.ok, route.health);
    watch.riseFall = state;
    upstream.healthState = state.health;
    if (result.ok) upstream.restoreWeight();
    if (!changed) return;
    if (state.health === 'down') {
      this.#log(
        `upstream ${upstream.origin} of route ${route.name} is DOWN after ${plural(state.failures, 'failed check')}: ${result.error ?? 'failed'}`,
      );
    } else {
      this.#log(`upstream ${upstream.origin} of route ${route.name} is UP after ${plural(state.successes, 'successful check')}`);
    }
  }

  #quiet(watch: Watch): void {
    if (watch.timer !== undefined) this.#timers.clearTimeout(watch.timer);
    watch.timer = undefined;
    const inFlight = watch.inFlight;
    watch.inFlight = undefined;
    inFlight?.abort();
  }
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
