/**
 * The proxy's own listening sockets, seen from the client side: is the endpoint a new upstream
 * connection reached one of them? A `pass` line, a DNS answer (`resolve`, `service=`) or a registry
 * entry that names the proxy's own `listen` or `tls_listen` address would send each request back
 * into the proxy, which forwards it to itself again, one new connection per hop, until sockets run
 * out (a break test counted ~16,700 hops and ~14,000 open fds in 5 s). The connection pool and the
 * health probe ask `match` once per new connection, right after the TCP connect, with the socket's
 * real peer (`remoteAddress`, `remotePort`): exact whatever the URL said (`localhost`, a name, an
 * address DNS chose) and whichever address happy eyeballs connected to. A match is refused with
 * `UpstreamLoopError` (src/errors.ts) before a byte of the request is written.
 *
 * The rule, for a peer `address:port` (an IPv4-mapped `::ffff:a.b.c.d` read as `a.b.c.d`):
 * 1. `port` is a listener's bound port (with port 0 in the config, the port the system gave), and
 * 2. `address` is that listener's address, or the listener is bound to an unspecified address and
 *    `address` is one of this host's: `0.0.0.0` takes IPv4 only (127.0.0.0/8 and the IPv4
 *    addresses of `os.networkInterfaces()`), `::` takes both families (node listens dual-stack:
 *    `::1`, 127.0.0.0/8, and every interface address). An IPv6 peer is never this proxy's
 *    `0.0.0.0` listener: that socket does not receive IPv6 connections, so another program may be
 *    the one listening on `[::1]:port`.
 * The admin listener is not one of them: a request to it is answered there, it does not loop.
 *
 * Cheap by construction: everything is computed when a listener starts (`add`) or the config is
 * reloaded (`refreshHostAddresses`, which re-reads the interfaces); `match` is one `Set` lookup of
 * the port for every connection to a port the proxy does not listen on, and a few map lookups
 * otherwise. An address added to an interface since (DHCP, a new container network) is found the
 * first time a peer on an unspecified listener's port is not a known host address: the interfaces
 * are read again then, at most once per {@link HOST_ADDRESSES_MAX_AGE_MS}, so a loop through that
 * address ends at its first hop after that second, and peers on other hosts that share the
 * listener's port number cost one reading a second at most.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIPv4, type LookupFunction, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { UpstreamLoopError } from '../errors.js';
import { unmapIpv4 } from '../config/values.js';

/** One listening socket of this proxy. */
export interface ListeningEndpoint {
  /** The bound address, as `server.address()` gives it: `0.0.0.0`, `::`, `127.0.0.1`. */
  readonly address: string;
  /** The bound port (never 0). */
  readonly port: number;
  /** The config key it serves: `listen` or `tls_listen`. */
  readonly key: 'listen' | 'tls_listen';
}

/** What the pool and the probe need: which of this proxy's listeners a peer is, if any. */
export interface OwnListenerMatcher {
  match(remoteAddress: string | undefined, remotePort: number | undefined): ListeningEndpoint | undefined;
}

/**
 * The error for a just-connected upstream `socket` whose peer is one of this proxy's listeners
 * (`matcher.match` on its `remoteAddress` and `remotePort`), or undefined when it is not (or there
 * is no matcher). Called once per new connection, from its `connect` event: the backstop behind
 * `loopErrorFor` and `lookupAvoidingOwnListeners`, which refuse before a connection is made.
 */
export function loopErrorOf(socket: Socket, matcher: OwnListenerMatcher | undefined): UpstreamLoopError | undefined {
  return loopErrorFor(socket.remoteAddress, socket.remotePort, matcher);
}

/**
 * The error for a connection to `address:port` that would reach one of this proxy's listeners, or
 * undefined when it would not (a host name, another port, no matcher). Asked before connecting to an
 * IP literal: the connection is never made. With `workers = N` that matters: a connection that is
 * made waits in the cluster primary's accept queue until a worker takes it, and under load thousands
 * of them piled up there (a break test counted 9,000 fds in the primary).
 */
export function loopErrorFor(address: string | undefined, port: number | undefined, matcher: OwnListenerMatcher | undefined): UpstreamLoopError | undefined {
  const own = matcher?.match(address, port);
  if (own === undefined) return undefined;
  return new UpstreamLoopError(formatEndpoint(unmapIpv4(address!), port!), `${own.key} ${formatEndpoint(own.address, own.port)}`);
}

/**
 * A `lookup` for `net.connect` / `tls.connect` to a host name on `port` that leaves out the
 * addresses of this proxy's own listeners (`localhost` → `127.0.0.1` and `::1`, with only
 * `127.0.0.1:port` the proxy's: `::1` is still tried). When every address is the proxy's own, the
 * lookup fails with UpstreamLoopError and no connection is made (see `loopErrorFor`). Without a
 * matcher, `lookup` itself. Node calls it only for names, never for IP literals.
 *
 * @param lookup the name resolution to filter; default `dns.lookup` (what node uses).
 */
export function lookupAvoidingOwnListeners(port: number, matcher: OwnListenerMatcher | undefined, lookup: LookupFunction = dnsLookup as LookupFunction): LookupFunction {
  if (matcher === undefined) return lookup;
  return (hostname, options, callback) => {
    lookup(hostname, options, (error, answer, family) => {
      if (error) return callback(error, answer, family);
      const answers: LookupAddress[] = typeof answer === 'string' ? [{ address: answer, family: family ?? 4 }] : answer;
      const others = answers.filter((entry) => matcher.match(entry.address, port) === undefined);
      if (others.length === 0) return callback(loopErrorFor(answers[0]?.address, port, matcher) as NodeJS.ErrnoException, answer, family);
      if (typeof answer === 'string') return callback(null, answer, family);
      callback(null, others);
    });
  };
}

/** Every address of this host's interfaces (`os.networkInterfaces()`), IPv4-mapped ones as IPv4. */
function interfaceAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((entries) => (entries ?? []).map((entry) => unmapIpv4(entry.address)));
}

/** `127.0.0.1:8080`, `[::1]:8080`. */
function formatEndpoint(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

/** How old the last reading of the interfaces may be when a peer is not one of the addresses read, ms. */
export const HOST_ADDRESSES_MAX_AGE_MS = 1000;

/** The bound listeners of this process (or, in a cluster primary, of its workers), by the rule in the file comment. */
export class OwnListeners implements OwnListenerMatcher {
  readonly #readHostAddresses: () => Iterable<string>;
  readonly #now: () => number;
  #hostAddresses: ReadonlySet<string>;
  /** When the interfaces were last read, ms (`now`). */
  #readAtMs: number;
  /** Every bound port: the one lookup most connections need. */
  readonly #ports = new Set<number>();
  /** `address port` of listeners bound to one address. */
  readonly #exact = new Map<string, ListeningEndpoint>();
  /** Listeners on `0.0.0.0`, by port. */
  readonly #anyIPv4 = new Map<number, ListeningEndpoint>();
  /** Listeners on `::`, by port. */
  readonly #anyIPv6 = new Map<number, ListeningEndpoint>();

  /**
   * @param readHostAddresses this host's interface addresses, read now and at every
   *   `refreshHostAddresses`; default `interfaceAddresses` (tests pass a fixed list). 127.0.0.0/8
   *   and `::1` are always the host's, listed or not.
   * @param now the clock for {@link HOST_ADDRESSES_MAX_AGE_MS}, ms; default `Date.now`
   */
  constructor(readHostAddresses: () => Iterable<string> = interfaceAddresses, now: () => number = Date.now) {
    this.#readHostAddresses = readHostAddresses;
    this.#now = now;
    this.#hostAddresses = new Set(readHostAddresses());
    this.#readAtMs = now();
  }

  /** Adds a listener once it is bound (adding the same one again changes nothing). */
  add(endpoint: ListeningEndpoint): void {
    const address = unmapIpv4(endpoint.address);
    const own = { ...endpoint, address };
    this.#ports.add(own.port);
    if (address === '0.0.0.0') this.#anyIPv4.set(own.port, own);
    else if (address === '::') this.#anyIPv6.set(own.port, own);
    else this.#exact.set(`${address} ${own.port}`, own);
  }

  /** Reads this host's interface addresses again (a reload calls it, and `match` when they may be stale). */
  refreshHostAddresses(): void {
    this.#hostAddresses = new Set(this.#readHostAddresses());
    this.#readAtMs = this.#now();
  }

  /** The listener `remoteAddress:remotePort` reaches, by the rule in the file comment; undefined for any other peer (or none yet). */
  match(remoteAddress: string | undefined, remotePort: number | undefined): ListeningEndpoint | undefined {
    if (remotePort === undefined || remoteAddress === undefined || !this.#ports.has(remotePort)) return undefined;
    const address = unmapIpv4(remoteAddress);
    const exact = this.#exact.get(`${address} ${remotePort}`);
    if (exact !== undefined) return exact;
    const isV4 = isIPv4(address);
    const unspecified = this.#anyIPv6.get(remotePort) ?? (isV4 ? this.#anyIPv4.get(remotePort) : undefined);
    if (unspecified === undefined) return undefined;
    if ((isV4 ? address.startsWith('127.') : address === '::1') || this.#hostAddresses.has(address)) return unspecified;
    if (this.#now() - this.#readAtMs < HOST_ADDRESSES_MAX_AGE_MS) return undefined;
    this.refreshHostAddresses(); // an address this host may have gained since
    return this.#hostAddresses.has(address) ? unspecified : undefined;
  }
}
