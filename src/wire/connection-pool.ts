/**
 * A keep-alive connection pool for upstreams, on raw `node:net` sockets (issue 5: node:http's
 * client Agent is where a Node proxy spends much of its time). One list of idle sockets per origin
 * (host, port), used last-in first-out like nginx's `keepalive` cache and Go's `http.Transport`: the
 * most recently used socket is the one least likely to have been closed by the upstream's idle
 * timeout, and the cold ones at the bottom age out.
 *
 * The get/free pair follows nginx's upstream peer API: `acquire` hands out a connected socket
 * (reused or new), `release` gives back one that may carry another request, `destroy` throws one
 * away. While a socket is idle the pool owns it: any byte or EOF from the upstream, an error, or
 * the idle timeout removes it. Idle sockets are unref'ed so they never keep the process alive.
 *
 * An upgrade request gets a connection of its own (`isForUpgrade`): new, half-open capable (a FIN
 * from the upstream ends only its direction of a tunnel), never pooled, read through `data` events
 * instead of the shared read buffer, and handed over for good with `detach` once the upstream
 * answered 101 (RFC 9110 §7.8): from then on it is a raw tunnel, no longer an HTTP connection.
 *
 * Stale connections (the race every keep-alive client has, RFC 9112 9.3.1): the upstream may close
 * an idle connection at the very moment we pick it and write a request into it. The write then
 * fails, or the socket ends/resets before any response byte arrives. That is not a failure of the
 * upstream. Like Go's transport (`persistConn.shouldRetryRequest`), the caller should retry such a
 * request once on a new connection when `connection.wasReused` is true and no response byte was
 * received, provided the request can be replayed (its body was not streamed away; for a
 * non-idempotent method only if the upstream cannot have seen it). The default idle timeout (4 s)
 * stays below node:http's server `keepAliveTimeout` (5 s) to make the race rare with Node upstreams.
 *
 * `https://` upstreams (`AcquireOptions.tls`): the same pool, the same rules, over `tls.connect`
 * sockets (which read into the same reused buffer). A connection is handed out once its TLS
 * handshake is done and the certificate verified (src/wire/tls-client.ts); `connect_timeout` covers
 * the TCP connect and the handshake together, one limit for "no usable connection yet", as Go's
 * `tls.DialWithDialer` applies a dialer's timeout to both (nginx's `proxy_connect_timeout` is the
 * TCP connect only, and Go's `http.Transport` gives the handshake a `TLSHandshakeTimeout` of its own). The idle lists are keyed by origin and the settings'
 * identity and the name TLS verifies (a discovered address serves its line's name: two names on one
 * address are two keys), so routes with different `tls_*` settings, or one address reached under
 * two names, never share a connection or a session. The last TLS session
 * per key is kept and offered to the next new connection (RFC 8446 section 2.2 tickets, RFC 5077 for
 * TLS 1.2), so only the first connection pays the full handshake; a session is kept only from a
 * connection whose certificate was accepted, since node does not check the name again on a
 * resumed session.
 *
 * A new connection to one of this proxy's own listeners (`ownListeners`, src/wire/own-listeners.ts:
 * a `pass` line, a DNS answer or a registry entry naming the proxy itself) is never made: an IP
 * literal is refused before connecting, a name's own addresses are left out of its lookup (the
 * others still tried; a name with nothing else left is refused without a lookup for
 * OWN_NAME_MEMORY_MS), and `acquire` rejects with `UpstreamLoopError`. The request would otherwise
 * come back in and be forwarded again, one new connection per hop. As a backstop, a connection whose
 * peer still turns out to be the proxy is destroyed right after its TCP connect, before a byte is
 * written. Checked once per new connection, never per request or on a reused one.
 *
 * Retiring a key (`retire`): when an address leaves every route (a DNS answer dropped it, a reload
 * or the registry removed it), its idle connections close at once and the ones in use close when
 * their exchange ends instead of going back to the idle list; its TLS session is forgotten. If the
 * address comes back later it starts with new connections. (nginx closes a removed peer's cached
 * `keepalive` connections as they come back to the cache; Envoy drains the connection pools of a
 * host that left a STRICT_DNS cluster the same way.)
 */
import net from 'node:net';
import tls from 'node:tls';
import { ProxyResourceError, UpstreamConnectError, UpstreamLoopError, UpstreamTimeoutError, UpstreamTlsError } from '../errors.js';
import { unrefTimers, type Timers } from '../timers.js';
import { plural } from '../log/plural.js';
import { tlsConnectOptions, tlsFailureReason, type TlsClientSettings } from './tls-client.js';
import { loopErrorFor, loopErrorOf, lookupAvoidingOwnListeners, type OwnListenerMatcher } from './own-listeners.js';

/** Timer functions, injected so tests drive the idle and connect timeouts without sleeping. */

/** Opens a TCP connection; `net.connect` by default, replaced in tests. */
export type ConnectFunction = (options: net.TcpNetConnectOpts) => net.Socket;

export interface ConnectionPoolOptions {
  /** Idle sockets kept per origin; releasing one more destroys the oldest idle one. Default 256. */
  readonly maxIdlePerOrigin?: number;
  /** How long an idle socket is kept, ms. Default 4000 (below node:http's 5 s server keep-alive). */
  readonly idleTimeoutMs?: number;
  readonly connect?: ConnectFunction;
  /** Default: the global timers, unref'ed. */
  readonly timers?: Timers;
  /** Clock in ms for the idle timeout (see `release`); default `performance.now`. Injected with `timers` in tests. */
  readonly now?: () => number;
  /** TLS sessions kept for resumption, one per origin and settings; the oldest goes first. Default 1024. */
  readonly maxSessions?: number;
  /** This proxy's own listeners: a new connection to one of them is refused (see the file comment). Default: none. */
  readonly ownListeners?: OwnListenerMatcher;
  /**
   * The most connections the pool may have open (connecting, in use or idle), asked before each new
   * connect: a cluster worker's share of its descriptors (src/process/descriptor-budget.ts). At the
   * limit the longest-idle connection of any origin is closed to make room; with none idle the
   * connect fails with ProxyResourceError. Default: no limit.
   */
  readonly maxOpen?: () => number;
  /**
   * The most open connections that read into a large buffer at once (`LARGE_READ_BUFFER_BYTES`
   * each); a large body on any other reads through its connection's small buffer, in more reads.
   * This bounds what concurrent large responses to slow clients hold: 128 × 512 KiB = 64 MiB by
   * default, where a buffer per connection would grow with every client.
   */
  readonly maxLargeReadBuffers?: number;
}

export interface AcquireOptions {
  /**
   * Time allowed for the TCP connect and, with `tls`, the TLS handshake, ms (SPEC `connect_timeout`).
   * 0 or Infinity: no limit.
   */
  readonly connectTimeoutMs: number;
  /** TLS settings for an `https://` upstream; undefined (default) = plain TCP. */
  readonly tls?: TlsClientSettings | undefined;
  /**
   * With `tls`, the name to send as SNI and verify when the settings name none
   * (`tls_server_name`): a discovered address's line host. Default: `host`.
   */
  readonly tlsName?: string | undefined;
  /** Aborts a pending connect (the client went away); the promise rejects with `signal.reason`. */
  readonly signal?: AbortSignal;
  /** Open a new connection even when an idle one is there (the retry after a stale one). */
  readonly isNewRequired?: boolean;
  /**
   * A new connection for an upgrade request (see the file comment): `allowHalfOpen`, its bytes as
   * fresh buffers (not views of a reused read buffer), never released to the idle list, and
   * `detach`able. Implies `isNewRequired`.
   */
  readonly isForUpgrade?: boolean;
}

/**
 * What an upstream exchange needs of the pool (src/wire/upstream-exchange.ts): the pool itself, or
 * a stand-in that hands out in-memory sockets (the request path's unit test).
 */
export type UpstreamTransport = Pick<ConnectionPool, 'acquireIdle' | 'acquire' | 'release' | 'destroy' | 'detach'>;

/** Counts for tests and status pages. */
export interface PoolStats {
  /** Sockets created by the pool and neither destroyed nor closed (connecting, in use or idle). */
  readonly open: number;
  /** Sockets waiting in idle lists. */
  readonly idle: number;
  /** Open connections reading into a large buffer (`LARGE_READ_BUFFER_BYTES`). */
  readonly largeReadBuffers: number;
  /** Large buffers given back by connections that went idle, kept for the next large body (at most 8). */
  readonly spareLargeReadBuffers: number;
}

/**
 * Whoever holds a connection gets its socket events through this object. The pool installs one set
 * of socket listeners per connection, for its whole life, and dispatches to the current handler —
 * adding and removing five listeners per request would cost more than the request's own parsing.
 * While a connection is idle it has no handler, and any byte, EOF or error drops it.
 */
export interface ConnectionHandler {
  /**
   * Bytes from the upstream. Over plain TCP `chunk` is a view of the connection's read buffer (see
   * `LARGE_READ_BUFFER_BYTES`), which the next read overwrites: copy what you keep past the call, and
   * pause the socket while a writer still holds a view (resume when it is done with it). Over TLS
   * it is a fresh buffer (see `connect`); the same rules hold, so the holder need not know which.
   */
  onData(chunk: Buffer): void;
  onEnd(): void;
  onError(error: Error): void;
  /** The socket closed (whoever closed it). Not called after the holder itself destroyed it. */
  onClose(): void;
  /** The socket was idle for the time given to `setIdleTimeout`. */
  onTimeout(): void;
}

/** One upstream TCP connection as handed out by the pool. */
export class UpstreamConnection {
  readonly socket: net.Socket;
  readonly host: string;
  readonly port: number;
  /**
   * True when this socket already carried an earlier request (it came from the idle list). A
   * reset or EOF before any response byte on such a connection is the stale-connection race, and
   * retryable (see the file comment).
   */
  wasReused = false;
  /** Its key was retired (`ConnectionPool.retire`) while it was in use: closed on release, never idle again. */
  isRetired = false;
  /** The pool's bookkeeping: handed out (connecting or carrying a request), neither released nor destroyed since. */
  isInUse = false;

  /** `host:port` (plus the TLS settings' identity and verified name: `poolKey`), the key of the origin's idle list. */
  readonly originKey: string;
  /** The holder's event handler; undefined while idle (or before the holder sets it). */
  handler: ConnectionHandler | undefined = undefined;
  /** Made for an upgrade request (`AcquireOptions.isForUpgrade`): never released, may be detached. */
  readonly isForUpgrade: boolean;
  /** The socket's idle timeout now in force, ms (0 = none). */
  #timeoutMs = 0;
  /** The pool's bookkeeping: when the connection went idle (`now`, ms); undefined while in use. */
  idleSince: number | undefined = undefined;
  /** The pool's bookkeeping: the handle of its idle timer, armed or undefined (see `ConnectionPool.release`). */
  idleTimer: unknown = undefined;
  /** The pool's bookkeeping: the large read buffer a plain connection reads into while it carries a large body (see `LARGE_READ_BUFFER_BYTES`). */
  largeReadBuffer: Buffer | undefined = undefined;

  /**
   * @param tls the settings of a TLS connection (its socket is a `tls.TLSSocket`); undefined for plain TCP
   * @param tlsName with `tls`, the name verified when the settings name none (default `host`)
   */
  constructor(socket: net.Socket, host: string, port: number, isForUpgrade = false, tls?: TlsClientSettings, tlsName?: string) {
    this.socket = socket;
    this.host = host;
    this.port = port;
    this.originKey = poolKey(host, port, tls, tlsName);
    this.isForUpgrade = isForUpgrade;
  }

  /**
   * The socket's inactivity limit, ms (`read_timeout`); `handler.onTimeout` is called when it
   * passes. Touches the socket only when the value changes: re-arming costs a timer operation.
   */
  setIdleTimeout(ms: number): void {
    if (ms === this.#timeoutMs) return;
    this.#timeoutMs = ms;
    this.socket.setTimeout(ms);
  }
}

/**
 * How long a name found to resolve only to this proxy's own listeners is refused without asking DNS
 * again, ms. Without it each request to such a name pays a system lookup (`getaddrinfo` on the
 * thread pool) that leads nowhere: a break test saw 3.3× fewer answers per second and other routes'
 * lookups queued behind them.
 */
export const OWN_NAME_MEMORY_MS = 1000;

/** At most this many such names are remembered (the oldest is forgotten first). */
const MAX_OWN_NAMES = 1024;

/**
 * Size of the read buffer each plain connection owns, bytes: 16 KiB, enough for the whole of most
 * responses (head and body) in one read. It is what an idle pooled connection holds.
 */
export const SMALL_READ_BUFFER_BYTES = 16 * 1024;

/**
 * Size of the read buffer a plain connection reads into while it carries a large body, bytes:
 * 512 KiB, eight times node's own read size. A large response body then crosses the proxy in few
 * reads and writes: on the AMD EPYC of earlier rounds 256 KiB took 12–19% less CPU per 1 MiB
 * response than 64 KiB, and 512 KiB no less than 256; on this round's Intel Xeon 512 KiB gave
 * 6–15% more 1 MiB responses per second than 256 KiB, 1 MiB buffers no more than 512 KiB
 * (docs/performance.md). A connection switches to one when a read fills its small buffer, and
 * gives it back when it is idle again after a read (see `nextReadBuffer`), so that pooled
 * connections do not each keep half a MiB: 200 of them, idle after a run of 1 MiB responses, held
 * 18 MiB more resident memory with 256 KiB buffers than with 16 KiB ones. At most
 * `ConnectionPoolOptions.maxLargeReadBuffers` connections hold one at a time.
 */
export const LARGE_READ_BUFFER_BYTES = 512 * 1024;

/** Large read buffers kept for the next large body once their connection is idle; more are left to the collector. */
const MAX_SPARE_LARGE_BUFFERS = 8;

/**
 * Keep-alive pool of upstream sockets, keyed by origin (and TLS settings).
 *
 * Contract for callers: after `acquire` resolves, set `connection.handler` before writing; the
 * socket is in flowing mode and its events reach the handler. Release only after a complete
 * response that allows keep-alive with no extra bytes (the pool clears the handler); otherwise
 * `destroy`.
 */
export class ConnectionPool {
  private readonly maxIdlePerOrigin: number;
  private readonly idleTimeoutMs: number;
  private readonly connectFunction: ConnectFunction;
  private readonly timers: Timers;
  private readonly now: () => number;
  private readonly maxSessions: number;
  /** Large read buffers of connections that went idle, for the next large body (see `nextReadBuffer` in `connect`). */
  private readonly spareLargeBuffers: Buffer[] = [];
  private readonly maxLargeReadBuffers: number;
  /** Open connections that hold a large read buffer (see `maxLargeReadBuffers`). */
  private largeReadBuffersHeld = 0;
  private readonly ownListeners: OwnListenerMatcher | undefined;
  private readonly maxOpen: (() => number) | undefined;

  /**
   * Names whose every address is one of this proxy's listeners (`host port` → until when, ms, and the
   * refusal), oldest first: for OWN_NAME_MEMORY_MS such a name is refused without a lookup.
   */
  private readonly ownNames = new Map<string, { readonly until: number; readonly error: UpstreamLoopError }>();
  /** The last TLS session per origin key (see the file comment), oldest first. */
  private readonly sessions = new Map<string, Buffer>();
  /**
   * Idle connections per origin, oldest first; `acquire` takes from the end (LIFO). A list that
   * empties stays (the next release refills it); `retire` drops its key's.
   */
  private readonly idle = new Map<string, UpstreamConnection[]>();
  /** Connections in the idle lists. */
  private idleCount = 0;
  /** Every connection not destroyed and whose socket has not emitted `close` yet. */
  private readonly open = new Set<UpstreamConnection>();
  /** Removes the pool's listeners from an upgrade connection's socket (see `detach`). */
  private readonly listenerRemovers = new Map<UpstreamConnection, () => void>();
  private isClosed = false;

  constructor(options: ConnectionPoolOptions = {}) {
    this.maxIdlePerOrigin = options.maxIdlePerOrigin ?? 256;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 4000;
    this.connectFunction = options.connect ?? net.connect;
    this.timers = options.timers ?? unrefTimers;
    this.now = options.now ?? (() => performance.now());
    this.maxSessions = options.maxSessions ?? 1024;
    this.ownListeners = options.ownListeners;
    this.maxOpen = options.maxOpen;
    this.maxLargeReadBuffers = options.maxLargeReadBuffers ?? 128;
  }

  /**
   * The most recently released live idle connection to `host:port` (over TLS with `tls`, made with
   * those settings and verifying `tlsName`, see `AcquireOptions.tlsName`), or undefined: the
   * synchronous half of `acquire`, for callers that set up cancellation only when they must wait
   * for a connect.
   */
  acquireIdle(host: string, port: number, tls?: TlsClientSettings, tlsName?: string): UpstreamConnection | undefined {
    return this.isClosed ? undefined : this.takeIdle(poolKey(host, port, tls, tlsName));
  }

  /**
   * Hands out a connected socket to `host:port`: the most recently released live idle one, or a
   * new connection (`autoSelectFamily`, so `localhost` works whether it resolves to 127.0.0.1 or
   * ::1; Nagle off). With `options.tls`, a TLS connection whose handshake is done and whose
   * certificate was accepted.
   *
   * @throws UpstreamConnectError when the connect fails (`connect ECONNREFUSED 127.0.0.1:9001`) or
   *   the pool is closed.
   * @throws ProxyResourceError when this process lacks what the connect needs (`connect EMFILE
   *   127.0.0.1:9001`), or `maxOpen` connections are open and none is idle.
   * @throws UpstreamLoopError when the new connection reached one of `ownListeners`.
   * @throws UpstreamTlsError (phase `handshake`) when the TLS handshake fails or the certificate
   *   does not verify (`certificate has expired`).
   * @throws UpstreamTimeoutError (phase `connect`) after `connectTimeoutMs`.
   * @throws `signal.reason` when the signal aborts first.
   */
  acquire(host: string, port: number, options: AcquireOptions): Promise<UpstreamConnection> {
    if (this.isClosed) return Promise.reject(new UpstreamConnectError('upstream pool is closed'));
    if (options.signal?.aborted) return Promise.reject(options.signal.reason);
    const isNewRequired = options.isNewRequired === true || options.isForUpgrade === true;
    const reused = isNewRequired ? undefined : this.takeIdle(poolKey(host, port, options.tls, options.tlsName));
    if (reused !== undefined) return Promise.resolve(reused);
    return this.connect(host, port, options);
  }

  /**
   * Gives back a connection whose response completed and allows keep-alive. It becomes idle for
   * `idleTimeoutMs`; a socket that is no longer usable, or has unread bytes, is destroyed instead.
   * Releasing a connection that is not in use does nothing.
   *
   * The idle timeout is a lazily re-armed timer, one per connection: release notes the time
   * (`idleSince`) and arms the timer only if none is armed; taking the connection leaves the timer
   * alone. When it fires, a connection idle for the whole timeout is destroyed, one idle for less
   * gets the timer re-armed for the rest, one in use gets none until its next release. A busy
   * connection so costs no timer calls per request (a setTimeout and a clearTimeout per request
   * before: about 1,100 → 600 ns per take-and-release, measured alone).
   */
  release(connection: UpstreamConnection): void {
    if (connection.isForUpgrade) {
      this.destroy(connection);
      return;
    }
    if (!connection.isInUse) return;
    connection.isInUse = false;
    connection.handler = undefined; // from now on any byte, EOF or error drops it (see connect)
    const socket = connection.socket;
    if (this.isClosed || connection.isRetired || !isUsable(socket) || socket.readableLength > 0) {
      this.destroy(connection);
      return;
    }
    if (socket.isPaused()) socket.resume(); // flowing, so that bytes and EOF are noticed
    connection.idleSince = this.now();
    if (connection.idleTimer === undefined) this.armIdleTimer(connection, this.idleTimeoutMs);

    let list = this.idle.get(connection.originKey);
    if (list === undefined) {
      list = [];
      this.idle.set(connection.originKey, list);
    }
    list.push(connection);
    this.idleCount++;
    if (list.length > this.maxIdlePerOrigin) this.destroy(list[0] as UpstreamConnection);
  }

  /**
   * Hands an upgrade connection's socket over for good (after the upstream's 101): the pool forgets
   * it and removes its listeners and idle timeout; the caller owns the socket from now on (its
   * errors included). Bytes already read were given to the handler.
   * @throws Error when the connection was not made with `isForUpgrade`.
   */
  detach(connection: UpstreamConnection): net.Socket {
    const removeListeners = this.listenerRemovers.get(connection);
    if (removeListeners === undefined) throw new Error('only a connection made for an upgrade request can be detached');
    this.listenerRemovers.delete(connection);
    removeListeners();
    connection.handler = undefined;
    this.open.delete(connection);
    connection.isInUse = false;
    connection.socket.setTimeout(0);
    return connection.socket;
  }

  /** Closes a connection at once (after an error, or when it may not be reused). Idempotent. */
  destroy(connection: UpstreamConnection): void {
    connection.handler = undefined;
    this.listenerRemovers.delete(connection);
    this.open.delete(connection);
    connection.isInUse = false;
    this.removeIdle(connection);
    // Its large buffer is not a spare: a client may still be writing from a view of it.
    this.dropLargeReadBuffer(connection);
    if (connection.idleTimer !== undefined) {
      this.timers.clearTimeout(connection.idleTimer);
      connection.idleTimer = undefined;
    }
    const socket = connection.socket;
    if (!socket.destroyed) {
      socket.on('error', ignoreError); // a late error of a socket we gave up on is not news
      socket.destroy();
    }
  }

  /**
   * Retires the key of `host:port` with `tls` and `tlsName` (the arguments of `acquire`): its idle
   * connections are closed now, those in use (or connecting) when they are released, and its TLS
   * session is forgotten. Later `acquire`s open new connections as usual. For an address that no
   * route uses any more (see the file comment).
   */
  retire(host: string, port: number, tls?: TlsClientSettings, tlsName?: string): void {
    const key = poolKey(host, port, tls, tlsName);
    for (const connection of [...(this.idle.get(key) ?? [])]) this.destroy(connection);
    this.idle.delete(key);
    for (const connection of this.open) if (connection.isInUse && connection.originKey === key) connection.isRetired = true;
    this.sessions.delete(key);
  }

  /** Destroys every connection, idle or in use. Resolves when all their sockets have closed. Later `acquire`s reject. */
  close(): Promise<void> {
    this.isClosed = true;
    const closing = [...this.open].map((connection) =>
      connection.socket.closed ? undefined : new Promise<void>((resolve) => connection.socket.once('close', () => resolve())),
    );
    for (const connection of [...this.open]) this.destroy(connection);
    return Promise.all(closing).then(() => undefined);
  }

  stats(): PoolStats {
    let largeReadBuffers = 0;
    for (const connection of this.open) if (connection.largeReadBuffer !== undefined) largeReadBuffers++;
    return { open: this.open.size, idle: this.idleCount, largeReadBuffers, spareLargeReadBuffers: this.spareLargeBuffers.length };
  }

  // ---- helpers ----------------------------------------------------------------------------------

  /** Pops live idle connections of an origin, newest first, destroying dead ones on the way. */
  private takeIdle(key: string): UpstreamConnection | undefined {
    const list = this.idle.get(key);
    while (list !== undefined && list.length > 0) {
      const connection = list.pop() as UpstreamConnection; // the newest: no search through the list
      this.idleCount--;
      connection.idleSince = undefined; // its idle timer stays armed (see `release`)
      if (!isUsable(connection.socket) || connection.socket.readableLength > 0) {
        this.destroy(connection);
        continue;
      }
      connection.wasReused = true;
      connection.isInUse = true;
      return connection;
    }
    return undefined;
  }

  /**
   * True when fewer than `maxOpen` connections are open, after closing the longest-idle ones (of
   * any origin) while there are too many (ConnectionPoolOptions.maxOpen).
   */
  private makeRoom(maxOpen: number): boolean {
    while (this.open.size >= maxOpen) {
      let oldest: UpstreamConnection | undefined;
      for (const list of this.idle.values()) {
        const first = list[0];
        if (first !== undefined && (oldest === undefined || first.idleSince! < oldest.idleSince!)) oldest = first;
      }
      if (oldest === undefined) return false;
      this.destroy(oldest);
    }
    return true;
  }

  /** Takes a connection off its idle list, if it is idle. */
  private removeIdle(connection: UpstreamConnection): void {
    if (connection.idleSince === undefined) return;
    connection.idleSince = undefined;
    const list = this.idle.get(connection.originKey) as UpstreamConnection[];
    list.splice(list.indexOf(connection), 1);
    this.idleCount--;
  }

  /** Forgets a connection's large read buffer, if it holds one (see `maxLargeReadBuffers`). */
  private dropLargeReadBuffer(connection: UpstreamConnection): void {
    if (connection.largeReadBuffer === undefined) return;
    connection.largeReadBuffer = undefined;
    this.largeReadBuffersHeld--;
  }

  /** Arms a connection's idle timer for `ms` (see `release`). */
  private armIdleTimer(connection: UpstreamConnection, ms: number): void {
    connection.idleTimer = this.timers.setTimeout(() => {
      connection.idleTimer = undefined;
      if (connection.idleSince === undefined) return; // in use (or gone): the next release arms it
      const idleMs = this.now() - connection.idleSince;
      if (idleMs >= this.idleTimeoutMs) this.destroy(connection);
      else this.armIdleTimer(connection, this.idleTimeoutMs - idleMs);
    }, ms);
  }

  /** Opens a new connection, with the connect timeout and the abort signal. */
  private connect(host: string, port: number, options: AcquireOptions): Promise<UpstreamConnection> {
    return new Promise((resolve, reject) => {
      // One of this proxy's own listeners is refused before a connection is made: an IP literal
      // here, a name's addresses in `lookup` (see the file comment).
      const loop = loopErrorFor(host, port, this.ownListeners) ?? this.knownOwnName(host, port);
      if (loop !== undefined) return reject(loop);
      if (this.maxOpen !== undefined && !this.makeRoom(this.maxOpen())) {
        return reject(new ProxyResourceError(`connect ${formatOrigin(host, port)}: no descriptor left in the budget (${plural(this.open.size, 'upstream connection')} open, none idle)`));
      }
      const lookup = lookupAvoidingOwnListeners(port, this.ownListeners);
      const isForUpgrade = options.isForUpgrade === true;
      const tlsSettings = options.tls;
      const tlsName = options.tlsName ?? host;
      const key = poolKey(host, port, tlsSettings, tlsName);
      let socket: net.Socket;
      if (isForUpgrade) {
        socket = this.openSocket({ host, port, lookup, autoSelectFamily: true, noDelay: true, allowHalfOpen: true }, key, tlsSettings, tlsName);
      } else if (tlsSettings !== undefined) {
        // No shared read buffer over TLS: a TLSSocket given `onread` keeps handing over bytes it had
        // already decrypted after `pause()`, which would overwrite a view a writer still holds (the
        // body of a response to a slow client). Its `data` events bring fresh buffers, and `pause()`
        // stops them.
        socket = this.openSocket({ host, port, lookup, autoSelectFamily: true, noDelay: true }, key, tlsSettings, tlsName);
      } else {
        // Reads go into a buffer the connection keeps, reused read after read, instead of a new
        // buffer per read: no allocation and no garbage per read, so a fast stream of large bodies
        // neither grows the process (freed buffers wait for the garbage collector) nor faults in
        // fresh pages all the time. The price is the rule on `ConnectionHandler.onData`.
        const smallBuffer = Buffer.allocUnsafe(SMALL_READ_BUFFER_BYTES);
        let hasRead = false;
        let wasFilled = false;
        const onRead = (bytes: number, buffer: Buffer): boolean => {
          hasRead = true;
          wasFilled = bytes === buffer.length;
          const chunk = buffer.subarray(0, bytes);
          if (connection.handler === undefined) this.destroy(connection);
          else connection.handler.onData(chunk);
          return true; // a handler that must stop reading pauses the socket itself
        };
        // Node asks for the buffer of the next read at the start and after every read (net.Socket's
        // `onread.buffer` as a function). The small one, unless the last read filled it while the
        // connection is in use: a large body is coming, and gets the large one. That goes back to
        // the spares once the connection is idle in its list; only then, because a released
        // connection's views are gone (a holder releases it only when it holds none: the client
        // response copies what it still queues, Http1Response `#flush`), while one destroyed in use
        // may leave a view with a client that is still writing.
        const nextReadBuffer = (): Buffer => {
          if (!hasRead) return smallBuffer; // the first call comes before `connection` below exists
          const largeBuffer = connection.largeReadBuffer;
          if (largeBuffer === undefined) {
            if (!wasFilled || connection.handler === undefined || this.largeReadBuffersHeld >= this.maxLargeReadBuffers) return smallBuffer;
            connection.largeReadBuffer = this.spareLargeBuffers.pop() ?? Buffer.allocUnsafe(LARGE_READ_BUFFER_BYTES);
            this.largeReadBuffersHeld++;
            return connection.largeReadBuffer;
          }
          if (connection.idleSince === undefined) return largeBuffer; // in use
          if (this.spareLargeBuffers.length < MAX_SPARE_LARGE_BUFFERS) this.spareLargeBuffers.push(largeBuffer);
          this.dropLargeReadBuffer(connection);
          return smallBuffer;
        };
        socket = this.openSocket({ host, port, lookup, autoSelectFamily: true, noDelay: true, onread: { buffer: nextReadBuffer, callback: onRead } }, key, tlsSettings, tlsName);
      }
      const connection = new UpstreamConnection(socket, host, port, isForUpgrade, tlsSettings, tlsName);
      // A pooled socket never keeps the process alive, idle or not (no `ref` and `unref` per
      // request, each a call into node's C++): a request in flight has its client's connection,
      // which does, and a closed pool destroys every socket. An upgrade's socket goes to a tunnel.
      if (!isForUpgrade) socket.unref();
      this.open.add(connection);
      connection.isInUse = true;
      // The connection's one set of listeners (and `onRead` above), for its whole life: to the
      // holder's handler, or, while idle, anything at all drops the connection (the upstream may
      // not speak first).
      const onEnd = (): void => (connection.handler === undefined ? this.destroy(connection) : connection.handler.onEnd());
      const onSocketError = (error: Error): void => (connection.handler === undefined ? this.destroy(connection) : connection.handler.onError(error));
      const onTimeout = (): void => connection.handler?.onTimeout();
      const onSocketClose = (): void => {
        const handler = connection.handler;
        this.destroy(connection); // forget it wherever it is
        handler?.onClose();
      };
      socket.on('end', onEnd);
      socket.on('error', onSocketError);
      socket.on('timeout', onTimeout);
      socket.once('close', onSocketClose);
      if (tlsSettings !== undefined && !isForUpgrade) {
        socket.on('data', (chunk: Buffer): void => {
          if (connection.handler === undefined) this.destroy(connection);
          else connection.handler.onData(chunk);
        });
      }
      if (isForUpgrade) {
        const onData = (chunk: Buffer): void => connection.handler?.onData(chunk);
        socket.on('data', onData);
        this.listenerRemovers.set(connection, () => {
          socket.off('data', onData);
          socket.off('end', onEnd);
          socket.off('error', onSocketError);
          socket.off('timeout', onTimeout);
          socket.off('close', onSocketClose);
        });
      }

      const { connectTimeoutMs, signal } = options;
      // A TLS socket emits `connect` when TCP is up and `secureConnect` once the handshake is done
      // and the certificate accepted: an error in between is the handshake's.
      let isTcpConnected = false;
      const readyEvent = tlsSettings === undefined ? 'connect' : 'secureConnect';
      const hasTimeout = connectTimeoutMs > 0 && Number.isFinite(connectTimeoutMs);
      const timer = hasTimeout
        ? this.timers.setTimeout(() => {
            const during = isTcpConnected ? ' (during the TLS handshake)' : '';
            fail(new UpstreamTimeoutError(`connect timeout after ${connectTimeoutMs} ms to ${formatOrigin(host, port)}${during}`, 'connect'));
          }, connectTimeoutMs)
        : undefined;
      const onAbort = (): void => fail(signal?.reason);
      const onError = (error: Error): void => {
        if (error instanceof UpstreamLoopError) this.rememberOwnName(host, port, error);
        fail(error instanceof UpstreamLoopError ? error : isTcpConnected ? new UpstreamTlsError(tlsFailureReason(error), 'handshake', formatOrigin(host, port)) : toConnectError(error, host, port));
      };
      // The peer is known once TCP is up: a loop back into this proxy ends here (see the file comment).
      const onTcpConnect = (): void => {
        const loop = loopErrorOf(socket, this.ownListeners);
        if (loop !== undefined) return fail(loop);
        isTcpConnected = true;
      };
      const onClose = (): void => fail(new UpstreamConnectError(`connect to ${formatOrigin(host, port)} aborted: the pool was closed`));
      const onConnect = (): void => {
        if (tlsSettings === undefined) {
          const loop = loopErrorOf(socket, this.ownListeners);
          if (loop !== undefined) return fail(loop);
        }
        cleanup();
        socket.setNoDelay(true);
        resolve(connection);
      };
      const cleanup = (): void => {
        if (hasTimeout) this.timers.clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        socket.off('error', onError);
        socket.off('close', onClose);
        socket.off(readyEvent, onConnect);
        if (tlsSettings !== undefined) socket.off('connect', onTcpConnect);
      };
      const fail = (error: unknown): void => {
        cleanup();
        this.destroy(connection);
        reject(error);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      socket.once('error', onError);
      socket.once('close', onClose); // destroyed by close() while connecting
      socket.once(readyEvent, onConnect);
      if (tlsSettings !== undefined) socket.once('connect', onTcpConnect);
    });
  }

  /**
   * A new socket: plain TCP with `connectFunction`, or `tls.connect` with the settings' options
   * (SNI and the verified name: the settings' `serverName`, else `tlsName`) and the last session of
   * `key` to resume. Every session the connection receives (TLS 1.3 sends its
   * tickets after the handshake, TLS 1.2 during it) replaces the kept one. Node emits `session` only
   * once the certificate was accepted (it holds back one that came earlier), so a connection that
   * was refused leaves none behind.
   */
  /** A name whose every address was one of this proxy's listeners less than OWN_NAME_MEMORY_MS ago: its refusal, without a new lookup. */
  private knownOwnName(host: string, port: number): UpstreamLoopError | undefined {
    const key = `${host} ${port}`;
    const known = this.ownNames.get(key);
    if (known === undefined) return undefined;
    if (this.now() < known.until) return new UpstreamLoopError(known.error.peer, known.error.listener);
    this.ownNames.delete(key);
    return undefined;
  }

  private rememberOwnName(host: string, port: number, error: UpstreamLoopError): void {
    const key = `${host} ${port}`;
    this.ownNames.delete(key); // re-inserted last: the map's order is the age
    this.ownNames.set(key, { until: this.now() + OWN_NAME_MEMORY_MS, error });
    if (this.ownNames.size > MAX_OWN_NAMES) this.ownNames.delete(this.ownNames.keys().next().value as string);
  }

  private openSocket(options: net.TcpNetConnectOpts, key: string, settings: TlsClientSettings | undefined, tlsName: string): net.Socket {
    if (settings === undefined) return this.connectFunction(options);
    const socket = tls.connect({ ...options, ...tlsConnectOptions(settings, tlsName), session: this.sessions.get(key) });
    socket.on('session', (session: Buffer) => this.keepSession(key, session));
    return socket;
  }

  private keepSession(key: string, session: Buffer): void {
    this.sessions.delete(key); // re-inserted last: the map's order is the age
    this.sessions.set(key, session);
    if (this.sessions.size > this.maxSessions) this.sessions.delete(this.sessions.keys().next().value as string);
  }
}

/** True when the socket is connected and neither side has ended it. */
function isUsable(socket: net.Socket): boolean {
  return !socket.destroyed && socket.readyState === 'open' && !socket.readableEnded && !socket.writableEnded;
}

/**
 * The pool's key: `host:port`, and for TLS the settings' identity and the name it verifies (the
 * settings' `serverName`, else `tlsName`, else `host`) after spaces (never part of a host).
 */
export function poolKey(host: string, port: number, tls?: TlsClientSettings, tlsName?: string): string {
  if (tls !== undefined) return `${host}:${port} ${tls.identity} ${tls.serverName ?? tlsName ?? host}`;
  let keys = plainKeys.get(host);
  let key = keys?.get(port);
  if (key !== undefined) return key;
  if (plainKeyCount >= MAX_PLAIN_KEYS) {
    plainKeys.clear();
    plainKeyCount = 0;
    keys = undefined;
  }
  if (keys === undefined) {
    keys = new Map();
    plainKeys.set(host, keys);
  }
  key = `${host}:${port}`;
  keys.set(port, key);
  plainKeyCount++;
  return key;
}

/**
 * The plain keys made so far, per host and port: every request looks its origin's idle list up by
 * key, and a key built anew is a string V8 must flatten, hash and compare byte by byte, where one
 * made once has its hash kept (with the in-use flag, 2% of a small GET's instructions,
 * docs/performance.md). Emptied when it holds MAX_PLAIN_KEYS keys: discovery and the registry can
 * bring new addresses forever.
 */
const plainKeys = new Map<string, Map<number, string>>();
let plainKeyCount = 0;
const MAX_PLAIN_KEYS = 4096;

function formatOrigin(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * `connect ECONNREFUSED 127.0.0.1:9001`: the errno code and the address tried (the first one
 * when `autoSelectFamily` tried several and got an AggregateError).
 */
function toConnectError(error: Error, host: string, port: number): UpstreamConnectError | ProxyResourceError {
  const first = error instanceof AggregateError ? (error.errors[0] as Error | undefined) : error;
  const details = (first ?? error) as NodeJS.ErrnoException & { address?: string; port?: number };
  const code = (error as NodeJS.ErrnoException).code ?? details.code ?? 'ERROR';
  const message = `connect ${code} ${formatOrigin(details.address ?? host, details.port ?? port)}`;
  const connectError = isProxyShortage(error) ? new ProxyResourceError(message) : new UpstreamConnectError(message);
  connectError.cause = error;
  return connectError;
}

/**
 * The errno codes of a connect that failed for want of this process's or this machine's resources
 * (ProxyResourceError). Not EADDRNOTAVAIL: it also says that the destination cannot be reached
 * (`::1` where IPv6 is off), and a free local port is chosen per destination anyway (a review).
 */
const PROXY_SHORTAGE_CODES = new Set(['EMFILE', 'ENFILE', 'ENOBUFS', 'ENOMEM']);

/** Whether a connect error is the proxy's own shortage: its code, or every code when `autoSelectFamily` tried several addresses. */
export function isProxyShortage(error: unknown): boolean {
  if (error instanceof AggregateError) return error.errors.length > 0 && error.errors.every((each) => isProxyShortage(each));
  return PROXY_SHORTAGE_CODES.has((error as NodeJS.ErrnoException | undefined)?.code ?? '');
}

function ignoreError(): void {}
