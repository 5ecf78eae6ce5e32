/**
 * What `/status`, `/status.json` and `/metrics` show, built in two steps so one process or a whole
 * cluster can answer:
 *
 * 1. `collectWorkerReport` — every process that serves traffic reports its own counters: per
 *    upstream active requests, totals, effective weight, passive ejection and the health state it
 *    believes in; per route the strategy's live state (`balancer.describeState()`); its metrics.
 * 2. `buildStatusSnapshot` — one process with the authoritative view of routes, health, draining and
 *    the registry (the single process, or the cluster primary) joins the reports: totals and active
 *    requests add up, effective weight is the lowest any worker has, an upstream counts as ejected
 *    when some worker ejected it, and every upstream also lists what each worker sees. DNS
 *    discovery (SPEC 7) is read from the same process (workers never resolve): each discovered
 *    upstream names the `pass` line and the name it came from, and every discovery line gets a row
 *    with its last lookup.
 *
 * Everything here is plain JSON, so reports travel over the cluster's IPC channel as they are.
 */
import type { Upstream } from '../upstream/upstream.js';
import type { ProxyServer } from '../gateway/proxy-server.js';
import type { RouteConfig, UpstreamConfig } from '../config/config.js';
import type { MetricsState } from './metrics-collector.js';
import { addLastMinuteCounts, newLastMinuteCounts, sumLastMinute, type LastMinuteCounts } from './last-minute-counts.js';
import type { RegistryEntry } from './upstream-registry.js';
import type { DiscoveryLineStatus, LookupCount, LookupResult } from '../discovery/discovered-line.js';

/** What the admin pages read of DNS discovery: the single process's, or the cluster primary's (workers have none). */
export interface DiscoveryView {
  /** Every discovery line of the config in force; empty without discovery. */
  readonly lines: readonly DiscoveryLineStatus[];
  /** Lookups by route, name and result since the start. */
  readonly lookupCounts: readonly LookupCount[];
}

/** One process's counters for one upstream. */
export interface UpstreamCounters {
  readonly activeRequests: number;
  readonly requestsTotal: number;
  readonly failuresTotal: number;
  readonly effectiveWeight: number;
  readonly isEjected: boolean;
  readonly healthState: 'up' | 'down';
  readonly isDraining: boolean;
}

/** One process's counters (a cluster worker's, or the single process's). */
export interface WorkerReport {
  readonly pid: number;
  /** Key `ROUTE ORIGIN`. */
  readonly upstreams: Readonly<Record<string, UpstreamCounters>>;
  /** Route name → `balancer.describeState()`, in upstream order. */
  readonly strategyState: Readonly<Record<string, readonly Readonly<Record<string, number | string>>[]>>;
  readonly metrics: MetricsState;
}

/**
 * Counters that no fresh report stands for (a cluster primary's): the last report
 * of every worker that exited or did not answer in time, added up.
 */
export interface CarriedCounters {
  readonly metrics: MetricsState;
  /** Key `ROUTE ORIGIN`. */
  readonly upstreams: Readonly<Record<string, { readonly requestsTotal: number; readonly failuresTotal: number }>>;
}

/** A cluster worker slot whose worker cannot start, retried with backoff. */
export interface WorkerStartFailure {
  /** The slot, 1..N. */
  readonly slot: number;
  /** Why the last attempt failed, e.g. `access_log '/var/log/p/a.log' cannot be opened for appending: ENOENT`. */
  readonly reason: string;
  /** Failed starts in a row. */
  readonly failedStarts: number;
  /** Until the next attempt, ms. */
  readonly nextAttemptInMs: number;
}

/** The single state shown for an upstream, most important first: down (config) > draining > DOWN (health) > ejected > UP. */
/** `leaving`: its address left the route's set (DNS, registry, reload) and requests are still in flight on it. */
export type UpstreamStateLabel = 'down' | 'draining' | 'leaving' | 'DOWN' | 'ejected' | 'UP';

export interface UpstreamStatus {
  /** `http://host:port`. */
  readonly origin: string;
  /** `host:port` as the access log and `/metrics` name it. */
  readonly address: string;
  readonly state: UpstreamStateLabel;
  readonly isBackup: boolean;
  /** Marked `down` in the config. */
  readonly isDown: boolean;
  readonly isDraining: boolean;
  readonly isEjected: boolean;
  readonly healthState: 'up' | 'down';
  readonly weight: number;
  readonly effectiveWeight: number;
  readonly activeRequests: number;
  readonly requestsTotal: number;
  readonly failuresTotal: number;
  readonly lastProbe: { readonly ok: boolean; readonly status?: number; readonly latencyMs: number; readonly error?: string; readonly ageMs: number } | null;
  /** The strategy's private state for this upstream (first worker's in a cluster), e.g. `{current: 3}`. */
  readonly strategyState: Readonly<Record<string, number | string>> | null;
  /** Set for an upstream added by the registry. */
  readonly registry: { readonly ttlMs: number; readonly expiresInMs: number } | null;
  /** Set for an address a discovery line found: the name looked up, the line (`env.ini:12`) and its origin. */
  readonly discoveredFrom: { readonly name: string; readonly line: string; readonly lineOrigin: string } | null;
  /** Each worker's own view (one entry in single-process mode). */
  readonly workers: readonly ({ readonly pid: number } & UpstreamCounters)[];
}

export interface RouteStatus {
  readonly name: string;
  /** `/a`, `~ ^/api/`, with `host` when set. */
  readonly match: string;
  readonly strategy: string;
  readonly healthCheck: { readonly isEnabled: boolean; readonly intervalMs: number; readonly method: string; readonly path: string };
  /** SPEC 8: the route's `access` lines, `rate_limit` (as `10/s burst=5`) and `conn_limit`, and what they refused in the last 60 s (every worker's). */
  readonly limits: {
    readonly accessRules: number;
    readonly rateLimit: string | null;
    readonly connLimit: number | null;
    readonly lastMinute: { readonly denied: number; readonly rateLimited: number; readonly connLimited: number };
  };
  readonly upstreams: readonly UpstreamStatus[];
}

/** A certificate the HTTPS listener serves (src/tls): where it came from, its names, its expiry. */
export interface CertificateStatus {
  /** `tls_cert` or `acme`. */
  readonly source: 'tls_cert' | 'acme';
  /** The `tls_cert` certificate file as written; null for `acme`. */
  readonly file: string | null;
  /** DNS names (wildcards as `*.example.com`), then IP addresses. */
  readonly names: readonly string[];
  readonly serialNumber: string;
  /** notAfter, ISO time. */
  readonly notAfter: string;
  /** notAfter, seconds since the epoch (`proxy_tls_certificate_expiry_seconds`). */
  readonly notAfterSeconds: number;
  /** The default certificate (no SNI, or a name no certificate serves). */
  readonly isDefault: boolean;
}

/** One discovery line (a `pass` line with `resolve` or `service=`) and its last lookup. */
export interface DiscoveryLineSnapshot {
  readonly route: string;
  /** `origin` of the pass line, e.g. `http://api.test:8080`. */
  readonly lineOrigin: string;
  /** Where the pass line is written: `env.ini:12`. */
  readonly line: string;
  /** `A/AAAA` for `resolve`, `SRV` for `service=`. */
  readonly kind: 'A/AAAA' | 'SRV';
  /** The name looked up (`api.test`, `_http._tcp.web.test`). */
  readonly name: string;
  /** Upstreams the line stands for now. */
  readonly upstreams: number;
  /** How the last lookup ended (`ok`, `nxdomain`, `empty`, `servfail`, `refused`, `timeout`, `error`); null before one ended. */
  readonly lastResult: LookupResult | null;
  /** ISO time of the last answer (`ok`, `nxdomain` or `empty`); null before one. */
  readonly lastAnswerAt: string | null;
  /** One line about the last failure or empty answer; null after `ok`. */
  readonly lastError: string | null;
}

export interface StatusSnapshot {
  /** ISO time the snapshot was made. */
  readonly generatedAt: string;
  /** The process answering (the primary in a cluster). */
  readonly pid: number;
  readonly mode: 'single' | 'cluster';
  readonly configFile: string;
  readonly workers: readonly { readonly pid: number; readonly requestsTotal: number; readonly activeRequests: number }[];
  /** Worker slots whose worker cannot start (cluster only; empty when all run). */
  readonly workerStartFailures: readonly WorkerStartFailure[];
  /**
   * Running workers that did not answer the primary within 1 s (cluster only; empty when all did):
   * stopped (SIGSTOP), or stuck in a long task. Their counters are not in `workers` and the
   * per-upstream views; their last known counts stay in the totals.
   */
  readonly silentWorkers: readonly { readonly pid: number }[];
  /** Every request, including those counted by workers that exited. */
  readonly totals: { readonly requests: number; readonly byStatusClass: Readonly<Record<string, number>> };
  readonly routes: readonly RouteStatus[];
  /** The HTTPS listener's certificates, in SNI precedence order (`tls_cert` in file order, then ACME); empty without `tls_listen`. */
  readonly certificates: readonly CertificateStatus[];
  /** Every discovery line, in the order discovery lists them; empty without discovery. */
  readonly discovery: readonly DiscoveryLineSnapshot[];
  /** DNS lookups since the start, by route, name and result (`proxy_dns_lookups_total`). */
  readonly dnsLookups: readonly { readonly route: string; readonly name: string; readonly result: LookupResult; readonly count: number }[];
}

/**
 * This process's counters.
 * @param nowMs the proxy's clock (the one passive ejection uses; `performance.now()` by default)
 */
export function collectWorkerReport(proxy: ProxyServer, metrics: MetricsState, nowMs: number, pid = process.pid): WorkerReport {
  const upstreams: Record<string, UpstreamCounters> = {};
  const strategyState: Record<string, readonly Readonly<Record<string, number | string>>[]> = {};
  for (const route of proxy.routes) {
    strategyState[route.name] = route.balancer.describeState();
    for (const upstream of [...route.upstreams, ...proxy.leavingUpstreams(route.name)]) upstreams[`${route.name} ${upstream.origin}`] = countersOf(upstream, nowMs);
  }
  return { pid, upstreams, strategyState, metrics };
}

function countersOf(upstream: Upstream, nowMs: number): UpstreamCounters {
  return {
    activeRequests: upstream.activeRequests,
    requestsTotal: upstream.requestsTotal,
    failuresTotal: upstream.failuresTotal,
    effectiveWeight: upstream.effectiveWeight,
    isEjected: upstream.isEjected(nowMs),
    healthState: upstream.healthState,
    isDraining: upstream.isDraining,
  };
}

export interface SnapshotOptions {
  readonly mode: 'single' | 'cluster';
  /** Registered upstreams (for their ttl), from `UpstreamRegistry.entries()`. */
  readonly registry: readonly RegistryEntry[];
  /** The registry's clock, ms (`Date.now` by default). */
  readonly registryNowMs: number;
  /** The health checker's clock, ms, for `lastProbe.ageMs` (`Date.now` by default). */
  readonly probeNowMs: number;
  /** Counters of exited or silent workers, added to the totals (cluster only). */
  readonly carried?: CarriedCounters;
  /** Worker slots that cannot start (cluster only). */
  readonly workerStartFailures?: readonly WorkerStartFailure[];
  /** Pids of running workers that did not answer in time (cluster only). */
  readonly silentWorkerPids?: readonly number[];
  /** DNS discovery of the authoritative process; absent = none. */
  readonly discovery?: DiscoveryView;
  /** Wall clock, ms since the epoch, for the last-minute counts. Default `Date.now()`. */
  readonly epochNowMs?: number;
}

/**
 * Joins `reports` over the routes, health and draining of `proxy` (the authoritative process).
 * Upstreams a report does not know (e.g. registered a moment ago) count as zero there.
 */
export function buildStatusSnapshot(proxy: ProxyServer, reports: readonly WorkerReport[], options: SnapshotOptions): StatusSnapshot {
  const byStatusClass: Record<string, number> = {};
  const carried = options.carried;
  for (const requests of [...reports.map((report) => report.metrics.requests), carried?.metrics.requests ?? {}]) {
    for (const [key, count] of Object.entries(requests)) {
      const statusClass = key.slice(key.lastIndexOf('\t') + 1);
      byStatusClass[statusClass] = (byStatusClass[statusClass] ?? 0) + count;
    }
  }
  const workers = reports.map((report) => {
    const counters = Object.values(report.upstreams);
    return {
      pid: report.pid,
      requestsTotal: Object.values(report.metrics.requests).reduce((sum, n) => sum + n, 0),
      activeRequests: counters.reduce((sum, c) => sum + c.activeRequests, 0),
    };
  });

  const recentRefusals: Record<string, LastMinuteCounts> = {};
  for (const metrics of [...reports.map((report) => report.metrics), ...(carried === undefined ? [] : [carried.metrics])]) {
    for (const [key, ring] of Object.entries(metrics.recentRefusals)) addLastMinuteCounts((recentRefusals[key] ??= newLastMinuteCounts()), ring);
  }
  const nowSecond = Math.floor((options.epochNowMs ?? Date.now()) / 1000);
  const lastMinute = (routeName: string, refusal: string): number => {
    const ring = recentRefusals[`${routeName}\t${refusal}`];
    return ring === undefined ? 0 : sumLastMinute(ring, nowSecond);
  };

  const routes = proxy.routes.map((route): RouteStatus => {
    const firstState = reports[0]?.strategyState[route.name] ?? route.balancer.describeState();
    const upstreams = [...route.upstreams, ...proxy.leavingUpstreams(route.name)].map((upstream, index): UpstreamStatus => {
      const key = `${route.name} ${upstream.origin}`;
      const perWorker = reports.flatMap((report) => {
        const counters = report.upstreams[key];
        return counters === undefined ? [] : [{ pid: report.pid, ...counters }];
      });
      const sum = (field: 'activeRequests' | 'requestsTotal' | 'failuresTotal'): number => perWorker.reduce((total, c) => total + c[field], 0);
      const carriedTotal = (field: 'requestsTotal' | 'failuresTotal'): number => carried?.upstreams[key]?.[field] ?? 0;
      const isEjected = perWorker.some((c) => c.isEjected);
      const entry = options.registry.find((e) => e.routeName === route.name && e.config.origin === upstream.origin);
      const probe = upstream.lastProbe;
      return {
        origin: upstream.origin,
        address: upstream.address,
        state: upstream.hasLeft ? 'leaving' : stateLabel(upstream.config.isDown, upstream.isDraining, upstream.healthState, isEjected),
        isBackup: upstream.config.isBackup,
        isDown: upstream.config.isDown,
        isDraining: upstream.isDraining,
        isEjected,
        healthState: upstream.healthState,
        weight: upstream.config.weight,
        effectiveWeight: perWorker.length === 0 ? upstream.effectiveWeight : Math.min(...perWorker.map((c) => c.effectiveWeight)),
        activeRequests: sum('activeRequests'),
        requestsTotal: sum('requestsTotal') + carriedTotal('requestsTotal'),
        failuresTotal: sum('failuresTotal') + carriedTotal('failuresTotal'),
        lastProbe:
          probe === undefined
            ? null
            : {
                ok: probe.ok,
                ...(probe.status === undefined ? {} : { status: probe.status }),
                latencyMs: probe.latencyMs,
                ...(probe.error === undefined ? {} : { error: probe.error }),
                ageMs: Math.max(0, Math.round(options.probeNowMs - probe.atMs)),
              },
        strategyState: firstState[index] ?? null,
        registry: entry === undefined ? null : { ttlMs: entry.ttlMs, expiresInMs: Math.max(0, entry.expiresAtMs - options.registryNowMs) },
        discoveredFrom: discoveredFromOf(upstream.config.discoveredFrom),
        workers: perWorker,
      };
    });
    return {
      name: route.name,
      match: describeMatch(route.config),
      strategy: route.config.strategy,
      healthCheck: {
        isEnabled: route.config.health.isEnabled,
        intervalMs: route.config.health.intervalMs,
        method: route.config.health.method,
        path: route.config.health.path,
      },
      limits: {
        accessRules: route.config.access.length,
        rateLimit: route.config.rateLimit?.source ?? null,
        connLimit: route.config.connLimit?.maxInFlight ?? null,
        lastMinute: { denied: lastMinute(route.name, 'access'), rateLimited: lastMinute(route.name, 'rate_limit'), connLimited: lastMinute(route.name, 'conn_limit') },
      },
      upstreams,
    };
  });

  return {
    generatedAt: new Date().toISOString(),
    pid: process.pid,
    mode: options.mode,
    configFile: proxy.config.file,
    workers,
    workerStartFailures: options.workerStartFailures ?? [],
    silentWorkers: (options.silentWorkerPids ?? []).map((pid) => ({ pid })),
    totals: { requests: Object.values(byStatusClass).reduce((sum, n) => sum + n, 0), byStatusClass },
    routes,
    certificates: proxy.certificates.map((pair, index) => ({
      source: pair.source,
      file: pair.certFile ?? null,
      names: [...pair.dnsNames, ...pair.ipAddresses],
      serialNumber: pair.serialNumber,
      notAfter: new Date(pair.notAfterMs).toISOString(),
      notAfterSeconds: Math.floor(pair.notAfterMs / 1000),
      isDefault: index === 0,
    })),
    discovery: (options.discovery?.lines ?? []).map(
      (line): DiscoveryLineSnapshot => ({
        route: line.routeName,
        lineOrigin: line.lineOrigin,
        line: `${line.place.file}:${line.place.line}`,
        kind: line.kind === 'resolve' ? 'A/AAAA' : 'SRV',
        name: line.name,
        upstreams: line.upstreamCount,
        lastResult: line.lastResult ?? null,
        lastAnswerAt: line.lastAnswerAtMs === undefined ? null : new Date(line.lastAnswerAtMs).toISOString(),
        lastError: line.lastError ?? null,
      }),
    ),
    dnsLookups: (options.discovery?.lookupCounts ?? []).map(({ routeName, name, result, count }) => ({ route: routeName, name, result, count })),
  };
}


function discoveredFromOf(source: UpstreamConfig['discoveredFrom']): UpstreamStatus['discoveredFrom'] {
  if (source === undefined) return null;
  return { name: source.name, line: `${source.place.file}:${source.place.line}`, lineOrigin: source.lineOrigin };
}

function stateLabel(isDown: boolean, isDraining: boolean, health: 'up' | 'down', isEjected: boolean): UpstreamStateLabel {
  if (isDown) return 'down';
  if (isDraining) return 'draining';
  if (health === 'down') return 'DOWN';
  if (isEjected) return 'ejected';
  return 'UP';
}

function describeMatch(route: RouteConfig): string {
  const path = route.path.kind === 'prefix' ? route.path.prefix : `${route.path.isCaseInsensitive ? '~*' : '~'} ${route.path.source}`;
  if (route.host === undefined) return path;
  const host = route.host.kind === 'exact' ? route.host.host : `*${route.host.suffix}`;
  return `${host} ${path}`;
}
