/**
 * Upgrade tunnelling (SPEC 5; RFC 9110 §7.8 Upgrade, RFC 6455 §4 for WebSocket): a request that asks
 * to switch protocols is routed and balanced like any other and sent upstream with its
 * `Connection: upgrade` and `Upgrade` headers — the one exception to hop-by-hop removal. Then:
 *
 *   - upstream answers 101: write the 101 head to the client, pass on the bytes that came with
 *     either handshake, and join the two raw sockets both ways. Half-close travels across (a FIN
 *     from one side ends the other side's writing half only); `read_timeout` is the idle limit. The
 *     tunnel counts as an active request until both sockets are closed.
 *   - upstream answers anything else: relay that response on the raw client socket, then close both
 *     connections (nginx does the same: an upgrade request's connection is not reused).
 *   - the upstream connection fails: 502/504 like any request, retried as retry-policy.ts allows.
 *
 * The handshake is sent with node:http's client on a dedicated connection (created with
 * `allowHalfOpen`, never pooled): upgrades are rare, and the connection becomes a raw tunnel anyway.
 */
import http from 'node:http';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import { hashKeyFor } from '../balancer/registry.js';
import { NoUpstreamError, RequestError, UpstreamConnectError, UpstreamProtocolError, UpstreamResetError, UpstreamTimeoutError } from '../errors.js';
import { canRetry, retryErrorKind } from './retry-policy.js';
import type { UpstreamConfig } from '../config/config.js';
import type { Upstream } from '../upstream/upstream.js';
import type { AttemptLog } from './access-log.js';
import { isTrustedProxy, normalizeClientIp } from './client-address.js';
import { rawErrorResponse } from './error-response.js';
import { httpDate } from '../http/http-date.js';
import { findRequestProblem } from './request-checks.js';
import { readRequestTarget } from './request-target.js';
import { buildClientResponseHeaders, buildUpstreamRequestHeaders } from './forward-headers.js';
import type { ProxyContext } from './request-path.js';
import type { ClientRequest } from '../http/client-exchange.js';
import type { Route } from './route.js';

/** Handles the server's `upgrade` event. Never throws. */
export function handleUpgrade(context: ProxyContext, clientReq: ClientRequest, clientSocket: Socket, clientHead: Buffer): void {
  const startedAt = context.now();
  const clientIp = normalizeClientIp(clientSocket.remoteAddress);
  const attempts: AttemptLog[] = [];
  let route: Route | undefined;
  let status = 0;
  const tunnel = { bytesFromClient: 0, bytesFromUpstream: 0 };
  let isTunnel = false;
  clientSocket.on('error', () => {});
  context.upgradeSockets.add(clientSocket);
  clientSocket.once('close', () => context.upgradeSockets.delete(clientSocket));
  let markLogged = (): void => {};
  const logged = new Promise<void>((resolve) => (markLogged = resolve));
  context.unloggedUpgrades.add(logged);

  const log = (): void => {
    context.unloggedUpgrades.delete(logged);
    markLogged();
    writeRecord();
  };
  const writeRecord = (): void =>
    context.accessLog.write({
      time: new Date(),
      clientIp,
      user: undefined,
      method: clientReq.method ?? '-',
      target: clientReq.url ?? '-',
      httpVersion: clientReq.httpVersion,
      status,
      bytesSent: isTunnel ? tunnel.bytesFromUpstream : 0,
      referer: clientReq.headers.referer,
      userAgent: clientReq.headers['user-agent'],
      route: route?.name,
      attempts,
      durationMs: context.now() - startedAt,
      ...(isTunnel ? { tunnel } : {}),
    });
  const refuse = (code: number, extra = ''): void => {
    if (status !== 0) return; // answered (or logged as abandoned) already
    status = code;
    clientSocket.end(rawErrorResponse(code).replace('\r\n\r\n', `${extra}\r\n\r\n`));
    log();
  };

  // 1. Check and route, as for any request (request-path.ts steps 0 and 1): both readings of the
  //    path must select the same route.
  const problem = findRequestProblem(clientReq);
  const target = problem === undefined ? readRequestTarget(clientReq) : problem;
  if ('status' in target) return refuse(target.status);
  const match = context.router.match(target);
  if (match.kind === 'redirect') return refuse(301, `\r\nLocation: ${match.location}`);
  if (match.kind !== 'route') return refuse(match.kind === 'none' ? 404 : 400);
  route = match.route;
  const selected = route;

  // 2. Attempts: a new connection each (an upgraded connection is never pooled).
  const tried = new Set<Upstream>();
  const pickContext = { clientIp, hashKey: hashKeyFor(selected.config, clientIp, target.path.literal + target.query, clientReq.headers), tried };
  const isTrustedPeer = isTrustedProxy(clientIp, context.server.trustedProxies);
  let clientGone = false;
  clientSocket.once('close', () => {
    clientGone = true;
    if (status === 0) {
      // Left before any answer (during the auth check or the upstream handshake): logged as nginx's 499.
      status = 499;
      log();
    }
  });
  // node hands the socket over paused; read it during the handshake so a client that leaves is
  // noticed (EOF, reset) instead of holding an upstream handshake open. Bytes it sends meanwhile
  // (a first WebSocket frame) are kept, up to 64 KiB, and go upstream first once the tunnel is up.
  const earlyBytes: Buffer[] = [];
  let earlyByteCount = 0;
  const onEarlyData = (chunk: Buffer): void => {
    earlyBytes.push(chunk);
    earlyByteCount += chunk.length;
    if (earlyByteCount > 64 * 1024) clientSocket.pause();
  };
  const onEarlyEnd = (): void => {
    if (!isTunnel) clientSocket.destroy(); // a FIN before the 101: the client gave up
  };
  clientSocket.on('data', onEarlyData);
  clientSocket.once('end', onEarlyEnd);
  clientSocket.resume();

  const attempt = (number: number, lastError: RequestError): void => {
    const upstream = number <= 1 + selected.config.retries ? selected.pick(pickContext) : undefined;
    if (upstream === undefined || clientGone) {
      const extra = lastError instanceof NoUpstreamError ? `\r\nRetry-After: ${selected.retryAfterSeconds}` : '';
      if (!clientGone) refuse(lastError.status, extra);
      return;
    }
    tried.add(upstream);
    const attemptLog: AttemptLog = { upstream: upstream.config.hostHeader };
    attempts.push(attemptLog);
    const endActiveRequest = upstream.beginRequest();
    let isConnected = false;

    const upstreamReq = http.request({
      host: upstream.config.host,
      port: upstream.config.port,
      method: clientReq.method,
      path: match.upstreamTarget,
      setHost: false,
      headers: buildUpstreamRequestHeaders(clientReq.rawHeaders, {
        clientIp,
        isTrustedPeer,
        preserveHost: selected.config.preserveHost,
        upstreamHost: upstream.config.hostHeader,
        isUpgrade: true,
        dropAuthorization: selected.config.authBasic !== undefined && !selected.config.authForward,
        targetHost: target.targetHost,
      }),
      // allowHalfOpen: a FIN from the upstream must not end our writing half towards it. No `agent`
      // (not even `false`, which makes node use a fresh Agent and ignore createConnection): the
      // socket comes from createConnection and is never pooled.
      createConnection: (options) => net.connect({ ...(options as net.NetConnectOpts), allowHalfOpen: true }),
    });
    const connectTimer = setTimeout(
      () => upstreamReq.destroy(new UpstreamTimeoutError(`connect to ${upstream.origin} timed out`, 'connect')),
      selected.config.connectTimeoutMs,
    );
    upstreamReq.once('socket', (socket: Socket) =>
      socket.once('connect', () => {
        isConnected = true;
        clearTimeout(connectTimer);
      }),
    );
    upstreamReq.setTimeout(selected.config.readTimeoutMs, () =>
      upstreamReq.destroy(new UpstreamTimeoutError(`${upstream.origin} sent nothing for ${selected.config.readTimeoutMs}ms`, 'read')),
    );
    const onClientGone = (): void => {
      upstreamReq.destroy();
    };
    clientSocket.once('close', onClientGone);

    upstreamReq.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(connectTimer);
      clientSocket.off('close', onClientGone);
      endActiveRequest();
      if (isTunnel || status !== 0 || clientGone) return;
      const failure = classifyUpgradeError(error, upstream.config, isConnected);
      attemptLog.error = failure.code;
      selected.recordFailure(upstream);
      // The same retry decision as every request (retry-policy.ts); the handshake has no body.
      const errorKind = retryErrorKind(failure);
      const isRetryable =
        errorKind !== undefined &&
        canRetry({
          errorKind,
          method: clientReq.method ?? 'GET',
          wasRequestSent: isConnected,
          hasStreamedBody: false,
          wereResponseBytesSent: false,
          attempt: number,
          retries: selected.config.retries,
        });
      if (isRetryable) attempt(number + 1, failure);
      else refuse(failure.status);
    });

    // Not a 101: relay it as a normal response on the raw socket, then close.
    upstreamReq.on('response', (upstreamRes: IncomingMessage) => {
      clearTimeout(connectTimer);
      clientSocket.off('close', onClientGone);
      attemptLog.status = upstreamRes.statusCode;
      selected.recordSuccess(upstream);
      status = upstreamRes.statusCode ?? 502;
      const headers = buildClientResponseHeaders(upstreamRes.rawHeaders, upstreamRes.statusCode);
      if (upstreamRes.headers.date === undefined) headers.push('Date', httpDate()); // RFC 9110 §6.6.1, as request-path.ts
      clientSocket.write(serializeHead(upstreamRes, headers.concat('Connection', 'close')));
      upstreamRes.pipe(clientSocket);
      clientSocket.once('close', () => upstreamRes.destroy()); // the client left: stop reading the answer
      upstreamRes.once('close', () => {
        if (!upstreamRes.complete) clientSocket.destroy();
        endActiveRequest();
        log();
      });
      upstreamRes.on('error', () => clientSocket.destroy());
    });

    // 101: join the sockets.
    upstreamReq.on('upgrade', (upstreamRes: IncomingMessage, upstreamSocket: Socket, upstreamHead: Buffer) => {
      clearTimeout(connectTimer);
      clientSocket.off('close', onClientGone);
      attemptLog.status = 101;
      selected.recordSuccess(upstream);
      status = 101;
      isTunnel = true;
      clientSocket.off('data', onEarlyData);
      clientSocket.off('end', onEarlyEnd);
      clientSocket.write(serializeHead(upstreamRes, upstreamRes.rawHeaders));
      joinSockets(clientSocket, upstreamSocket, Buffer.concat([clientHead, ...earlyBytes]), upstreamHead, selected.config.readTimeoutMs, tunnel, () => {
        endActiveRequest();
        log();
      });
    });
    upstreamReq.end();
  };

  // 3. The route's own Basic auth, then the first attempt. Last, after everything above is
  // initialised: without auth, the first attempt starts synchronously.
  const forward = (): void => attempt(1, new NoUpstreamError(`no upstream available for route ${selected.name}`));
  if (selected.authenticator !== undefined) {
    const authenticator = selected.authenticator;
    authenticator.check(clientReq.headers.authorization).then(
      (isAllowed) => (isAllowed ? forward() : refuse(401, `\r\nWWW-Authenticate: ${authenticator.challenge()}`)),
      () => refuse(500),
    );
  } else {
    forward();
  }
}

/** The status line and headers of `res`, with `headers` in place of its own, as one latin1 string. */
function serializeHead(res: IncomingMessage, headers: readonly string[]): string {
  let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage || STATUS_CODES[res.statusCode ?? 0] || ''}\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return head + '\r\n';
}

/**
 * Pipes `a` ↔ `b` with backpressure. `end` crosses over as a half-close; an error or an idle
 * `timeoutMs` on either side destroys both. `onClosed` runs once, when both are closed.
 */
function joinSockets(
  clientSocket: Socket,
  upstreamSocket: Socket,
  clientHead: Buffer,
  upstreamHead: Buffer,
  timeoutMs: number,
  counts: { bytesFromClient: number; bytesFromUpstream: number },
  onClosed: () => void,
): void {
  upstreamSocket.on('error', () => {});
  const destroyBoth = (): void => {
    clientSocket.destroy();
    upstreamSocket.destroy();
  };
  clientSocket.on('error', destroyBoth);
  upstreamSocket.on('error', destroyBoth);
  for (const socket of [clientSocket, upstreamSocket]) {
    socket.setTimeout(timeoutMs, destroyBoth);
    socket.setNoDelay(true);
  }
  if (upstreamHead.length > 0) {
    counts.bytesFromUpstream += upstreamHead.length;
    clientSocket.write(upstreamHead);
  }
  if (clientHead.length > 0) {
    counts.bytesFromClient += clientHead.length;
    upstreamSocket.write(clientHead);
  }
  clientSocket.on('data', (chunk: Buffer) => {
    counts.bytesFromClient += chunk.length;
  });
  upstreamSocket.on('data', (chunk: Buffer) => {
    counts.bytesFromUpstream += chunk.length;
  });
  clientSocket.pipe(upstreamSocket);
  upstreamSocket.pipe(clientSocket);
  let openCount = 2;
  const onClose = (): void => {
    if (--openCount === 0) onClosed();
    else destroyBoth(); // one side fully closed: nothing can cross any more
  };
  clientSocket.once('close', onClose);
  upstreamSocket.once('close', onClose);
  clientSocket.resume();
}

/** Maps a node:http client error of the handshake to one of the request errors (and so to 502/504). */
function classifyUpgradeError(error: NodeJS.ErrnoException, upstream: UpstreamConfig, isConnected: boolean): RequestError {
  if (error instanceof RequestError) return error;
  const code = error.code ?? 'ERROR';
  if (!isConnected) return new UpstreamConnectError(`connect ${code} ${upstream.origin}`);
  if (code.startsWith('HPE_')) return new UpstreamProtocolError(`malformed response from ${upstream.origin}: ${code}`);
  return new UpstreamResetError(`${upstream.origin} closed the connection (${code === 'ECONNRESET' ? 'reset' : code})`);
}
