/**
 * One request/response exchange with one upstream over a pooled raw `node:net` connection — the
 * proxy's "round trip" (Go's `Transport.RoundTrip`), written without node:http's client (Step 4:
 * ClientRequest, IncomingMessage and the Agent are where a node:http proxy spends its time).
 *
 *   1. take a connection from the pool (reused, or a new one within `connect_timeout`);
 *   2. write the request head as one buffer, then stream the body with backpressure (re-framed as
 *      chunked when the client's was; Content-Length bodies go through byte for byte);
 *   3. feed every byte the upstream sends to the strict ResponseParser (src/http), which answers
 *      with the head, body chunks, trailers and "complete" — or an error for bad framing;
 *   4. hand the head to the caller (`response`), then the body to the sink the caller attaches
 *      (`streamBodyTo`), pausing the upstream socket while the client cannot keep up;
 *   5. give the connection back to the pool only when the response completed cleanly, the request
 *      was fully sent, keep-alive is allowed and no stray byte followed; otherwise close it.
 *
 * `read_timeout` is the socket's idle timeout for the whole exchange (waiting for the head, between
 * body bytes). Facts the retry policy needs are kept in `progress`.
 */
import type { Readable } from 'node:stream';
import type { Socket } from 'node:net';
import type { UpstreamConfig } from '../config/config.js';
import { ClientAbortError, RequestError, UpstreamProtocolError, UpstreamResetError, UpstreamTimeoutError } from '../errors.js';
import type { ConnectionHandler, ConnectionPool, UpstreamConnection } from '../http/connection-pool.js';
import { serializeRequestHead } from '../http/request-head.js';
import { ResponseParser, type ResponseHead } from '../http/response-parser.js';

/** Everything one exchange needs. */
export interface ExchangeOptions {
  readonly pool: ConnectionPool;
  readonly upstream: UpstreamConfig;
  readonly method: string;
  /** Path and query, as it goes on the request line. */
  readonly target: string;
  /** Flat raw header list (Host first), framing headers included. */
  readonly headers: readonly string[];
  /** The request body, or undefined when there is none. Read only once the connection is up. */
  readonly body: Readable | undefined;
  /** Re-frame the body as chunked (the client's was chunked; `Transfer-Encoding: chunked` is in `headers`). */
  readonly isChunkedBody: boolean;
  /** ms. */
  readonly connectTimeoutMs: number;
  /** ms, upstream idle limit. */
  readonly readTimeoutMs: number;
  /** Use a new connection, not a pooled one (the resend after a stale pooled connection). */
  readonly isNewConnectionRequired?: boolean;
}

/** What happened on the wire, for the retry policy (SPEC 4) and the stale-connection retry. */
export interface AttemptProgress {
  /** A connection was established or a pooled one assigned. */
  isConnected: boolean;
  /**
   * The request body started to stream to the upstream (set when the head goes out, before the
   * first body byte): from here on the body cannot be replayed.
   */
  hasStreamedBody: boolean;
  /** The connection came from the keep-alive pool. */
  isReusedSocket: boolean;
  /** At least one byte came back from the upstream. */
  hasResponseBytes: boolean;
}

/** Where the response body goes: the client response, in practice. */
export interface BodySink {
  /**
   * `chunk` is a view of the upstream connection's read buffer. Returns true when the sink is done
   * with it (copied or written) and has room for more; false when it still holds it or is full:
   * then nothing is read until `drain`.
   */
  write(chunk: Buffer): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

export interface BodyEvents {
  /** Every body chunk, after it was written to the sink (for byte counts). */
  onChunk?(chunk: Buffer): void;
  /** The body is complete; `rawTrailers` is `[name, value, …]`, empty when there were none. */
  onEnd(rawTrailers: readonly string[]): void;
  /** The exchange failed after the head (reset, timeout, bad chunk): the client connection must be closed. */
  onError(error: RequestError): void;
}

export class UpstreamExchange implements ConnectionHandler {
  readonly progress: AttemptProgress = { isConnected: false, hasStreamedBody: false, isReusedSocket: false, hasResponseBytes: false };
  /** Settles with the final response head, or rejects with a RequestError. */
  readonly response: Promise<ResponseHead>;

  readonly #options: ExchangeOptions;
  #connection: UpstreamConnection | undefined;
  #parser: ResponseParser;
  #resolveHead!: (head: ResponseHead) => void;
  #rejectHead!: (error: RequestError) => void;
  #head: ResponseHead | undefined;
  #isRequestSent = false;
  #isComplete = false;
  #isDone = false;
  #hasExtraBytes = false;
  /** Body chunks parsed before `streamBodyTo` attached a sink. */
  #pending: Buffer[] = [];
  /** `#pending` holds a view of the read buffer: the socket is paused until they are delivered. */
  #isHoldingPending = false;
  #trailers: readonly string[] = [];
  #sink: BodySink | undefined;
  #events: BodyEvents | undefined;
  #failure: RequestError | undefined;
  /** A `drain` listener is waiting on the sink (one at a time, however many chunks filled it). */
  #isWaitingForDrain = false;
  /** Cancels a connect still in progress when the exchange ends first (only made when one is needed). */
  #connectAbort: AbortController | undefined;
  readonly #onSinkDrain = (): void => {
    this.#isWaitingForDrain = false;
    if (this.#isDone) return; // a released connection is someone else's now
    if (this.#isComplete) this.#releaseIfDone();
    else this.#connection?.socket.resume();
  };

  constructor(options: ExchangeOptions) {
    this.#options = options;
    this.#parser = this.#createParser();
    this.response = new Promise<ResponseHead>((resolve, reject) => {
      this.#resolveHead = resolve;
      this.#rejectHead = reject;
    });
    this.response.catch(() => {}); // the caller reads it; a rejection nobody awaited is not a crash
    this.#start().catch((error: unknown) => this.#fail(asRequestError(error as Error)));
  }

  /**
   * Attaches the body's destination after the head was handed out. Chunks already parsed are
   * written first. `events` is told about the end (with trailers) or a failure — exactly one of them.
   */
  streamBodyTo(sink: BodySink, events: BodyEvents): void {
    this.#sink = sink;
    this.#events = events;
    const pending = this.#pending;
    this.#pending = [];
    for (const chunk of pending) this.#deliver(chunk);
    if (this.#isHoldingPending) {
      this.#isHoldingPending = false;
      if (this.#isComplete) this.#releaseIfDone();
      else if (!this.#isWaitingForDrain && !this.#isDone) this.#connection?.socket.resume();
    }
    if (this.#failure !== undefined) events.onError(this.#failure);
    else if (this.#isComplete) this.#finishBody();
  }

  /** The client went away: close the upstream connection at once (never reused). Idempotent. */
  abort(): void {
    if (this.#isDone) return;
    this.#fail(new ClientAbortError('the client went away'));
  }

  // ---- 1 and 2: connect, send ------------------------------------------------------------------

  async #start(): Promise<void> {
    const { pool, upstream } = this.#options;
    let connection: UpstreamConnection;
    try {
      const idle = this.#options.isNewConnectionRequired === true ? undefined : pool.acquireIdle(upstream.host, upstream.port);
      if (idle !== undefined) {
        connection = idle;
      } else {
        this.#connectAbort = new AbortController();
        connection = await pool.acquire(upstream.host, upstream.port, {
          connectTimeoutMs: this.#options.connectTimeoutMs,
          signal: this.#connectAbort.signal,
          isNewRequired: true,
        });
      }
    } catch (error) {
      this.#isDone = true;
      this.#rejectHead(this.#failure ?? (error instanceof RequestError ? error : new UpstreamResetError(String(error))));
      return;
    }
    if (this.#isDone) {
      pool.destroy(connection); // aborted while connecting
      return;
    }
    this.#connection = connection;
    this.progress.isConnected = true;
    this.progress.isReusedSocket = connection.wasReused;
    connection.handler = this;
    connection.setIdleTimeout(this.#options.readTimeoutMs);
    this.#send(connection.socket);
  }

  #send(socket: Socket): void {
    const { method, target, headers, body } = this.#options;
    let head: Buffer;
    try {
      head = serializeRequestHead(method, target, headers);
    } catch (error) {
      this.#fail(error as RequestError);
      return;
    }
    if (body === undefined) {
      socket.write(head);
      this.#isRequestSent = true;
      return;
    }
    if (body.errored) {
      this.#fail(asRequestError(body.errored));
      return;
    }
    socket.write(head);
    this.progress.hasStreamedBody = true;
    const isChunked = this.#options.isChunkedBody;
    const onBodyData = (chunk: Buffer): void => {
      const isFull = isChunked
        ? !socket.write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, CRLF]))
        : !socket.write(chunk);
      if (isFull) {
        body.pause();
        socket.once('drain', () => body.resume());
      }
    };
    const onBodyEnd = (): void => {
      if (isChunked) socket.write(LAST_CHUNK);
      this.#isRequestSent = true;
      this.#releaseIfDone();
    };
    const onBodyError = (error: Error): void => this.#fail(asRequestError(error));
    body.on('data', onBodyData);
    body.once('end', onBodyEnd);
    body.once('error', onBodyError);
    this.#stopBody = () => {
      body.off('data', onBodyData);
      body.off('end', onBodyEnd);
      body.off('error', onBodyError);
    };
  }

  #stopBody: () => void = () => {};

  // ---- 3 and 4: receive (ConnectionHandler: the pool calls these with the socket's events) --------

  onData(chunk: Buffer): void {
    this.#receive(chunk);
  }

  onEnd(): void {
    this.#receiveEnd();
  }

  onError(error: NodeJS.ErrnoException): void {
    this.#fail(this.#classify(error));
  }

  onClose(): void {
    this.#fail(new UpstreamResetError(`${this.#options.upstream.origin} closed the connection`));
  }

  onTimeout(): void {
    const { readTimeoutMs, upstream } = this.#options;
    if (this.#isWaitingForDrain) {
      // The upstream is quiet because we stopped reading it: the client has not taken what it was
      // sent for that long. Cut, but as the client's stall, not the upstream's (nginx's send_timeout).
      this.#fail(new ClientAbortError(`the client read nothing of its response for ${readTimeoutMs}ms`));
      return;
    }
    this.#fail(new UpstreamTimeoutError(`${upstream.origin} sent nothing for ${readTimeoutMs}ms`, 'read'));
  }

  #createParser(): ResponseParser {
    return new ResponseParser({
      method: this.#options.method,
      onHead: (head) => {
        if (head.statusCode === 101) {
          throw new UpstreamProtocolError(`${this.#options.upstream.origin} switched protocols without being asked to`);
        }
        this.#head = head;
        this.#resolveHead(head);
      },
      onBody: (chunk) => {
        if (this.#sink !== undefined) {
          this.#deliver(chunk);
        } else if (chunk.length <= PENDING_COPY_MAX_BYTES) {
          this.#pending.push(Buffer.from(chunk)); // the read buffer is reused by the next read: a copy
        } else {
          // Too big to copy: kept in place, and the socket reads nothing until streamBodyTo.
          this.#pending.push(chunk);
          this.#isHoldingPending = true;
          this.#connection?.socket.pause();
        }
      },
      onTrailers: (rawTrailers) => {
        this.#trailers = rawTrailers;
      },
      onComplete: () => {
        this.#isComplete = true;
      },
    });
  }

  #receive(chunk: Buffer): void {
    this.progress.hasResponseBytes = true;
    let consumed: number;
    try {
      consumed = this.#parser.execute(chunk);
    } catch (error) {
      this.#fail(asRequestError(error as Error));
      return;
    }
    if (consumed < chunk.length) this.#hasExtraBytes = true;
    if (this.#isComplete) {
      this.#releaseIfDone();
      if (this.#events !== undefined) this.#finishBody();
    }
  }

  #receiveEnd(): void {
    try {
      this.#parser.finish();
    } catch (error) {
      this.#fail(asRequestError(error as Error));
      return;
    }
    if (this.#isComplete) {
      this.#hasExtraBytes = true; // the connection is gone: never reuse it
      this.#releaseIfDone();
      if (this.#events !== undefined) this.#finishBody();
    }
  }

  /**
   * Writes a body chunk to the sink. The chunk is a view of the connection's read buffer: while the
   * sink holds it (write returned false, until `drain`) the socket reads nothing, and the
   * connection is not given back to the pool.
   */
  #deliver(chunk: Buffer): void {
    const sink = this.#sink!;
    const hasRoom = sink.write(chunk);
    this.#events!.onChunk?.(chunk);
    if (!hasRoom && !this.#isWaitingForDrain) {
      this.#isWaitingForDrain = true;
      this.#connection?.socket.pause();
      sink.once('drain', this.#onSinkDrain);
    }
  }

  #finishBody(): void {
    const events = this.#events!;
    this.#events = undefined; // exactly once
    events.onEnd(this.#trailers);
  }

  // ---- 5: release or close ---------------------------------------------------------------------

  /** Once both the response is complete and the request fully sent, the connection goes back to the pool (or is closed). */
  #releaseIfDone(): void {
    if (this.#isDone || !this.#isComplete || this.#isWaitingForDrain || this.#isHoldingPending) return; // later, then
    const connection = this.#connection;
    if (connection === undefined) return;
    if (!this.#isRequestSent) {
      // The upstream answered before the whole body was sent (e.g. an early 413): the connection
      // is mid-request and cannot carry another one.
      this.#close();
      return;
    }
    this.#isDone = true;
    connection.socket.resume(); // in case backpressure paused it; the pool watches idle sockets in flowing mode
    const isReusable = this.#head?.isKeepAlive === true && !this.#hasExtraBytes;
    if (isReusable) this.#options.pool.release(connection);
    else this.#options.pool.destroy(connection);
  }

  #fail(error: RequestError): void {
    if (this.#isDone) return;
    this.#failure ??= error;
    this.#close();
    if (this.#head === undefined) this.#rejectHead(this.#failure);
    else if (this.#events !== undefined && !this.#isComplete) {
      const events = this.#events;
      this.#events = undefined;
      events.onError(this.#failure);
    }
  }

  #close(): void {
    this.#isDone = true;
    this.#connectAbort?.abort(new ClientAbortError('the exchange ended before its connection was up'));
    this.#stopBody();
    const connection = this.#connection;
    if (connection === undefined) return;
    this.#options.pool.destroy(connection);
  }

  #classify(error: NodeJS.ErrnoException): RequestError {
    if (error instanceof RequestError) return error;
    return new UpstreamResetError(`${this.#options.upstream.origin} closed the connection (${error.code === 'ECONNRESET' ? 'reset' : (error.code ?? error.message)})`);
  }
}

/** Body bytes that arrive before the sink is attached are copied up to this size, bytes; larger ones are held in place. */
const PENDING_COPY_MAX_BYTES = 4096;
const CRLF = Buffer.from('\r\n');
const LAST_CHUNK = Buffer.from('0\r\n\r\n');

/** A failure of the client's request body (it went away mid-upload) is the client's, not the upstream's. */
function asRequestError(error: Error): RequestError {
  return error instanceof RequestError ? error : new ClientAbortError(`request body: ${error.message}`);
}
