/**
 * The runtime state of the routes and their upstreams, apart from the listener that serves them:
 * one keyed store of `Upstream` objects (key: route name and origin) that a reload (SIGHUP) and the
 * admin registry both go through, as Caddy keeps one `hosts` map that every config load reuses.
 *
 * An upstream whose route and origin stay keeps its object, so its runtime state survives the
 * change: health, counters, ejection, effective weight, draining, and its place in the health
 * checker. A new key gets a new object; a key no route has any more is dropped from the store and
 * marked `hasLeft` (requests in flight finish on the objects they started with, and a retry of one
 * of them never picks it again; `leavingUpstreams` lists it until they have); if it comes back
 * later it is a new object that starts fresh, except that an operator's drain (admin `drain`) of a
 * DNS-discovered address is remembered: one drained before its DNS answer dropped it is drained
 * again when an answer brings it back. An upstream the operator removed (its `pass` line, or the
 * registry's DELETE or lapse) comes back undrained: it is a new one, as nginx Plus's API adds a
 * server anew after a delete, and a redeployed instance that registers again must get traffic.
 *
 * A route's runtime upstream list (SPEC 7) is built from three sources, in this order:
 *   1. its `pass` lines in file order, each discovery line (`resolve`, `service=`) replaced by the
 *      addresses its last good DNS answer gave (`setDiscovered`; none until an answer came): a
 *      discovery line itself is never connected to;
 *   2. the upstreams the admin registry added (`setRegistered`).
 * An origin (scheme, address and port) appears once: a plain `pass` line wins over a discovered
 * address or a registered one wherever it is written (the operator's weight and flags for that
 * address apply), otherwise the first occurrence wins. With `retries` not written, a route's retries
 * are recounted as (upstreams − 1, at least 0) on every rebuild. Every upstream of a route is
 * reached with the route's `pass` path (`passPath`, read by router.ts `rewritePath`), whatever path
 * its own URL has: a registered URL may have none, or the one a reload since changed
 * (upstream-registry.ts `checkPath`).
 *
 * The addresses of one discovery line keep their order across answers: those that stay keep
 * their places, new ones follow in answer order (DNS servers rotate the records of an answer, and a
 * list reshuffled at every TTL would make round robin's turns uneven). nginx (`zone` + `resolve`)
 * and HAProxy (`server-template` slots) keep a surviving address in its place the same way.
 */
import { isIP } from 'node:net';
import type { Config, RouteConfig, UpstreamConfig } from '../config/config.js';
import { Upstream } from './upstream.js';
import { Route, type RuntimeDeps } from './route.js';
import { buildRouteTls, type RouteTls } from './upstream-tls.js';
import type { DiscoveredLine } from '../discovery/discovered-line.js';
import type { LimitsProvider } from '../limits/limits.js';

/** What a change did to the store, for the reload log line. */
export interface StoreChange {
  /** Upstreams whose route and origin were there before: their runtime state was kept. */
  readonly kept: number;
  readonly added: number;
  readonly removed: number;
}

export class RouteTable {
  #config: Config;
  #routes: readonly Route[];
  /** Upstreams added at run time by the admin registry, per route name; they survive reloads. */
  readonly #registered = new Map<string, readonly UpstreamConfig[]>();
  /** What each discovery line of a route stands for now: route name → lineOrigin → upstreams. */
  readonly #discovered = new Map<string, Map<string, readonly UpstreamConfig[]>>();
  /** Every runtime upstream now in a route, by `storeKey`. */
  #upstreams = new Map<string, Upstream>();
  /** Upstreams that left their route's set with requests in flight, by `storeKey`, until those end. */
  readonly #leaving = new Map<string, Upstream>();
  /** Keys of DNS-discovered upstreams an operator had drained when DNS dropped them: drained again if they come back. */
  readonly #drainedWhileGone = new Set<string>();
  /** Each route's TLS client settings, read from the files of `#config`, and their warnings. */
  #tls: RouteTls;
  /** Wall clock, ms since the epoch, for the validity of the TLS files. */
  readonly #epochNow: () => number;
  readonly #deps: RuntimeDeps;
  /** Makes each route's `rate_limit` / `conn_limit` state; asked at every rebuild (same name and settings: the same state). */
  readonly #limits: LimitsProvider | undefined;

  /**
   * @param limits the provider of the routes' limits (ProxyServer's); without one no route is limited
   * @param epochNow wall clock (ms since the epoch) for the TLS files' validity; default Date.now.
   *   A file out of date is used with a warning at the start (see `tlsWarnings`).
   * @throws ConfigValueError when a route's `tls_ca` or `tls_client_cert` file does not load (upstream-tls.ts)
   */
  constructor(config: Config, deps: RuntimeDeps, limits?: LimitsProvider, epochNow: () => number = Date.now) {
    this.#config = config;
    this.#epochNow = epochNow;
    this.#tls = buildRouteTls(config.routes, { nowMs: epochNow(), usesOutOfDate: () => true });
    this.#deps = deps;
    this.#limits = limits;
    this.#routes = [];
    this.#rebuild(config, () => true, false);
  }

  get config(): Config {
    return this.#config;
  }

  /** The warnings of the routes' TLS files as the start or the last reload read them (upstream-tls.ts `RouteTls`). */
  get tlsWarnings(): readonly string[] {
    return this.#tls.warnings;
  }

  /** The routes now in force, in file order. */
  get routes(): readonly Route[] {
    return this.#routes;
  }

  /** The upstreams the admin registry added to `routeName` (see `setRegistered`). */
  registeredUpstreams(routeName: string): readonly UpstreamConfig[] {
    return this.#registered.get(routeName) ?? [];
  }

  /**
   * Replaces the registered upstreams of `routeName`: the route is rebuilt with its configured
   * upstreams followed by `configs` (an origin a `pass` line already has is skipped); other routes
   * keep their objects, balancers included. A name not in the config is remembered and applied if a
   * reload brings the route. Returns false when no route of that name is in force.
   */
  setRegistered(routeName: string, configs: readonly UpstreamConfig[]): boolean {
    if (configs.length === 0) this.#registered.delete(routeName);
    else this.#registered.set(routeName, [...configs]);
    if (!this.#routes.some((route) => route.name === routeName)) return false;
    this.#rebuild(this.#config, (routeConfig) => routeConfig.name === routeName, true);
    return true;
  }

  /**
   * What the discovery lines of `routeName` stand for now, one entry per line that had an answer,
   * in the order of the route's `pass` lines (addresses in the order the route uses them).
   */
  discoveredLines(routeName: string): readonly DiscoveredLine[] {
    const lines = this.#discovered.get(routeName);
    const routeConfig = this.#config.routes.find((candidate) => candidate.name === routeName);
    if (lines === undefined || routeConfig === undefined) return [];
    return routeConfig.upstreams.flatMap((passLine) => {
      const upstreams = lines.get(passLine.origin);
      return passLine.discovery === undefined || upstreams === undefined ? [] : [{ lineOrigin: passLine.origin, upstreams }];
    });
  }

  /**
   * The upstreams of `routeName` that left its set while requests were in flight on them and still
   * have some (they take no new ones): `/status` shows them as leaving until they are done.
   */
  leavingUpstreams(routeName: string): readonly Upstream[] {
    const leaving: Upstream[] = [];
    for (const [key, upstream] of this.#leaving) {
      if (upstream.activeRequests === 0) this.#leaving.delete(key);
      else if (upstream.routeName === routeName) leaving.push(upstream);
    }
    return leaving;
  }

  /**
   * Replaces what the listed discovery lines of `routeName` stand for (a line not listed keeps what
   * it had; an empty `upstreams` empties it) and rebuilds that route only, other routes keeping
   * their objects. Upstream objects of addresses that stay are kept (see the file comment), and the
   * new balancer takes over the old one's state for them (round-robin position, smooth weighted
   * round robin's current weights). An entry whose `lineOrigin` is not a discovery line of the
   * route is ignored, and so is a member that is not an address of that line (see `isMemberOf`).
   * Returns false (and changes nothing) when no route of that name is in force.
   */
  setDiscovered(routeName: string, lines: readonly DiscoveredLine[]): boolean {
    const routeConfig = this.#config.routes.find((candidate) => candidate.name === routeName);
    if (routeConfig === undefined) return false;
    const kept = this.#discovered.get(routeName) ?? new Map<string, readonly UpstreamConfig[]>();
    for (const line of lines) {
      const passLine = routeConfig.upstreams.find((candidate) => candidate.discovery !== undefined && candidate.origin === line.lineOrigin);
      if (passLine === undefined) continue;
      const members = line.upstreams.filter((member) => isMemberOf(passLine, member));
      kept.set(line.lineOrigin, inStableOrder(kept.get(line.lineOrigin) ?? [], members));
    }
    this.#discovered.set(routeName, kept);
    this.#rebuild(this.#config, (candidate) => candidate.name === routeName, true);
    return true;
  }

  /**
   * Swaps in `config`'s routes; every route is rebuilt, upstream objects are kept by key. The TLS
   * files are read first: when one does not load, nothing changes. A file out of date is used
   * (with a warning) only when its contents are in use now, as a `tls_cert` pair's.
   * @throws ConfigValueError when a route's `tls_ca` or `tls_client_cert` file does not load, or
   *   is out of date and not in use now
   */
  reload(config: Config): StoreChange {
    const inUse = this.#tls.texts;
    this.#tls = buildRouteTls(config.routes, { nowMs: this.#epochNow(), usesOutOfDate: (pem) => inUse.has(pem) });
    this.#config = config;
    this.#keepDiscoveredOf(config);
    return this.#rebuild(config, () => true, false);
  }

  /** Forgets the discovered lines of (route, lineOrigin) pairs that are no discovery line of `config`. */
  #keepDiscoveredOf(config: Config): void {
    for (const [routeName, lines] of [...this.#discovered]) {
      const routeConfig = config.routes.find((candidate) => candidate.name === routeName);
      for (const lineOrigin of [...lines.keys()]) {
        const isStill = routeConfig?.upstreams.some((passLine) => passLine.discovery !== undefined && passLine.origin === lineOrigin) === true;
        if (!isStill) lines.delete(lineOrigin);
      }
      if (lines.size === 0) this.#discovered.delete(routeName);
    }
  }

  /**
   * Builds the routes `isRebuilt` selects from `config` (the others keep their Route objects), takes
   * each upstream from the store or creates it, and drops (and drains) the keys no route has any
   * more. With `isSetChange` (discovery or the registry, not a reload) a rebuilt route's balancer
   * takes over its predecessor's state.
   */
  #rebuild(config: Config, isRebuilt: (routeConfig: RouteConfig) => boolean, isSetChange: boolean): StoreChange {
    const previous = this.#upstreams;
    const current = new Map<string, Upstream>();
    let kept = 0;
    this.#routes = config.routes.map((routeConfig) => {
      const existing = this.#routes.find((route) => route.name === routeConfig.name);
      if (existing !== undefined && !isRebuilt(routeConfig)) {
        for (const upstream of existing.upstreams) current.set(storeKey(routeConfig.name, upstream.origin), upstream);
        return existing;
      }
      const runtimeConfig = this.#runtimeConfig(routeConfig);
      const upstreams = runtimeConfig.upstreams.map((upstreamConfig) => {
        const key = storeKey(routeConfig.name, upstreamConfig.origin);
        let upstream = previous.get(key);
        if (upstream === undefined) {
          upstream = new Upstream(upstreamConfig, routeConfig.name);
          this.#leaving.delete(key);
          if (this.#drainedWhileGone.delete(key)) upstream.isDraining = true;
        } else {
          upstream.reconfigure(upstreamConfig);
          kept++;
        }
        current.set(key, upstream);
        return upstream;
      });
      const predecessor = isSetChange ? existing : undefined;
      const limits = this.#limits?.limitsFor(routeConfig.name, routeConfig.rateLimit, routeConfig.connLimit);
      return new Route(runtimeConfig, this.#deps, upstreams, this.#tls.settings.get(routeConfig.name), predecessor, limits);
    });
    this.#upstreams = current;
    let removed = 0;
    for (const [key, upstream] of previous) {
      if (current.has(key)) continue;
      removed++;
      upstream.hasLeft = true; // its object lives on only in requests in flight
      if (upstream.activeRequests > 0) this.#leaving.set(key, upstream);
      if (upstream.isDraining && upstream.config.discoveredFrom !== undefined) this.#drainedWhileGone.add(key);
    }
    for (const [key, upstream] of this.#leaving) if (upstream.activeRequests === 0) this.#leaving.delete(key);
    const routeNames = new Set(config.routes.map((routeConfig) => routeConfig.name));
    for (const key of this.#drainedWhileGone) if (!routeNames.has(key.slice(0, key.indexOf(' ')))) this.#drainedWhileGone.delete(key);
    const added = current.size - (previous.size - removed);
    return { kept, added, removed };
  }

  /**
   * `routeConfig` as it runs now: its upstreams expanded and merged as the file comment says, and
   * `retries` recounted when it was not written.
   */
  #runtimeConfig(routeConfig: RouteConfig): RouteConfig {
    const discovered = this.#discovered.get(routeConfig.name);
    const isPlainLine = (upstream: UpstreamConfig): boolean => upstream.discovery === undefined;
    const configuredOrigins = new Set(routeConfig.upstreams.filter(isPlainLine).map((upstream) => upstream.origin));
    const seen = new Set<string>();
    const upstreams: UpstreamConfig[] = [];
    const add = (upstream: UpstreamConfig, isConfigured: boolean): void => {
      if (seen.has(upstream.origin) || (!isConfigured && configuredOrigins.has(upstream.origin))) return;
      seen.add(upstream.origin);
      upstreams.push(upstream);
    };
    for (const passLine of routeConfig.upstreams) {
      if (isPlainLine(passLine)) add(passLine, true);
      else for (const member of discovered?.get(passLine.origin) ?? []) add(member, false);
    }
    for (const registered of this.registeredUpstreams(routeConfig.name)) add(registered, false);
    const isUnchanged = upstreams.length === routeConfig.upstreams.length && upstreams.every((upstream, i) => upstream === routeConfig.upstreams[i]);
    if (isUnchanged) return routeConfig;
    const retries = routeConfig.isRetriesDefault ? Math.max(0, upstreams.length - 1) : routeConfig.retries;
    return { ...routeConfig, upstreams, retries };
  }
}

/**
 * True when `member` can stand for discovery line `passLine`: it says it came from that line, has
 * the line's scheme, and its host is an IP address with a port in 1..65535. A DNS answer decides
 * where traffic goes, so nothing else gets in: not a host name (which a connect would look up in
 * the system's resolver and `/etc/hosts`), not another scheme.
 */
function isMemberOf(passLine: UpstreamConfig, member: UpstreamConfig): boolean {
  return (
    member.discoveredFrom?.lineOrigin === passLine.origin &&
    member.scheme === passLine.scheme &&
    isIP(member.host) !== 0 &&
    Number.isInteger(member.port) &&
    member.port >= 1 &&
    member.port <= 65535
  );
}

/**
 * A discovery line's new members in the route's order: those of `before` that are still in
 * `answer` keep their relative order (each with its config from the new answer), then the new ones
 * in answer order. An origin repeated in the answer is taken once.
 */
function inStableOrder(before: readonly UpstreamConfig[], answer: readonly UpstreamConfig[]): readonly UpstreamConfig[] {
  const byOrigin = new Map<string, UpstreamConfig>();
  for (const member of answer) if (!byOrigin.has(member.origin)) byOrigin.set(member.origin, member);
  const ordered: UpstreamConfig[] = [];
  for (const member of before) {
    const now = byOrigin.get(member.origin);
    if (now === undefined) continue;
    ordered.push(now);
    byOrigin.delete(member.origin);
  }
  ordered.push(...byOrigin.values());
  return ordered;
}

/** The store's key: an upstream is the same one when both its route and its origin are. */
function storeKey(routeName: string, origin: string): string {
  return `${routeName} ${origin}`;
}
