/**
 * The validated configuration: the middle of the three layers (INI document → this → runtime
 * objects). Everything here is plain readonly data, frozen by the loader; runtime objects point at
 * it, never the reverse. Units are in the names: `…Ms` is milliseconds, `…Bytes` or `…Size` is bytes.
 * Defaults are those of SPEC 1.2.
 */
import type { SourcePlace } from '../errors.js';

/** A listen address: `host:port`, `:port` (all interfaces) or `[::]:port`. */
export interface ListenAddress {
  /** Host to bind; `0.0.0.0` or `::` for all interfaces. */
  readonly host: string;
  /** TCP port 0..65535 (0 = pick a free one, used by tests). */
  readonly port: number;
}

/** A DNS server of `resolver`: `IP[:PORT]` (port 53 by default). */
export interface ResolverAddress {
  /** IPv4 or IPv6 address, without brackets. */
  readonly host: string;
  /** UDP/TCP port 1..65535. Default 53. */
  readonly port: number;
}

/** One `resolver` item: its server, the item as written and where it is written (for `--check`'s warnings). */
export interface ConfiguredResolver extends ResolverAddress {
  readonly source: string;
  readonly place: SourcePlace;
}

/**
 * An IPv4 or IPv6 network for `trusted_proxies` and `access`. An IPv4-mapped one (`::ffff:10.0.0.0/104`)
 * is held as the IPv4 network it maps (family 4, `10.0.0.0/8`), as client IPs are read.
 */
export interface Cidr {
  readonly family: 4 | 6;
  /** The network address as 4 or 16 bytes. */
  readonly bytes: Uint8Array;
  readonly prefixLength: number;
  /** As written in the file, for `--check` and errors. */
  readonly source: string;
}

/** One `trusted_proxies` item: its network and where it is written (for `--check`'s warnings). */
export interface TrustedProxy extends Cidr {
  readonly place: SourcePlace;
}

export type AccessLogFormat = 'combined' | 'json';

/** The lowest TLS version a listener accepts (`tls_min_version`). */
export type TlsVersion = 'TLSv1.2' | 'TLSv1.3';

/**
 * A certificate and its private key, as PEM files: a `tls_cert` line of `[server]` or a route's
 * `tls_client_cert`. Paths are as written (relative ones are read from the working directory, like
 * `access_log`); the files are read and checked by src/tls, not by the config loader.
 */
export interface CertificateFiles {
  /** PEM file: the certificate first, then its intermediates (the chain sent to peers). */
  readonly certFile: string;
  /** PEM file of the certificate's private key (PKCS#8, PKCS#1 or SEC1). */
  readonly keyFile: string;
  /** Where the certificate path is written (errors about the pair point here). */
  readonly place: SourcePlace;
  /** Where the key path is written. */
  readonly keyPlace: SourcePlace;
}

/** `[server]`. */
export interface ServerConfig {
  /** The plain HTTP listener; undefined for `listen = off` (only allowed with `tls_listen`). */
  readonly listen: ListenAddress | undefined;
  /** `stdout`, `stderr`, `off`, or a file path (appended). Default `stdout`. */
  readonly accessLog: string;
  /** Where `access_log` was set, for errors about the file (undefined when defaulted). */
  readonly accessLogPlace?: SourcePlace | undefined;
  readonly accessLogFormat: AccessLogFormat;
  readonly trustedProxies: readonly TrustedProxy[];
  /** Time to receive a request head. Default 10 000. */
  readonly headerTimeoutMs: number;
  /**
   * Longest pause between two reads of a request body, ms (nginx's `client_body_timeout`): a
   * steadily flowing upload is never cut. 0 = no limit. Default 60 000.
   */
  readonly bodyTimeoutMs: number;
  /** Time to receive a whole request, head and body, ms; 0 = no limit (default). */
  readonly requestTimeoutMs: number;
  /** Idle client keep-alive. Default 5 000. */
  readonly keepaliveTimeoutMs: number;
  /** Larger request heads get 431. Default 16 384. */
  readonly maxHeaderSize: number;
  /** Larger request bodies get 413; 0 = no limit (default). */
  readonly maxBodySize: number;
  /** Graceful drain on SIGTERM/SIGINT. Default 10 000. */
  readonly shutdownTimeoutMs: number;
  /** Worker processes; `auto` = one per core. Default 1. */
  readonly workers: number | 'auto';
  /** The HTTPS listener (HTTP/1.1 over TLS); undefined (default) = none. */
  readonly tlsListen: ListenAddress | undefined;
  /** `tls_cert` lines in file order: SNI picks among them, the first is the default. */
  readonly tlsCertificates: readonly CertificateFiles[];
  /** Default `TLSv1.2`. */
  readonly tlsMinVersion: TlsVersion;
  /** `redirect_https`: the plain listener answers 308 to the https:// URL (ACME challenges excepted). Default false. */
  readonly redirectHttps: boolean;
  /** `hsts`: the max-age of `Strict-Transport-Security` on HTTPS responses, seconds; undefined = off (default). */
  readonly hstsMaxAgeSeconds: number | undefined;
  /**
   * `resolver`: the DNS servers asked for `resolve` and `service=` pass lines (SPEC 7), in order;
   * empty (default, also `resolver = system` or an empty value) = the system's (`/etc/resolv.conf`). `/etc/hosts` is never read for these lines.
   */
  readonly resolvers: readonly ConfiguredResolver[];
  /** `resolver_timeout`: the limit of one DNS lookup, ms. Default 2 000. */
  readonly resolverTimeoutMs: number;
}

/** `[admin]`; absent (undefined on Config) unless `listen` is set. */
export interface AdminConfig {
  readonly listen: ListenAddress;
  /** Bearer token for state-changing calls; undefined = state-changing calls are refused. */
  readonly token: string | undefined;
}

export const STRATEGY_NAMES = [
  'random',
  'weighted-random',
  'round-robin',
  'weighted-round-robin',
  'smooth-weighted-round-robin',
  'ip-hash',
  'least-connections',
  'consistent-hash',
  'power-of-two-choices',
] as const;
export type StrategyName = (typeof STRATEGY_NAMES)[number];

export type HashName = 'crc32' | 'fnv1a';

/** Where `consistent-hash` takes its key from (`hash_key`). */
export type HashKey =
  | { readonly kind: 'client_ip' }
  | { readonly kind: 'uri' }
  | { readonly kind: 'header'; readonly name: string } // lowercased
  | { readonly kind: 'cookie'; readonly name: string };

/**
 * How a `pass` line finds its addresses in DNS (SPEC 7), when it has the `resolve` or `service=`
 * flag. `name` is what is looked up.
 *
 * - `resolve`: A and AAAA lookups of the URL's host name; every address, with the URL's port, is one
 *   upstream (nginx `server … resolve`).
 * - `service`: an SRV lookup of `_SERVICE._tcp.HOST` (RFC 2782); each record's target and port is one
 *   upstream, its priority picks primaries (the lowest number) and backups (every other), its weight
 *   (0 → 1) is the upstream's weight unless the line sets `weight=` (nginx `service=`).
 */
export type UpstreamDiscovery =
  | { readonly kind: 'resolve'; readonly name: string }
  | {
      readonly kind: 'service';
      /** The service as written after `service=`, e.g. `http`. */
      readonly service: string;
      /** `_http._tcp.HOST`, the SRV name looked up. */
      readonly name: string;
      /** `weight=` of the line, which then applies to every record; undefined = the records' weights. */
      readonly weight: number | undefined;
    };

/** Where a discovered upstream came from, for `/status`, logs and metrics. */
export interface DiscoverySource {
  /** The name looked up: the host for `resolve`, `_SERVICE._tcp.HOST` for `service=`. */
  readonly name: string;
  /** `origin` of the `pass` line (`http://HOST:PORT`), which identifies the line within its route. */
  readonly lineOrigin: string;
  /** Where the `pass` line is written. */
  readonly place: SourcePlace;
}

/**
 * One `pass` line: `URL [weight=N] [backup] [down] [resolve] [service=NAME]`, or one address a
 * discovery line found (then `host` is that address, `discoveredFrom` says which line, and the
 * line's name stays in `hostHeader` and `tlsName`).
 */
export interface UpstreamConfig {
  /** The URL as written, e.g. `http://localhost:9001`. */
  readonly url: string;
  /** `http` or `https` (TLS to the upstream, with the route's `tls_*` settings). */
  readonly scheme: 'http' | 'https';
  /**
   * `http://host:port` or `https://host:port`, the upstream's identity (used for logs and to keep
   * state across reloads; the scheme is part of it, so the same host:port over TLS is another upstream).
   */
  readonly origin: string;
  /** Host to connect to, without brackets (`::1`, `localhost`, `10.0.0.2`). */
  readonly host: string;
  /** 1..65535; default 80 for http, 443 for https. */
  readonly port: number;
  /** `host:port` as it goes in the Host header when `preserve_host = off` (IPv6 in brackets; the scheme's default port omitted). */
  readonly hostHeader: string;
  /** The path of the URL when it has one (even `/`), else undefined: nginx `proxy_pass` semantics. */
  readonly path: string | undefined;
  /** 1..1 000 000, default 1. */
  readonly weight: number;
  readonly isBackup: boolean;
  /** Marked `down` in the config: never picked. */
  readonly isDown: boolean;
  readonly place: SourcePlace;
  /**
   * Set on a `pass` line with `resolve` or `service=`: the line stands for the addresses DNS gives
   * (src/discovery), it is never connected to itself. Absent on plain lines.
   */
  readonly discovery?: UpstreamDiscovery | undefined;
  /**
   * On a discovered address: the name TLS sends as SNI and verifies the certificate against when
   * the route sets no `tls_server_name`, i.e. the host name of its `pass` line (a certificate names
   * the service, not the address). Absent: `host` is used.
   */
  readonly tlsName?: string | undefined;
  /** On a discovered address: the line and lookup it came from. Absent on configured upstreams. */
  readonly discoveredFrom?: DiscoverySource | undefined;
}

/** How a route matches the request path. */
export type PathMatcher =
  | { readonly kind: 'prefix'; readonly prefix: string }
  /**
   * `~ REGEX` or `~* REGEX` (`isCaseInsensitive`) as written (`source`); `regex` is what runs, made by
   * route-regex.ts (for `~*` a case-folded pattern, not the `i` flag).
   */
  | { readonly kind: 'regex'; readonly regex: RegExp; readonly source: string; readonly isCaseInsensitive: boolean };

/** Host match: exact (lowercased) or `*.example.com` (suffix `.example.com`). */
export type HostMatcher =
  | { readonly kind: 'exact'; readonly host: string }
  | { readonly kind: 'wildcard'; readonly suffix: string };

/** Inclusive status range, e.g. 200-399. */
export interface StatusRange {
  readonly from: number;
  readonly to: number;
}

export interface HealthCheckConfig {
  readonly isEnabled: boolean;
  /** Default `HEAD`. */
  readonly method: string;
  /** Default `/`. */
  readonly path: string;
  /** Default 3 000. */
  readonly intervalMs: number;
  /** Default 2 000. */
  readonly timeoutMs: number;
  /** Consecutive failures to mark DOWN. Default 3. */
  readonly fall: number;
  /** Consecutive successes to mark UP. Default 2. */
  readonly rise: number;
  /** Default [200-399]. */
  readonly statuses: readonly StatusRange[];
}

/** A `auth_user` line: `name:HASH`. */
export interface AuthUser {
  readonly name: string;
  /** The encoded scrypt hash as written (see src/auth). */
  readonly hash: string;
  readonly place: SourcePlace;
}

/** How a route talks TLS to its `https://` upstreams (route keys `tls_*`). */
export interface UpstreamTlsConfig {
  /** `tls_verify`: check the chain and the name. Default true (`off` is warned about by `--check`). */
  readonly isVerified: boolean;
  /** Where `tls_verify` is written (its value: the `--check` warnings about it point there); undefined when defaulted. */
  readonly verifyPlace: SourcePlace | undefined;
  /** `tls_ca`: PEM file of the CAs trusted instead of the system store; undefined = system store (default). */
  readonly caFile: string | undefined;
  /** Where `tls_ca` is written, for errors about the file. */
  readonly caPlace: SourcePlace | undefined;
  /**
   * `tls_server_name`: the SNI sent and the name verified. Undefined (default) = the URL's host, and
   * no SNI when that host is an IP address.
   */
  readonly serverName: string | undefined;
  /** Where `tls_server_name` is written (its value); undefined when defaulted. */
  readonly serverNamePlace: SourcePlace | undefined;
  /** `tls_client_cert`: presented to the upstream (mutual TLS); undefined = none (default). */
  readonly clientCertificate: CertificateFiles | undefined;
}

/** One `access` line (SPEC 8): `allow CIDR|all` or `deny CIDR|all`, nginx's `allow` / `deny`. */
export interface AccessRule {
  /** `allow` (true) or `deny` (false). */
  readonly isAllowed: boolean;
  /** The network the client IP must be in; undefined for `all`. It matches clients of its own family only (a `::ffff:`-mapped client is IPv4). */
  readonly network: Cidr | undefined;
  readonly place: SourcePlace;
}

/** `rate_limit = N/s|N/m [burst=N]` (SPEC 8): a token bucket per route and client IP. */
export interface RateLimitConfig {
  /** N: tokens added per `periodMs`, 1..1 000 000. */
  readonly requests: number;
  /** 1 000 for `/s`, 60 000 for `/m`. */
  readonly periodMs: 1_000 | 60_000;
  /** Bucket size, the most requests let through at once after a quiet time: `burst=` or ⌈N/s⌉ (`/m`: ⌈N/60⌉), at least 1. */
  readonly burst: number;
  /** As written after normalising, e.g. `10/s burst=5`, for `--check`, `/status` and logs. */
  readonly source: string;
  readonly place: SourcePlace;
}

/** `conn_limit = N` (SPEC 8): requests in flight per client IP on the route, an open tunnel counting as one. */
export interface ConnLimitConfig {
  /** 1..1 000 000. */
  readonly maxInFlight: number;
  readonly place: SourcePlace;
}

/** One `[proxy.NAME]` section, with `[proxy]` defaults already applied. */
export interface RouteConfig {
  /** NAME of `[proxy.NAME]`. */
  readonly name: string;
  readonly path: PathMatcher;
  /** Where the `path` value is written (in the route's section or inherited from `[proxy]`), for the warnings about it; undefined in routes built by code. */
  readonly pathPlace?: SourcePlace;
  readonly host: HostMatcher | undefined;
  readonly upstreams: readonly UpstreamConfig[];
  /** The path every `pass` URL agrees on (undefined = forward the request path unchanged). */
  readonly passPath: string | undefined;
  /** Default `round-robin`. */
  readonly strategy: StrategyName;
  /** Default `crc32`. */
  readonly hash: HashName;
  /** Default client_ip. */
  readonly hashKey: HashKey;
  /** Ring points per unit of weight. Default 160. */
  readonly virtualNodes: number;
  /** Default true. */
  readonly preserveHost: boolean;
  /** Default 5 000. */
  readonly connectTimeoutMs: number;
  /** Upstream idle time. Default 60 000. */
  readonly readTimeoutMs: number;
  /** Extra attempts on other upstreams. Default upstreams − 1. */
  readonly retries: number;
  /**
   * True when `retries` was not written (here or in `[proxy]`): it is then recounted as upstreams − 1
   * whenever discovery or the registry change the route's upstreams at run time.
   */
  readonly isRetriesDefault: boolean;
  /** Default 1; 0 disables passive health. */
  readonly maxFails: number;
  /** Default 10 000. */
  readonly failTimeoutMs: number;
  /** Default 5. */
  readonly failFactor: number;
  readonly health: HealthCheckConfig;
  /** Realm; undefined = the proxy does not demand credentials. */
  readonly authBasic: string | undefined;
  readonly authUsers: readonly AuthUser[];
  /** Default false. */
  readonly authForward: boolean;
  /** Default false. */
  readonly trace: boolean;
  readonly tls: UpstreamTlsConfig;
  /** `access` lines in order, the first match decides, no match allows; empty (default) = everyone. Own lines replace `[proxy]`'s (nginx). */
  readonly access: readonly AccessRule[];
  /** `rate_limit`; undefined (default) = off. */
  readonly rateLimit: RateLimitConfig | undefined;
  /** `conn_limit`; undefined (default) = off. */
  readonly connLimit: ConnLimitConfig | undefined;
  readonly place: SourcePlace;
}

/** Let's Encrypt's production directory, `[acme] directory`'s default. */
export const LETS_ENCRYPT_DIRECTORY = 'https://acme-v02.api.letsencrypt.org/directory';

/** `[acme]`; absent (undefined on Config) unless `domains` is set. Automatic certificates, RFC 8555. */
export interface AcmeConfig {
  /** Lowercased DNS names, one certificate for them all (the first is its subject); no wildcards (HTTP-01 cannot prove them). */
  readonly domains: readonly string[];
  /** Account contact (`mailto:` is added); undefined = none. */
  readonly email: string | undefined;
  /** The ACME directory URL (https://). Default Let's Encrypt's production directory. */
  readonly directoryUrl: string;
  /** PEM file trusted for the directory's own TLS (private or test ACME servers); undefined = system store. */
  readonly directoryCaFile: string | undefined;
  /** Where `directory_ca` is written, for errors about the file. */
  readonly directoryCaPlace: SourcePlace | undefined;
  /** Directory for the account key, certificates and keys. Default `./acme`. */
  readonly storageDir: string;
  /** Where `storage` is written (undefined when defaulted: errors then point at `domains`). */
  readonly storagePlace: SourcePlace | undefined;
  /** Where `domains` is written. */
  readonly place: SourcePlace;
}

export interface Config {
  /** The file it was loaded from, as given. */
  readonly file: string;
  readonly server: ServerConfig;
  readonly admin: AdminConfig | undefined;
  readonly acme: AcmeConfig | undefined;
  /** In file order. */
  readonly routes: readonly RouteConfig[];
}
