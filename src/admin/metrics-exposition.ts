/**
 * `GET /metrics`: the proxy's counters and gauges in the Prometheus text format (see
 * prometheus-text.ts). Names follow the Prometheus naming guide (`proxy_` prefix, base units —
 * seconds — and `_total` counters). What each family counts:
 *
 * | family | type | labels | source |
 * |---|---|---|---|
 * | `proxy_requests_total` | counter | route, status_class | every finished exchange (access-log record); route `(none)` when no route matched |
 * | `proxy_upstream_requests_total` | counter | route, upstream, status_class | every upstream attempt; status_class `error` when it failed without a status |
 * | `proxy_request_duration_seconds` | histogram | route | exchange duration, buckets 5 ms … 10 s |
 * | `proxy_retries_total` | counter | route | attempts after the first |
 * | `proxy_health_checks_total` | counter | route, upstream, result | active probes, result `ok` or `fail` |
 * | `proxy_upstream_up` | gauge | route, upstream | 1 when active health says UP, else 0 |
 * | `proxy_upstream_available` | gauge | route, upstream | 1 when a balancer may pick it (UP, not down, ejected or draining) |
 * | `proxy_upstream_active_requests` | gauge | route, upstream | requests in flight |
 * | `proxy_upstream_weight` / `proxy_upstream_effective_weight` | gauge | route, upstream | configured / current weight |
 * | `proxy_upstream_failures_total` | counter | route, upstream | failed attempts (passive health) |
 * | `proxy_denied_total` | counter | route | requests refused with 403 by the route's `access` lines (SPEC 8) |
 * | `proxy_rate_limited_total` | counter | route, limit (`rate`, `conn`) | requests refused with 429 by `rate_limit` / `conn_limit` |
 * | `proxy_log_lines_dropped_total` | counter | log (`access`, `error`) | log lines dropped because their destination failed or fell behind (src/log/log-sink.ts) |
 * | `proxy_dns_lookups_total` | counter | route, name, result | DNS lookups of discovery lines (SPEC 7), result `ok`, `nxdomain`, `empty`, `servfail`, `refused`, `timeout` or `error` (src/discovery/discovered-line.ts `LookupResult`) |
 * | `proxy_discovered_upstreams` | gauge | route, name | upstreams the discovery lines of that name stand for now (summed over the route's lines of one name) |
 * | `proxy_tls_certificate_expiry_seconds` | gauge | cert (the `tls_cert` file, or `acme`), names (comma separated) | notAfter of each certificate the HTTPS listener serves, seconds since the epoch (the convention of `ssl_certificate_expiry_seconds` in exporters: alert on `… - time() < 14 * 86400`) |
 *
 * Upstream counters live on the Upstream objects; an upstream removed by a reload, the registry or
 * discovery takes its counters with it (Prometheus sees a counter reset, which `rate()` handles if
 * it comes back). The counters kept by route and upstream (attempts, probes) are shown for the
 * upstreams of the snapshot only, leaving ones included, so that every address a discovery line
 * ever returned does not keep its series for the life of the process (client_golang's
 * `DeleteLabelValues` for a target that went away); MetricsCollector `forgetUpstreams` forgets them.
 */
import { DURATION_BUCKETS_SECONDS, type MetricsState } from './metrics-collector.js';
import { histogramSamples, renderExposition, type MetricFamily, type Sample } from './prometheus-text.js';
import type { StatusSnapshot, UpstreamStatus } from './status-snapshot.js';

/** Renders `/metrics` from a status snapshot (gauges, upstream totals) and merged metrics (counters). */
export function renderMetrics(snapshot: StatusSnapshot, metrics: MetricsState): string {
  const upstreams = snapshot.routes.flatMap((route) => route.upstreams.map((upstream) => ({ route: route.name, upstream })));
  const perUpstream = (value: (upstream: UpstreamStatus) => number): Sample[] =>
    upstreams.map(({ route, upstream }) => ({ labels: { route, upstream: upstream.address }, value: value(upstream) }));
  const currentPairs = new Set(upstreams.map(({ route, upstream }) => `${route}\t${upstream.address}`));
  /** With `isPerUpstream`, keys start `route\tupstream\t` and only the snapshot's pairs are shown. */
  const fromKeys = (counters: Record<string, number>, labelNames: readonly string[], isPerUpstream = false): Sample[] =>
    Object.entries(counters)
      .filter(([key]) => !isPerUpstream || currentPairs.has(key.slice(0, key.lastIndexOf('\t'))))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, value]) => {
        const parts = key.split('\t');
        return { labels: Object.fromEntries(labelNames.map((name, index) => [name, parts[index] ?? ''])), value };
      });

  const families: MetricFamily[] = [
    {
      name: 'proxy_requests_total',
      help: 'Requests answered to clients, by route and status class.',
      type: 'counter',
      samples: fromKeys(metrics.requests, ['route', 'status_class']),
    },
    {
      name: 'proxy_upstream_requests_total',
      help: 'Attempts sent to upstreams, by route, upstream and status class (error: no response status).',
      type: 'counter',
      samples: fromKeys(metrics.upstreamRequests, ['route', 'upstream', 'status_class'], true),
    },
    {
      name: 'proxy_request_duration_seconds',
      help: 'Time from the request head to the end of the response, by route.',
      type: 'histogram',
      samples: Object.keys(metrics.durations)
        .sort()
        .flatMap((route) => {
          const histogram = metrics.durations[route]!;
          return histogramSamples({ route }, DURATION_BUCKETS_SECONDS, histogram.counts, histogram.sum);
        }),
    },
    {
      name: 'proxy_retries_total',
      help: 'Attempts after the first one of a request, by route.',
      type: 'counter',
      samples: fromKeys(metrics.retries, ['route']),
    },
    {
      name: 'proxy_denied_total',
      help: "Requests refused with 403 by the route's access lines, by route.",
      type: 'counter',
      samples: fromKeys(metrics.denied, ['route']),
    },
    {
      name: 'proxy_rate_limited_total',
      help: 'Requests refused with 429 by rate_limit (limit="rate") or conn_limit (limit="conn"), by route.',
      type: 'counter',
      samples: fromKeys(metrics.rateLimited, ['route', 'limit']),
    },
    {
      name: 'proxy_health_checks_total',
      help: 'Active health probes, by route, upstream and result (ok or fail).',
      type: 'counter',
      samples: fromKeys(metrics.probes, ['route', 'upstream', 'result'], true),
    },
    {
      name: 'proxy_upstream_up',
      help: '1 when active health checks consider the upstream UP, 0 when DOWN.',
      type: 'gauge',
      samples: perUpstream((u) => (u.healthState === 'up' ? 1 : 0)),
    },
    {
      name: 'proxy_upstream_available',
      help: '1 when a balancer may pick the upstream (UP, not marked down, not ejected, not draining).',
      type: 'gauge',
      samples: perUpstream((u) => (u.state === 'UP' ? 1 : 0)),
    },
    {
      name: 'proxy_upstream_active_requests',
      help: 'Requests dispatched to the upstream and not yet ended (summed over workers).',
      type: 'gauge',
      samples: perUpstream((u) => u.activeRequests),
    },
    {
      name: 'proxy_upstream_weight',
      help: 'Configured weight of the upstream.',
      type: 'gauge',
      samples: perUpstream((u) => u.weight),
    },
    {
      name: 'proxy_upstream_effective_weight',
      help: 'Effective weight after failures (the lowest of any worker).',
      type: 'gauge',
      samples: perUpstream((u) => u.effectiveWeight),
    },
    {
      name: 'proxy_upstream_failures_total',
      help: 'Failed attempts (connect error, timeout, reset) counted by passive health.',
      type: 'counter',
      samples: perUpstream((u) => u.failuresTotal),
    },
    {
      name: 'proxy_log_lines_dropped_total',
      help: 'Log lines dropped because their destination failed (closed pipe, full disk) or its reader fell behind, by log (access or error).',
      type: 'counter',
      samples: fromKeys(metrics.logLinesDropped, ['log']),
    },
    {
      name: 'proxy_dns_lookups_total',
      help: 'DNS lookups of discovery lines (resolve, service=), by route, name looked up and result.',
      type: 'counter',
      samples: [...snapshot.dnsLookups]
        .sort((a, b) => compareKeys([a.route, a.name, a.result], [b.route, b.name, b.result]))
        .map(({ route, name, result, count }) => ({ labels: { route, name, result }, value: count })),
    },
    {
      name: 'proxy_discovered_upstreams',
      help: 'Upstreams the discovery lines of a route stand for now, by route and name looked up.',
      type: 'gauge',
      samples: discoveredCounts(snapshot),
    },
    {
      name: 'proxy_tls_certificate_expiry_seconds',
      help: 'When each certificate of the HTTPS listener expires (notAfter), seconds since the epoch, by certificate file (or acme) and names.',
      type: 'gauge',
      samples: snapshot.certificates.map((certificate) => ({
        labels: { cert: certificate.file ?? 'acme', names: certificate.names.join(',') },
        value: certificate.notAfterSeconds,
      })),
    },
  ];
  return renderExposition(families);
}

/** Members per route and name (two lines of one route may look up one name on two ports). */
function discoveredCounts(snapshot: StatusSnapshot): Sample[] {
  const counts = new Map<string, { route: string; name: string; value: number }>();
  for (const line of snapshot.discovery) {
    const key = `${line.route}\t${line.name}`;
    const entry = counts.get(key) ?? { route: line.route, name: line.name, value: 0 };
    entry.value += line.upstreams;
    counts.set(key, entry);
  }
  return [...counts.values()]
    .sort((a, b) => compareKeys([a.route, a.name], [b.route, b.name]))
    .map(({ route, name, value }) => ({ labels: { route, name }, value }));
}

function compareKeys(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < a.length; i++) {
    if (a[i]! !== b[i]!) return a[i]! < b[i]! ? -1 : 1;
  }
  return 0;
}
