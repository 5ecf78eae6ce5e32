/**
 * The client side of one request, as the request path sees it: the request it reads and the
 * response it writes. The proxy's HTTP/1.1 server (src/wire/http1-server.ts, with its response
 * writer src/wire/http1-response.ts) stands behind these interfaces; the request path knows the
 * client only through them, so a test can stand in for the client, and another server (TLS,
 * HTTP/2) could.
 *
 * Only what the request path uses is here, so each member is a promise every server must keep.
 * Shapes and semantics are node's `IncomingMessage`/`ServerResponse`'s, where those exist.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';

/** A request head (RFC 9112 §3), with node's shapes. */
export interface ClientRequest {
  readonly method?: string | undefined;
  /** The request target as sent. */
  readonly url?: string | undefined;
  /** `'1.1'` or `'1.0'`. */
  readonly httpVersion: string;
  /** `[name, value, …]`: names as sent, values without surrounding whitespace, latin1. */
  readonly rawHeaders: string[];
  /** Lower-cased names, duplicates combined by node's rules (see `combineHeaders`). */
  readonly headers: IncomingHttpHeaders;
  readonly socket: Socket;
  /**
   * The peer's address (`socket.remoteAddress`) as read when the connection was accepted, never
   * undefined: a socket forgets its address once it closed, and a request must be judged by who
   * sent it (access rules, limits, X-Forwarded-For) even when that peer has already reset the
   * connection. A connection whose peer was gone before it was served is never served.
   */
  readonly remoteAddress: string;
  /** The request came over TLS (the HTTPS listener, `tls_listen`): `X-Forwarded-Proto: https`, HSTS, no `redirect_https`. */
  readonly isTls: boolean;
  /**
   * The request body (RFC 9112 §6), de-chunked, for one reader, with backpressure (see
   * `RequestBody`). Undefined when the request has none.
   */
  readonly body: RequestBody | undefined;
  /**
   * The body's length when the server framed it by Content-Length (RFC 9112 §6.3), bytes; undefined
   * for a chunked body or none. The request path reads the framing from here, never again from the
   * headers: what the server framed is what is forwarded.
   */
  readonly contentLength: number | undefined;
  /** The whole request, body included, has been received. */
  readonly complete: boolean;
  /**
   * The protocol an upgrade request asks to switch to (RFC 9110 §7.8: its `Upgrade` value, with
   * `upgrade` in `Connection`), as the server read the head: HTTP/1.1 and no body, as llhttp
   * decides. Undefined for every other request, which is forwarded without `Upgrade`.
   */
  readonly upgrade: string | undefined;
}

/**
 * A request body as the server reads it from the client: de-chunked pieces in order, then its end
 * or the error that stopped it, for exactly one reader (the upstream exchange). Not a node
 * `Readable`: one reader that takes each piece as it comes needs none of a stream's buffering
 * modes, and their ticks and listeners were most of what a POST cost over a GET
 * (docs/performance.md).
 *
 * Backpressure: what arrives while the reader is paused (or not attached yet) is held; once
 * `BODY_HIGH_WATER_MARK` bytes are held (src/wire/http1-server.ts, 128 KiB) the server stops
 * reading the client until the reader takes them.
 *
 * A body fails with a RequestError (src/errors.ts) saying why it could not be read: bad chunked
 * framing (400), `body_timeout` or `request_timeout` (408), the client left (499).
 */
export interface RequestBody {
  /** The RequestError that stopped the body, or null. */
  readonly errored: Error | null;
  /** Every byte of the body was received: what `takeHeld` returns then is the rest of it. */
  readonly isReceived: boolean;
  /** A chunked body's trailer fields (RFC 9112 §7.1.2), `[name, value, …]` as read; empty until `isReceived`, and when there are none. */
  readonly rawTrailers: readonly string[];
  /** Takes what is held (received, not yet delivered) as one buffer; null when nothing is. */
  takeHeld(): Buffer | null;
  /**
   * From now on each piece goes to `reader` as it arrives (what is held first, on a later tick),
   * then the end or the error, each on a later tick than this call: never from inside it.
   */
  attach(reader: RequestBodyReader): void;
  /** Hold further pieces until `resume`. */
  pause(): void;
  /** Deliver again: what was held first, on a later tick. */
  resume(): void;
  /**
   * The reader takes no more: what is held and the rest of the body are read and dropped, so a
   * reader that stopped (an upstream that answered early) never stalls the client.
   */
  detach(): void;
}

/** The one reader of a `RequestBody`. */
export interface RequestBodyReader {
  onRequestBodyData(chunk: Buffer): void;
  onRequestBodyEnd(): void;
  onRequestBodyError(error: Error): void;
}

/** The response to a `ClientRequest`, with node's `ServerResponse` semantics. */
export interface ClientResponse {
  readonly req: { readonly method?: string | undefined };
  /** True once `writeHead` ran (the head may not be on the wire yet). */
  readonly headersSent: boolean;
  /** The response, or the connection under it, was destroyed. */
  readonly destroyed: boolean;
  /** The whole response was handed to the operating system. */
  readonly writableFinished: boolean;
  readonly statusCode: number;
  /**
   * `headers` is a flat raw list `[name, value, …]`; throws on invalid names or values (as node).
   * `checkedLength`: how many entries at its start are valid fields already and need no check
   * (read by this proxy's response parser, buildClientResponseHeaders); default 0.
   * `checkedLines`: those entries as their lines on the wire, `name ": " value CRLF` each, in
   * order (buildClientResponseFields' `fieldBlock`), sent as they are; default: joined from `headers`.
   */
  writeHead(statusCode: number, headers: string[]): unknown;
  writeHead(statusCode: number, statusMessage: string, headers: string[], checkedLength?: number, checkedLines?: string): unknown;
  /**
   * Sends the head now, without waiting for a body byte: `writeHead` only stores it, and the first
   * `write` or `end` would carry it.
   */
  flushHeaders(): void;
  /**
   * Returns true when the response is done with `chunk` (copied or written, so the caller may
   * reuse its memory) and has room for more; false when it still holds `chunk` or is full: wait
   * for `drain`.
   */
  write(chunk: Buffer): boolean;
  end(chunk?: string): unknown;
  destroy(): unknown;
  addTrailers(trailers: [string, string][]): void;
  /** Sends `HTTP/1.1 100 Continue`. */
  writeContinue(): void;
  /**
   * Writes `HTTP/1.1 101 <statusMessage>` with `headers` and hands the connection to the caller
   * (RFC 9110 §7.8): returns the raw client socket and the bytes the client already sent after the
   * request head. Afterwards the connection belongs to the caller.
   */
  switchProtocols(statusMessage: string, headers: string[]): { socket: Socket; head: Buffer };
  /** `close`: the response finished or the connection closed (check `writableFinished`). */
  once(event: 'close' | 'drain', listener: () => void): unknown;
  /**
   * Answers an upgrade request with `101 <statusMessage>` and `headers` (a flat raw list, written
   * as given: the caller has removed the hop-by-hop ones and put `Connection: upgrade` and
   * `Upgrade` in; RFC 9110 §7.8, §15.2.2), then hands the connection over: returns the raw client
   * socket and the bytes the client already sent after its request head (a first WebSocket frame,
   * say; empty when none). Afterwards the connection belongs to the caller — its reading, writing,
   * timeouts, errors and closing — and this response writes nothing more (its `headersSent` is
   * true, `statusCode` 101).
   * @throws like `writeHead` on an invalid name or value (nothing is written then), or when a head
   *   was already written.
   */
  switchProtocols(statusMessage: string, headers: string[]): { socket: Socket; head: Buffer };
}

/** Header names of which node keeps only the first occurrence in `headers` (`matchKnownFields`). */
const FIRST_ONLY = new Set([
  'age', 'authorization', 'content-length', 'content-type', 'etag', 'expires', 'from', 'host',
  'if-modified-since', 'if-unmodified-since', 'last-modified', 'location', 'max-forwards',
  'proxy-authorization', 'referer', 'retry-after', 'server', 'user-agent',
]);

/**
 * node's `IncomingMessage.headers` from a raw list: names lower-cased; for the names in
 * `FIRST_ONLY` the first value wins; `set-cookie` becomes an array; `cookie` values are joined
 * with `; `, all others with `, ` (Node 20, lib/_http_incoming.js).
 */
export function combineHeaders(rawHeaders: readonly string[]): IncomingHttpHeaders {
  const headers: Record<string, string | string[]> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    const value = rawHeaders[i + 1]!;
    const existing = Object.hasOwn(headers, name) ? headers[name] : undefined; // `constructor` is a header name too
    if (name === 'set-cookie') {
      if (existing === undefined) headers[name] = [value];
      else (existing as string[]).push(value);
    } else if (existing === undefined) {
      headers[name] = value;
    } else if (!FIRST_ONLY.has(name)) {
      headers[name] = `${existing as string}${name === 'cookie' ? '; ' : ', '}${value}`;
    }
  }
  return headers;
}
