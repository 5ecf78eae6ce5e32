/**
 * The counters behind `/metrics` that no Upstream field holds: requests by route and status class,
 * upstream attempts by status class, the request-duration histogram, retries and health-probe
 * results, the requests refused by `access` and the limits (SPEC 8; with their last minute, for
 * `/status`), and the process's dropped log lines. It is fed by `ProxyServer.observe` (one access-log record per finished exchange) and
 * `ProxyServer.observeProbes`, and keeps plain JSON-able data (`MetricsState`) so a cluster worker
 * can send it to the primary, which adds the states of all workers up (`mergeMetrics`), together
 * with the last states of workers that exited, so no counter goes down (src/process/cluster/counter-ledger.ts).
 *
 * Label keys are joined with a tab: route names, `host:port` and status classes never contain one.
 */
import type { AccessLogRecord } from '../gateway/access-log.js';
import type { ProxyServer } from '../gateway/proxy-server.js';
import { droppedLogLines } from '../log/process-log.js';
import { upstreamAddress } from '../upstream/upstream.js';
import { addLastMinuteCounts, countAt, newLastMinuteCounts, type LastMinuteCounts } from './last-minute-counts.js';

/**
 * Upper bounds (seconds) of the request-duration histogram: the Prometheus client libraries'
 * default buckets, 5 ms to 10 s, which suit an HTTP proxy.
 */
export const DURATION_BUCKETS_SECONDS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** One histogram: `counts[i]` requests fell in bucket i (not cumulative); one extra slot for +Inf. */
export interface HistogramState {
  readonly counts: number[];
  sum: number;
  count: number;
}

/** Counters keyed by tab-joined label values. */
export interface MetricsState {
  /** `route\tstatus_class` → exchanges answered to the client. */
  readonly requests: Record<string, number>;
  /** `route\tupstream\tstatus_class` → upstream attempts (`status_class` is `error` for a failed attempt). */
  readonly upstreamRequests: Record<string, number>;
  /** route → request duration histogram. */
  readonly durations: Record<string, HistogramState>;
  /** route → extra attempts after the first. */
  readonly retries: Record<string, number>;
  /** `route\tupstream\tresult` (`ok` | `fail`) → active health probes. */
  readonly probes: Record<string, number>;
  /** log (`access` | `error`) → lines dropped because their destination failed or fell behind. */
  readonly logLinesDropped: Record<string, number>;
  /** route → requests refused by its `access` lines (403). */
  readonly denied: Record<string, number>;
  /** `route\tlimit` (`rate` | `conn`) → requests refused by `rate_limit` / `conn_limit` (429). */
  readonly rateLimited: Record<string, number>;
  /** `route\trefusal` (`access` | `rate_limit` | `conn_limit`) → the refusals of the last minute, by epoch second. */
  readonly recentRefusals: Record<string, LastMinuteCounts>;
}

/** The label value for a request that matched no route. */
export const NO_ROUTE = '(none)';

/** `2xx`, `5xx`, … for an HTTP status; `error` for an attempt without one. */
export function statusClass(status: number | undefined): string {
  return status === undefined ? 'error' : `${Math.floor(status / 100)}xx`;
}

export function emptyMetrics(): MetricsState {
  return { requests: {}, upstreamRequests: {}, durations: {}, retries: {}, probes: {}, logLinesDropped: {}, denied: {}, rateLimited: {}, recentRefusals: {} };
}

export class MetricsCollector {
  /**
   * `logLinesDropped` is the process's own counter object (src/log/process-log.ts), shared by every
   * collector of the process: dropped lines are a fact of the process, counted from its start.
   */
  readonly state: MetricsState = { ...emptyMetrics(), logLinesDropped: droppedLogLines };
  readonly #epochNow: () => number;

  /** @param epochNow wall clock, ms since the epoch, for the last-minute counts (the same second in every worker). Default `Date.now`. */
  constructor(epochNow: () => number = Date.now) {
    this.#epochNow = epochNow;
  }

  /** Counts one finished exchange (an access-log record). */
  recordExchange(record: AccessLogRecord): void {
    const route = record.route ?? NO_ROUTE;
    increment(this.state.requests, `${route}\t${statusClass(record.status)}`);
    for (const attempt of record.attempts) {
      increment(this.state.upstreamRequests, `${route}\t${attempt.upstream}\t${statusClass(attempt.error === undefined ? attempt.status : undefined)}`);
    }
    if (record.attempts.length > 1) increment(this.state.retries, route, record.attempts.length - 1);
    observeDuration((this.state.durations[route] ??= newHistogram()), record.durationMs / 1000);
    // A route's refusals (SPEC 8); `plain_http` is the TLS listener's, counted with the 400s above.
    if (record.refusal !== undefined && record.refusal !== 'plain_http') {
      if (record.refusal === 'access') increment(this.state.denied, route);
      else increment(this.state.rateLimited, `${route}\t${record.refusal === 'rate_limit' ? 'rate' : 'conn'}`);
      countAt((this.state.recentRefusals[`${route}\t${record.refusal}`] ??= newLastMinuteCounts()), Math.floor(this.#epochNow() / 1000));
    }
  }

  /** Counts one finished health probe of `upstream` (`host:port`) of `route`. */
  recordProbe(route: string, upstream: string, isOk: boolean): void {
    increment(this.state.probes, `${route}\t${upstream}\t${isOk ? 'ok' : 'fail'}`);
  }

  /**
   * Forgets the counters kept by route and upstream (attempts, probes) of every pair not in
   * `current` (`route\tupstream` keys, `upstreamPairsOf`): upstreams a reload, the registry or
   * discovery removed, which /metrics no longer shows (metrics-exposition.ts). Without it each
   * address a discovery line ever returned would keep its keys for the life of the process.
   */
  forgetUpstreams(current: ReadonlySet<string>): void {
    for (const counters of [this.state.upstreamRequests, this.state.probes]) {
      for (const key of Object.keys(counters)) {
        if (!current.has(key.slice(0, key.lastIndexOf('\t')))) delete counters[key];
      }
    }
  }

  /** Feeds this collector from `proxy`'s exchanges and probes. Returns the function that detaches it. */
  attach(proxy: ProxyServer): () => void {
    const stopExchanges = proxy.observe((record) => this.recordExchange(record));
    const stopProbes = proxy.observeProbes((upstreamConfig, result) => {
      const route = proxy.routes.find((candidate) => candidate.upstreams.some((upstream) => upstream.config === upstreamConfig));
      this.recordProbe(route?.name ?? NO_ROUTE, upstreamAddress(upstreamConfig), result.ok);
    });
    return () => {
      stopExchanges();
      stopProbes();
    };
  }
}

/** `route\tupstream` for every upstream of `proxy`'s routes, leaving ones included (MetricsCollector `forgetUpstreams`). */
export function upstreamPairsOf(proxy: Pick<ProxyServer, 'routes' | 'leavingUpstreams'>): Set<string> {
  const pairs = new Set<string>();
  for (const route of proxy.routes) {
    for (const upstream of [...route.upstreams, ...proxy.leavingUpstreams(route.name)]) pairs.add(`${route.name}\t${upstream.address}`);
  }
  return pairs;
}

/** Adds states up (the primary merging its workers' counters). The inputs are not changed. */
export function mergeMetrics(states: readonly MetricsState[]): MetricsState {
  const total = emptyMetrics();
  for (const state of states) {
    for (const key of ['requests', 'upstreamRequests', 'retries', 'probes', 'logLinesDropped', 'denied', 'rateLimited'] as const) {
      for (const [label, count] of Object.entries(state[key])) increment(total[key], label, count);
    }
    for (const [route, histogram] of Object.entries(state.durations)) {
      const into = (total.durations[route] ??= newHistogram());
      histogram.counts.forEach((count, index) => (into.counts[index] = (into.counts[index] ?? 0) + count));
      into.sum += histogram.sum;
      into.count += histogram.count;
    }
    for (const [key, ring] of Object.entries(state.recentRefusals)) addLastMinuteCounts((total.recentRefusals[key] ??= newLastMinuteCounts()), ring);
  }
  return total;
}

function newHistogram(): HistogramState {
  return { counts: new Array<number>(DURATION_BUCKETS_SECONDS.length + 1).fill(0), sum: 0, count: 0 };
}

function observeDuration(histogram: HistogramState, seconds: number): void {
  const bucket = DURATION_BUCKETS_SECONDS.findIndex((bound) => seconds <= bound);
  const index = bucket < 0 ? DURATION_BUCKETS_SECONDS.length : bucket;
  histogram.counts[index] = (histogram.counts[index] ?? 0) + 1;
  histogram.sum += seconds;
  histogram.count++;
}

function increment(counters: Record<string, number>, key: string, by = 1): void {
  counters[key] = (counters[key] ?? 0) + by;
}
