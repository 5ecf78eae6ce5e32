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
 * - A reload does not restart it: `update()` is given the new routes and keeps
 *   the watch of every upstream object it already had — streaks, next probe time, probe in flight —
 *   so SIGHUPs coming faster than `health_interval` neither reset rise/fall nor add probes. Which
 *   upstreams are "the same" is decided once, by the caller (ProxyServer.reload keeps the Upstream
 *   object of an unchanged route name and address); here objects are only compared. What a change
 *   of `health_*` settings keeps is listed at `update()`.
 *
 * Time is injected (`timers`, `now`) and so is the probe, so the tests drive it exactly.
 */
import type { HealthCheckConfig, RouteConfig } from '../../config/config.js';
import type { Upstream } from '../upstream.js';
import type { TlsClientSettings } from '../../wire/tls-client.js';
import { probe as realProbe, type ProbeFunction, type ProbeResult } from './probe.js';
import { initialHealth, nextHealth, type RiseFallState } from './rise-fall.js';
import { systemTimers, unrefed, type Timers } from '../../timers.js';
import { plural } from '../../log/plural.js';
import { CountedWarning } from '../../log/counted-warning.js';

/** The timer functions the checker uses; the global ones by default. Handles are opaque. */

/** A route and the runtime upstreams to check for it. */
export interface HealthCheckTarget {
  readonly route: RouteConfig;
  readonly upstreams: readonly Upstream[];
  /** The route's TLS settings: its `https://` upstreams are probed with them, as requests reach them; default node's (verified, system store). */
  readonly tls?: TlsClientSettings | undefined;
}

export interface HealthCheckerOptions {
  /** The first targets (see `update`). Routes whose `health.isEnabled` is false are skipped. */
  readonly routes: readonly HealthCheckTarget[];
  /** Default: the real `probe` of probe.ts. */
  readonly probe?: ProbeFunction;
  /** Default: the global setTimeout/clearTimeout. */
  readonly timers?: Timers;
  /**
   * Clock, ms: `lastProbe.atMs`, and when the next probe is due after `health_interval` changed.
   * Default `Date.now`.
   */
  readonly now?: () => number;
  /** Where transition lines go (one line, no newline). Default: nowhere. */
  readonly log?: (line: string) => void;
  /**
   * The most probes in flight at once, each a socket: an upstream whose turn comes while that many
   * are out waits, in turn order, for one of them to end, and is probed then. Default: no limit. The proxy passes a share of its file descriptors
   * (src/process/descriptor-budget.ts `probeLimit`).
   */
  readonly maxProbesInFlight?: number;
}

/** The window over which the probes that waited for `maxProbesInFlight` are counted for one log line: 60 s. */
export const WAITED_LOG_INTERVAL_MS = 60_000;

/** One upstream under watch. */
interface Watch {
  /** The route as last given to `update` (its `health` settings are the ones in force). */
  route: RouteConfig;
  /** The route's TLS settings as last given to `update` (a reload may bring new files). */
  tls: TlsClientSettings | undefined;
  readonly upstream: Upstream;
  riseFall: RiseFallState;
  timer: unknown;
  /** When the current interval began (the last tick), `now()` ms. */
  tickedAtMs: number;
  /** The probe in flight, if any; aborting it ends it early. */
  inFlight: AbortController | undefined;
}


export class HealthChecker {
  readonly #probe: ProbeFunction;
  readonly #timers: Timers;
  readonly #now: () => number;
  readonly #log: (line: string) => void;
  readonly #watches = new Map<Upstream, Watch>();
  #isRunning = false;
  /** `#timers`, each timer `unref()`ed: health checks alone never keep the process alive. */
  readonly #unrefedTimers: Timers;
  readonly #maxProbesInFlight: number;
  /** Probes sent and not settled yet, aborted ones too (their sockets close when they settle). */
  #probesInFlight = 0;
  /** Watches whose turn came at `maxProbesInFlight`, in the order their turns came: each is probed when one ends. */
  readonly #waiting = new Set<Watch>();
  /** Probes that had to wait. */
  readonly #waited: CountedWarning;

  constructor(options: HealthCheckerOptions) {
    this.#probe = options.probe ?? realProbe;
    this.#timers = options.timers ?? systemTimers;
    this.#now = options.now ?? Date.now;
    this.#log = options.log ?? (() => {});
    this.#maxProbesInFlight = options.maxProbesInFlight ?? Infinity;
    this.#unrefedTimers = unrefed(this.#timers);
    this.#waited = new CountedWarning(WAITED_LOG_INTERVAL_MS, this.#unrefedTimers, (count, isWindowed) =>
      this.#log(
        `warning: ${plural(this.#maxProbesInFlight, 'health probe')} in flight, the most this process sends at once with its file descriptors: ` +
          `${plural(count, 'probe')} waited for one to end${isWindowed ? ` in the last ${WAITED_LOG_INTERVAL_MS / 1000} s` : ''} (raise ulimit -n)`,
      ),
    );
    this.update(options.routes);
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
    this.#waited.stop();
  }

  /**
   * Makes the watched upstreams those of `routes` whose `health_check` is on: what a reload and the
   * admin registry call with the routes now in force. Upstreams are matched by object identity.
   *
   * - Watched before and listed again, same `health_*` settings: nothing changes. The streaks, the
   *   next probe time and the probe in flight are kept, and that probe's result counts.
   * - Settings changed: the health state (UP/DOWN) is always kept, and a reload never flips it by
   *   itself; only a probe result does.
   *   - Only `health_interval`, `health_fall` or `health_rise`: the probe is the same, so the streaks
   *     and the probe in flight are kept and the next result is judged by the new fall/rise. The next
   *     probe is due one new interval after the last one (at once if that time has passed), then
   *     every new interval.
   *   - `health_method`, `health_path`, `health_timeout` or `health_status`: a different probe, whose
   *     verdicts the old ones say nothing about. The streaks start again from 0, the probe in flight
   *     is aborted (its result ignored), and a probe with the new settings goes out at once (when
   *     running); the schedule counts from it.
   * - New (not watched before): the rise/fall state starts from `upstream.healthState`; probed at
   *   once when running.
   * - No longer listed: its timer is cleared, its probe aborted, a late result ignored.
   * - Still listed but its route's `health_check` is now off: the same, and since nothing will probe
   *   it any more it is set UP (logged if it was DOWN) and its `lastProbe` cleared (when running).
   */
  update(routes: readonly HealthCheckTarget[]): void {
    const listed = new Map<Upstream, HealthCheckTarget>();
    for (const target of routes) for (const upstream of target.upstreams) listed.set(upstream, target);
    for (const watch of [...this.#watches.values()]) {
      const target = listed.get(watch.upstream);
      if (target === undefined) this.#unwatch(watch);
      else if (!target.route.health.isEnabled) this.#unwatchChecksOff(watch, target.route);
      else {
        watch.tls = target.tls;
        this.#reconfigure(watch, target.route);
      }
    }
    for (const [upstream, { route, tls }] of listed) {
      if (!route.health.isEnabled || this.#watches.has(upstream)) continue;
      const watch: Watch = {
        route,
        tls,
        upstream,
        riseFall: initialHealth(upstream.healthState),
        timer: undefined,
        tickedAtMs: 0,
        inFlight: undefined,
      };
      this.#watches.set(upstream, watch);
      if (this.#isRunning) this.#tick(watch);
    }
  }

  /** The upstreams being watched, in the order they were first watched. */
  get upstreams(): readonly Upstream[] {
    return [...this.#watches.keys()];
  }

  /** A watched upstream listed again, with its route's settings as they are now (see `update`). */
  #reconfigure(watch: Watch, route: RouteConfig): void {
    const before = watch.route.health;
    const after = route.health;
    watch.route = route;
    if (!isSameProbe(before, after)) {
      watch.riseFall = initialHealth(watch.riseFall.health);
      if (!this.#isRunning) return;
      this.#quiet(watch);
      this.#tick(watch);
    } else if (before.intervalMs !== after.intervalMs && this.#isRunning) {
      this.#timers.clearTimeout(watch.timer);
      const dueInMs = watch.tickedAtMs + after.intervalMs - this.#now();
      // At most one new interval away, even if the clock jumped back.
      if (dueInMs <= 0) this.#tick(watch);
      else this.#arm(watch, Math.min(after.intervalMs, dueInMs));
    }
  }

  #unwatch(watch: Watch): void {
    this.#quiet(watch);
    this.#watches.delete(watch.upstream);
  }

  /**
   * `health_check` turned off for an upstream that stays: no probe will ever mark it UP again, so it
   * is UP now. Only a running checker writes onto upstreams (a cluster worker's never runs: the
   * primary's pushes the state), so the line is logged once.
   */
  #unwatchChecksOff(watch: Watch, route: RouteConfig): void {
    this.#unwatch(watch);
    if (!this.#isRunning) return;
    const { upstream } = watch;
    upstream.lastProbe = undefined;
    if (upstream.healthState === 'up') return;
    upstream.healthState = 'up';
    this.#log(`upstream ${upstream.origin} of route ${route.name} is UP: health_check is now off`);
  }

  /** One interval: arm the next tick first (fixed rate), then probe unless the last probe is still out. */
  #tick(watch: Watch): void {
    watch.tickedAtMs = this.#now();
    this.#arm(watch, watch.route.health.intervalMs);
    if (watch.inFlight !== undefined) return;
    if (this.#probesInFlight < this.#maxProbesInFlight) return this.#sendProbe(watch, watch.route.health);
    if (this.#waiting.has(watch)) return; // still waiting from its last turn
    this.#waiting.add(watch);
    this.#waited.note();
  }

  /** Sends the probes that waited for `maxProbesInFlight`, oldest turn first, while there is room. */
  #sendWaiting(): void {
    for (const watch of this.#waiting) {
      if (this.#probesInFlight >= this.#maxProbesInFlight) return;
      this.#waiting.delete(watch);
      if (this.#isRunning && watch.inFlight === undefined && this.#watches.get(watch.upstream) === watch) this.#sendProbe(watch, watch.route.health);
    }
  }

  /** The next tick in `delayMs`; unref()ed so health checks alone never keep the process alive. */
  #arm(watch: Watch, delayMs: number): void {
    watch.timer = this.#unrefedTimers.setTimeout(() => this.#tick(watch), delayMs);
  }

  #sendProbe(watch: Watch, check: HealthCheckConfig): void {
    const controller = new AbortController();
    watch.inFlight = controller;
    this.#probesInFlight++;
    let probing: Promise<ProbeResult>;
    try {
      probing = this.#probe(watch.upstream.config, check, { timeoutMs: check.timeoutMs, signal: controller.signal, tls: watch.tls });
    } catch (error) {
      probing = Promise.reject(error);
    }
    probing
      .catch((error: unknown): ProbeResult => ({ ok: false, latencyMs: 0, error: `probe failed: ${String(error)}` }))
      .then((result) => {
        this.#probesInFlight--;
        this.#sendWaiting();
        if (watch.inFlight !== controller) return; // stopped, removed or replaced by a new probe meanwhile
        watch.inFlight = undefined;
        this.#apply(watch, result);
      });
  }

  /** Runs the state machine on one result and writes what follows onto the upstream. */
  #apply(watch: Watch, result: ProbeResult): void {
    const { upstream, route } = watch;
    upstream.lastProbe = { ...result, atMs: this.#now() };
    if (result.isInconclusive === true) return; // the proxy's own shortage says nothing of the upstream
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
    this.#waiting.delete(watch);
  }
}

/** True when two `health_*` settings send the same probe and judge it alike (interval, fall and rise aside). */
function isSameProbe(a: HealthCheckConfig, b: HealthCheckConfig): boolean {
  return (
    a.method === b.method &&
    a.path === b.path &&
    a.timeoutMs === b.timeoutMs &&
    a.statuses.length === b.statuses.length &&
    a.statuses.every((range, index) => range.from === b.statuses[index]!.from && range.to === b.statuses[index]!.to)
  );
}
