/**
 * The request path: everything that happens to one client request, top to bottom, as one checklist
 * (the shape of Go's `ReverseProxy.ServeHTTP`). Each numbered step calls a named helper:
 *
 *   0. refuse what cannot be proxied (request-checks.ts), read the target and its host
 *      (request-target.ts, authority.ts)                              → 400 / 417 / 501;
 *      with `[acme]`, answer an HTTP-01 challenge request (acme-challenge.ts) → 200 / 404;
 *      and, with `redirect_https`, send a plain request to its https:// URL (https-redirect.ts) → 308
 *   1. route the request by both readings of its path (router.ts)    → 404 when nothing matches,
 *      400 when the readings disagree; then, in SPEC 8's order, each check consuming nothing of
 *      the later ones: the route's `access` lines (src/limits/access-list.ts) → 403, its
 *      `conn_limit` → 429, its `rate_limit` → 429 (src/limits), its own Basic auth (route.ts) → 401
 *   2. check the body limit against Content-Length                    → 413
 *   3. build the upstream header list (forward-headers.ts); an upgrade request keeps its
 *      `Connection: upgrade` and `Upgrade`
 *   4. attempt loop: pick an upstream (balancer), send (upstream-facts.ts), and on failure ask the
 *      retry policy whether another upstream may be tried             → 502 / 503 / 504
 *   5. COMMIT POINT: the upstream's status and headers go to the client as soon as the upstream's
 *      head arrived (with the body bytes that came in the same read); from then on no error page
 *      can be sent, so a failure closes the client connection instead
 *   6. stream the response body with backpressure, then the trailers — or, when the upstream
 *      answered an upgrade request with 101 (as Go's `ServeHTTP` does, after the same round
 *      trip), write the 101 and join the two sockets (upgrade-tunnel.ts)
 *   7. log the request once the client connection is done with it, or the tunnel closed (access-log.ts)
 *
 * Every answer before the commit point goes through one function (error-response.ts).
 *
 * The client IP (client-address.ts) is computed once, before anything else, and is the one that
 * access, limits, the balancer and the access log see; X-Forwarded-For appends the peer.
 *
 * Names are fixed: `clientReq`/`clientRes` face the client; the upstream side is one
 * `UpstreamExchange` per attempt and the `upstreamHead` it answers with. `clientReq` is never mutated.
 */
import type { ClientRequest, ClientResponse, RequestBody, RequestBodyReader } from '../wire/client-side.js';
import type { Socket } from 'node:net';
import { hashKeyFor } from '../upstream/balancer/strategies.js';
import { BodyTooLargeError, NoUpstreamError, ProxyResourceError, RequestError, RequestFramingError, ShutdownCutError, UpstreamProtocolError, UpstreamResetError, UpstreamTlsError } from '../errors.js';
import type { Upstream } from '../upstream/upstream.js';
import { buildAccessLogRecord, type AccessLog, type AttemptLog, type Refusal } from './access-log.js';
import { logLine } from '../log/process-log.js';
import { isTrustedProxy, normalizeClientIp, resolveClientIp } from './client-address.js';
import { sendErrorResponse } from './error-response.js';
import { Tunnel } from './upgrade-tunnel.js';
import { findRequestProblem } from './request-checks.js';
import { readRequestTarget } from './request-target.js';
import { httpsRedirectLocation } from './https-redirect.js';
import { namedHopByHopHeaders } from './hop-by-hop.js';
import { announcedTrailers, buildClientResponseFields, buildClientResponseHeaders, buildUpstreamRequestHeaders, forwardableRequestTrailers, forwardableTrailers, headerValue, withoutHeader } from './forward-headers.js';
import type { Route } from '../upstream/route.js';
import type { Router } from './router.js';
import { canRetry, IDEMPOTENT_METHODS, retryErrorKind } from './retry-policy.js';
import { UpstreamExchange, type BodySink } from '../wire/upstream-exchange.js';
import type { UpstreamTransport } from '../wire/connection-pool.js';
import type { ResponseHead } from '../wire/response-parser.js';
import { formatTrace } from '../upstream/balancer/trace.js';
import type { ServerConfig } from '../config/config.js';
import { isChallengeRequest, writeKeyAuthorization, type AcmeChallengeStore } from './acme-challenge.js';

/** What the request path needs from the running proxy. */
export interface ProxyContext {
  /** Swapped by a reload (only `trusted_proxies` changes take effect without a restart). */
  server: ServerConfig;
  /** Swapped by a reload. */
  router: Router<Route>;
  /**
   * `redirect_https`: the HTTPS listener's port that plain requests are redirected to (its bound
   * port once it listens); undefined: no redirect. Set by the server, swapped by a reload.
   */
  httpsRedirectPort: number | undefined;
  /** Keep-alive connections to the upstreams (src/wire/connection-pool.ts). */
  readonly pool: UpstreamTransport;
  readonly accessLog: AccessLog;
  /** High-resolution clock in ms (durations). */
  readonly now: () => number;
  /** True once a graceful shutdown began: responses say `Connection: close`. */
  isDraining: boolean;
  /**
   * True once `shutdown_timeout` ran out and the server cuts every connection left: a request that
   * ends now was cut by the proxy, not left by its client (the log says `PRX_SHUTDOWN_CUT`).
   */
  isCutting: boolean;
  /**
   * Open tunnels (upgrade-tunnel.ts): their connections belong to no server any more, so a
   * shutdown that runs out of time closes them itself, and waits for their log records (`closed`).
   */
  readonly tunnels: Set<Tunnel>;
  /** The HTTP-01 tokens being validated now (acme-challenge.ts); undefined without `[acme]`: such paths route as usual. */
  readonly acmeChallenges: AcmeChallengeStore | undefined;
}

/** The one-line body of the 400 for a path whose two readings select different routes (router.ts). */
const AMBIGUOUS_PATH_TEXT = 'bad request: the path selects different routes read literally and decoded';
/** The one-line body of the 404 for an HTTP-01 challenge token that is not being validated now. */
const UNKNOWN_TOKEN_TEXT = 'not found: no ACME challenge with this token is being validated';
/** The one-line body of the 400 for a path that, rewritten, would climb out of the route's pass path (router.ts). */
const OUTSIDE_PASS_PATH_TEXT = "bad request: the path leaves the route's pass path once its dot segments are resolved";

/** The one-line body of the 414 for a path that took too long to match against the route regexes (router.ts REGEX_BUDGET_MS). */
const OVER_REGEX_BUDGET_TEXT = 'URI too long: the path takes too long to match against the route regular expressions';
/** The one-line body of the 403 of `access` (SPEC 8). */
const DENIED_TEXT = 'forbidden: your address is not allowed on this route';
/** The one-line body of the 429 of `rate_limit`. */
const RATE_LIMITED_TEXT = 'too many requests: over the rate limit of this route, retry later';
/** The one-line body of the 429 of `conn_limit`. */
const CONN_LIMITED_TEXT = 'too many requests: too many requests in flight from your address on this route';

/** Per-request facts gathered on the way, for the access log. */
interface RequestFacts {
  readonly startedAt: number;
  /** The TCP peer (normalised): what X-Forwarded-For appends and `trusted_proxies` judges. */
  readonly peerIp: string;
  readonly isTrustedPeer: boolean;
  /** The client IP of SPEC 8 (client-address.ts): access, limits, balancing, the log. */
  readonly clientIp: string;
  /** Set when access or a limit refused the request (the log and the metrics say which). */
  refusal: Refusal | undefined;
  /** The `conn_limit` slot this request holds; given back once, however the exchange ends. */
  releaseSlot: (() => void) | undefined;
  route: Route | undefined;
  readonly attempts: AttemptLog[];
  bytesSent: number;
  /** Set once a 101 joined the client to the upstream: the request is logged when it closes. */
  tunnel: Tunnel | undefined;
}

/**
 * Handles one request from `clientReq` to the end of `clientRes`. Never throws.
 * @param isExpectingContinue the client sent `Expect: 100-continue`: answer 100 once the request
 *   passed routing, auth and the body limit, before its body is read (nginx's order)
 */
export function handleRequest(context: ProxyContext, clientReq: ClientRequest, clientRes: ClientResponse, isExpectingContinue = false): void {
  // The address read when the connection was accepted (client-side.ts): `socket.remoteAddress` is
  // undefined once the client reset the connection, and an empty address matched no `deny` rule.
  const peerIp = normalizeClientIp(clientReq.remoteAddress);
  if (peerIp === '') {
    clientRes.destroy(); // never judged, never forwarded: a request is only served for a known peer
    return;
  }
  const { trustedProxies } = context.server;
  const isTrustedPeer = isTrustedProxy(peerIp, trustedProxies);
  const facts: RequestFacts = {
    startedAt: context.now(),
    peerIp,
    isTrustedPeer,
    clientIp: resolveClientIp(peerIp, isTrustedPeer, clientReq.rawHeaders, trustedProxies),
    refusal: undefined,
    releaseSlot: undefined,
    route: undefined,
    attempts: [],
    bytesSent: 0,
    tunnel: undefined,
  };
  proxyRequest(context, clientReq, clientRes, facts, isExpectingContinue).catch((error: unknown) => {
    logLine(`internal error on ${clientReq.method} ${clientReq.url}: ${(error as Error)?.stack ?? String(error)}`);
    if (!clientRes.headersSent) facts.bytesSent = sendErrorResponse(clientRes, { status: 502, shouldClose: true });
    else clientRes.destroy();
  });
  // Step 7, registered after proxyRequest's own 'close' listener: a client that leaves aborts the
  // attempt first, so the record says how it ended. A tunnel logs itself when it closes.
  if (context.accessLog.isEnabled) {
    clientRes.once('close', () => {
      if (facts.tunnel === undefined) logRequest(context, clientReq, clientRes.writableFinished || clientRes.headersSent ? clientRes.statusCode : 499, facts);
    });
  }
}

async function proxyRequest(
  context: ProxyContext,
  clientReq: ClientRequest,
  clientRes: ClientResponse,
  facts: RequestFacts,
  isExpectingContinue: boolean,
): Promise<void> {
  // Client gone → abort whatever attempt is in flight (SPEC 5). Registered before the first await,
  // so a client that leaves while its credentials are checked is noticed too.
  let current: UpstreamExchange | undefined;
  let isClientGone = false;
  clientRes.once('close', () => {
    if (!clientRes.writableFinished) {
      isClientGone = true;
      current?.abort(context.isCutting ? new ShutdownCutError('cut at shutdown_timeout') : undefined);
      // Said here, not when the aborted attempt's rejection arrives: the record is written next.
      const attemptLog = facts.attempts.at(-1);
      if (attemptLog !== undefined && attemptLog.status === undefined) attemptLog.error ??= context.isCutting ? 'PRX_SHUTDOWN_CUT' : 'PRX_CLIENT_ABORT';
    }
  });

  // 0. Requests the proxy refuses before routing (request-checks.ts): a missing or repeated Host,
  //    repeated Authorization, an Expect other than 100-continue (the server's parser refused bad
  //    framing already); then the target and its host (request-target.ts): a bad Host or
  //    absolute-form authority, a raw `#`, a bad escape.
  const problem = findRequestProblem(clientReq);
  const target = problem === undefined ? readRequestTarget(clientReq) : problem;
  if ('status' in target) {
    facts.bytesSent = sendErrorResponse(clientRes, { status: target.status, text: target.text, shouldClose: true });
    return;
  }

  // 0b. An HTTP-01 challenge request (acme-challenge.ts), answered here while [acme] is configured,
  //     before routing: the ACME server asks the proxy itself, never an upstream.
  if (context.acmeChallenges !== undefined && isChallengeRequest(clientReq, target)) {
    const keyAuthorization = context.acmeChallenges.keyAuthorizationFor(target.path.literal);
    facts.bytesSent = keyAuthorization === undefined ? sendErrorResponse(clientRes, { status: 404, text: UNKNOWN_TOKEN_TEXT }) : writeKeyAuthorization(clientRes, keyAuthorization);
    return;
  }

  // 0c. `redirect_https`: a request on the plain listener goes to its https:// URL (https-redirect.ts),
  //     except an ACME challenge; nothing of it is routed or forwarded.
  if (context.httpsRedirectPort !== undefined && !clientReq.isTls) {
    const location = httpsRedirectLocation(clientReq, target, context.httpsRedirectPort);
    if (location === undefined) {
      facts.bytesSent = sendErrorResponse(clientRes, { status: 400, text: 'bad request: a Host header is needed to redirect to https' });
      return;
    }
    if (location !== 'exempt') {
      facts.bytesSent = sendErrorResponse(clientRes, { status: 308, text: `permanent redirect to ${location}`, extraHeaders: ['Location', location] });
      return;
    }
  }

  // 1. Route, by both readings of the path (router.ts).
  const match = context.router.match(target);
  if (match.kind === 'none') {
    facts.bytesSent = sendErrorResponse(clientRes, { status: 404 });
    return;
  }
  if (match.kind === 'over-regex-budget') {
    facts.bytesSent = sendErrorResponse(clientRes, { status: 414, text: OVER_REGEX_BUDGET_TEXT, shouldClose: true });
    return;
  }
  if (match.kind === 'ambiguous' || match.kind === 'outside-pass-path') {
    const text = match.kind === 'ambiguous' ? AMBIGUOUS_PATH_TEXT : OUTSIDE_PASS_PATH_TEXT;
    facts.bytesSent = sendErrorResponse(clientRes, { status: 400, text, shouldClose: true });
    return;
  }
  const route = match.route;
  facts.route = route;
  if (match.kind === 'redirect') {
    facts.bytesSent = sendErrorResponse(clientRes, { status: 301, text: `moved permanently to ${match.location}`, extraHeaders: ['Location', match.location] });
    return;
  }

  // 1b. Access and limits (SPEC 8), in this order, each refusal consuming nothing of the later
  //     checks: `access` (403), `conn_limit` (429, Retry-After: 1), `rate_limit` (429).
  if (route.access !== undefined && !route.access.isAllowed(facts.clientIp)) {
    facts.refusal = 'access';
    facts.bytesSent = sendErrorResponse(clientRes, { status: 403, text: DENIED_TEXT });
    return;
  }
  const { limits } = route;
  if (limits !== undefined) {
    if (route.config.connLimit !== undefined) {
      const answer = limits.acquireSlot(facts.clientIp);
      const releaseSlot = answer instanceof Promise ? await answer : answer;
      if (releaseSlot === undefined) {
        if (isClientGone) return;
        facts.refusal = 'conn_limit';
        facts.bytesSent = sendErrorResponse(clientRes, { status: 429, text: CONN_LIMITED_TEXT, extraHeaders: ['Retry-After', '1'] });
        return;
      }
      holdSlot(clientRes, facts, releaseSlot, isClientGone);
      if (isClientGone) return;
    }
    if (route.config.rateLimit !== undefined) {
      const answer = limits.takeToken(facts.clientIp);
      const verdict = answer instanceof Promise ? await answer : answer;
      if (isClientGone) return;
      if (!verdict.isAllowed) {
        facts.refusal = 'rate_limit';
        facts.bytesSent = sendErrorResponse(clientRes, { status: 429, text: RATE_LIMITED_TEXT, extraHeaders: ['Retry-After', String(verdict.retryAfterSeconds)] });
        return;
      }
    }
  }

  // 1c. The proxy's own Basic auth, when the route demands it (RFC 7617).
  if (route.authenticator !== undefined && !(await route.authenticator.check(clientReq.headers.authorization))) {
    if (isClientGone) return;
    facts.bytesSent = sendErrorResponse(clientRes, { status: 401, extraHeaders: ['WWW-Authenticate', route.authenticator.challenge()] });
    return;
  }

  if (isClientGone) return;

  // 2. Body limit, as far as Content-Length tells it (chunked bodies are counted while streaming).
  const maxBodySize = context.server.maxBodySize;
  if (maxBodySize > 0 && (clientReq.contentLength ?? 0) > maxBodySize) {
    facts.bytesSent = sendErrorResponse(clientRes, { status: 413, shouldClose: true });
    return;
  }
  const isChunked = clientReq.body !== undefined && clientReq.contentLength === undefined;
  // An upgrade, as the server read the head (a request without a body that asks for one); the 101
  // then hands the connection over (step 6).
  const isUpgrade = clientReq.upgrade !== undefined;
  // Routed, allowed, not too large: invite the body, when there is one (nginx sends no 100 for a
  // request without a body; RFC 9110 §10.1.1 lets a server skip it).
  if (isExpectingContinue && clientReq.body !== undefined) clientRes.writeContinue();

  // 3. Upstream headers (the same for every attempt except Host when preserve_host = off).
  // X-Forwarded-For appends the peer, the hop this proxy saw (HAProxy, Envoy, Go), not the client
  // IP read from the list: the chain stays a record of every hop. Every field is valid to write as
  // it is (buildUpstreamRequestHeaders), so the serializer does not check them a second time.
  const headersFor = (upstream: Upstream): string[] => {
    const headers = buildUpstreamRequestHeaders(clientReq.rawHeaders, {
      peerIp: facts.peerIp,
      isTrustedPeer: facts.isTrustedPeer,
      proto: clientReq.isTls ? 'https' : 'http',
      preserveHost: route.config.preserveHost,
      upstreamHost: upstream.config.hostHeader,
      isUpgrade,
      dropAuthorization: route.config.authBasic !== undefined && !route.config.authForward,
      targetHost: target.targetHost,
    });
    if (isChunked) headers.push('Transfer-Encoding', 'chunked');
    return headers;
  };
  // A Content-Length body is exactly that long (the server's framing), and its length passed step 2:
  // only a chunked body is counted as it streams.
  const body = clientReq.body === undefined ? undefined : isChunked ? withBodyLimit(clientReq.body, maxBodySize) : clientReq.body;

  // 4. Attempt loop.
  const tried = new Set<Upstream>();
  const pickContext = {
    clientIp: facts.clientIp,
    // read by `consistent-hash` alone: the other strategies do not pay for it (nor for `clientReq.headers`)
    hashKey: route.config.strategy === 'consistent-hash' ? hashKeyFor(route.config, facts.clientIp, target.path.literal + target.query, clientReq.headers) : '',
    tried,
  };
  const method = clientReq.method ?? 'GET';
  let lastError: RequestError | undefined; // undefined: no upstream was available at all (→ 503)
  for (let attempt = 1; attempt <= 1 + route.config.retries && !isClientGone; attempt++) {
    const upstream = route.pick(pickContext);
    if (upstream === undefined) break;
    const traceHeader = route.config.trace ? formatTrace(route, upstream, attempt, { nowMs: context.now(), tried }) : undefined;
    tried.add(upstream);
    let attemptLog: AttemptLog = { upstream: upstream.address };
    facts.attempts.push(attemptLog);

    const endActiveRequest = upstream.beginRequest();
    let upstreamHead: ResponseHead;
    try {
      upstreamHead = await sendWithStaleRetry(method, () => isClientGone, (staleError) => {
        if (staleError !== undefined) {
          // The stale send is an attempt of its own in the log (it reached the upstream, which may
          // have read it), and the resend to the same upstream gets the next record.
          attemptLog.error = `${loggedError(staleError)} (a reused keep-alive connection: sent again on a new one)`;
          attemptLog = { upstream: upstream.address };
          facts.attempts.push(attemptLog);
        }
        const headers = headersFor(upstream);
        current = new UpstreamExchange({
          pool: context.pool,
          upstream: upstream.config,
          tls: upstream.config.scheme === 'https' ? route.upstreamTls : undefined,
          method,
          target: match.upstreamTarget,
          headers,
          checkedHeaderLength: headers.length, // every field is valid as it is (headersFor)
          body,
          isChunkedBody: isChunked,
          forwardTrailers: isChunked ? (rawTrailers) => forwardableRequestTrailers(rawTrailers, namedHopByHopHeaders(clientReq.rawHeaders)) : undefined, // trailers end only a chunked body
          connectTimeoutMs: route.config.connectTimeoutMs,
          readTimeoutMs: route.config.readTimeoutMs,
          isNewConnectionRequired: staleError !== undefined,
          upgrade: clientReq.upgrade,
        });
        return current;
      });
    } catch (error) {
      endActiveRequest();
      const failure = error instanceof RequestError ? error : new UpstreamResetError(`failed: ${String(error)}`, upstream.config.origin);
      attemptLog.error = loggedError(failure);
      if (isClientGone) return;
      if (failure instanceof BodyTooLargeError) {
        facts.bytesSent = sendErrorResponse(clientRes, { status: 413, shouldClose: true });
        return;
      }
      lastError = failure;
      const errorKind = retryErrorKind(failure);
      // Passive health counts only the upstream's own failures: not a request the proxy could not
      // write (400), not a read timeout while the client was still slowly sending its body, and
      // not a reset on a reused keep-alive connection before any response byte, the pool's race
      // with an upstream that closed it (the request was not sent again: it has a body, or is not
      // idempotent). A break test saw one such POST eject a healthy primary for its backup.
      const isClientsFault = errorKind === 'read-timeout' && body !== undefined && !clientReq.complete;
      const isPoolRace = failure instanceof UpstreamResetError && current !== undefined && current.progress.isReusedSocket && !current.progress.hasResponseBytes;
      if (errorKind !== undefined && !isClientsFault && !isPoolRace) route.recordFailure(upstream);
      const isRetryable =
        errorKind !== undefined &&
        canRetry({
          errorKind,
          method,
          wasRequestSent: current?.progress.isConnected ?? false,
          hasStreamedBody: current?.progress.hasStreamedBody ?? false,
          wereResponseBytesSent: false,
          attempt,
          retries: route.config.retries,
        });
      if (!isRetryable) break;
      continue;
    }
    attemptLog.status = upstreamHead.statusCode;
    route.recordSuccess(upstream);

    // 5. COMMIT POINT.
    try {
      if (upstreamHead.statusCode === 101) openTunnel(context, clientReq, clientRes, upstreamHead, current!, facts, attemptLog, route.config.readTimeoutMs, endActiveRequest);
      else relayResponse(clientReq, clientRes, upstreamHead, current!, facts, attemptLog, traceHeader, context.isDraining || isUpgrade, endActiveRequest);
    } catch (error) {
      endActiveRequest(); // a bug past the commit point must not leave the counter up
      current!.abort();
      throw error;
    }
    return;
  }
  if (isClientGone) return;
  lastError ??= new NoUpstreamError(`no upstream available for route ${route.name}`);
  const extraHeaders = lastError instanceof NoUpstreamError ? ['Retry-After', String(route.retryAfterSeconds)] : lastError instanceof ProxyResourceError ? ['Retry-After', '1'] : [];
  // A body left half-read cannot be skipped reliably: close the connection after the answer. A body
  // the client framed wrongly is the client's to fix: its answer says what was wrong, as the
  // server's own 400s for a bad head do.
  const text = lastError instanceof RequestFramingError ? `bad request: ${lastError.message}` : undefined;
  facts.bytesSent = sendErrorResponse(clientRes, { status: lastError.status, text, extraHeaders, shouldClose: body !== undefined && !clientReq.complete });
}

/**
 * Keeps the `conn_limit` slot for as long as the exchange lasts: given back when the client
 * response closes (answered, failed, or the client gone) unless a 101 turned it into a tunnel,
 * which gives it back when it closes (openTunnel). The release function is idempotent, so a slot
 * is given back exactly once however the exchange ends.
 */
function holdSlot(clientRes: ClientResponse, facts: RequestFacts, releaseSlot: () => void, isClientGone: boolean): void {
  facts.releaseSlot = releaseSlot;
  // A client that left while a promised slot came: its response closed already, give it back now.
  if (isClientGone) releaseSlot();
  else clientRes.once('close', () => {
    if (facts.tunnel === undefined) releaseSlot();
  });
}

/**
 * Sends one attempt; if it was written into a pooled keep-alive connection that the upstream had
 * just closed (a reset before any response byte, nothing of the body read yet), sends it once more
 * on a new connection (not another pooled one, which may be just as stale) — the race every HTTP
 * client with a pool has (Go's transport retries the same way).
 *
 * Only for an idempotent method: a reset on a reused connection may also mean the upstream read
 * the request and died, so a POST must not be sent twice (RFC 9110 §9.2.2). For every route, as
 * Go's transport does it, whatever the number of upstreams: the race is the pool's, not a failure
 * of the upstream, so it is not counted for passive health unless the resend fails too. (nginx
 * tries the same peer again only when it is a route's only one, `peers->single`, and otherwise
 * counts the reset and tries the next: a break test of that rule saw 3% of GETs answered 502 on a
 * route whose other upstream was `down`, and a healthy primary ejected for its backup, behind an
 * upstream that closes keep-alive connections after a few requests.)
 */
async function sendWithStaleRetry(
  method: string,
  isClientGone: () => boolean,
  /**
   * Starts an attempt's UpstreamExchange; `staleError` (the reset of the stale send) asks for the
   * resend, on a new connection instead of a pooled one.
   */
  start: (staleError: UpstreamResetError | undefined) => UpstreamExchange,
): Promise<ResponseHead> {
  for (let staleError: UpstreamResetError | undefined; ; ) {
    const attempt = start(staleError);
    try {
      return await attempt.response;
    } catch (error) {
      const { progress } = attempt;
      const isStale =
        IDEMPOTENT_METHODS.has(method) &&
        progress.isReusedSocket &&
        !progress.hasResponseBytes &&
        !progress.hasStreamedBody &&
        error instanceof UpstreamResetError;
      if (staleError !== undefined || !isStale || isClientGone()) throw error;
      staleError = error;
    }
  }
}

/**
 * Steps 5 and 6: the upstream's head to the client, then the body with backpressure, then trailers.
 * A failure after this point closes the client connection: it must not see a complete-looking response.
 */
function relayResponse(
  clientReq: ClientRequest,
  clientRes: ClientResponse,
  upstreamHead: ResponseHead,
  upstreamExchange: UpstreamExchange,
  facts: RequestFacts,
  attemptLog: AttemptLog,
  traceHeader: string | undefined,
  isLastOnConnection: boolean,
  onDone: () => void,
): void {
  let { headers, fieldBlock } = buildClientResponseFields(upstreamHead);
  // With `trace = on` the proxy's X-Proxy-Trace is the one the client gets: an upstream's own
  // (another proxy's, say) would be read as this hop's (a break test saw both, the upstream's first).
  if (traceHeader !== undefined && headerValue(headers, 'x-proxy-trace') !== undefined) {
    headers = withoutHeader(headers, 'x-proxy-trace');
    fieldBlock = undefined;
  }
  const checkedLength = headers.length; // valid as they are (buildClientResponseFields); the ones added below are checked
  // Trailers can only follow a chunked body: re-announce them (as Go does) only when node will
  // chunk this response, i.e. the upstream's was chunked, there is a body, and the client speaks 1.1.
  const announced = announcedTrailers(upstreamHead.rawHeaders);
  const canCarryTrailers = upstreamHead.bodyKind === 'chunked' && clientReq.httpVersion === '1.1' && clientReq.method !== 'HEAD';
  if (announced !== undefined && canCarryTrailers) headers.push('Trailer', announced);
  if (traceHeader !== undefined) headers.push('X-Proxy-Trace', traceHeader);
  // Close the client connection after this response when the proxy is shutting down, or after an
  // upgrade request that got no 101 (nginx does not reuse it either). An answer that came before
  // the client finished sending its body (an early 413 or 401) is the server's to judge: it reads
  // and drops a short rest and keeps the connection, and says `Connection: close` otherwise.
  if (isLastOnConnection) headers.push('Connection', 'close');
  // The upstream's Date passes through; a response without one gets the proxy's from the client
  // response (RFC 9110 §6.6.1), as Go's httputil and net/http do.

  // The head is committed now, as soon as the upstream's arrived, not with the first body byte:
  // an event stream or a long poll must not wait for its first event to open. node refuses a
  // header it would have to write (it validates every name and value) before anything was sent:
  // that is still the proxy's own 502.
  try {
    clientRes.writeHead(upstreamHead.statusCode, upstreamHead.statusMessage, headers, checkedLength, fieldBlock);
  } catch (error) {
    onDone();
    upstreamExchange.abort();
    attemptLog.error = 'PRX_BAD_RESPONSE_HEADER';
    logLine(`cannot relay the response of ${clientReq.method} ${clientReq.url}: ${(error as Error).message}`);
    facts.bytesSent = sendErrorResponse(clientRes, { status: 502, shouldClose: true });
    return;
  }
  // Body chunks are views of the upstream connection's read buffer (BodySink): the client response
  // is done with a chunk when write returns true (ClientResponse.write).
  let hasBodyWrite = false;
  let isEnded = false;
  const sink: BodySink = {
    write: (chunk) => {
      hasBodyWrite = true;
      return clientRes.write(chunk);
    },
    once: (event, listener) => clientRes.once(event, listener),
  };
  upstreamExchange.streamBodyTo(sink, {
    onChunk(chunk) {
      facts.bytesSent += chunk.length;
    },
    onEnd(rawTrailers) {
      isEnded = true;
      onDone();
      if (rawTrailers.length > 0) clientRes.addTrailers(forwardableTrailers(rawTrailers, namedHopByHopHeaders(upstreamHead.rawHeaders)));
      clientRes.end();
    },
    onError(error) {
      onDone();
      attemptLog.error = loggedError(error); // the log keeps the status sent, and says how the body ended (nginx)
      // Past the commit point the client must not see a complete-looking response: cut the
      // connection, after what was written this tick has left (node's ServerResponse sends its
      // corked output on the next tick; nginx, too, sends what it has before closing).
      process.nextTick(() => clientRes.destroy());
    },
  });
  // Body bytes that came in the same read as the head were written above (streamBodyTo delivers
  // them at once) and leave with the head in one write; without them the head leaves alone, now.
  if (!hasBodyWrite && !isEnded) clientRes.flushHeaders();
}

/**
 * Steps 5 and 6 for a 101 to an upgrade request: the 101 to the client (hop-by-hop headers removed,
 * those its `Connection` names too; `Upgrade` and `Connection: upgrade` kept), then the client's
 * socket joined to the upstream's (upgrade-tunnel.ts). The tunnel counts as an active request, and
 * the request is logged, until both sockets are closed.
 */
function openTunnel(
  context: ProxyContext,
  clientReq: ClientRequest,
  clientRes: ClientResponse,
  upstreamHead: ResponseHead,
  upstreamExchange: UpstreamExchange,
  facts: RequestFacts,
  attemptLog: AttemptLog,
  idleTimeoutMs: number,
  onDone: () => void,
): void {
  const upstreamEnd = upstreamExchange.takeOverConnection();
  if (upstreamEnd === undefined) {
    // The upstream connection failed between its 101 and now: nothing went to the client yet.
    onDone();
    attemptLog.error = 'PRX_UPSTREAM_RESET';
    facts.bytesSent = sendErrorResponse(clientRes, { status: 502, shouldClose: true });
    return;
  }
  let clientEnd: { socket: Socket; head: Buffer };
  try {
    clientEnd = clientRes.switchProtocols(upstreamHead.statusMessage || 'Switching Protocols', buildClientResponseHeaders(upstreamHead.rawHeaders, 101));
  } catch (error) {
    onDone();
    upstreamEnd.socket.destroy();
    attemptLog.error = 'PRX_BAD_RESPONSE_HEADER';
    logLine(`cannot relay the 101 of ${clientReq.method} ${clientReq.url}: ${(error as Error).message}`);
    facts.bytesSent = sendErrorResponse(clientRes, { status: 502, shouldClose: true });
    return;
  }
  const tunnel = new Tunnel(clientEnd, upstreamEnd, idleTimeoutMs, () => {
    context.tunnels.delete(tunnel);
    onDone();
    facts.releaseSlot?.();
    facts.bytesSent = tunnel.bytesFromUpstream;
    // Closed by the cut at shutdown_timeout, as a request in flight then is (not by either end).
    if (context.isCutting) attemptLog.error ??= 'PRX_SHUTDOWN_CUT';
    if (context.accessLog.isEnabled) logRequest(context, clientReq, 101, facts);
  });
  facts.tunnel = tunnel;
  context.tunnels.add(tunnel);
}

/**
 * How an attempt's error is logged: its code, and for a TLS failure, a connection that ended early
 * or a response the proxy refused the reason too (`PRX_UPSTREAM_TLS: certificate has expired`,
 * `PRX_UPSTREAM_RESET: closed the connection before the response was complete (10 of 100 body
 * bytes)`, `PRX_UPSTREAM_PROTOCOL: 101 without Connection: upgrade`): the code alone would leave
 * the operator guessing which of a dozen checks failed, or whether a close was a reset.
 */
function loggedError(error: RequestError): string {
  if (error instanceof UpstreamTlsError || error instanceof UpstreamResetError) return `${error.code}: ${error.reason}`;
  return error instanceof UpstreamProtocolError || error instanceof ProxyResourceError ? `${error.code}: ${error.message}` : error.code;
}

/** The request body, counted against `max_body_size` (0 = no limit) while it streams. */
function withBodyLimit(body: RequestBody, maxBodySize: number): RequestBody {
  return maxBodySize === 0 ? body : new LimitedBody(body, maxBodySize);
}

/**
 * A chunked request body that fails with a BodyTooLargeError (413) once more than `maxBodySize`
 * bytes came: the counted piece is not passed on, and the rest is read and dropped.
 */
class LimitedBody implements RequestBody, RequestBodyReader {
  readonly #body: RequestBody;
  readonly #maxBodySize: number;
  #received = 0;
  #reader: RequestBodyReader | undefined;
  #error: Error | null = null;

  constructor(body: RequestBody, maxBodySize: number) {
    this.#body = body;
    this.#maxBodySize = maxBodySize;
  }

  get errored(): Error | null {
    return this.#error ?? this.#body.errored;
  }

  get isReceived(): boolean {
    return this.#error === null && this.#body.isReceived;
  }

  get rawTrailers(): readonly string[] {
    return this.#body.rawTrailers;
  }

  takeHeld(): Buffer | null {
    const held = this.#body.takeHeld();
    if (held === null || this.#isWithinLimit(held)) return held;
    this.#body.detach();
    return null;
  }

  attach(reader: RequestBodyReader): void {
    this.#reader = reader;
    this.#body.attach(this);
  }

  pause(): void {
    this.#body.pause();
  }

  resume(): void {
    this.#body.resume();
  }

  detach(): void {
    this.#reader = undefined;
    this.#body.detach();
  }

  onRequestBodyData(chunk: Buffer): void {
    if (!this.#isWithinLimit(chunk)) {
      const reader = this.#reader;
      this.detach();
      reader?.onRequestBodyError(this.#error!);
      return;
    }
    this.#reader?.onRequestBodyData(chunk);
  }

  onRequestBodyEnd(): void {
    this.#reader?.onRequestBodyEnd();
  }

  onRequestBodyError(error: Error): void {
    this.#reader?.onRequestBodyError(error);
  }

  /** Counts `chunk`; false (and `errored` set) once the body is over the limit. */
  #isWithinLimit(chunk: Buffer): boolean {
    this.#received += chunk.length;
    if (this.#received <= this.#maxBodySize) return true;
    this.#error ??= new BodyTooLargeError(`request body over ${this.#maxBodySize} bytes`);
    return false;
  }
}

function logRequest(context: ProxyContext, clientReq: ClientRequest, status: number, facts: RequestFacts): void {
  const tunnel = facts.tunnel;
  context.accessLog.write(
    buildAccessLogRecord(clientReq, {
      clientIp: facts.clientIp,
      status,
      bytesSent: facts.bytesSent,
      route: facts.route?.name,
      refusal: facts.refusal,
      attempts: facts.attempts,
      durationMs: context.now() - facts.startedAt,
      tunnel: tunnel === undefined ? undefined : { bytesFromClient: tunnel.bytesFromClient, bytesFromUpstream: tunnel.bytesFromUpstream },
    }),
  );
}
