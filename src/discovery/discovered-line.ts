/**
 * What a discovery line (a `pass` line with `resolve` or `service=`, SPEC 7) stands for at a given
 * moment: the upstreams of the addresses its last good DNS answer gave. This file is the contract
 * between the part that asks DNS (src/discovery) and the part that balances (src/upstream): the
 * lookups produce `DiscoveredLine`s, the route table expands each discovery line into them.
 *
 * A discovered address is an upstream like a configured one, with the line's flags: its origin is
 * the address (`http://10.0.0.7:8080`, so health, counters and pooled connections belong to the
 * address), while the line's host name stays in the Host header for `preserve_host = off` and in
 * `tlsName` (SNI and the name the certificate must carry), as nginx keeps the `proxy_pass` name.
 */
import type { UpstreamConfig } from '../config/config.js';
import type { SourcePlace } from '../errors.js';

/** The addresses one discovery line stands for now. */
export interface DiscoveredLine {
  /** `origin` of the `pass` line (`http://api.test:8080`): identifies the line within its route. */
  readonly lineOrigin: string;
  /** One upstream per address:port of the last good answer, sorted (primaries, then address, then port); empty until one came. */
  readonly upstreams: readonly UpstreamConfig[];
}

/** What the DNS answer says about one address (RFC 2782 fields for SRV; none of them for A/AAAA). */
export interface DiscoveredAddress {
  /** IPv4 or IPv6 address, without brackets. */
  readonly address: string;
  /** Port to connect to: the line's for `resolve`, the record's for `service=`. */
  readonly port: number;
  /** SRV weight as answered (0..65535); undefined for A/AAAA. */
  readonly srvWeight?: number | undefined;
  /** True for an SRV record whose priority is not the lowest of its answer: a backup (nginx `service=`). */
  readonly isBackupByPriority?: boolean | undefined;
}

/**
 * The upstream config of one discovered address of `line` (a `pass` line with `discovery` set).
 *
 * - origin `scheme://ADDRESS:PORT` (IPv6 in brackets), `host` the address, `port` as given;
 * - `hostHeader`, `path`, `url`, `place`, `isDown` from the line; `tlsName` the line's host;
 * - weight: the line's `weight=` when written, else for SRV the record's weight (0 → 1, SPEC 7),
 *   else 1;
 * - backup: the line's `backup`, or an SRV record of a higher priority number than the lowest.
 *
 * @throws Error when `line` has no `discovery` (a programming error: plain lines are not expanded)
 */
export function discoveredUpstreamConfig(line: UpstreamConfig, found: DiscoveredAddress): UpstreamConfig {
  const { discovery } = line;
  if (discovery === undefined) throw new Error(`discoveredUpstreamConfig: ${line.origin} is not a discovery line`);
  const weight =
    discovery.kind === 'service'
      ? (discovery.weight ?? Math.max(1, found.srvWeight ?? 1))
      : line.weight;
  const addressInUrl = found.address.includes(':') ? `[${found.address}]` : found.address;
  return {
    url: line.url,
    scheme: line.scheme,
    origin: `${line.scheme}://${addressInUrl}:${found.port}`,
    host: found.address,
    port: found.port,
    hostHeader: line.hostHeader,
    path: line.path,
    weight,
    isBackup: line.isBackup || found.isBackupByPriority === true,
    isDown: line.isDown,
    place: line.place,
    tlsName: line.host,
    discoveredFrom: { name: discovery.name, lineOrigin: line.origin, place: line.place },
  };
}

/** What discovery changes: the proxy (ProxyServer), or the cluster primary's model that workers copy. */
export interface DiscoveryTarget {
  /**
   * Replaces what the discovery lines of route `routeName` stand for. `lines` lists every discovery
   * line of that route (by `lineOrigin`) with its current upstreams; a line not listed keeps what it had.
   */
  setDiscoveredUpstreams(routeName: string, lines: readonly DiscoveredLine[]): void;
}

/**
 * How one lookup ended (the `result` label of `proxy_dns_lookups_total`): `ok` an answer with
 * addresses; `nxdomain` the name does not exist; `empty` it exists without records of the type
 * (NODATA); `servfail`, `refused`, `timeout` (no answer within `resolver_timeout`), `error` anything
 * else (an unreachable server, a malformed answer). The first three are answers, the rest failures.
 */
export type LookupResult = 'ok' | 'nxdomain' | 'empty' | 'servfail' | 'refused' | 'timeout' | 'error';

/** One discovery line as `/status` shows it. */
export interface DiscoveryLineStatus {
  readonly routeName: string;
  /** `origin` of the pass line. */
  readonly lineOrigin: string;
  readonly kind: 'resolve' | 'service';
  /** The name looked up (`api.test`, `_http._tcp.web.test`). */
  readonly name: string;
  /** Where the pass line is written. */
  readonly place: SourcePlace;
  /** Upstreams the line stands for now. */
  readonly upstreamCount: number;
  /** Wall-clock time (ms since the epoch) of the last answer (`ok`, `nxdomain` or `empty`); undefined before one. */
  readonly lastAnswerAtMs: number | undefined;
  /** How the last lookup ended; undefined before the first one ended. */
  readonly lastResult: LookupResult | undefined;
  /** One line about the last failure or empty answer (`SERVFAIL from 127.0.0.1:5353`); undefined after `ok`. */
  readonly lastError: string | undefined;
}

/** Lookups of one line's name by result, for `proxy_dns_lookups_total{route,name,result}`. */
export interface LookupCount {
  readonly routeName: string;
  readonly name: string;
  readonly result: LookupResult;
  readonly count: number;
}
