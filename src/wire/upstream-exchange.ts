/**
 * One request/response exchange with one upstream over a pooled raw `node:net` connection (a
 * `node:tls` one for an `https://` upstream, the same in every other respect) — the
 * proxy's "round trip" (Go's `Transport.RoundTrip`), written without node:http's client (Step 4:
 * ClientRequest, IncomingMessage and the Agent are where a node:http proxy spends its time).
 *
 *   1. take a connection from the pool (reused, or a new one within `connect_timeout`);
 *   2. write the request head as one latin1 string, then stream the body with backpressure (re-framed as
 *      chunked when the client's was; Content-Length bodies go through byte for byte). Body bytes
 *      that came with the head leave in the head's write (the whole request in one write when the
 *      body was all here); later ones in batches, each after a poll phase has read whatever the
 *      upstream sent (see "early answers" below);
 *   3. feed every byte the upstream sends to the strict ResponseParser (src/wire), which answers
 *      with the head, body chunks, trailers and "complete" — or an error for bad framing;
 *   4. hand the head to the caller (`response`), then the body to the sink the caller attaches
 *      (`streamBodyTo`), pausing the upstream socket while the client cannot keep up;
 *   5. give the connection back to the pool only when the response completed cleanly, the request
 *      was fully sent (after an early keep-alive answer: once the rest of the body was), keep-alive
 *      is allowed and no stray byte followed; otherwise close it.
 *
 * `read_timeout` is the socket's idle timeout for the whole exchange (waiting for the head, between
 * body bytes), except while the upstream has every body byte sent so far and only waits for the
 * client's next ones. Facts the retry policy needs are kept in `progress`.
 *
 * Early answers (SPEC 5: an upstream that answers 413 or 401 before the upload ended has that
 * answer relayed, not a 502). An upstream that closes with part of the body unread makes its kernel
 * answer our next bytes with a reset, and node destroys a socket whose write fails, unread answer
 * and all. So: once the head arrived and says the upstream closes, no more body is sent (RFC 9112
 * §9.5: the client "SHOULD immediately cease transmitting the body"); an error after the head never
 * rejects `response`; and the body is written so that the upstream's socket is read just before
 * each write. A write made from the body reader's `onRequestBodyData` goes out in the middle of a poll
 * phase, and an answer that arrived while that phase was reading the client (megabytes of upload)
 * is lost to it. Instead the chunks of one batch are queued while the body is paused, and written
 * one event-loop turn later (two `setImmediate` hops): the poll phase in between reads the
 * upstream's answer, if any, and reads little else, since the client's body is paused. Against an
 * upstream that answers 413 and closes after reading the head, this turned 10 of 10 502s into 10 of
 * 10 relayed answers (test/integration/streaming.test.ts).
 *
 * Upgrades (`upgrade`, RFC 9110 §7.8): a new connection that is never pooled. A 101 is accepted
 * only then, only with `Connection: upgrade` and only to the protocol asked for, as Go's
 * ReverseProxy checks (otherwise it is an `UpstreamProtocolError`, a 502); after it the caller takes the socket and
 * the bytes that came after the 101 head with `takeOverConnection` and joins it to the client's
 * (upgrade-tunnel.ts). Any other answer to an upgrade request is an ordinary response.
 */
import type { Socket } from 'node:net';
import { ClientAbortError, RequestError, UpstreamProtocolError, UpstreamResetError, UpstreamTimeoutError, UpstreamTlsError } from '../errors.js';
import type { RequestBody, RequestBodyReader } from './client-side.js';
import type { ConnectionHandler, UpstreamConnection, UpstreamTransport } from './connection-pool.js';
import { isTlsAlert, tlsFailureReason, type TlsClientSettings } from './tls-client.js';
import { serializeLastChunk, serializeRequestHead } from './request-head.js';
import { equalsIgnoringCase, listElements } from './field-bytes.js';
import { ResponseParser, type ResponseHead } from './response-parser.js';

/** Where an exchange goes: all the wire needs of an upstream (a config's `UpstreamConfig` fits). */
export interface UpstreamAddress {
  readonly host: string;
  readonly port: number;
  /** `http://host:port`, for error messages. */
  readonly origin: string;
  /**
   * For an `https://` upstream: the name TLS sends as SNI and verifies when the route sets no
   * `tls_server_name` (a discovered address's line host); absent = `host`.
   */
  readonly tlsName?: string | undefined;
}

/** Everything one exchange needs. */
export interface ExchangeOptions {
  readonly pool: UpstreamTransport;
  readonly upstream: UpstreamAddress;
  /** For an `https://` upstream: the route's TLS settings (src/wire/tls-client.ts); undefined = plain TCP. */
  readonly tls?: TlsClientSettings | undefined;
  readonly method: string;
  /** Path and query, as it goes on the request line. */
  readonly target: string;
  /** Flat raw header list (Host first), framing headers included. */
  readonly headers: readonly string[];
  /** How many entries at the start of `headers` are valid fields already (serializeRequestHead's `checkedLength`). Default 0. */
  readonly checkedHeaderLength?: number;
  /** The request body, or undefined when there is none. Read only once the connection is up. */
  readonly body: RequestBody | undefined;
  /** Re-frame the body as chunked (the client's was chunked; `Transfer-Encoding: chunked` is in `headers`). */
  readonly isChunkedBody: boolean;
  /**
   * Of a chunked body's trailer fields (`[name, value, …]`), those that go to the upstream after
   * the last chunk; undefined = none.
   */
  readonly forwardTrailers?: ((rawTrailers: readonly string[]) => readonly (readonly [string, string])[]) | undefined;
  /** ms. */
  readonly connectTimeoutMs: number;
  /** ms, upstream idle limit. */
  readonly readTimeoutMs: number;
  /** Use a new connection, not a pooled one (the resend after a stale pooled connection). */
  readonly isNewConnectionRequired?: boolean;
  /**
   * The protocol the request asks to switch to (its `Upgrade` value; `Connection: upgrade` and
   * `Upgrade` are in `headers`): a new connection of its own, and a 101 to that protocol is
   * accepted (see the file comment). Undefined: no upgrade.
   */
  readonly upgrade?: string | undefined;
}

/** An upstream connection taken over after a 101: the raw socket and the bytes read after the 101 head. */
export interface SwitchedConnection {
  readonly socket: Socket;
  readonly head: Buffer;
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

export class UpstreamExchange implements ConnectionHandler, RequestBodyReader {
  readonly progress: AttemptProgress = { isConnected: false, hasStreamedBody: false, isReusedSocket: false, hasResponseBytes: false };

  readonly #options: ExchangeOptions;
  #connection: UpstreamConnection | undefined;
  #parser: ResponseParser;
  /** `response`, made when first read (see there); its settling functions until then undefined. */
  #response: Promise<ResponseHead> | undefined;
  #resolveHead: ((head: ResponseHead) => void) | undefined;
  #rejectHead: ((error: RequestError) => void) | undefined;
  #head: ResponseHead | undefined;
  /** Why there is no head: the exchange failed before one came. */
  #headError: RequestError | undefined;
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
  /** Body chunks (framed) waiting to be written (see the file comment); made only for a request with a body. */
  #bodyQueue: Buffer[] | undefined;
  #isBodyFlushScheduled = false;
  /** The request body ended; its end (the last chunk) leaves with the queue. */
  #isBodyEnded = false;
  /** After a 101: the bytes the upstream sent after its head, until `takeOverConnection`. */
  #switchedBytes: Buffer[] | undefined;
  readonly #onSinkDrain = (): void => {
    this.#isWaitingForDrain = false;
    if (this.#isDone) return; // a released connection is someone else's now
    if (this.#isComplete) this.#releaseIfDone();
    else this.#connection?.socket.resume();
  };

  constructor(options: ExchangeOptions) {
    this.#options = options;
    this.#parser = this.#createParser();
    try {
      this.#start();
    } catch (error) {
      this.#fail(asRequestError(error as Error));
    }
  }

  /**
   * Settles with the final response head, or rejects with a RequestError. Made when first read, so
   * that an exchange whose failure nobody asks about leaves no rejected promise behind (an
   * unhandled rejection), without a `catch` on every request's promise to prevent one.
   */
  get response(): Promise<ResponseHead> {
    if (this.#response === undefined) {
      if (this.#head !== undefined) this.#response = Promise.resolve(this.#head);
      else if (this.#headError !== undefined) this.#response = Promise.reject(this.#headError);
      else {
        this.#response = new Promise<ResponseHead>((resolve, reject) => {
          this.#resolveHead = resolve;
          this.#rejectHead = reject;
        });
      }
    }
    return this.#response;
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

  /**
   * After `response` resolved with a 101: the exchange ends and the caller owns the upstream socket
   * (its errors and its closing included) and the bytes the upstream sent after the 101 head.
   * Returns undefined when the connection failed in between (it is closed; `progress` and the
   * failure say how).
   * @throws Error when the response was not a 101 to an upgrade request.
   */
  takeOverConnection(): SwitchedConnection | undefined {
    const switchedBytes = this.#switchedBytes;
    if (switchedBytes === undefined) throw new Error('takeOverConnection: the upstream did not switch protocols');
    const connection = this.#connection;
    if (this.#isDone || connection === undefined) return undefined;
    this.#isDone = true;
    const socket = this.#options.pool.detach(connection);
    return { socket, head: switchedBytes.length === 1 ? switchedBytes[0]! : Buffer.concat(switchedBytes) };
  }

  /**
   * The client went away (or `reason` says who ended the request): close the upstream connection
   * at once (never reused). Idempotent.
   */
  abort(reason: RequestError = new ClientAbortError('the client went away')): void {
    if (this.#isDone) return;
    this.#fail(reason);
  }

  // ---- 1 and 2: connect, send ------------------------------------------------------------------

  /**
   * Sends at once on an idle pooled connection, or opens a new one first (`#connect`). The common
   * case, an idle connection, stays synchronous: no async function and no promise of its own.
   */
  #start(): void {
    const { pool, upstream } = this.#options;
    const isUpgrade = this.#options.upgrade !== undefined;
    const idle = this.#options.isNewConnectionRequired === true || isUpgrade ? undefined : pool.acquireIdle(upstream.host, upstream.port, this.#options.tls, upstream.tlsName);
    if (idle === undefined) this.#connect(isUpgrade).catch((error: unknown) => this.#fail(asRequestError(error as Error)));
    else this.#begin(idle);
  }

  /** Opens a new connection (within `connect_timeout`, cancelled by `abort`), then sends. */
  async #connect(isUpgrade: boolean): Promise<void> {
    const { pool, upstream } = this.#options;
    let connection: UpstreamConnection;
    try {
      this.#connectAbort = new AbortController();
      connection = await pool.acquire(upstream.host, upstream.port, {
        connectTimeoutMs: this.#options.connectTimeoutMs,
        signal: this.#connectAbort.signal,
        isNewRequired: true,
        isForUpgrade: isUpgrade,
        tls: this.#options.tls,
        tlsName: upstream.tlsName,
      });
    } catch (error) {
      this.#isDone = true;
      this.#failHead(this.#failure ?? (error instanceof RequestError ? error : new UpstreamResetError(`failed: ${String(error)}`, upstream.origin)));
      return;
    }
    if (this.#isDone) {
      pool.destroy(connection); // aborted while connecting
      return;
    }
    this.#begin(connection);
  }

  /** The connection is this exchange's: take its events, set `read_timeout`, send. */
  #begin(connection: UpstreamConnection): void {
    this.#connection = connection;
    this.progress.isConnected = true;
    this.progress.isReusedSocket = connection.wasReused;
    connection.handler = this;
    connection.setIdleTimeout(this.#options.readTimeoutMs);
    this.#send(connection.socket);
  }

  #send(socket: Socket): void {
    const { method, target, headers, body } = this.#options;
    let head: string;
    try {
      head = serializeRequestHead(method, target, headers, this.#options.checkedHeaderLength);
    } catch (error) {
      this.#fail(error as RequestError);
      return;
    }
    if (body === undefined) {
      socket.write(head, 'latin1');
      this.#isRequestSent = true;
      return;
    }
    // Body bytes already here (they came with the request head) leave with the head, in one write:
    // the upstream cannot have answered a request whose head it has not got, so the early-answer
    // race that the batches below guard against does not apply to them.
    const ready = body.takeHeld();
    if (body.errored !== null) {
      this.#fail(asRequestError(body.errored));
      return;
    }
    this.progress.hasStreamedBody = true;
    const isChunked = this.#options.isChunkedBody;
    if (ready === null && !body.isReceived) {
      socket.write(head, 'latin1');
    } else {
      socket.cork();
      socket.write(Buffer.from(head, 'latin1')); // a writev of buffers only: node's path for strings among them is the slower one
      if (ready !== null) {
        if (isChunked) socket.write(Buffer.from(`${ready.length.toString(16)}\r\n`, 'latin1'));
        socket.write(ready);
        if (isChunked) socket.write(CRLF);
      }
      // The whole body was here: the request is sent in this one write.
      if (body.isReceived && isChunked) socket.write(this.#lastChunk());
      socket.uncork();
    }
    if (body.isReceived) {
      this.#isRequestSent = true;
      return;
    }
    this.#bodyQueue = [];
    this.#isSendingBody = true;
    body.attach(this);
  }

  /** RequestBodyReader: a piece of the client's body; it goes out with the next batch. */
  onRequestBodyData(chunk: Buffer): void {
    if (chunk.length === 0) return; // a chunk of size 0 would be the last chunk
    if (this.#options.isChunkedBody) this.#bodyQueue!.push(Buffer.from(`${chunk.length.toString(16)}\r\n`, 'latin1'), chunk, CRLF);
    else this.#bodyQueue!.push(chunk);
    this.#scheduleBodyFlush();
  }

  /** RequestBodyReader: the client's body ended. */
  onRequestBodyEnd(): void {
    this.#isBodyEnded = true;
    // The batch in waiting carries the end; with nothing queued it goes now: an upstream that
    // answers the whole request must find it sent, or its connection could not be reused.
    if (!this.#isBodyFlushScheduled) this.flushQueuedBody();
  }

  /** RequestBodyReader: the client's body failed (bad framing, a timeout, the client left). */
  onRequestBodyError(error: Error): void {
    this.#isSendingBody = false; // the body has no reader left to detach
    this.#fail(asRequestError(error));
  }

  /** The end of a chunked body, with the trailers `forwardTrailers` picks. */
  #lastChunk(): Buffer {
    const { body, forwardTrailers } = this.#options;
    const rawTrailers = body!.rawTrailers;
    return serializeLastChunk(rawTrailers.length === 0 || forwardTrailers === undefined ? [] : forwardTrailers(rawTrailers));
  }

  /** Queues the next batch: the body pauses, and the batch is written after the next poll phase. */
  #scheduleBodyFlush(): void {
    if (this.#isBodyFlushScheduled) return;
    this.#isBodyFlushScheduled = true;
    this.#options.body!.pause();
    setImmediate(awaitPollPhase, this);
  }

  /**
   * Writes the queued batch in one go (the second `setImmediate` of `#scheduleBodyFlush`, or the
   * body's end when nothing is queued), then the last chunk once the body ended; the body resumes
   * at once, or at `drain` when the socket is full.
   */
  flushQueuedBody(): void {
    this.#isBodyFlushScheduled = false;
    const connection = this.#connection;
    if (this.#isDone || connection === undefined || this.#isRequestSent) return;
    const socket = connection.socket;
    const queue = this.#bodyQueue!;
    this.#bodyQueue = [];
    const isEnd = this.#isBodyEnded;
    if (isEnd && this.#options.isChunkedBody) queue.push(this.#lastChunk());
    if (queue.length > 1) socket.cork();
    let hasRoom = true;
    for (const chunk of queue) hasRoom = socket.write(chunk);
    if (queue.length > 1) socket.uncork();
    const body = this.#options.body!;
    if (isEnd) {
      this.#isRequestSent = true;
      this.#stopBody();
      this.#releaseIfDone();
    } else if (hasRoom) {
      body.resume();
    } else {
      socket.once('drain', () => body.resume());
    }
  }

  /**
   * The upstream answered while the body was still being sent and says it closes the connection:
   * stop sending (RFC 9112 §9.5). The rest of the client's body is read and dropped, so the client
   * is not stalled while its answer is relayed.
   */
  #ceaseSendingBody(): void {
    this.#stopBody();
  }

  /** No more of the body goes to the upstream (its end was sent, a cease, a failure): what the client still sends of it is read and dropped. */
  #stopBody(): void {
    if (!this.#isSendingBody) return;
    this.#isSendingBody = false;
    this.#bodyQueue = [];
    this.#options.body!.detach();
  }

  /** The body is attached to this exchange: its bytes go to the upstream as they come (until its end, a cease, or a failure). */
  #isSendingBody = false;

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
    // Without an `end` or an `error` first (those fail the exchange before the socket closes).
    this.#fail(new UpstreamResetError('closed the connection', this.#options.upstream.origin));
  }

  onTimeout(): void {
    const { readTimeoutMs, upstream } = this.#options;
    if (this.#isWaitingForClientBody()) {
      // The upstream has every byte of the body the client sent so far and is quiet because the
      // client is: not the upstream's stall. `read_timeout` counts again from the next byte sent
      // (the socket's idle timer restarts on activity); the client's own pause is the server's
      // `body_timeout` (nginx: `proxy_read_timeout` starts once the request was sent).
      return;
    }
    if (this.#isWaitingForDrain) {
      // The upstream is quiet because we stopped reading it: the client has not taken what it was
      // sent for that long. Cut, but as the client's stall, not the upstream's (nginx's send_timeout).
      this.#fail(new ClientAbortError(`the client read nothing of its response for ${readTimeoutMs}ms`));
      return;
    }
    this.#fail(new UpstreamTimeoutError(`${upstream.origin} sent nothing for ${readTimeoutMs}ms`, 'read'));
  }

  /** Still sending the body, nothing of it waiting here or in the socket, no answer yet: the next bytes are the client's to send. */
  #isWaitingForClientBody(): boolean {
    const socket = this.#connection?.socket;
    return (
      this.#options.body !== undefined &&
      !this.#isRequestSent &&
      this.#head === undefined &&
      !this.#isBodyFlushScheduled &&
      socket !== undefined &&
      socket.writableLength === 0
    );
  }

  #createParser(): ResponseParser {
    return new ResponseParser({
      method: this.#options.method,
      onHead: (head) => {
        if (head.statusCode === 101) {
          const asked = this.#options.upgrade;
          if (asked === undefined) throw new UpstreamProtocolError('101 to a request that asked for no upgrade');
          const answered = switchedProtocolOf(head.rawHeaders);
          if (answered === undefined) throw new UpstreamProtocolError('101 without Connection: upgrade');
          if (!isOfferedProtocol(answered, asked)) {
            throw new UpstreamProtocolError(`101 to '${answered}' when '${asked}' was asked for`);
          }
          this.#switchedBytes = [];
        } else if (!head.isKeepAlive && !this.#isRequestSent) {
          this.#ceaseSendingBody();
        }
        this.#head = head;
        this.#resolveHead?.(head);
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
    if (this.#switchedBytes !== undefined && this.#parser.isComplete) {
      this.#switchedBytes.push(chunk); // the tunnel's (an upgrade connection's reads are fresh buffers)
      return;
    }
    let consumed: number;
    try {
      consumed = this.#parser.execute(chunk);
    } catch (error) {
      this.#fail(asRequestError(error as Error));
      return;
    }
    if (this.#switchedBytes !== undefined) {
      if (consumed < chunk.length) this.#switchedBytes.push(chunk.subarray(consumed));
      return; // the connection waits for takeOverConnection
    }
    if (consumed < chunk.length) this.#hasExtraBytes = true;
    if (this.#isComplete) {
      this.#releaseIfDone();
      if (this.#events !== undefined) this.#finishBody();
    }
  }

  #receiveEnd(): void {
    if (this.#switchedBytes !== undefined) return; // the tunnel sees the end (the socket stays ended)
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
   * connection is not given back to the pool. A copy parsed before the sink came may be written
   * after the response completed and the connection went back to the pool (`#isDone`): that
   * connection is another exchange's by then, and is left alone.
   */
  #deliver(chunk: Buffer): void {
    const sink = this.#sink!;
    const hasRoom = sink.write(chunk);
    this.#events!.onChunk?.(chunk);
    if (!hasRoom && !this.#isWaitingForDrain && !this.#isDone) {
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
    if (this.#switchedBytes !== undefined) return; // a 101: the connection waits for takeOverConnection
    const connection = this.#connection;
    if (connection === undefined) return;
    if (!this.#isRequestSent) {
      // The upstream answered before the whole body was sent. When it keeps the connection (it
      // reads and drops the rest, as nginx does) and the body still goes to it, the connection is
      // released once the body's end is sent; after an answer that closes (an early 413), it is
      // mid-request and cannot carry another one.
      if (this.#head?.isKeepAlive === true && this.#isSendingBody) return;
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
    if (this.#head === undefined) this.#failHead(this.#failure);
    else if (this.#events !== undefined && !this.#isComplete) {
      const events = this.#events;
      this.#events = undefined;
      events.onError(this.#failure);
    }
  }

  /** No head will come: `response` rejects with `error` (now, or when it is made). */
  #failHead(error: RequestError): void {
    if (this.#headError !== undefined) return;
    this.#headError = error;
    this.#rejectHead?.(error);
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
    // An alert on an established TLS connection: with TLS 1.3 a server that wants a client
    // certificate refuses a missing one only now, after our handshake was done.
    if (isTlsAlert(error)) return new UpstreamTlsError(tlsFailureReason(error), 'after-handshake', this.#options.upstream.origin);
    // A reset (RST) is named as one; a close (FIN) comes as `end` and the parser says how far the
    // response got. Any other socket error (EPIPE, ETIMEDOUT…) is named by its code. A reset met by
    // a write says so: the upstream stopped reading the request. What it sent before its reset is
    // lost with the socket (node destroys a socket whose write fails), an alert included: a TLS
    // upstream that refuses our client certificate with an alert while a body is still being sent
    // is logged so, not as a TLS failure, since the alert was never read.
    const reason =
      error.code !== 'ECONNRESET'
        ? `dropped the connection (${error.code ?? error.message})`
        : error.syscall === 'write'
          ? 'reset the connection while the request was being sent (ECONNRESET)'
          : 'reset the connection (ECONNRESET)';
    return new UpstreamResetError(reason, this.#options.upstream.origin);
  }
}

/**
 * The `setImmediate` callbacks of `UpstreamExchange.#scheduleBodyFlush` (no closure per batch): an
 * immediate queued from the check phase runs in the next turn's, after its poll phase.
 */
function awaitPollPhase(exchange: UpstreamExchange): void {
  setImmediate(flushQueuedBody, exchange);
}
function flushQueuedBody(exchange: UpstreamExchange): void {
  exchange.flushQueuedBody();
}

/** Body bytes that arrive before the sink is attached are copied up to this size, bytes; larger ones are held in place. */
const PENDING_COPY_MAX_BYTES = 4096;
const CRLF = Buffer.from('\r\n');

/** A failure of the client's request body (it went away mid-upload) is the client's, not the upstream's. */
function asRequestError(error: Error): RequestError {
  return error instanceof RequestError ? error : new ClientAbortError(`request body: ${error.message}`);
}

/**
 * Whether a 101's `Upgrade` value switches only to protocols the request offered (RFC 9110 §7.8:
 * the client lists them in order of preference and the server picks, `Upgrade: foo/1, websocket`
 * answered by `Upgrade: websocket`), compared ignoring case; an empty answer switches to nothing.
 * nginx tunnels any 101; Go's httputil wants the whole value equal, which refuses a server that
 * picked.
 */
function isOfferedProtocol(answered: string, asked: string): boolean {
  const switched = listElements(answered);
  const offered = listElements(asked);
  return switched.length > 0 && switched.every((protocol) => offered.some((candidate) => candidate.toLowerCase() === protocol.toLowerCase()));
}

/**
 * The protocol a 101 head switches to (RFC 9110 §7.8): its first `Upgrade` value ('' when it has
 * none), read only when a `Connection` header lists the `upgrade` token (any case, alone or in a
 * list such as `keep-alive, Upgrade`); undefined without that token. `Upgrade` is hop-by-hop and
 * must be named in `Connection` (RFC 9110 §7.6.1, §7.8), so a 101 without it announces no switch a
 * proxy may act on: Go's httputil reads it so (`upgradeType`) and refuses such a 101 with a 502.
 */
function switchedProtocolOf(rawHeaders: readonly string[]): string | undefined {
  let isUpgradeListed = false;
  let protocol: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (equalsIgnoringCase(name, 'connection')) {
      isUpgradeListed ||= listElements(rawHeaders[i + 1]!).some((token) => equalsIgnoringCase(token, 'upgrade'));
    } else if (protocol === undefined && equalsIgnoringCase(name, 'upgrade')) {
      protocol = rawHeaders[i + 1];
    }
  }
  return isUpgradeListed ? (protocol ?? '') : undefined;
}
