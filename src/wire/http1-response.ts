/**
 * The response writer of the proxy's HTTP/1.1 server (src/wire/http1-server.ts): what node's
 * `ServerResponse` does for one request, written straight to the client socket, byte for byte as
 * node writes it (Node 20, lib/_http_outgoing.js `_storeHeader`):
 *
 *   HTTP/1.1 <status> <reason>\r\n
 *   <the caller's headers, in order, validated as node validates them>
 *   Date: …                          unless the caller gave one (RFC 9110 §6.6.1)
 *   Strict-Transport-Security: …     on TLS connections with `hsts`, unless the caller gave one
 *                                    (RFC 6797 §6.1; the upstream's own is kept)
 *   Connection: keep-alive           plus `Keep-Alive: timeout=<s>`, or `Connection: close`,
 *                                    unless the caller gave a Connection header
 *   Transfer-Encoding: chunked       when the caller gave no Content-Length, the response has a
 *                                    body (not HEAD, 204, 304 or 1xx) and the client speaks
 *                                    HTTP/1.1 — RFC 9112 §6.1; an HTTP/1.0 client cannot read
 *                                    chunks, so its body is delimited by closing the connection
 *                                    (RFC 9112 §6.3 rule 8), as node and nginx do
 *
 * Body writes are chunk-framed when chunked (RFC 9112 §7.1) and ignored when the response has no
 * body; `end` writes the last chunk and the trailers. Output waits until the end of the tick, so
 * the head goes out with the body bytes written in the same tick in one socket write (node corks
 * them into one writev; one buffer is cheaper still); `flushHeaders` sends it without waiting for
 * a body byte. `switchProtocols` writes a 101 and gives the raw socket to the caller (RFC 9110 §7.8).
 */
import type { Socket } from 'node:net';
import type { ClientResponse } from './client-side.js';
import { STATUS_CODES } from 'node:http';
import { equalsIgnoringCase, hasInvalidFieldChar, isToken } from './field-bytes.js';
import { httpDate } from './http-date.js';

/** What a response needs from the connection it is written to. */
export interface ResponseConnection {
  readonly socket: Socket;
  /** The TCP connection under `socket`: `socket` itself on plain HTTP, the one its TLS socket wraps on HTTPS. */
  readonly tcpSocket: Socket;
  /** Announced as `Keep-Alive: timeout=<s>` (whole seconds), ms; 0: no Keep-Alive header. */
  readonly keepAliveTimeoutMs: number;
  /** Added as `Strict-Transport-Security` when the caller gave none (HTTPS with `hsts`); undefined: never. */
  readonly strictTransportSecurity: string | undefined;
  /**
   * The request's body has not been read to its end (an answer before the upload finished, a body
   * that failed): the connection will close after this response, so its head says so (RFC 9112
   * §9.6) instead of announcing a keep-alive the server will not keep.
   */
  readonly isRequestBodyUnread: boolean;
  /** `100 Continue` was sent: the client will send the body it held back (RFC 9110 §10.1.1). */
  onContinueSent(): void;
  /** The last byte was handed to the socket; `isLast`: the connection must close now. */
  onResponseFinished(isLast: boolean): void;
  /**
   * The connection stops serving HTTP and forgets the socket (its listeners removed, the socket
   * left paused); returns the bytes the client sent after the request head, not read as HTTP.
   */
  releaseSocket(): Buffer;
}

const STRICT_TRANSPORT_SECURITY = 'strict-transport-security';
const CONNECTION_CLOSE = /(?:^|\W)close(?:$|\W)/i;
const CHUNKED = /(?:^|\W)chunked(?:$|\W)/i;
/** Queued output of at least this many bytes is written at once, in place, by `write`; less, or what another flush sends, is copied into one buffer (see `#flush`). */
const FLUSH_AT_BYTES = 16 * 1024;
const EMPTY = Buffer.alloc(0);

export class Http1Response implements ClientResponse {
  readonly req: { readonly method: string };
  statusCode = 200;
  /** The head as built by `writeHead`; undefined before. */
  #head: string | undefined;
  #isHeadQueued = false;
  /** Output not yet given to the socket (see `#queue`). */
  #output: (string | Buffer)[] = [];
  #outputBytes = 0;
  #isFlushQueued = false;
  /** In-place writes so far (see `#flush`). */
  #inPlaceWrites = 0;
  /** The in-place write whose chunks the socket still holds; 0: none. */
  #heldWrite = 0;
  #hasBody: boolean;
  /** The client speaks HTTP/1.0: no chunked framing (see the file comment). */
  readonly #isHttp10: boolean;
  #isChunked = false;
  /** The body ends with the connection (an HTTP/1.0 client, no Content-Length): see `destroy`. */
  #isCloseDelimited = false;
  #isLast: boolean;
  #isEnded = false;
  #isFinished = false;
  #isDestroyed = false;
  #isCloseEmitted = false;
  #trailers = '';
  #closeListeners: (() => void)[] = [];
  #drainListeners: (() => void)[] = [];
  readonly #connection: ResponseConnection;

  /**
   * @param method the request's method (HEAD: no body)
   * @param httpVersion the request's version
   * @param shouldKeepAlive the client allows another request on this connection (RFC 9112 §9.3)
   *   and the server wants one
   */
  constructor(connection: ResponseConnection, method: string, httpVersion: '1.1' | '1.0', shouldKeepAlive: boolean) {
    this.#connection = connection;
    this.req = { method };
    this.#hasBody = method !== 'HEAD';
    this.#isHttp10 = httpVersion === '1.0';
    this.#isLast = !shouldKeepAlive;
  }

  get headersSent(): boolean {
    return this.#head !== undefined;
  }

  get destroyed(): boolean {
    // The socket goes first when the client leaves (its 'close' comes a tick later): nothing written now could reach it.
    return this.#isDestroyed || this.#connection.socket.destroyed;
  }

  get writableFinished(): boolean {
    return this.#isFinished;
  }

  writeHead(statusCode: number, statusMessageOrHeaders: string | string[], maybeHeaders?: string[], checkedLength = 0, checkedLines?: string): this {
    if (this.#head !== undefined) throw codedError(Error, 'ERR_HTTP_HEADERS_SENT', 'Cannot write headers after they are sent to the client');
    const hasReason = typeof statusMessageOrHeaders === 'string';
    const reason = hasReason ? statusMessageOrHeaders : (STATUS_CODES[statusCode] ?? 'unknown');
    const headers = (hasReason ? maybeHeaders : statusMessageOrHeaders) ?? [];
    if (statusCode < 100 || statusCode > 999) throw codedError(RangeError, 'ERR_HTTP_INVALID_STATUS_CODE', `Invalid status code: ${statusCode}`);
    if (hasInvalidFieldChar(reason)) throw codedError(TypeError, 'ERR_INVALID_CHAR', 'Invalid character in statusMessage');
    this.statusCode = statusCode;
    if (statusCode === 204 || statusCode === 304 || statusCode < 200) this.#hasBody = false;

    let head = `HTTP/1.1 ${statusCode} ${reason}\r\n`;
    if (checkedLines !== undefined) head += checkedLines;
    let hasConnection = false;
    let hasContentLength = false;
    let hasTransferEncoding = false;
    let hasDate = false;
    let hasTrailer = false;
    let hasKeepAlive = false;
    const strictTransportSecurity = this.#connection.strictTransportSecurity;
    let needsStrictTransportSecurity = strictTransportSecurity !== undefined;
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!;
      const value = headers[i + 1]!;
      if (i >= checkedLength) head += fieldLine(name, value, 'Header');
      else if (checkedLines === undefined) head += `${name}: ${value}\r\n`;
      // the names this writer acts on, compared without allocating (by length first)
      if (equalsIgnoringCase(name, 'connection')) {
        hasConnection = true;
        this.#isLast = CONNECTION_CLOSE.test(value);
      } else if (equalsIgnoringCase(name, 'transfer-encoding')) {
        hasTransferEncoding = true;
        if (CHUNKED.test(value)) this.#isChunked = true;
      } else if (equalsIgnoringCase(name, 'content-length')) {
        hasContentLength = true;
      } else if (equalsIgnoringCase(name, 'date')) {
        hasDate = true;
      } else if (equalsIgnoringCase(name, 'trailer')) {
        hasTrailer = true;
      } else if (equalsIgnoringCase(name, 'keep-alive')) {
        hasKeepAlive = true;
      } else if (equalsIgnoringCase(name, STRICT_TRANSPORT_SECURITY)) {
        needsStrictTransportSecurity = false;
      }
    }
    if (!hasDate) head += `Date: ${httpDate()}\r\n`;
    if (needsStrictTransportSecurity) head += `Strict-Transport-Security: ${strictTransportSecurity}\r\n`;
    if (this.#isChunked && (statusCode === 204 || statusCode === 304)) {
      this.#isLast = true;
      this.#isChunked = false;
    }
    const isUnframed = !hasContentLength && !hasTransferEncoding && this.#hasBody;
    if (isUnframed && this.#isHttp10) {
      this.#isLast = true; // delimited by the close
      this.#isCloseDelimited = true;
    }
    if (this.#connection.isRequestBodyUnread) this.#isLast = true;
    if (!hasConnection) {
      if (this.#isLast) {
        head += 'Connection: close\r\n';
      } else {
        head += 'Connection: keep-alive\r\n';
        const { keepAliveTimeoutMs } = this.#connection;
        if (keepAliveTimeoutMs > 0 && !hasKeepAlive) head += `Keep-Alive: timeout=${Math.floor(keepAliveTimeoutMs / 1000)}\r\n`;
      }
    }
    if (isUnframed && !this.#isHttp10) {
      head += 'Transfer-Encoding: chunked\r\n';
      this.#isChunked = true;
    }
    if (!this.#isChunked && hasTrailer) throw codedError(TypeError, 'ERR_HTTP_TRAILER_INVALID', 'Trailers are invalid with this transfer encoding');
    this.#head = `${head}\r\n`;
    return this;
  }

  write(chunk: Buffer): boolean {
    if (this.#head === undefined) this.writeHead(this.statusCode, []);
    if (this.#isDestroyed || this.#isEnded) return false;
    if (!this.#hasBody || chunk.length === 0) return true; // node ignores body writes to HEAD/204/304
    this.#queueHead();
    if (this.#isChunked) {
      this.#queue(`${chunk.length.toString(16)}\r\n`);
      this.#queue(chunk);
      this.#queue('\r\n');
    } else {
      this.#queue(chunk);
    }
    if (this.#outputBytes >= FLUSH_AT_BYTES) return this.#flush(undefined, true);
    return !this.#connection.socket.writableNeedDrain;
  }

  end(chunk?: string): this {
    if (this.#isEnded || this.#isDestroyed) return this;
    if (this.#head === undefined) this.writeHead(this.statusCode, []);
    this.#isEnded = true;
    this.#queueHead();
    if (this.#hasBody && chunk !== undefined && chunk.length > 0) {
      const body = Buffer.from(chunk);
      if (this.#isChunked) this.#queue(`${body.length.toString(16)}\r\n`);
      this.#queue(body);
      if (this.#isChunked) this.#queue('\r\n');
    }
    if (this.#isChunked) this.#queue(`0\r\n${this.#trailers}\r\n`);
    this.#flush((error) => this.#onFinished(error), false); // the caller may reuse what it wrote before: copied
    return this;
  }

  /**
   * Cuts the connection; output written so far and still queued leaves first, as it would with node.
   * A body delimited by the close, cut after its head left, is cut with a TCP reset instead of a
   * FIN: a FIN would end it as a complete response, and the reset is the connection's error that
   * makes it incomplete (RFC 9112 §8). On TLS the TCP connection under it is reset the same way:
   * the missing close_notify (§9.8) alone goes unnoticed by clients that read a TCP FIN without
   * close_notify as the end (curl 7.88 exits 0 with the partial body).
   */
  destroy(): this {
    if (!this.#isDestroyed) {
      if (this.#output.length > 0) this.#flush(undefined, false);
      this.#isDestroyed = true;
      const { socket, tcpSocket } = this.#connection;
      if (this.#isCloseDelimited && this.#isHeadQueued && !this.#isFinished && !socket.destroyed && !tcpSocket.destroyed) tcpSocket.resetAndDestroy();
      socket.destroy();
    }
    return this;
  }

  /**
   * Sends the head now, without a body byte (node's `flushHeaders`): it leaves at the end of this
   * tick, together with whatever else is written before then.
   */
  flushHeaders(): void {
    if (this.#head === undefined) this.writeHead(this.statusCode, []);
    if (this.#isDestroyed || this.#isEnded) return;
    this.#queueHead();
  }

  addTrailers(trailers: [string, string][]): void {
    for (const [name, value] of trailers) {
      this.#trailers += fieldLine(name, value, 'Trailer');
    }
  }

  /**
   * Switches the connection to the protocol the client asked for (RFC 9110 §7.8, §15.2.2): writes
   * `HTTP/1.1 101 <statusMessage>` with `headers` (flat raw list, validated as writeHead does; no
   * Date, Connection or framing header is added), and hands over the connection. From then on
   * the socket is the caller's: the server neither reads nor writes it, and this response is
   * finished (`writableFinished`) and emits no more events.
   * @returns the client socket (paused) and the bytes the client already sent after the request
   *   head (a first WebSocket frame, say), which the caller must treat as the new protocol's
   * @throws like writeHead, when a head was already written or a name or value is invalid
   */
  switchProtocols(statusMessage: string, headers: string[]): { socket: Socket; head: Buffer } {
    if (this.#head !== undefined) throw codedError(Error, 'ERR_HTTP_HEADERS_SENT', 'Cannot write headers after they are sent to the client');
    if (hasInvalidFieldChar(statusMessage)) throw codedError(TypeError, 'ERR_INVALID_CHAR', 'Invalid character in statusMessage');
    let head = `HTTP/1.1 101 ${statusMessage}\r\n`;
    for (let i = 0; i < headers.length; i += 2) {
      head += fieldLine(headers[i]!, headers[i + 1]!, 'Header');
    }
    this.#head = `${head}\r\n`;
    this.statusCode = 101;
    this.#isHeadQueued = true;
    this.#isEnded = true;
    this.#isFinished = true;
    const socket = this.#connection.socket;
    socket.write(this.#head, 'latin1');
    return { socket, head: this.#connection.releaseSocket() };
  }

  writeContinue(): void {
    this.#connection.onContinueSent();
    this.#connection.socket.write('HTTP/1.1 100 Continue\r\n\r\n', 'latin1');
  }

  once(event: 'close' | 'drain', listener: () => void): this {
    if (event === 'close') this.#closeListeners.push(listener);
    else this.#drainListeners.push(listener);
    return this;
  }

  /**
   * Everything written so far has left the socket's queue (the socket's `drain`, forwarded by the
   * connection, or the completion of the newest in-place write): `drain` for whoever waits.
   */
  onSocketDrain(): void {
    this.#heldWrite = 0;
    const listeners = this.#drainListeners;
    this.#drainListeners = [];
    for (const listener of listeners) listener();
  }

  /** The connection closed under the response (a finished response has already emitted `close`). */
  onConnectionClose(): void {
    this.#isDestroyed = true;
    this.#emitClose();
  }

  #queueHead(): void {
    if (this.#isHeadQueued) return;
    this.#isHeadQueued = true;
    this.#queue(this.#head!);
  }

  /**
   * Output waits until the end of the tick (or `end`, or 16 KiB), then leaves in one socket write:
   * a small response — head, body, last chunk — costs one system call and one buffer.
   */
  #queue(data: string | Buffer): void {
    this.#output.push(data);
    this.#outputBytes += data.length; // strings here are latin1: one byte per character
    if (!this.#isFlushQueued) {
      this.#isFlushQueued = true;
      process.nextTick(flushQueued, this);
    }
  }

  /**
   * Writes the queued output. Body chunks may be views of an upstream connection's read buffer,
   * which the caller reuses once `write` returned true (src/wire/upstream-exchange.ts, BodySink):
   *
   * - under 16 KiB in all, or when `mayWriteInPlace` is false, the output is copied into one new
   *   buffer and written: the caller's chunks are free at once; false means the socket's buffer is
   *   full (wait for `drain`);
   * - more, from `write`, it is written in place (no copy of large bodies); if the socket could not
   *   take it all at once, the chunks are still held: false, and `drain` once the socket wrote them.
   *
   * Only `write` may write in place, because only its own return value tells the caller whether
   * its chunks are still held. The other flushes (`end`, `destroy`, the end of the tick) come after
   * `write` returned true for the chunks still queued, and the caller may have reused their buffer
   * by then. A break test found another client's bytes at the end of a chunked body: `end` added
   * the last chunk and trailers to a queue just under 16 KiB, the queue was written in place, and
   * a slow client's socket still held its tail when the upstream connection, released, read the
   * next response into the same buffer. What `end` copies is under 16 KiB plus the trailers.
   */
  #flush(callback: ((error?: Error | null) => void) | undefined, mayWriteInPlace: boolean): boolean {
    const socket = this.#connection.socket;
    const output = this.#output;
    const bytes = this.#outputBytes;
    this.#output = [];
    this.#outputBytes = 0;
    if (this.#isDestroyed) return false;
    if (bytes < FLUSH_AT_BYTES || !mayWriteInPlace) {
      if (output.length === 0) return socket.write(EMPTY, callback);
      if (output.length === 1 && typeof output[0] === 'string') return socket.write(output[0], 'latin1', callback);
      const buffer = Buffer.allocUnsafe(bytes);
      let offset = 0;
      for (const data of output) offset += typeof data === 'string' ? buffer.write(data, offset, 'latin1') : data.copy(buffer, offset);
      return socket.write(buffer, callback);
    }
    // Several in-place writes may be queued; only the newest one's completion frees them all.
    const id = ++this.#inPlaceWrites;
    const onWritten = (error?: Error | null): void => {
      if (this.#heldWrite === id) this.onSocketDrain();
      callback?.(error);
    };
    if (output.length > 1) socket.cork();
    for (let i = 0; i < output.length - 1; i++) socket.write(output[i]!, 'latin1');
    socket.write(output[output.length - 1]!, 'latin1', onWritten);
    if (output.length > 1) socket.uncork();
    if (socket.writableLength > 0) this.#heldWrite = id; // its tail waits in the socket's queue, in place
    return this.#heldWrite === 0;
  }

  /** The end-of-tick flush (see `#queue`). */
  flushQueued(): void {
    this.#isFlushQueued = false;
    if (this.#output.length > 0) this.#flush(undefined, false);
  }

  #onFinished(error: Error | null | undefined): void {
    if (error || this.#isDestroyed) return; // the connection's close event reports it
    this.#isFinished = true;
    this.#emitClose();
    this.#connection.onResponseFinished(this.#isLast);
  }

  #emitClose(): void {
    if (this.#isCloseEmitted) return;
    this.#isCloseEmitted = true;
    for (const listener of this.#closeListeners) listener();
    this.#closeListeners = [];
    this.#drainListeners = [];
  }
}

function flushQueued(response: Http1Response): void {
  response.flushQueued();
}

/**
 * `name: value` CRLF, checked as node's writers check a field: a token name, a value without CR,
 * LF or another control character (header splitting, RFC 9112 §11.2).
 * @throws TypeError with node's code `ERR_INVALID_HTTP_TOKEN` or `ERR_INVALID_CHAR`
 */
function fieldLine(name: string, value: string, kind: 'Header' | 'Trailer'): string {
  if (!isToken(name)) throw codedError(TypeError, 'ERR_INVALID_HTTP_TOKEN', `${kind} name must be a valid HTTP token ["${name}"]`);
  if (hasInvalidFieldChar(value)) throw codedError(TypeError, 'ERR_INVALID_CHAR', `Invalid character in ${kind.toLowerCase()} content ["${name}"]`);
  return `${name}: ${value}\r\n`;
}

/** An error with node's `code`, as node's own `ServerResponse` throws it. */
function codedError(Kind: new (message: string) => Error, code: string, message: string): Error {
  return Object.assign(new Kind(message), { code });
}
