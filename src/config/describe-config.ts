/**
 * The human summary `--check` prints after a config validated, as `nginx -t` confirms a config and
 * HAProxy's `-c` lists what it understood. It shows how the proxy reads the file: where it listens,
 * the routes in the order they are tried (SPEC 1.2 "Routing order"), each route's match and
 * strategy, each upstream with its flags, and every setting that differs from its default, so a
 * reader can spot "that is not what I meant" before the proxy runs.
 */
import type { Config, HashKey, RouteConfig, ServerConfig, StatusRange, UpstreamConfig } from './config.js';
import { ROUTE_DEFAULTS, SERVER_DEFAULTS } from './load-config.js';
import { formatDuration, formatListenAddress, formatSize } from './values.js';

/** A `tls_cert` pair as the summary shows it (src/tls/certificate-pair.ts's CertificatePair fits). */
export interface CertificateSummary {
  readonly certFile: string | undefined;
  readonly dnsNames: readonly string[];
  readonly ipAddresses: readonly string[];
  /** ms since the epoch. */
  readonly notAfterMs: number;
}

/**
 * Describes a validated config in a few lines per route.
 *
 * Example (the tutorial's file):
 * ```
 * listen 0.0.0.0:8080, 1 worker, access log stdout (combined)
 * 2 routes, in matching order:
 *   [proxy.a] path /a (prefix), any host, round-robin
 *       http://localhost:9001
 *   [proxy.b] path /b (prefix), any host, round-robin
 *       http://localhost:9002
 * ```
 * With `tls_listen`, one line for the HTTPS listener and one per readable `tls_cert` pair
 * (`certificates`, read by the caller), e.g.
 * `  tls_cert certs/exact.pem: exact.test, expires 2126-11-07 13:45:08 UTC`.
 * @returns text ending in a newline.
 */
export function describeConfig(config: Config, certificates: readonly CertificateSummary[] = []): string {
  const lines: string[] = [];
  const { server, admin } = config;
  const workers = server.workers === 'auto' ? 'one worker per core' : `${server.workers} worker${server.workers === 1 ? '' : 's'}`;
  const accessLog = server.accessLog === 'off' ? 'access log off' : `access log ${server.accessLog} (${server.accessLogFormat})`;
  lines.push(`listen ${server.listen === undefined ? 'off' : formatListenAddress(server.listen)}, ${workers}, ${accessLog}`);
  const serverSettings = describeServerSettings(server);
  if (serverSettings.length > 0) lines.push(`  ${serverSettings.join(', ')}`);
  if (server.tlsListen !== undefined) {
    const extras = [
      server.redirectHttps ? 'redirect_https on' : undefined,
      server.hstsMaxAgeSeconds === undefined ? undefined : `hsts max-age=${server.hstsMaxAgeSeconds}`,
      config.acme === undefined ? undefined : `acme ${config.acme.domains.join(',')}`,
    ].filter((extra) => extra !== undefined);
    lines.push(`tls_listen ${formatListenAddress(server.tlsListen)}, ${server.tlsMinVersion} or later, http/1.1${extras.map((extra) => `, ${extra}`).join('')}`);
    certificates.forEach((pair, index) => {
      const names = [...pair.dnsNames, ...pair.ipAddresses].join(', ');
      const expires = `${new Date(pair.notAfterMs).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
      lines.push(`  tls_cert ${pair.certFile ?? 'acme'}: ${names}, expires ${expires}${index === 0 ? ' (the default)' : ''}`);
    });
  }
  if (admin !== undefined) {
    lines.push(`admin ${formatListenAddress(admin.listen)} (${admin.token === undefined ? 'no token: read-only' : 'token set'})`);
  }

  const routes = routesInMatchingOrder(config.routes);
  lines.push(`${routes.length} route${routes.length === 1 ? '' : 's'}, in matching order:`);
  for (const route of routes) {
    lines.push(`  ${describeRouteHead(route)}`);
    const settings = describeRouteSettings(route);
    if (settings.length > 0) lines.push(`      ${settings.join(', ')}`);
    for (const upstream of route.upstreams) lines.push(`      ${describeUpstream(upstream)}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * The order routes are tried in (SPEC 1.2), as nginx picks a `server` by name before a `location`:
 * routes whose `host` is set come first, host-less ones after; within each group, regex routes in
 * file order, then prefix routes, longer prefixes first (ties keep file order). The router
 * (src/gateway/router.ts) tries routes in exactly this order, skipping those whose host does not match.
 */
export function routesInMatchingOrder<R extends RouteConfig>(routes: readonly R[]): R[] {
  const prefixLength = (route: RouteConfig): number => (route.path.kind === 'prefix' ? route.path.prefix.length : 0);
  const inGroup = (group: readonly R[]): R[] => [
    ...group.filter((route) => route.path.kind === 'regex'),
    ...group.filter((route) => route.path.kind === 'prefix').sort((a, b) => prefixLength(b) - prefixLength(a)),
  ];
  return [...inGroup(routes.filter((route) => route.host !== undefined)), ...inGroup(routes.filter((route) => route.host === undefined))];
}

function describeRouteHead(route: RouteConfig): string {
  const path =
    route.path.kind === 'prefix'
      ? `path ${route.path.prefix} (prefix)`
      : `path ${route.path.isCaseInsensitive ? '~*' : '~'} ${route.path.source} (regex)`;
  const host =
    route.host === undefined ? 'any host' : route.host.kind === 'exact' ? `host ${route.host.host}` : `host *${route.host.suffix}`;
  return `[proxy.${route.name}] ${path}, ${host}, ${route.strategy}`;
}

function describeUpstream(upstream: UpstreamConfig): string {
  const flags = [
    ...(upstream.weight !== 1 ? [`weight=${upstream.weight}`] : []),
    ...(upstream.isBackup ? ['backup'] : []),
    ...(upstream.isDown ? ['down'] : []),
    ...(upstream.discovery === undefined
      ? []
      : upstream.discovery.kind === 'resolve'
        ? [`resolve (A and AAAA of ${upstream.discovery.name})`]
        : [`service=${upstream.discovery.service} (SRV of ${upstream.discovery.name})`]),
  ];
  return [upstream.url, ...flags].join(' ');
}

function describeServerSettings(server: ServerConfig): string[] {
  const d = SERVER_DEFAULTS;
  const settings: string[] = [];
  const duration = (key: string, value: number, fallback: number): void => {
    if (value !== fallback) settings.push(`${key} ${formatDuration(value)}`);
  };
  duration('header_timeout', server.headerTimeoutMs, d.headerTimeoutMs);
  duration('body_timeout', server.bodyTimeoutMs, d.bodyTimeoutMs);
  duration('request_timeout', server.requestTimeoutMs, d.requestTimeoutMs);
  duration('keepalive_timeout', server.keepaliveTimeoutMs, d.keepaliveTimeoutMs);
  duration('shutdown_timeout', server.shutdownTimeoutMs, d.shutdownTimeoutMs);
  if (server.maxHeaderSize !== d.maxHeaderSize) settings.push(`max_header_size ${formatSize(server.maxHeaderSize)}`);
  if (server.maxBodySize !== d.maxBodySize) settings.push(`max_body_size ${formatSize(server.maxBodySize)}`);
  if (server.trustedProxies.length > 0) {
    settings.push(`trusted_proxies ${server.trustedProxies.map((network) => network.source).join(',')}`);
  }
  if (server.resolvers.length > 0) {
    const servers = server.resolvers.map(({ host, port }) => {
      const address = host.includes(':') ? `[${host}]` : host;
      return port === 53 ? address : `${address}:${port}`;
    });
    settings.push(`resolver ${servers.join(',')}`);
  }
  duration('resolver_timeout', server.resolverTimeoutMs, d.resolverTimeoutMs);
  return settings;
}

/** Every route setting that differs from its default, as `key value`, in SPEC 1.2 table order. */
function describeRouteSettings(route: RouteConfig): string[] {
  const d = ROUTE_DEFAULTS;
  const settings: string[] = [];
  const add = (key: string, value: string, fallback: string): void => {
    if (value !== fallback) settings.push(`${key} ${value}`);
  };
  const isHashing = route.strategy === 'ip-hash' || route.strategy === 'consistent-hash';
  if (isHashing) add('hash', route.hash, d.hash);
  if (route.strategy === 'consistent-hash') {
    add('hash_key', formatHashKey(route.hashKey), formatHashKey(d.hashKey));
    add('virtual_nodes', String(route.virtualNodes), String(d.virtualNodes));
  }
  add('preserve_host', route.preserveHost ? 'on' : 'off', 'on');
  add('connect_timeout', formatDuration(route.connectTimeoutMs), formatDuration(d.connectTimeoutMs));
  add('read_timeout', formatDuration(route.readTimeoutMs), formatDuration(d.readTimeoutMs));
  add('retries', String(route.retries), String(route.upstreams.length - 1));
  add('max_fails', String(route.maxFails), String(d.maxFails));
  add('fail_timeout', formatDuration(route.failTimeoutMs), formatDuration(d.failTimeoutMs));
  add('fail_factor', String(route.failFactor), String(d.failFactor));
  if (route.health.isEnabled) {
    const h = route.health;
    settings.push(
      `health_check ${h.method} ${h.path} every ${formatDuration(h.intervalMs)} (timeout ${formatDuration(h.timeoutMs)}, ` +
        `fall ${h.fall}, rise ${h.rise}, status ${formatStatuses(h.statuses)})`,
    );
  }
  if (route.authBasic !== undefined) {
    const users = route.authUsers.map((user) => user.name).join(', ');
    settings.push(`auth_basic "${route.authBasic}" (users: ${users}${route.authForward ? '; auth_forward on' : ''})`);
  }
  add('trace', route.trace ? 'on' : 'off', 'off');
  const { tls } = route;
  add('tls_verify', tls.isVerified ? 'on' : 'off', 'on');
  if (tls.caFile !== undefined) settings.push(`tls_ca ${tls.caFile}`);
  if (tls.serverName !== undefined) settings.push(`tls_server_name ${tls.serverName}`);
  if (tls.clientCertificate !== undefined) settings.push(`tls_client_cert ${tls.clientCertificate.certFile} ${tls.clientCertificate.keyFile}`);
  if (route.access.length > 0) {
    const rules = route.access.map((rule) => `${rule.isAllowed ? 'allow' : 'deny'} ${rule.network?.source ?? 'all'}`);
    settings.push(`access ${rules.join(', ')} (first match decides, else allowed)`);
  }
  if (route.rateLimit !== undefined) settings.push(`rate_limit ${route.rateLimit.source} per client IP`);
  if (route.connLimit !== undefined) settings.push(`conn_limit ${route.connLimit.maxInFlight} per client IP`);
  return settings;
}

function formatHashKey(key: HashKey): string {
  return key.kind === 'header' || key.kind === 'cookie' ? `${key.kind}:${key.name}` : key.kind;
}

function formatStatuses(ranges: readonly StatusRange[]): string {
  return ranges.map((range) => (range.from === range.to ? String(range.from) : `${range.from}-${range.to}`)).join(',');
}
