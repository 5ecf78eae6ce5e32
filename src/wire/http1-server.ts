/**
 * The proxy's HTTP/1.1 server (RFC 9112): one raw `node:net` server and one connection loop per
 * client socket, for every request — no node:http on the data path. It teaches what an HTTP/1.1
 * server does between the bytes and the request handler, the part node's `http.Server`, Go's
 * `net/http` `conn.serve` and nginx's `ngx_http_request.c` hide:
 *
 *   1. read the head with the strict parser (src/wire/request-parser.ts); a head that arrives in
 *      pieces is parsed again as each piece comes (after MAX_HEAD_PIECES only when a piece may
 *      end it, `mayEndHead`); a head the parser refuses gets the proxy's own answer — 400, 414, 431, 501 or 505
 *      with the parser's one-line reason — and the connection is closed;
 *   2. hand the request to the handler as a `ClientRequest`/`ClientResponse` pair
 *      (src/wire/client-side.ts); the body, delimited by Content-Length or chunked (RFC 9112
 *      §6.3, src/wire/body-decoder.ts), reaches its one reader piece by piece, with
 *      backpressure (`RequestBody`): while the reader does not take it, the socket is paused;
 *   3. requests are answered strictly one at a time, in order (RFC 9112 §9.3.2): bytes of the
 *      next request that are already here wait, and nothing more is read once they fill a bounded
 *      buffer (`maxHeadBytes`);
 *   4. when the response ended: the next request, or the close. HTTP/1.1 keeps the connection
 *      unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive` (RFC 9112 §9.3), and
 *      never after a body delimited by the close (http1-response.ts). A request whose body was not
 *      read to its end when its response ended (an early 413 or 401) closes the connection;
 *
 * Closing is nginx's lingering close (`lingering_close`, ngx_http_set_lingering_close): send the
 * FIN after the answer, then keep reading and discarding what the client still sends, until it
 * closes its side, LINGER_MS pass or LINGER_MAX_BYTES came. Closing at once while the client is
 * still uploading would make the kernel answer its next bytes with a reset, which destroys the
 * answer the client has not read yet: that is how an early 413 reaches a client still sending.
 *
 * Timeouts (`[server]`, SPEC 1.2), checked by one interval for all connections (no timer per
 * request, like node's `connectionsCheckingInterval`):
 * - `header_timeout`: the head, counted from the connection's start for its first request and
 *   from its first byte for later ones; it never restarts while the head comes in pieces → 408
 *   (a connection that sent no byte at all is closed silently, as nginx does);
 * - `body_timeout`: the longest wait for the next piece of a request body (nginx's
 *   `client_body_timeout`); time the server itself does not read (the handler has not taken the
 *   last piece yet) does not count, so a steady upload is never cut → 408 when no answer started,
 *   else the connection is cut;
 * - `request_timeout`: the whole request, head and body, from the head's start; 0 = off → 408;
 * - `keepalive_timeout`: idle time between requests, announced as `Keep-Alive: timeout=N`; the
 *   connection is closed silently KEEP_ALIVE_GRACE_MS later, so a client that trusts the
 *   announcement never sends into a closing connection (node's 1 s buffer); 0 turns keep-alive
 *   off, as nginx's `keepalive_timeout 0` does.
 *
 * Also: `Expect: 100-continue` is passed to the handler, which answers 100 once it wants the body
 * (RFC 9110 §10.1.1); CONNECT is answered 405 (a reverse proxy tunnels nothing; nginx answers
 * 400); an upgrade request (HTTP/1.1, `Connection: upgrade` with `Upgrade`, no body: llhttp's
 * rule, `ClientRequest.upgrade`) goes to the handler and the loop reads nothing more until its
 * response finished or `switchProtocols` took the socket; with a body it is a plain request, and so
 * is one that offers no protocol or offers `h2c` (`isTunnelledUpgrade`). A client
 * that ends its side in the middle of a head gets 400; between requests, the connection closes;
 * with a request in flight, the request is abandoned (the connection closes, the handler sees
 * `close`).
 */
import net from 'node:net';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { IncomingHttpHeaders } from 'node:http';
import { ClientAbortError, ClientTimeoutError } from '../errors.js';
import { combineHeaders, type ClientRequest, type ClientResponse, type RequestBody, type RequestBodyReader } from './client-side.js';
import { Http1Response, type ResponseConnection } from './http1-response.js';
import { createBodyDecoder, type BodyDecoder } from './body-decoder.js';
import { writeTextAnswer } from './text-answer.js';
import { CR, equalsIgnoringCase, LF, listElements } from './field-bytes.js';
import { receivedRequestLine } from './received-request-line.js';
import { parseRequestHead, type RequestHead, type RequestLimits } from './request-parser.js';

/**
 * An idle keep-alive connection is closed this long after the `Keep-Alive: timeout` it announced,
 * ms (node 20's `HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER`, lib/_http_server.js).
 */
export const KEEP_ALIVE_GRACE_MS = 1000;

/**
 * After this many reads of a head still incomplete, the pieces are only collected, and the head is
 * parsed again (from its start) only when a piece may end it (`mayEndHead`). A few pieces (a head
 * split across TCP segments) cost little to re-parse; a head sent a few bytes at a time would
 * otherwise cost work quadratic in its size (parsed again at every line's LF, 16 KiB heads in
 * 5-byte pieces kept a core busy at 36 KB/s of input, a break test; nginx parses incrementally).
 */
export const MAX_HEAD_PIECES = 4;

const LF_CRLF = Buffer.from('\n\r\n', 'latin1');
const LF_LF = Buffer.from('\n\n', 'latin1');
/** How many of its last bytes an incomplete head keeps for `mayEndHead`: the end `\r\n\r\n` less one. */
const HEAD_END_TAIL_BYTES = 3;

/**
 * True when the head whose last bytes so far are `tail` (at most 3) may end within `chunk`: the
 * bytes `\n\r\n` (the end of a head, CRLF CRLF) or `\n\n` (a bare-LF end, which the parser
 * refuses with 400) occur in `tail` + `chunk`.
 */
export function mayEndHead(tail: Buffer, chunk: Buffer): boolean {
  if (chunk.indexOf(LF) === -1) return false;
  if (chunk.includes(LF_CRLF) || chunk.includes(LF_LF)) return true;
  if (tail.length === 0) return false;
  // An end across the two starts in the tail and takes at most the piece's first two bytes.
  const seam = Buffer.concat([tail, chunk.subarray(0, 2)]);
  return seam.includes(LF_CRLF) || seam.includes(LF_LF);
}

/** The last `HEAD_END_TAIL_BYTES` of `tail` + `chunk`. */
function headTail(tail: Buffer, chunk: Buffer): Buffer {
  if (chunk.length >= HEAD_END_TAIL_BYTES) return chunk.subarray(chunk.length - HEAD_END_TAIL_BYTES);
  const joined = Buffer.concat([tail, chunk]);
  return joined.subarray(Math.max(0, joined.length - HEAD_END_TAIL_BYTES));
}

/** A lingering close ends at the latest this long after it began, ms (nginx's `lingering_time` is 30 s; a few seconds let any client read its answer). */
export const LINGER_MS = 5000;
/** …or once the client sent this many more bytes, which are read and thrown away. */
export const LINGER_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The most request-body bytes the server reads and drops after a response that did not take them
 * (an answer before the upload ended), to keep the connection for the next request, as Go's server
 * does (`maxPostHandlerReadBytes`, 256 KiB), for at most LINGER_MS in all (nginx caps discarding at
 * its `lingering_time`). A longer rest, a chunked one, or one whose request asked `Expect:
 * 100-continue` and got no 100, closes the connection after the response instead (lingering).
 */
export const DISCARD_MAX_BYTES = 256 * 1024;

/**
 * Whether an upgrade request whose `Upgrade` value (`protocol[/version]` items, comma-separated)
 * is `upgrade` is tunnelled on a 101: it must name a protocol (RFC 9110 §7.8; an empty value offers
 * nothing), and none of them may be `h2c`, HTTP/2 in the clear (RFC 7540 §3.2). Otherwise it is
 * served as a plain HTTP/1.1 request, which RFC 7540 allows a server to do: the HTTP/2 connection
 * inside a tunnel would carry requests to any path of the upstream that no route, `access` line,
 * auth or limit of the proxy ever sees ("h2c smuggling"). RFC 9113 §3.1 deprecates this upgrade.
 * mitmproxy removes h2c upgrades the same way; Envoy tunnels only the upgrade types it is
 * configured for (WebSocket by default); nginx and Go's httputil tunnel any.
 */
export function isTunnelledUpgrade(upgrade: string): boolean {
  const protocols = listElements(upgrade);
  return protocols.length > 0 && !protocols.some((protocol) => equalsIgnoringCase(protocol, 'h2c'));
}

/** The request body held for its reader before the socket is paused, bytes (one or two socket reads). */
const BODY_HIGH_WATER_MARK = 128 * 1024;
const EMPTY = Buffer.alloc(0);
const NO_TRAILERS: readonly string[] = [];

/** An answer the server wrote itself, before a request existed (for the access log). */
export interface ServerAnswer {
  readonly status: number;
  /** The client's address as the connection was accepted (a socket forgets it once it closed). */
  readonly clientAddress: string | undefined;
  /** The request's method and target when its head was read (CONNECT), else `-`. */
  readonly method: string;
  readonly target: string;
  /** The request's version (`1.1`) when its head was read; undefined when none was (none is made up). */
  readonly httpVersion: string | undefined;
  /**
   * When no head was read: the first line of the bytes that came, as the client sent them, if it
   * is printable ASCII (src/wire/received-request-line.ts); undefined otherwise.
   */
  readonly receivedLine: string | undefined;
  /** Body bytes written. */
  readonly bytesSent: number;
  /**
   * From the first byte of the head answered (or of the request whose head was read) to the
   * answer, ms; from the connection's accept when no byte was read (`refuse`). nginx's
   * `$request_time`, "time elapsed since the first bytes were read from the client": a 408 after
   * `header_timeout` logs about that long.
   */
  readonly durationMs: number;
  /**
   * True for the answer of `refuse`: nothing of the connection was read as HTTP (the HTTPS
   * listener's 400 to a plain HTTP request, whose bytes were never parsed as a request).
   */
  readonly isRefusedUnread: boolean;
}

export interface Http1ServerOptions {
  /** Every request; never throws. `isExpectingContinue`: call `writeContinue` when the body is wanted. */
  readonly onRequest: (clientReq: ClientRequest, clientRes: ClientResponse, isExpectingContinue: boolean) => void;
  /** Every answer the server wrote itself (408, a refused head, CONNECT's 405); never throws. */
  readonly onAnswer: (answer: ServerAnswer) => void;
  /** True while the server shuts down: every response closes its connection. */
  readonly isDraining: () => boolean;
  /** `header_timeout`, ms; 0: none. */
  readonly headTimeoutMs: number;
  /** `body_timeout`, ms; 0: none. */
  readonly bodyTimeoutMs: number;
  /** `request_timeout`, ms; 0: none. */
  readonly requestTimeoutMs: number;
  /** `keepalive_timeout`, ms, announced as `Keep-Alive: timeout`; 0: no keep-alive, every response closes its connection (nginx's `keepalive_timeout 0`). */
  readonly keepAliveTimeoutMs: number;
  /** `max_header_size`, bytes: longer heads get 431; also the most bytes of a next request read ahead. */
  readonly maxHeadBytes: number;
  /** Clock for the timeouts, ms. Default `performance.now`. */
  readonly now?: () => number;
  /**
   * Asked for every new TCP connection of the listener before it is served: false closes it at
   * once, unread (a cluster worker's connection budget, src/process/descriptor-budget.ts). Default:
   * every connection is served.
   */
  readonly admit?: (socket: net.Socket) => boolean;
}

export class Http1Server {
  /** The listening socket: `listen`, `close` and `address` are node's. */
  readonly server: net.Server;
  readonly options: Http1ServerOptions;
  /** What the parser is given for every head (from `maxHeadBytes`). */
  readonly limits: RequestLimits;
  readonly #now: () => number;
  readonly #connections = new Set<Http1Connection>();
  #checker: NodeJS.Timeout | undefined;
  /** Requests read so far. */
  requestCount = 0;
  /**
   * The `Strict-Transport-Security` value (`max-age=SECONDS`, RFC 6797 §6.1) added to every
   * response on a TLS connection that has none; undefined (default): none. Never on plain
   * connections (RFC 6797 §7.2: a host must not send it over plain HTTP). Set by the owner (`hsts`).
   */
  strictTransportSecurity: string | undefined;

  constructor(options: Http1ServerOptions) {
    this.options = options;
    this.limits = { maxHeadBytes: options.maxHeadBytes };
    this.#now = options.now ?? (() => performance.now());
    // allowHalfOpen: a client's FIN ends only its side; the loop decides what that means.
    // Socket buffers of 256 KiB instead of 16 KiB: a 64 KiB chunk read from an upstream no longer
    // fills the client socket's buffer at once, so large bodies pause and resume the upstream
    // (two epoll changes each time) once per few chunks instead of once per chunk.
    const { admit } = options;
    this.server = net.createServer({ allowHalfOpen: true, noDelay: true, highWaterMark: 256 * 1024 }, (socket) => {
      if (admit === undefined || admit(socket)) this.accept(socket);
      else socket.destroy();
    });
    this.server.on('listening', () => this.startTimeoutChecks());
    this.server.on('close', () => this.#stopChecks());
  }

  /** The server's clock, ms (`options.now`). */
  now(): number {
    return this.#now();
  }

  /**
   * Serves `socket`: a plain TCP socket from this server's listener, or an established TLS socket
   * (a `tls.TLSSocket` from the HTTPS listener, src/tls/tls-listener.ts), which the same loop reads
   * and writes; its requests say `isTls`. Tests may call it with any connected socket.
   * `tcpSocket`: the TCP connection a TLS socket wraps (reset to cut a close-delimited body, see
   * Http1Response `destroy`); default `socket` itself.
   */
  accept(socket: Socket, tcpSocket: Socket = socket): void {
    // A peer that reset the connection before it was served has no address left to judge its
    // requests by: it gets nothing (read now, the address is kept for the connection's life).
    if ((tcpSocket.remoteAddress ?? socket.remoteAddress) === undefined) {
      socket.destroy();
      return;
    }
    this.#connections.add(new Http1Connection(socket, this, tcpSocket));
  }

  /**
   * Answers `socket` with the server's own `status` and one-line `reason` before reading anything
   * from it — the same answer as a refused head: `Connection: close`, a Date, logged through
   * `onAnswer` — and closes it, lingering. The HTTPS listener's answer to a plain HTTP request
   * (src/tls/tls-listener.ts); `received`, what the client sent so far, is never parsed: only its
   * first line is reported (`receivedLine`), then it is dropped.
   */
  refuse(socket: Socket, status: number, reason: string, received: Buffer): void {
    const connection = new Http1Connection(socket, this);
    this.#connections.add(connection);
    connection.refuse(status, reason, received);
  }

  /** Connections still served (not closed, not handed over by an upgrade). */
  get size(): number {
    return this.#connections.size;
  }

  /** `connection` is no longer served (closed, or handed over by an upgrade). */
  forget(connection: Http1Connection): void {
    this.#connections.delete(connection);
  }

  /** Closes every connection with no request in flight (graceful shutdown). */
  closeIdleConnections(): void {
    for (const connection of this.#connections) connection.closeIfIdle();
  }

  /** Destroys every connection (shutdown time is up). */
  closeAllConnections(): void {
    for (const connection of this.#connections) connection.socket.destroy();
  }

  /** Applies every timeout of every connection; runs on an interval while listening. */
  checkTimeouts(): void {
    const now = this.#now();
    for (const connection of this.#connections) connection.checkTimeout(now);
  }

  /**
   * Starts the one interval that applies every connection's timeouts, until `server` closes;
   * listening starts it, and so must an owner that feeds `accept` from a listener of its own
   * (the HTTPS one) while `server` may never listen (`listen = off`). Idempotent.
   */
  startTimeoutChecks(): void {
    if (this.#checker !== undefined) return;
    const { headTimeoutMs, bodyTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = this.options;
    // Lingering closes need the checks too, so there is always an interval.
    const shortest = Math.min(headTimeoutMs || Infinity, bodyTimeoutMs || Infinity, requestTimeoutMs || Infinity, keepAliveTimeoutMs || Infinity, LINGER_MS);
    const checkIntervalMs = Math.max(50, Math.min(1000, Math.floor(shortest / 4)));
    this.#checker = setInterval(() => this.checkTimeouts(), checkIntervalMs);
    this.#checker.unref();
  }

  #stopChecks(): void {
    clearInterval(this.#checker);
    this.#checker = undefined;
  }
}

/** What the connection is doing; what a read means depends on it. */
const enum State {
  /** Between requests, or reading a head. */
  Head,
  /** A request in flight whose body is still being read. */
  Body,
  /** A request in flight with nothing more to read for it: bytes that come are the next request's. */
  Busy,
  /** A request in flight on a connection that will not carry another (its body failed): nothing is read. */
  Broken,
  /** The response ended before its request's body: the rest (at most DISCARD_MAX_BYTES) is read and dropped, then the next request. */
  Discarding,
  /** Closing: the FIN is sent (or about to be, after a response); what comes is read and dropped. */
  Lingering,
  /** No longer served: closed, or handed over by an upgrade. */
  Gone,
}

/** One client connection and its requests, one at a time. */
export class Http1Connection implements ResponseConnection {
  readonly socket: Socket;
  readonly tcpSocket: Socket;
  /** The connection came over TLS (the HTTPS listener). */
  readonly isTls: boolean;
  readonly #server: Http1Server;
  #state = State.Head;
  /** Bytes received and not yet parsed (a head in pieces, pipelined requests). */
  #unread: Buffer | undefined;
  #request: Http1Request | undefined;
  #response: Http1Response | undefined;
  #decoder: BodyDecoder | undefined;
  /** `socket.remoteAddress` when the connection was accepted, for the answers logged after it closed. */
  readonly #clientAddress: string | undefined;
  /** The Content-Length of the body being read, bytes; undefined for a chunked one. */
  #bodyLength: number | undefined;
  /**
   * The request in flight asked `Expect: 100-continue` and no 100 was sent: its client may never
   * send the body, so an answer now must close the connection (Go's server does; reading on would
   * take the client's next request for the body).
   */
  #isAwaitingContinue = false;
  /** When the rest of a body whose answer went out started to be read (State.Discarding, or `#isBodyAfterResponse`), ms. */
  #discardStartedAt = 0;
  /** The response of the request in flight finished while its body's reader still takes the rest: when the body ends, the next request. */
  #isBodyAfterResponse = false;
  /** When the last response finished (or the connection opened), ms. */
  #idleSince: number;
  /** When the head being read began, ms (the connection's start for the first one); undefined between requests. */
  #headStartedAt: number | undefined;
  /** When the first byte of the head being read (or of the request in flight) came, ms; undefined until then. */
  #headFirstByteAt: number | undefined;
  /** When the request in flight began (its head's start), ms, for `request_timeout`. */
  #requestStartedAt = 0;
  /** Since when the body is waited for, ms; undefined while the server is not reading (paused for the handler). */
  #bodyWaitingSince: number | undefined;
  #headPieces = 0;
  /** After `MAX_HEAD_PIECES`: the pieces of the incomplete head, not joined yet, their size, and their last bytes (`mayEndHead`). */
  #trickle: Buffer[] | undefined;
  #trickleBytes = 0;
  #trickleTail: Buffer = EMPTY;
  #lingerStartedAt = 0;
  #lingerBytes = 0;
  readonly #onData = (chunk: Buffer): void => this.#receive(chunk);
  readonly #onEnd = (): void => this.#onClientEnd();
  readonly #onClose = (): void => this.#onSocketClose();
  readonly #onDrain = (): void => this.#response?.onSocketDrain();
  readonly #onBodyData = (chunk: Buffer): void => this.#pushBody(chunk);

  constructor(socket: Socket, server: Http1Server, tcpSocket: Socket = socket) {
    this.socket = socket;
    this.tcpSocket = tcpSocket;
    this.isTls = socket instanceof TLSSocket;
    this.#clientAddress = tcpSocket.remoteAddress ?? socket.remoteAddress;
    this.#server = server;
    this.#idleSince = server.now();
    this.#headStartedAt = this.#idleSince;
    socket.on('data', this.#onData);
    socket.on('end', this.#onEnd);
    socket.on('close', this.#onClose);
    socket.on('drain', this.#onDrain);
    socket.on('error', ignoreError); // reported through 'close'
  }

  get keepAliveTimeoutMs(): number {
    return this.#server.options.keepAliveTimeoutMs;
  }

  get strictTransportSecurity(): string | undefined {
    return this.isTls ? this.#server.strictTransportSecurity : undefined;
  }

  // ---- the response's side (ResponseConnection) ------------------------------------------------

  onContinueSent(): void {
    this.#isAwaitingContinue = false;
  }

  onResponseFinished(isLast: boolean): void {
    this.#response = undefined;
    const request = this.#request;
    this.#request = undefined;
    if (this.#state === State.Gone || this.#state === State.Lingering) return; // closing already (see #answer)
    if (this.#state === State.Body && !isLast && !this.isRequestBodyUnread && !this.#server.options.isDraining()) {
      // An answer before the upload ended, with little of it left (nginx discards a request body
      // too): the rest is read — by its reader when it still takes it (the upstream exchange of an
      // upstream that answered early and keeps its connection), else dropped — then the next
      // request. body_timeout still applies.
      const body = request?.body;
      if (body !== undefined && body.isAttached) {
        this.#request = request;
        this.#isBodyAfterResponse = true;
        this.#discardStartedAt = this.#server.now();
        return;
      }
      body?.abandon();
      this.#state = State.Discarding;
      this.#bodyWaitingSince = this.#server.now();
      this.#discardStartedAt = this.#bodyWaitingSince;
      if (this.socket.isPaused()) this.socket.resume();
      return;
    }
    if (this.#state === State.Body || this.#state === State.Broken) {
      // The body was not read to its end (an early answer, a failed body): the connection is mid-request.
      this.#decoder = undefined;
      request?.body?.abandon();
      this.#linger();
      return;
    }
    if (isLast || this.#server.options.isDraining()) {
      this.#linger();
      return;
    }
    this.#nextRequest();
  }

  /** The response and its request are done and the connection stays: read the next head (bytes already here first). */
  #nextRequest(): void {
    this.#state = State.Head;
    this.#idleSince = this.#server.now();
    this.#headFirstByteAt = undefined;
    const unread = this.#unread;
    this.#unread = undefined;
    if (this.socket.isPaused()) this.socket.resume();
    if (unread !== undefined) this.#receiveHead(unread);
  }

  releaseSocket(): Buffer {
    const unread = this.#unread ?? EMPTY;
    this.#unread = undefined;
    this.#response = undefined;
    this.#request = undefined;
    this.#state = State.Gone;
    this.socket.pause();
    this.#detach();
    this.#server.forget(this);
    return unread;
  }

  /**
   * A head has begun: bytes other than the empty lines a client may send before a request line
   * (RFC 9112 §2.2, skipped by the parser) are waiting. Without one, a timeout or the client's end
   * closes the connection silently (nginx), and nothing is logged.
   */
  #hasHeadBytes(): boolean {
    const pieces = this.#trickle ?? (this.#unread === undefined ? [] : [this.#unread]);
    return pieces.some((piece) => piece.some((byte) => byte !== CR && byte !== LF));
  }

  /**
   * ResponseConnection: the connection closes after this response because of its request's body:
   * the body failed, or it is still being read and what is left cannot be read and dropped cheaply
   * afterwards (chunked, or more than DISCARD_MAX_BYTES).
   */
  get isRequestBodyUnread(): boolean {
    if (this.#state === State.Broken) return true;
    if (this.#state !== State.Body) return false;
    return this.#isAwaitingContinue || this.#bodyLength === undefined || this.#bodyLength - this.#decoder!.bytesRead > DISCARD_MAX_BYTES;
  }

  // ---- the server's side -------------------------------------------------------------------------

  /** Answers `status` with `reason` before any request was read, then closes (Http1Server `refuse`). */
  refuse(status: number, reason: string, received: Buffer): void {
    this.#unread = received; // reported (its first line), never parsed; dropped by the lingering close
    this.#answer(status, reason, undefined, undefined, true);
  }

  closeIfIdle(): void {
    if (this.#state === State.Head && this.#unread === undefined && this.#trickle === undefined) this.socket.destroy();
  }

  checkTimeout(now: number): void {
    const { headTimeoutMs, bodyTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = this.#server.options;
    switch (this.#state) {
      case State.Head:
        if (this.#headStartedAt !== undefined) {
          const limit = Math.min(headTimeoutMs || Infinity, requestTimeoutMs || Infinity);
          if (now - this.#headStartedAt < limit) return;
          // No byte of a head came at all (a browser's preconnect, say): closed silently and not
          // logged, as nginx does; a head begun and not finished gets its 408.
          if (!this.#hasHeadBytes()) this.socket.destroy();
          else this.#answer(408, 'request timeout: the request head did not arrive in time');
        } else if (keepAliveTimeoutMs > 0 && now - this.#idleSince >= keepAliveTimeoutMs + KEEP_ALIVE_GRACE_MS) {
          this.socket.destroy();
        }
        return;
      case State.Body:
        if (this.#isBodyAfterResponse && now - this.#discardStartedAt >= LINGER_MS) {
          this.socket.destroy(); // the rest of a body whose answer went out, for longer than a lingering close may take
        } else if (requestTimeoutMs > 0 && now - this.#requestStartedAt >= requestTimeoutMs) {
          this.#failBody(new ClientTimeoutError(`the request was not received within request_timeout (${requestTimeoutMs}ms)`, 'request'));
        } else if (bodyTimeoutMs > 0 && this.#bodyWaitingSince !== undefined && now - this.#bodyWaitingSince >= bodyTimeoutMs) {
          this.#failBody(new ClientTimeoutError(`the request body paused for more than body_timeout (${bodyTimeoutMs}ms)`, 'body'));
        }
        return;
      case State.Discarding:
        // The client stopped sending the rest of a body whose answer it has, or takes longer in
        // all than a lingering close may (nginx caps discarding at its lingering_time): close.
        if (now - this.#discardStartedAt >= LINGER_MS) this.socket.destroy();
        else if (bodyTimeoutMs > 0 && this.#bodyWaitingSince !== undefined && now - this.#bodyWaitingSince >= bodyTimeoutMs) this.#linger();
        return;
      case State.Lingering:
        if (now - this.#lingerStartedAt >= LINGER_MS) this.socket.destroy();
        return;
      default:
        return;
    }
  }

  // ---- reading -----------------------------------------------------------------------------------

  #receive(chunk: Buffer): void {
    switch (this.#state) {
      case State.Head:
        this.#receiveHead(chunk);
        return;
      case State.Body:
      case State.Discarding:
        this.#bodyWaitingSince = this.#server.now();
        this.#readBody(chunk);
        return;
      case State.Busy:
        // The next request's bytes wait for this response; stop reading once they fill the buffer.
        this.#unread = this.#unread === undefined ? chunk : Buffer.concat([this.#unread, chunk]);
        if (this.#unread.length >= this.#server.options.maxHeadBytes) this.socket.pause();
        return;
      case State.Lingering:
        this.#lingerBytes += chunk.length;
        if (this.#lingerBytes > LINGER_MAX_BYTES) this.socket.destroy();
        return;
      default:
        return; // Broken (paused; a read already under way) or Gone
    }
  }

  #receiveHead(chunk: Buffer): void {
    if (this.#trickle !== undefined) {
      const tail = this.#trickleTail;
      this.#trickle.push(chunk);
      this.#trickleBytes += chunk.length;
      this.#trickleTail = headTail(tail, chunk);
      if (!mayEndHead(tail, chunk) && this.#trickleBytes < this.#server.options.maxHeadBytes) return; // cannot have ended
      chunk = Buffer.concat(this.#trickle);
      this.#trickle = undefined;
    }
    const bytes = this.#unread === undefined ? chunk : Buffer.concat([this.#unread, chunk]);
    this.#unread = undefined;
    if (this.#headFirstByteAt === undefined) {
      this.#headFirstByteAt = this.#server.now();
      this.#headStartedAt ??= this.#headFirstByteAt; // a later request's head begins with its first byte
    }
    const parse = parseRequestHead(bytes, 0, this.#server.limits);
    if (parse.kind === 'incomplete') {
      if (++this.#headPieces < MAX_HEAD_PIECES) {
        this.#unread = bytes;
      } else {
        this.#trickle = [bytes];
        this.#trickleBytes = bytes.length;
        this.#trickleTail = headTail(EMPTY, bytes);
      }
      return;
    }
    if (parse.kind === 'invalid') {
      this.#unread = bytes; // for the answer's report of the line received
      this.#answer(parse.status, parse.reason);
      return;
    }
    this.#start(parse.head, parse.end < bytes.length ? bytes.subarray(parse.end) : undefined);
  }

  /** A whole head: the request starts; `rest` are the bytes after its head (body, next requests). */
  #start(head: RequestHead, rest: Buffer | undefined): void {
    this.#requestStartedAt = this.#headStartedAt ?? this.#server.now();
    this.#headStartedAt = undefined;
    this.#headPieces = 0;
    const options = this.#server.options;
    if (head.method === 'CONNECT') {
      // A 405 must say what is allowed (RFC 9110 §15.5.6): for an authority, which is no resource of the proxy's, nothing (§10.2.1).
      this.#answer(405, 'method not allowed: this proxy does not tunnel CONNECT', head, ['Allow', '']);
      return;
    }
    this.#server.requestCount++;
    // An upgrade asks for a body-less request (llhttp's rule): with a body it is a plain request.
    const isUpgrade = head.upgrade !== undefined && head.body.kind === 'none' && isTunnelledUpgrade(head.upgrade);
    const decoder = createBodyDecoder(head.body);
    const clientReq = new Http1Request(head, this.socket, this.#clientAddress ?? '', this.isTls, decoder === undefined ? undefined : new Http1RequestBody(this), isUpgrade);
    const clientRes = new Http1Response(this, head.method, head.httpVersion, head.isKeepAlive && !isUpgrade && options.keepAliveTimeoutMs > 0 && !options.isDraining());
    this.#request = clientReq;
    this.#response = clientRes;
    this.#decoder = decoder;
    this.#bodyLength = head.body.kind === 'length' ? head.body.length : undefined;
    this.#isAwaitingContinue = head.isExpectingContinue && decoder !== undefined;
    if (decoder === undefined) {
      this.#state = State.Busy;
      if (rest !== undefined) this.#receive(rest);
      if (isUpgrade) this.socket.pause(); // its bytes after the head belong to whatever protocol comes
    } else {
      this.#state = State.Body;
      this.#bodyWaitingSince = this.#server.now();
      if (rest !== undefined) this.#readBody(rest); // before the handler: `complete` is true at once for a body that came with its head
    }
    options.onRequest(clientReq, clientRes, head.isExpectingContinue);
  }

  /** Body bytes at the start of `bytes`; what follows the body's end is the next request's. */
  #readBody(bytes: Buffer): void {
    const decoder = this.#decoder!;
    let end: number;
    const isDiscarding = this.#state === State.Discarding;
    try {
      end = decoder.execute(bytes, 0, isDiscarding ? dropBodyData : this.#onBodyData);
    } catch (error) {
      if (isDiscarding) this.#linger(); // nobody is left to answer the bad framing: close
      else this.#failBody(error as Error); // RequestFramingError: 400 from the handler
      return;
    }
    if (!decoder.isComplete) return;
    this.#decoder = undefined;
    this.#bodyWaitingSince = undefined;
    const rest = end < bytes.length ? bytes.subarray(end) : undefined;
    if (isDiscarding) {
      // The rest of the body is dropped; what follows it is the next request's.
      if (rest !== undefined) this.#unread = this.#unread === undefined ? rest : Buffer.concat([rest, this.#unread]);
      this.#nextRequest();
      return;
    }
    this.#state = State.Busy;
    this.#request!.body!.finish(decoder.rawTrailers);
    if (this.#isBodyAfterResponse) {
      this.#isBodyAfterResponse = false;
      this.#request = undefined;
      if (rest !== undefined) this.#unread = this.#unread === undefined ? rest : Buffer.concat([rest, this.#unread]);
      this.#nextRequest();
      return;
    }
    if (rest !== undefined) this.#receive(rest);
  }

  #pushBody(chunk: Buffer): void {
    if (this.#request!.body!.push(chunk)) return;
    // The reader has not taken what is held: read no more until it does (Http1RequestBody's onBodyWanted).
    this.#bodyWaitingSince = undefined;
    this.socket.pause();
  }

  /** The handler wants more body: read again. */
  onBodyWanted(): void {
    if (this.#state !== State.Body || !this.socket.isPaused()) return;
    this.#bodyWaitingSince = this.#server.now();
    this.socket.resume();
  }

  /** The body cannot be read to its end (bad framing, a timeout): the handler sees `error`; this connection carries no other request. */
  #failBody(error: Error): void {
    this.#decoder = undefined;
    this.#bodyWaitingSince = undefined;
    this.#state = State.Broken;
    this.socket.pause();
    this.#request?.body?.fail(error);
    if (this.#isBodyAfterResponse) {
      // Its response already went out: nobody is left to answer the failure, so the connection closes.
      this.#isBodyAfterResponse = false;
      this.#request = undefined;
      this.#linger();
    }
  }

  /** The client ended its side (FIN). */
  #onClientEnd(): void {
    switch (this.#state) {
      case State.Head:
        if (this.#hasHeadBytes()) this.#answer(400, 'bad request: the connection ended in the middle of a request head');
        else this.socket.end();
        return;
      case State.Lingering:
        this.socket.destroy();
        return;
      default:
        // A request in flight is abandoned, as node's server does without allowHalfOpen.
        this.#request?.body?.fail(new ClientAbortError('the client ended the connection before its request body was complete'));
        this.socket.destroy();
    }
  }

  // ---- closing -----------------------------------------------------------------------------------

  /**
   * Writes the server's own answer — `status` with its one-line `reason`, `Connection: close`, a
   * Date — then closes (lingering). `head`: the request it answers, when one was read; without
   * one, the first line of the bytes still unread is reported as received.
   */
  #answer(status: number, reason: string, head?: RequestHead, extraHeaders?: readonly string[], isRefusedUnread = false): void {
    const receivedLine = head === undefined ? receivedRequestLine(this.#trickle ?? (this.#unread === undefined ? [] : [this.#unread])) : undefined;
    // Written through the same writer and answer shape as every other answer; `end` hands it to
    // the socket at once, and the connection lingers from here (its later finish changes nothing).
    // A HEAD whose head was refused still gets no body (RFC 9110 §9.3.2), as nginx answers it.
    const method = head?.method ?? (receivedLine?.startsWith('HEAD ') === true ? 'HEAD' : 'GET');
    const clientRes = new Http1Response(this, method, head?.httpVersion ?? '1.1', false);
    const bytesSent = writeTextAnswer(clientRes, status, reason, { shouldClose: true, extraHeaders });
    const durationMs = this.#server.now() - (this.#headFirstByteAt ?? this.#idleSince); // no byte read (refuse): since the accept
    this.#linger();
    this.#server.options.onAnswer({
      status,
      clientAddress: this.#clientAddress,
      method: head?.method ?? '-',
      target: head?.target ?? '-',
      httpVersion: head?.httpVersion,
      receivedLine,
      bytesSent,
      durationMs,
      isRefusedUnread,
    });
  }

  /** nginx's lingering close (see the file comment): FIN now, read and drop until the client closes, LINGER_MS or LINGER_MAX_BYTES. */
  #linger(): void {
    this.#state = State.Lingering;
    this.#unread = undefined;
    this.#trickle = undefined;
    this.#lingerStartedAt = this.#server.now();
    this.#lingerBytes = 0;
    this.socket.end();
    if (this.socket.isPaused()) this.socket.resume();
  }

  #onSocketClose(): void {
    const wasState = this.#state;
    this.#state = State.Gone;
    this.#server.forget(this);
    if (wasState === State.Body) this.#request?.body?.fail(new ClientAbortError('the client closed the connection before its request body was complete'));
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

/** A request as the handler reads it: the parsed head, and the body when it has one. */
class Http1Request implements ClientRequest {
  readonly method: string;
  readonly url: string;
  readonly httpVersion: '1.1' | '1.0';
  readonly rawHeaders: string[];
  readonly socket: Socket;
  readonly remoteAddress: string;
  readonly isTls: boolean;
  readonly body: Http1RequestBody | undefined;
  readonly upgrade: string | undefined;
  readonly contentLength: number | undefined;
  #headers: IncomingHttpHeaders | undefined;

  constructor(head: RequestHead, socket: Socket, remoteAddress: string, isTls: boolean, body: Http1RequestBody | undefined, isUpgrade: boolean) {
    this.remoteAddress = remoteAddress;
    this.isTls = isTls;
    this.upgrade = isUpgrade ? head.upgrade : undefined;
    this.contentLength = head.body.kind === 'length' ? head.body.length : undefined;
    this.method = head.method;
    this.url = head.target;
    this.httpVersion = head.httpVersion;
    this.rawHeaders = head.rawHeaders;
    this.socket = socket;
    this.body = body;
  }

  get headers(): IncomingHttpHeaders {
    return (this.#headers ??= combineHeaders(this.rawHeaders));
  }

  get complete(): boolean {
    return this.body === undefined || this.body.isReceived;
  }
}

/**
 * A request body as this server reads it (client-side.ts `RequestBody`): the connection pushes each
 * de-chunked piece; the reader takes it at once while it is attached and not paused, else it is
 * held, and what is held goes to the reader as one piece. Held pieces, ends and errors are
 * delivered from `process.nextTick`, never from inside the connection's read or the reader's own
 * call, so that neither sees the other change state under it (a response may finish inside the
 * reader's `onRequestBodyEnd`).
 */
class Http1RequestBody implements RequestBody {
  readonly #connection: Http1Connection;
  #reader: RequestBodyReader | undefined;
  #held: Buffer[] = [];
  #heldBytes = 0;
  #isPaused = false;
  /** Detached or failed: what still arrives is dropped. */
  #isDropping = false;
  #isDeliveryScheduled = false;
  isReceived = false;
  rawTrailers: readonly string[] = NO_TRAILERS;
  errored: Error | null = null;

  constructor(connection: Http1Connection) {
    this.#connection = connection;
  }

  /** A reader is attached and has not detached, failed or been told the end. */
  get isAttached(): boolean {
    return this.#reader !== undefined;
  }

  /** The connection read `chunk`. False: BODY_HIGH_WATER_MARK bytes are held, read no more until `onBodyWanted`. */
  push(chunk: Buffer): boolean {
    if (this.#isDropping || chunk.length === 0) return true;
    if (this.#reader !== undefined && !this.#isPaused && this.#heldBytes === 0) {
      this.#reader.onRequestBodyData(chunk);
      return true;
    }
    this.#held.push(chunk);
    this.#heldBytes += chunk.length;
    return this.#heldBytes < BODY_HIGH_WATER_MARK;
  }

  /** The connection read the body's last byte; `rawTrailers` are the chunked body's trailer fields. */
  finish(rawTrailers: readonly string[]): void {
    this.isReceived = true;
    this.rawTrailers = rawTrailers;
    if (this.#reader !== undefined && !this.#isPaused) this.#scheduleDelivery();
  }

  /** The body cannot be read to its end: `error` is a RequestError; a no-op once failed. */
  fail(error: Error): void {
    if (this.errored !== null) return;
    this.errored = error;
    this.#isDropping = true;
    this.#dropHeld();
    if (this.#reader !== undefined) this.#scheduleDelivery();
  }

  /**
   * Nobody will read the rest (the response ended first): fail with a ClientAbortError, so that a
   * reader still sending the body on (the exchange with an upstream that answered early and keeps
   * its connection) closes that connection, which is mid-request, now instead of at its
   * `read_timeout`.
   */
  abandon(): void {
    if (!this.isReceived) this.fail(new ClientAbortError('the rest of the request body is not read: its response ended first'));
  }

  takeHeld(): Buffer | null {
    if (this.#heldBytes === 0) return null;
    const held = this.#held.length === 1 ? this.#held[0]! : Buffer.concat(this.#held, this.#heldBytes);
    this.#dropHeld();
    return held;
  }

  attach(reader: RequestBodyReader): void {
    this.#reader = reader;
    if (this.errored !== null || this.#heldBytes > 0 || this.isReceived) this.#scheduleDelivery();
  }

  pause(): void {
    this.#isPaused = true;
  }

  resume(): void {
    this.#isPaused = false;
    if (this.#reader !== undefined && (this.#heldBytes > 0 || this.isReceived || this.errored !== null)) this.#scheduleDelivery();
  }

  detach(): void {
    this.#reader = undefined;
    this.#isDropping = true;
    this.#dropHeld();
  }

  #dropHeld(): void {
    this.#held = [];
    this.#heldBytes = 0;
    this.#connection.onBodyWanted();
  }

  #scheduleDelivery(): void {
    if (this.#isDeliveryScheduled) return;
    this.#isDeliveryScheduled = true;
    process.nextTick(deliverBody, this);
  }

  /** What is held, then the end or the error, to the reader (process.nextTick from #scheduleDelivery). */
  deliver(): void {
    this.#isDeliveryScheduled = false;
    const reader = this.#reader;
    if (reader === undefined) return;
    if (this.errored !== null) {
      this.#reader = undefined;
      reader.onRequestBodyError(this.errored);
      return;
    }
    // Everything held goes as one piece: a reader pauses after a piece, and a body of many tiny
    // chunks, held one by one, would otherwise cost a delivery (and a write upstream) per chunk.
    const held = this.#isPaused ? null : this.takeHeld();
    if (held !== null) reader.onRequestBodyData(held);
    if (this.#heldBytes === 0 && this.isReceived && !this.#isPaused && this.#reader === reader) {
      this.#reader = undefined;
      reader.onRequestBodyEnd();
    }
  }
}

function deliverBody(body: Http1RequestBody): void {
  body.deliver();
}

function ignoreError(): void {}

/** The body piece of a request whose response already ended (State.Discarding). */
function dropBodyData(): void {}
