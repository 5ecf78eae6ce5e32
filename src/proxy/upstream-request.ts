/**
 * One attempt to send a request to one upstream (the "round trip" of Go's ReverseProxy), over
 * node:http's client with a keep-alive Agent so upstream connections are reused (SPEC 5).
 *
 * It turns node's many failure shapes into the four request errors of src/errors.ts, and records
 * the facts the retry policy needs: was anything sent yet, was the body streamed, was the socket a
 * reused keep-alive one. The request body is not read from the client until the upstream connection
 * is up, so a connect failure leaves the body unread and the request can be replayed elsewhere.
 */
import http from 'node:http';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { UpstreamConfig } from '../config/config.js';
import {
  RequestError,
  UpstreamConnectError,
  UpstreamProtocolError,
  UpstreamResetError,
  UpstreamTimeoutError,
} from '../errors.js';

export interface UpstreamRequestOptions {
  readonly agent: http.Agent;
  readonly upstream: UpstreamConfig;
  readonly method: string;
  /** Path and query, as it goes on the request line. */
  readonly target: string;
  /** Flat raw header list (Host first). */
  readonly headers: readonly string[];
  /** The client's request body, or undefined when it has none. Piped once connected. */
  readonly body: Readable | undefined;
  /** TCP connect limit (ms). */
  readonly connectTimeoutMs: number;
  /** Idle limit while waiting for the head and between body bytes (ms). */
  readonly readTimeoutMs: number;
}

/** What happened on the wire, for the retry policy (SPEC 4) and the access log. */
export interface AttemptProgress {
  /** The upstream connection was established (or a reused one was assigned). */
  isConnected: boolean;
  /** Request body bytes were read from the client (the body cannot be replayed any more). */
  hasStreamedBody: boolean;
  /** The socket came from the keep-alive pool. */
  isReusedSocket: boolean;
}

export interface UpstreamAttempt {
  readonly request: ClientRequest;
  readonly progress: AttemptProgress;
  /** Settles with the upstream's final response head, or rejects with a RequestError. */
  readonly response: Promise<IncomingMessage>;
}

/** Sends the request; see {@link UpstreamAttempt}. Never throws synchronously for network reasons. */
export function sendUpstreamRequest(options: UpstreamRequestOptions): UpstreamAttempt {
  const progress: AttemptProgress = { isConnected: false, hasStreamedBody: false, isReusedSocket: false };
  const { upstream } = options;
  const request = http.request({
    agent: options.agent,
    host: upstream.host,
    port: upstream.port,
    method: options.method,
    path: options.target,
    headers: options.headers as string[],
    setHost: false,
  });

  const response = new Promise<IncomingMessage>((resolve, reject) => {
    let connectTimer: NodeJS.Timeout | undefined;
    let failure: RequestError | undefined;
    const fail = (error: RequestError): void => {
      failure ??= error;
      request.destroy(failure);
    };

    request.once('socket', (socket: Socket) => {
      progress.isReusedSocket = request.reusedSocket;
      if (socket.connecting) {
        connectTimer = setTimeout(
          () => fail(new UpstreamTimeoutError(`connect to ${upstream.origin} timed out after ${options.connectTimeoutMs}ms`, 'connect')),
          options.connectTimeoutMs,
        );
        socket.once('connect', () => {
          clearTimeout(connectTimer);
          onConnected();
        });
      } else {
        onConnected();
      }
    });

    const onConnected = (): void => {
      progress.isConnected = true;
      if (options.body === undefined) {
        request.end();
        return;
      }
      const bodyFailure = (error: Error): RequestError =>
        error instanceof RequestError ? error : new UpstreamResetError(`request body: ${error.message}`);
      if (options.body.errored) return fail(bodyFailure(options.body.errored)); // e.g. over max_body_size already
      progress.hasStreamedBody = true;
      options.body.once('error', (error) => fail(bodyFailure(error)));
      options.body.pipe(request);
    };

    request.setTimeout(options.readTimeoutMs, () =>
      fail(new UpstreamTimeoutError(`${upstream.origin} sent nothing for ${options.readTimeoutMs}ms`, 'read')),
    );
    request.once('response', (upstreamRes) => {
      clearTimeout(connectTimer);
      resolve(upstreamRes);
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(connectTimer);
      reject(failure ?? classifyError(error, upstream, progress));
    });
  });
  return { request, progress, response };
}

/** Maps a node client error to one of the request errors (and so to 502/504). */
export function classifyError(error: NodeJS.ErrnoException, upstream: UpstreamConfig, progress: AttemptProgress): RequestError {
  if (error instanceof RequestError) return error;
  const code = error.code ?? 'ERROR';
  if (!progress.isConnected) return new UpstreamConnectError(`connect ${code} ${upstream.origin}`);
  if (code.startsWith('HPE_')) return new UpstreamProtocolError(`malformed response from ${upstream.origin}: ${code}`);
  return new UpstreamResetError(`${upstream.origin} closed the connection (${code === 'ECONNRESET' ? 'reset' : code})`);
}
