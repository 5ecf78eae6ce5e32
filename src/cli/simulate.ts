/**
 * `node dist/main.js simulate ROUTE [-n N] [--client-ip IP] [--key K]` (SPEC 2): runs a route's
 * balancer N times on fresh upstream state, without sending traffic, and prints every decision with
 * the strategy's state before and after it, then the distribution — so a learner can watch smooth
 * weighted round robin's current weights move, or a hash ring keep a key in place, step by step.
 *
 * Upstreams are labelled a, b, c, … in config order, as in the SPEC's sequences (`a a b a c a a`).
 * Nothing is dispatched, so active requests stay 0 (least-connections then shows its round-robin
 * tie order) and effective weights stay at their configured values; `down` upstreams are skipped.
 *
 * A route with discovery lines (`resolve`, `service=`, SPEC 7) is simulated on the addresses DNS
 * gives at that moment: `resolveDiscoveryLines` looks each line up once (the config's `resolver`
 * and `resolver_timeout`) and puts its addresses where the line is written; a line that cannot be
 * resolved is reported and left out, and the simulation goes on with the rest. When nothing is
 * left, there is nothing to simulate: that is the one outcome printed (which names did not resolve,
 * and why), with exit code 1.
 */
import type { Config, RouteConfig, UpstreamConfig } from '../config/config.js';
import { NoUpstreamToSimulateError, UsageError } from '../errors.js';
import { plural } from '../log/plural.js';
import { lookupLineOnce } from '../discovery/discovery.js';
import { createBalancer } from '../upstream/balancer/strategies.js';
import { Upstream } from '../upstream/upstream.js';
import { normalizeClientIp, parseForwardedAddress } from '../gateway/client-address.js';

export interface SimulateOptions {
  /** Number of picks. */
  readonly n: number;
  /**
   * Client IP for ip-hash (and the default key). Default `127.0.0.1`. Read as the proxy reads a
   * client address: IPv6 in canonical form, an IPv4-mapped one as IPv4 (`::FFFF:0606:0606` is
   * `6.6.6.6`), so the pick is the proxy's.
   */
  readonly clientIp?: string;
  /** Hash key for consistent-hash. Default: `/` for `hash_key = uri`, else the client IP. */
  readonly key?: string;
  /** Uniform in [0, 1), for the random strategies. Default Math.random. */
  readonly random?: () => number;
}

/**
 * `config` with the discovery lines of route `routeName` replaced by the addresses one lookup
 * each gives now (in line order; an address already listed by an earlier line is not repeated),
 * and the lines to print first: `could not resolve NAME: REASON` for each line that failed. A
 * route without discovery lines comes back as it is.
 *
 * @throws UsageError when `routeName` is not a route of `config`
 * @throws NoUpstreamToSimulateError when no upstream is left (every line is a discovery line and
 *   none resolved), at the first discovery line, naming each name and why it did not resolve
 */
export async function resolveDiscoveryLines(config: Config, routeName: string): Promise<{ readonly config: Config; readonly messages: readonly string[] }> {
  const route = findRoute(config, routeName);
  if (!route.upstreams.some((upstream) => upstream.discovery !== undefined)) return { config, messages: [] };
  const answers = await Promise.all(
    route.upstreams.map(async (upstream) => (upstream.discovery === undefined ? { upstreams: [upstream] } : await lookupLineOnce(upstream, config.server))),
  );
  const failures: { readonly name: string; readonly error: string }[] = [];
  const upstreams = new Map<string, UpstreamConfig>();
  answers.forEach((answer, index) => {
    if ('error' in answer) {
      failures.push({ name: route.upstreams[index]!.discovery!.name, error: answer.error });
      return;
    }
    for (const upstream of answer.upstreams) if (!upstreams.has(upstream.origin)) upstreams.set(upstream.origin, upstream);
  });
  if (upstreams.size === 0) {
    const unresolved = failures.map((failure) => `${failure.name} (${failure.error})`);
    throw new NoUpstreamToSimulateError(
      route.upstreams.find((upstream) => upstream.discovery !== undefined)!.place,
      `route ${route.name} has no upstream to simulate: its upstreams are known only from DNS, and ${unresolved.length === 1 ? `${unresolved[0]} did not resolve` : `none of ${unresolved.join(', ')} resolved`}`,
    );
  }
  const messages = failures.map((failure) => `could not resolve ${failure.name}: ${failure.error}`);
  const resolved: RouteConfig = { ...route, upstreams: [...upstreams.values()] };
  return { config: { ...config, routes: config.routes.map((candidate) => (candidate === route ? resolved : candidate)) }, messages };
}

function findRoute(config: Config, routeName: string): RouteConfig {
  const route = config.routes.find((candidate) => candidate.name === routeName);
  if (route !== undefined) return route;
  const names = config.routes.map((candidate) => candidate.name).join(', ');
  throw new UsageError(`unknown route '${routeName}' (routes: ${names === '' ? 'none' : names})`);
}

/**
 * The text `simulate` prints: a header naming the upstreams, a table (step, state before, pick, state
 * after), the pick sequence, and the distribution (count and percent per upstream). Ends with `\n`.
 *
 * @throws UsageError when `routeName` is not a route of `config` (the message lists the routes), or
 *   when `n` is not a non-negative integer
 */
export function runSimulate(config: Config, routeName: string, options: SimulateOptions): string {
  const route = findRoute(config, routeName);
  if (!Number.isInteger(options.n) || options.n < 0) throw new UsageError(`-n must be a whole number >= 0, got ${options.n}`);
  const clientIp = asProxyReadsIt(options.clientIp ?? '127.0.0.1');
  const upstreams = route.upstreams.map((upstreamConfig) => new Upstream(upstreamConfig, route.name));
  const balancer = createBalancer(route, upstreams, { random: options.random ?? Math.random, now: () => 0 });
  const labels = upstreams.map((_, i) => labelFor(i, upstreams.length));
  // Without --key, the key the proxy would use for a request to `/` from clientIp.
  const context = { clientIp, hashKey: options.key ?? (route.hashKey.kind === 'uri' ? '/' : clientIp), tried: new Set<Upstream>() };

  const describe = (): string =>
    balancer
      .describeState()
      .map((state, i) => `${labels[i]}{${Object.entries(state).map(([key, value]) => `${key}=${value}`).join(',')}}`)
      .join(' ');

  const rows: string[][] = [['step', 'state before', 'pick', 'state after']];
  const sequence: string[] = [];
  const counts = new Map<Upstream | undefined, number>();
  for (let step = 1; step <= options.n; step++) {
    const before = describe();
    const picked = balancer.pick(context);
    const label = picked === undefined ? '-' : labels[upstreams.indexOf(picked)]!;
    rows.push([String(step), before, label, describe()]);
    sequence.push(label);
    counts.set(picked, (counts.get(picked) ?? 0) + 1);
  }

  const lines = [
    `route ${route.name}: ${route.strategy}, ${plural(options.n, 'pick')}, client IP ${clientIp}, key ${context.hashKey}`,
    ...upstreamLines(route, labels),
    '',
    ...formatTable(rows, [true, false, false, false]),
    '',
    `sequence: ${sequence.join(' ')}`,
    '',
    'distribution:',
    ...formatTable(
      [
        ...upstreams.map((upstream, i) => distributionRow(labels[i]!, upstream.origin, counts.get(upstream) ?? 0, options.n)),
        ...(counts.has(undefined) ? [distributionRow('-', '(none available)', counts.get(undefined)!, options.n)] : []),
      ],
      [false, false, true, true],
    ).map((line) => `  ${line}`),
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * `ip` as the proxy keys a client by it (src/gateway/client-address.ts): canonical IPv6 (RFC 5952,
 * `2001:DB8:0::1` is `2001:db8::1`) and IPv4-mapped addresses unmapped, as parseForwardedAddress
 * reads an X-Forwarded-For entry and normalizeClientIp a socket's peer. An address with a zone id
 * (`fe80::1%eth0`), which a forwarded entry never carries, is only unmapped, as a socket's peer is.
 */
function asProxyReadsIt(ip: string): string {
  return parseForwardedAddress(ip) ?? normalizeClientIp(ip);
}

/** a, b, …, z for up to 26 upstreams; u1, u2, … beyond. */
function labelFor(index: number, count: number): string {
  return count <= 26 ? String.fromCharCode(97 + index) : `u${index + 1}`;
}

function upstreamLines(route: RouteConfig, labels: readonly string[]): string[] {
  return formatTable(
    route.upstreams.map((upstream, i) => [
      labels[i]!,
      upstream.origin,
      [
        `weight=${upstream.weight}`,
        upstream.isBackup ? 'backup' : '',
        upstream.isDown ? 'down' : '',
        upstream.discoveredFrom === undefined ? '' : `from ${upstream.discoveredFrom.name}`,
      ]
        .filter(Boolean)
        .join(' '),
    ]),
    [false, false, false],
  ).map((line) => `  ${line}`);
}

function distributionRow(label: string, origin: string, count: number, total: number): string[] {
  const percent = total === 0 ? 0 : (100 * count) / total;
  return [label, origin, String(count), `${percent.toFixed(2)}%`];
}

/** Columns padded to their widest cell, separated by two spaces; `isRight[c]` right-aligns column c. */
export function formatTable(rows: readonly (readonly string[])[], isRight: readonly boolean[]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, c) => (widths[c] = Math.max(widths[c] ?? 0, cell.length)));
  return rows.map((row) =>
    row
      .map((cell, c) => (isRight[c] === true ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join('  ')
      .trimEnd(),
  );
}
