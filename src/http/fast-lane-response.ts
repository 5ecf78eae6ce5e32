/**
 * The fast lane's response: what node's `ServerResponse` does for one request, written straight to
 * the client socket, byte for byte as node writes it (Node 20, lib/_http_outgoing.js `_storeHeader`):
 *
 *   HTTP/1.1 <status> <reason>\r\n
 *   <the caller's headers, in order, validated as node validates them>
 *   Date: …                          unless `sendDate` is off or the caller gave one
 *   Connection: keep-alive           plus `Keep-Alive: timeout=<s>`, or `Connection: close`,
 *                                    unless the caller gave a Connection header
 *   Transfer-Encoding: chunked       when the caller gave no Content-Length and the response has a
 *                                    body (not HEAD, 204, 304 or 1xx) — RFC 9112 §6.1
 *
 * Body writes are chunk-framed when chunked (RFC 9112 §7.1) and ignored when the response has no
 * body; `end` writes the last chunk and the trailers. The head goes out with the first body bytes,
 * corked into one system call, as node does.
 */
import type { Socket } from 'node:net';
import type { ClientResponse } from './client-exchange.js';
import { STATUS_CODES } from 'node:http';

/** What a response needs from the connection it is written to. */
export interface ResponseConnection {
  readonly socket: Socket;
  /** The last byte was handed to the socket; `isLast`: the connection must close now. */
  onResponseFinished(isLast: boolean): void;
}

/** Facts from the request that shape the response. */
export interface ResponseOptions {
  readonly method: string;
  /** The client allows another request on this connection (HTTP/1.1 without `Connection: close`). */
  readonly shouldKeepAlive: boolean;
  /** Announced as `Keep-Alive: timeout=<s>` (whole seconds); 0: no Keep-Alive header. */
  readonly keepAliveTimeoutMs: number;
}

const TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;
const INVALID_FIELD_CHAR = /[^\t\x20-\x7e\x80-\xff]/;
const CONNECTION_CLOSE = /(?:^|\W)close(?:$|\W)/i;
const CHUNKED = /(?:^|\W)chunked(?:$|\W)/i;
const LAST_CHUNK_CRLF = '\r\n';

export class FastLaneResponse implements ClientResponse {
  readonly req: { readonly method: string };
  statusCode = 200;
  sendDate = true;
  /** The head as built by `writeHead`; undefined before. */
  #head: string | undefined;
  #isHeadWritten = false;
  #hasBody: boolean;
  #isChunked = false;
  #isLast: boolean;
  #isEnded = false;
  #isFinished = false;
  #isDestroyed = false;
  #isCloseEmitted = false;
  #trailers = '';
  #closeListeners: (() => void)[] = [];
  #drainListeners: (() => void)[] = [];
  readonly #connection: ResponseConnection;
  readonly #options: ResponseOptions;

  constructor(connection: ResponseConnection, options: ResponseOptions) {
    this.#connection = connection;
    this.#options = options;
    this.req = { method: options.method };
    this.#hasBody = options.method !== 'HEAD';
    this.#isLast = !options.shouldKeepAlive;
  }

  get headersSent(): boolean {
    return this.#head !== undefined;
  }

  get destroyed(): boolean {
    return this.#isDestroyed;
  }

  get writableFinished(): boolean {
    return this.#isFinished;
  }

  writeHead(statusCode: number, statusMessageOrHeaders: string | string[], maybeHeaders?: string[]): this {
    if (this.#head !== undefined) throw codedError(Error, 'ERR_HTTP_HEADERS_SENT', 'Cannot write headers after they are sent to the client');
    const hasReason = typeof statusMessageOrHeaders === 'string';
    const reason = hasReason ? statusMessageOrHeaders : (STATUS_CODES[statusCode] ?? 'unknown');
    const headers = (hasReason ? maybeHeaders : statusMessageOrHeaders) ?? [];
    if (statusCode < 100 || statusCode > 999) throw codedError(RangeError, 'ERR_HTTP_INVALID_STATUS_CODE', `Invalid status code: ${statusCode}`);
    if (INVALID_FIELD_CHAR.test(reason)) throw codedError(TypeError, 'ERR_INVALID_CHAR', 'Invalid character in statusMessage');
    this.statusCode = statusCode;
    if (statusCode === 204 || statusCode === 304 || statusCode < 200) this.#hasBody = false;

    let head = `HTTP/1.1 ${statusCode} ${reason}\r\n`;
    let hasConnection = false;
    let hasContentLength = false;
    let hasTransferEncoding = false;
    let hasDate = false;
    let hasTrailer = false;
    let hasKeepAlive = false;
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!;
      const value = headers[i + 1]!;
      if (!TOKEN.test(name)) throw codedError(TypeError, 'ERR_INVALID_HTTP_TOKEN', `Header name must be a valid HTTP token ["${name}"]`);
      if (INVALID_FIELD_CHAR.test(value)) throw codedError(TypeError, 'ERR_INVALID_CHAR', `Invalid character in header content ["${name}"]`);
      head += `${name}: ${value}\r\n`;
      if (name.length < 4 || name.length > 17) continue;
      switch (name.toLowerCase()) {
        case 'connection':
          hasConnection = true;
          this.#isLast = CONNECTION_CLOSE.test(value);
          break;
        case 'transfer-encoding':
          hasTransferEncoding = true;
          if (CHUNKED.test(value)) this.#isChunked = true;
          break;
        case 'content-length':
          hasContentLength = true;
          break;
        case 'date':
          hasDate = true;
          break;
        case 'trailer':
          hasTrailer = true;
          break;
        case 'keep-alive':
          hasKeepAlive = true;
          break;
      }
    }
    if (this.sendDate && !hasDate) head += `Date: ${utcDate()}\r\n`;
    if (this.#isChunked && (statusCode === 204 || statusCode === 304)) {
      this.#isLast = true;
      this.#isChunked = false;
    }
    if (!hasConnection) {
      if (this.#isLast) {
        head += 'Connection: close\r\n';
      } else {
        head += 'Connection: keep-alive\r\n';
        const { keepAliveTimeoutMs } = this.#options;
        if (keepAliveTimeoutMs > 0 && !hasKeepAlive) head += `Keep-Alive: timeout=${Math.floor(keepAliveTimeoutMs / 1000)}\r\n`;
      }
    }
    if (!hasContentLength && !hasTransferEncoding && this.#hasBody) {
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
    const socket = this.#beginWrite();
    if (this.#isChunked) {
      socket.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
      socket.write(chunk);
      return socket.write(LAST_CHUNK_CRLF, 'latin1');
    }
    return socket.write(chunk);
  }

  end(chunk?: string): this {
    if (this.#isEnded || this.#isDestroyed) return this;
    if (this.#head === undefined) this.writeHead(this.statusCode, []);
    this.#isEnded = true;
    const socket = this.#beginWrite();
    let last = '';
    if (this.#hasBody && chunk !== undefined && chunk.length > 0) {
      const body = Buffer.from(chunk);
      if (this.#isChunked) socket.write(`${body.length.toString(16)}\r\n`, 'latin1');
      socket.write(body);
      if (this.#isChunked) last = '\r\n';
    }
    if (this.#isChunked) last += `0\r\n${this.#trailers}\r\n`;
    socket.write(last, 'latin1', (error) => this.#onFinished(error));
    return this;
  }

  destroy(): this {
    if (!this.#isDestroyed) {
      this.#isDestroyed = true;
      this.#connection.socket.destroy();
    }
    return this;
  }

  addTrailers(trailers: [string, string][]): void {
    for (const [name, value] of trailers) {
      if (!TOKEN.test(name)) throw codedError(TypeError, 'ERR_INVALID_HTTP_TOKEN', `Trailer name must be a valid HTTP token ["${name}"]`);
      if (INVALID_FIELD_CHAR.test(value)) throw codedError(TypeError, 'ERR_INVALID_CHAR', `Invalid character in trailer content ["${name}"]`);
      this.#trailers += `${name}: ${value}\r\n`;
    }
  }

  writeContinue(): void {
    this.#connection.socket.write('HTTP/1.1 100 Continue\r\n\r\n', 'latin1');
  }

  once(event: 'close' | 'drain', listener: () => void): this {
    if (event === 'close') this.#closeListeners.push(listener);
    else this.#drainListeners.push(listener);
    return this;
  }

  /** The connection's socket drained (the connection forwards it to the response in flight). */
  emitDrain(): void {
    const listeners = this.#drainListeners;
    this.#drainListeners = [];
    for (const listener of listeners) listener();
  }

  /** The connection closed under the response (a finished response has already emitted `close`). */
  onConnectionClose(): void {
    this.#isDestroyed = true;
    this.#emitClose();
  }

  /** Corks the socket for this tick (head and body leave in one system call) and writes the head once. */
  #beginWrite(): Socket {
    const socket = this.#connection.socket;
    if (!socket.writableCorked) {
      socket.cork();
      process.nextTick(uncork, socket);
    }
    if (!this.#isHeadWritten) {
      this.#isHeadWritten = true;
      socket.write(this.#head!, 'latin1');
    }
    return socket;
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

function uncork(socket: Socket): void {
  socket.uncork();
}

/** An error with node's `code`, as node's own `ServerResponse` throws it. */
function codedError(Kind: new (message: string) => Error, code: string, message: string): Error {
  return Object.assign(new Kind(message), { code });
}

let cachedDate = '';
let cachedSecond = -1;

/** The IMF-fixdate of now (RFC 9110 §5.6.7), computed at most once a second. */
function utcDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedDate = new Date(now).toUTCString();
  }
  return cachedDate;
}
