/**
 * Retry safety, written down in one function (SPEC 4; the shape of Caddy's `tryAgain` and Go's
 * `Request.isReplayable`): may a failed attempt be sent again to another upstream?
 *
 * The question is whether the first upstream may already have *acted* on the request, and whether the
 * proxy can still *produce* it again. RFC 9110 §9.2.2 defines the methods whose repetition has the
 * same effect as one request (idempotent: GET, HEAD, OPTIONS, PUT, DELETE, TRACE); §9.2.2 also says a
 * client "SHOULD NOT automatically retry a request with a non-idempotent method unless it has some
 * means to know that the request semantics are actually idempotent". A proxy is such a client.
 */
import {
  UpstreamConnectError,
  UpstreamLoopError,
  UpstreamProtocolError,
  UpstreamResetError,
  UpstreamTimeoutError,
  UpstreamTlsError,
} from '../errors.js';

/** How an attempt failed, as far as retrying is concerned. */
export type RetryErrorKind =
  /**
   * TCP connect failed (refused, unreachable, DNS), the TLS handshake did (a certificate that
   * does not verify, an alert), or the connection reached the proxy's own listener and was
   * refused (`UpstreamLoopError`): the upstream never saw a byte of the request.
   */
  | 'connect'
  /** No connection within `connect_timeout`: likewise nothing reached the upstream. */
  | 'connect-timeout'
  /** The upstream went quiet for `read_timeout` after the request was (maybe) sent. */
  | 'read-timeout'
  /**
   * The upstream closed or reset the connection before the response head (or ended an established
   * TLS connection with an alert).
   */
  | 'reset'
  /** The upstream's response was malformed. */
  | 'protocol';

/** Everything the decision depends on, for one failed attempt. */
export interface RetryQuestion {
  readonly errorKind: RetryErrorKind;
  /** The request method exactly as received (methods are case-sensitive, RFC 9110 §9.1). */
  readonly method: string;
  /** At least one byte of the request went to the upstream. */
  readonly wasRequestSent: boolean;
  /** Request body bytes were streamed through and are gone: the body cannot be sent again. */
  readonly hasStreamedBody: boolean;
  /** Response bytes (the head at least) already went to the client: past the commit point. */
  readonly wereResponseBytesSent: boolean;
  /** Which attempt just failed, 1-based (1 = the first try). */
  readonly attempt: number;
  /** The route's `retries`: extra attempts allowed after the first. */
  readonly retries: number;
}

/** RFC 9110 §9.2.2, the list SPEC 4 names. */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

/**
 * True when the failed attempt may be retried on another upstream. The rules, in the order they are
 * checked; the first that applies decides:
 *
 * 1. Never once response bytes reached the client (`wereResponseBytesSent`): the status line is out,
 *    a second response cannot be spliced in (Go httputil's commit point). The caller closes the client
 *    connection instead.
 * 2. Never beyond `retries`: attempt `n` failed, `n − 1` retries were used, one more is allowed while
 *    `n ≤ retries`. With retries = 2: attempts 1 and 2 may be retried, attempt 3 may not.
 * 3. Always after `connect` or `connect-timeout`: the upstream never got the request, so even a POST
 *    is safe to send elsewhere (nginx `proxy_next_upstream error timeout`, Caddy's dial errors). The
 *    caller holds the body back until the connection is up, so it is still whole.
 * 4. Never when the body was streamed through (`hasStreamedBody`): those bytes are gone, nothing is
 *    left to replay (Go's `isReplayable` requires a body it can get again).
 * 5. Always when no byte of the request was sent: a reused keep-alive connection that the upstream
 *    had just closed fails this way, and the upstream saw nothing (Go's transport retries it too).
 * 6. Never after a malformed response (`protocol`): nginx leaves `invalid_header` out of its default
 *    `proxy_next_upstream`; a broken upstream answer is reported, not hidden.
 * 7. Otherwise (`reset`, `read-timeout` after the request was sent) only for idempotent methods
 *    (`IDEMPOTENT_METHODS`): the upstream may have acted on it, and only these are safe to repeat.
 *    POST and PATCH are not retried (RFC 9110 §9.2.2; nginx ≥ 1.9.13 likewise).
 */
export function canRetry(question: RetryQuestion): boolean {
  const { errorKind, method, wasRequestSent, hasStreamedBody, wereResponseBytesSent, attempt, retries } = question;
  if (wereResponseBytesSent) return false; // 1
  if (attempt > retries) return false; // 2
  if (errorKind === 'connect' || errorKind === 'connect-timeout') return true; // 3
  if (hasStreamedBody) return false; // 4
  if (!wasRequestSent) return true; // 5
  if (errorKind === 'protocol') return false; // 6
  return IDEMPOTENT_METHODS.has(method); // 7
}

/**
 * Maps an error of src/errors.ts to its `RetryErrorKind`; undefined for anything else (client abort,
 * body too large, the proxy's own shortage of descriptors or ports (ProxyResourceError), bugs),
 * which is never retried nor counted against the upstream.
 */
export function retryErrorKind(error: unknown): RetryErrorKind | undefined {
  if (error instanceof UpstreamConnectError || error instanceof UpstreamLoopError) return 'connect';
  if (error instanceof UpstreamTlsError) return error.phase === 'handshake' ? 'connect' : 'reset';
  if (error instanceof UpstreamTimeoutError) return error.phase === 'connect' ? 'connect-timeout' : 'read-timeout';
  if (error instanceof UpstreamResetError) return 'reset';
  if (error instanceof UpstreamProtocolError) return 'protocol';
  return undefined;
}
