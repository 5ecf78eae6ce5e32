/**
 * The fast lane (issue 5): the proxy's own HTTP/1.1 server side for the common request, beside
 * node:http for everything else.
 *
 * Most requests a proxy sees are simple: a complete head in one read, HTTP/1.1, no body, no
 * upgrade. For those, node:http's server machinery (IncomingMessage and ServerResponse streams,
 * per-request timers and bookkeeping) costs as much as the whole rest of the proxy. So the proxy's
 * http.Server still listens, but each new connection goes to a `FastLaneConnection` first. It reads
 * the bytes itself and, for each request in turn:
 *
 *   1. parses the head with the strict parser of src/http/request-parser.ts (a head that arrives
 *      in pieces is parsed again as each piece comes);
 *   2. a simple request → builds a `FastLaneRequest`/`FastLaneResponse` pair (the same interfaces
 *      as node's objects, src/http/client-exchange.ts) and hands it to the request path;
 *   3. anything else has its request line's version judged first (src/http/request-line-version.ts,
 *      RFC 9110 §2.5): another major version (`HTTP/2.0`, the HTTP/2 preface `PRI * HTTP/2.0`) gets
 *      505 and a line that has no HTTP-version 400, both closing the connection; `HTTP/1.2` …
 *      `HTTP/1.9` is read as HTTP/1.1, from step 1 again;
 *   4. the rest — a body, Expect, Upgrade, HTTP/1.0, any byte the parser is not sure of, a head
 *      longer than `maxHeadBytes` — hands the connection to node:http for good: the unread bytes go back into
 *      the socket (`unshift`) and node's own connection listener takes over, exactly as if node had
 *      accepted the connection. node then answers 400/408/431, streams bodies, upgrades, and so on.
 *
 * So the fast lane decides no hard case but the version, which node:http would read otherwise
 * (llhttp serves `HTTP/2.0` and refuses `HTTP/1.2`): it only recognises easy ones. Requests on one
 * connection are answered one at a time, in order (RFC 9112 §9.3.2); pipelined bytes wait.
 *
 * Timeouts, as node's server applies them (Node 20, lib/_http_server.js): a head not complete
 * within `headTimeoutMs` — counted from the connection's start for its first request, from the
 * head's first byte for later ones — gets `onBadHead(socket, 408)`; an idle keep-alive connection
 * is closed silently `KEEP_ALIVE_GRACE_MS` after the `keepAliveTimeoutMs` it announced. One interval checks all connections (like node's
 * `connectionsCheckingInterval`), so a request costs no timer calls. A client that closes its side
 * in the middle of a head gets `onBadHead(socket, 400)`, as node's parser reports it.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { combineHeaders, type ClientRequest, type ClientResponse } from './client-exchange.js';
import { FastLaneResponse, type ResponseConnection } from './fast-lane-response.js';
import { parseRequestHead, type RequestHead } from './request-parser.js';
import { readRequestLineVersion, withHttp11Version } from './request-line-version.js';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * An idle keep-alive connection is closed this long after the `Keep-Alive: timeout` it announced,
 * ms, so that a client which trusts the announcement never sends into a closing connection (node
 * 20's `HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER`, lib/_http_server.js).
 */
export const KEEP_ALIVE_GRACE_MS = 1000;

/**
 * After this many reads of a head still incomplete, the pieces are only collected, and the head is
 * parsed again (from its start) only when a piece brings a LF: it cannot end without one. A few
 * pieces (a head split across TCP segments) cost little to re-parse; a head sent a byte at a time
 * would otherwise cost quadratic work. (Handing it to node:http instead would restart the head
 * timeout there.)
 */
export const MAX_HEAD_PIECES = 4;
const LF = 0x0a;

export interface FastLaneOptions {
  /** Every simple request; never throws. */
  readonly onRequest: (clientReq: ClientRequest, clientRes: ClientResponse) => void;
  /**
   * No complete head in time (408), the client ended the connection in the middle of one (400), or
   * a request line whose version the proxy does not serve (505, or 400 when it is no HTTP-version):
   * answer `status` and close the socket (what node's `clientError` handler does).
   */
  readonly onBadHead: (socket: Socket, status: 400 | 408 | 505) => void;
  /** True while the server shuts down: every response closes its connection. */
  readonly isDraining: () => boolean;
  /** Time a new connection has for its first request head, ms (node's `headersTimeout`). 0: none. */
  readonly headTimeoutMs: number;
  /** Idle time between requests, ms, announced as `Keep-Alive: timeout` (node's `keepAliveTimeout`); the connection closes `KEEP_ALIVE_GRACE_MS` later. 0: no limit. */
  readonly keepAliveTimeoutMs: number;
  /** Heads longer than this go to node:http, bytes (half of `max_header_size`: node judges near the limit). */
  readonly maxHeadBytes: number;
  /** Clock for the idle checks, ms. Default `performance.now`. */
  readonly now?: () => number;
}

export class FastLane {
  readonly #server: Server;
  readonly #options: FastLaneOptions;
  readonly #now: () => number;
  /** node:http's own connection listener, for the connections handed over. */
  readonly #nodeConnectionListener: (socket: Socket) => void;
  readonly #connections = new Set<FastLaneConnection>();
  #checker: NodeJS.Timeout | undefined;
  /** Requests the fast lane answered itself. */
  requestCount = 0;
  /** Connections given to node:http. */
  handOverCount = 0;

  /**
   * Takes over `server`'s new connections. Throws when the server's `connection` listeners are not
   * node's one (the fast lane must be installed right after `http.createServer`).
   */
  constructor(server: Server, options: FastLaneOptions) {
    const listeners = server.listeners('connection');
    if (listeners.length !== 1) throw new Error(`fast lane: expected node's one connection listener, found ${listeners.length}`);
    this.#server = server;
    this.#options = options;
    this.#now = options.now ?? (() => performance.now());
    this.#nodeConnectionListener = listeners[0] as (socket: Socket) => void;
    server.removeListener('connection', this.#nodeConnectionListener);
    server.on('connection', (socket: Socket) => this.#connections.add(new FastLaneConnection(socket, this)));
    server.on('listening', () => this.#startChecks());
    server.on('close', () => this.#stopChecks());
  }

  get options(): FastLaneOptions {
    return this.#options;
  }

  now(): number {
    return this.#now();
  }

  /** Connections the fast lane still holds (not handed to node, not closed). */
  get size(): number {
    return this.#connections.size;
  }

  /** Gives `socket` to node:http, with `unread` bytes put back in front of whatever comes next. */
  handOver(connection: FastLaneConnection, socket: Socket, unread: Buffer | undefined): void {
    this.#connections.delete(connection);
    this.handOverCount++;
    if (unread !== undefined && unread.length > 0) socket.unshift(unread);
    this.#nodeConnectionListener.call(this.#server, socket);
    socket.resume();
  }

  forget(connection: FastLaneConnection): void {
    this.#connections.delete(connection);
  }

  /** Closes every connection with no request in flight (graceful shutdown). */
  closeIdleConnections(): void {
    for (const connection of this.#connections) connection.closeIfIdle();
  }

  /** Destroys every connection (shutdown time is up). */
  closeAllConnections(): void {
    for (const connection of this.#connections) connection.destroy();
  }

  /** Applies the head and keep-alive timeouts; runs every `checkIntervalMs`. */
  checkTimeouts(): void {
    const now = this.#now();
    for (const connection of this.#connections) connection.checkTimeout(now);
  }

  #startChecks(): void {
    const { headTimeoutMs, keepAliveTimeoutMs } = this.#options;
    const shortest = Math.min(headTimeoutMs || Infinity, keepAliveTimeoutMs || Infinity);
    if (shortest === Infinity || this.#checker !== undefined) return;
    const checkIntervalMs = Math.max(50, Math.min(1000, Math.floor(shortest / 4)));
    this.#checker = setInterval(() => this.checkTimeouts(), checkIntervalMs);
    this.#checker.unref();
  }

  #stopChecks(): void {
    clearInterval(this.#checker);
    this.#checker = undefined;
  }
}

/** One client connection while the fast lane holds it. */
export class FastLaneConnection implements ResponseConnection {
  readonly socket: Socket;
  readonly #lane: FastLane;
  /** Bytes received and not yet parsed (pipelined requests, or what arrived while busy). */
  #unread: Buffer | undefined;
  /** The response in flight; undefined while idle. */
  #response: FastLaneResponse | undefined;
  /** No request has started on this connection yet. */
  #isFresh = true;
  /** When the last response finished (or the connection opened), ms. */
  #idleSince: number;
  /** When the first byte of a head still incomplete arrived, ms; undefined when there is none. */
  #headStartedAt: number | undefined;
  /** Reads that brought pieces of the head still incomplete. */
  #headPieces = 0;
  /** After `MAX_HEAD_PIECES`: the pieces of the incomplete head, not joined yet, and their size. */
  #trickle: Buffer[] | undefined;
  #trickleBytes = 0;
  readonly #onData = (chunk: Buffer): void => this.#receive(chunk);
  readonly #onEnd = (): void => this.#onClientEnd();
  readonly #onClose = (): void => this.#onSocketClose();
  readonly #onDrain = (): void => this.#response?.onSocketDrain();

  constructor(socket: Socket, lane: FastLane) {
    this.socket = socket;
    this.#lane = lane;
    this.#idleSince = lane.now();
    socket.on('data', this.#onData);
    socket.on('end', this.#onEnd);
    socket.on('close', this.#onClose);
    socket.on('drain', this.#onDrain);
    socket.on('error', ignoreError); // reported through 'close'
  }

  onResponseFinished(isLast: boolean): void {
    this.#response = undefined;
    if (isLast || this.#lane.options.isDraining()) {
      this.socket.destroySoon();
      return;
    }
    this.#idleSince = this.#lane.now();
    const unread = this.#unread;
    this.#unread = undefined;
    if (this.socket.isPaused()) this.socket.resume();
    if (unread !== undefined) this.#receive(unread);
  }

  closeIfIdle(): void {
    if (this.#response === undefined) this.socket.destroySoon();
  }

  destroy(): void {
    this.socket.destroy();
  }

  checkTimeout(now: number): void {
    if (this.#response !== undefined) return;
    const { headTimeoutMs, keepAliveTimeoutMs } = this.#lane.options;
    if (this.#isFresh || this.#headStartedAt !== undefined) {
      const since = this.#isFresh ? this.#idleSince : this.#headStartedAt!;
      if (headTimeoutMs > 0 && now - since >= headTimeoutMs) this.#refuseHead(408);
    } else if (keepAliveTimeoutMs > 0 && now - this.#idleSince >= keepAliveTimeoutMs + KEEP_ALIVE_GRACE_MS) {
      this.socket.destroy();
    }
  }

  #receive(chunk: Buffer): void {
    if (this.#response !== undefined) {
      // Busy: keep the bytes for after this response; stop reading if the client sends a lot.
      this.#unread = this.#unread === undefined ? chunk : Buffer.concat([this.#unread, chunk]);
      if (this.#unread.length > this.#lane.options.maxHeadBytes) this.socket.pause();
      return;
    }
    if (this.#trickle !== undefined) {
      this.#trickle.push(chunk);
      this.#trickleBytes += chunk.length;
      if (chunk.indexOf(LF) === -1 && this.#trickleBytes < this.#lane.options.maxHeadBytes) return; // cannot have ended
      chunk = Buffer.concat(this.#trickle);
      this.#trickle = undefined;
    }
    const bytes = this.#unread === undefined ? chunk : Buffer.concat([this.#unread, chunk]);
    this.#unread = undefined;
    this.#readHead(bytes);
  }

  /** The head at the start of `bytes`: wait for the rest, start a simple request, or judge it further. */
  #readHead(bytes: Buffer): void {
    const parse = parseRequestHead(bytes, 0, { maxHeadBytes: this.#lane.options.maxHeadBytes });
    if (parse.kind === 'incomplete') {
      this.#awaitRest(bytes);
      return;
    }
    // empty lines before the request line (skipped by the parser) are node's, as before
    if (parse.kind === 'invalid' || bytes[0] === LF || bytes[0] === 0x0d /* CR */ || !isSimpleHead(parse.head)) {
      this.#readOtherHead(bytes);
      return;
    }
    if (parse.end < bytes.length) this.#unread = bytes.subarray(parse.end);
    this.#isFresh = false;
    this.#headStartedAt = undefined;
    this.#headPieces = 0;
    this.#start(parse.head);
  }

  #start(head: RequestHead): void {
    const clientReq = new FastLaneRequest(head, this.socket);
    const clientRes = new FastLaneResponse(this, {
      method: head.method,
      shouldKeepAlive: head.isKeepAlive && !this.#lane.options.isDraining(),
      keepAliveTimeoutMs: this.#lane.options.keepAliveTimeoutMs,
    });
    this.#response = clientRes;
    this.#lane.requestCount++;
    this.#lane.options.onRequest(clientReq, clientRes);
  }

  /** Keeps `bytes`, the start of a head, and waits for the rest under the head timeout. */
  #awaitRest(bytes: Buffer): void {
    this.#headStartedAt ??= this.#lane.now();
    if (++this.#headPieces < MAX_HEAD_PIECES) {
      this.#unread = bytes;
    } else {
      this.#trickle = [bytes];
      this.#trickleBytes = bytes.length;
    }
  }

  /**
   * A head the strict parser does not take: its request line's version is judged here, before
   * node:http could read it another way (request-line-version.ts). A version the proxy does not
   * serve is answered 505 or 400; `HTTP/1.2` … `HTTP/1.9` is read again as HTTP/1.1 (so it may
   * still be simple); any other head goes to node:http unchanged.
   */
  #readOtherHead(bytes: Buffer): void {
    const line = readRequestLineVersion(bytes, emptyLinesBefore(bytes), this.#lane.options.maxHeadBytes);
    if (line.kind === 'incomplete') this.#awaitRest(bytes);
    else if (line.kind === 'other' || line.verdict.kind === 'served') this.#handOver(bytes);
    else if (line.verdict.kind === 'refused') this.#refuseHead(line.verdict.status);
    else this.#readHead(withHttp11Version(bytes, line.versionStart));
  }

  #handOver(unread: Buffer): void {
    this.socket.pause();
    this.#detach();
    this.#lane.handOver(this, this.socket, unread);
  }

  /** The client half-closed: as node's server (no `allowHalfOpen`), abandon what is in flight and close. */
  #onClientEnd(): void {
    if (this.#response !== undefined) this.socket.destroy();
    else if (this.#unread !== undefined || this.#trickle !== undefined) this.#refuseHead(400); // a head cut short
    else this.socket.end();
  }

  /** Answers `status` through the proxy (node's `clientError` answer) and stops reading. */
  #refuseHead(status: 400 | 408 | 505): void {
    this.socket.removeListener('data', this.#onData); // whatever comes after the answer is not read
    this.#unread = undefined;
    this.#trickle = undefined;
    this.#lane.forget(this);
    this.#lane.options.onBadHead(this.socket, status);
  }

  #onSocketClose(): void {
    this.#lane.forget(this);
    const response = this.#response;
    this.#response = undefined;
    response?.onConnectionClose();
  }

  #detach(): void {
    this.socket.removeListener('data', this.#onData);
    this.socket.removeListener('end', this.#onEnd);
    this.socket.removeListener('close', this.#onClose);
    this.socket.removeListener('drain', this.#onDrain);
    this.socket.removeListener('error', ignoreError);
  }
}

/** A simple request as the request path reads it (no body: `complete` from the start). */
class FastLaneRequest implements ClientRequest {
  readonly method: string;
  readonly url: string;
  readonly httpVersion = '1.1';
  readonly rawHeaders: string[];
  readonly socket: Socket;
  readonly complete = true;
  #headers: IncomingHttpHeaders | undefined;

  constructor(head: RequestHead, socket: Socket) {
    this.method = head.method;
    this.url = head.target;
    this.rawHeaders = head.rawHeaders;
    this.socket = socket;
  }

  get headers(): IncomingHttpHeaders {
    return (this.#headers ??= combineHeaders(this.rawHeaders));
  }
}

function ignoreError(): void {}

// ---- adapter to the full request parser, until the one server of issue 12 replaces this lane ----

/** The methods the fast lane takes (RFC 9110 9.3), compared exactly: methods are case-sensitive. */
const SIMPLE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH']);
/** Origin-form of pchar / `/` / `?` only (RFC 3986 3.3, 3.4). */
const SIMPLE_TARGET = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*$/;
/** A clean Connection token list (llhttp might read others differently). */
const CLEAN_TOKEN_LIST = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?:[ \t]*,[ \t]*[!#$%&'*+\-.^_`|~0-9A-Za-z]+)*$/;

/**
 * Whether the fast lane takes `head` (as the old simple-head recogniser did, so that what it takes
 * node:http reads the same way): HTTP/1.1, one of {@link SIMPLE_METHODS}, an origin-form target of
 * pchar, at most 100 fields, exactly one Host, no body, no Transfer-Encoding, Expect, Upgrade or
 * Proxy-Connection, a clean Connection list without `upgrade`, Content-Length only `0`.
 */
function isSimpleHead(head: RequestHead): boolean {
  const { rawHeaders } = head;
  if (head.httpVersion !== '1.1' || head.body.kind !== 'none' || !SIMPLE_METHODS.has(head.method)) return false;
  if (!SIMPLE_TARGET.test(head.target) || rawHeaders.length > 200) return false;
  let hostCount = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const value = rawHeaders[i + 1] as string;
    if (name.length === 4 && name.toLowerCase() === 'host') hostCount++;
    else if (name.length === 10 && name.toLowerCase() === 'connection') {
      if (!CLEAN_TOKEN_LIST.test(value) || /(?:^|[ \t,])upgrade(?:$|[ \t,])/i.test(value)) return false;
    } else if (name.length === 14 && name.toLowerCase() === 'content-length') {
      if (value !== '0') return false;
    } else if ((name.length === 6 || name.length === 7 || name.length === 16 || name.length === 17) && /^(?:expect|upgrade|proxy-connection|transfer-encoding)$/i.test(name)) {
      return false;
    }
  }
  return hostCount === 1;
}

/**
 * How many bytes of empty lines (CRLF, or a bare LF) come before the request line: RFC 9112 §2.2
 * says a server SHOULD ignore at least one, as node:http and nginx do, so the version is judged
 * on the line after them.
 */
function emptyLinesBefore(bytes: Buffer): number {
  let start = 0;
  for (;;) {
    if (bytes[start] === 0x0a /* LF */) start += 1;
    else if (bytes[start] === 0x0d /* CR */ && bytes[start + 1] === 0x0a) start += 2;
    else return start;
  }
}
