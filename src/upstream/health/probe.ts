/**
 * One active health probe (SPEC 4): send `health_method health_path` to an upstream on a fresh
 * connection, wait at most `health_timeout`, and judge the status against `health_status`. This is
 * the tutorial's timer-driven HEAD check, made trustworthy:
 *
 * - A fresh connection every time (`agent: false`, `Connection: close`), so a probe tests what a new
 *   request would meet (listen socket, accept queue) and never parks a socket in a pool.
 * - One deadline for the whole probe, connect included; at the deadline the socket is destroyed.
 * - The body, if any, is drained so the upstream can finish cleanly, but at most `maxBodyBytes`
 *   (64 KiB) of it: a health URL that streams forever cannot hold a probe open.
 * - It never throws and never rejects: every failure becomes `{ ok: false, error }` with a one-line
 *   reason for the log ("connect ECONNREFUSED", "timeout after 2000ms", "status 500").
 * - The promise settles only after the socket has closed, so nothing is left open behind it.
 * - `localhost` works whether it resolves to 127.0.0.1 or ::1: `autoSelectFamily` (RFC 8305 "happy
 *   eyeballs") tries every address of the name.
 * - An `https://` upstream is probed over TLS with its route's settings, verification included
 *   (src/wire/tls-client.ts), so an upstream whose certificate requests would refuse is DOWN, and
 *   the reason says why: `tls: certificate has expired`. A discovered address is checked under its
 *   line's name (`tlsName`, unless the route sets `tls_server_name`), as requests are.
 * - A connection to one of the proxy's own listeners (`ownListeners`, src/wire/own-listeners.ts) is
 *   not made (an IP literal is refused at once, a name's own addresses are left out of its lookup;
 *   one that still reaches the proxy is closed before the request is written), and the probe fails
 *   with the reason `PRX_UPSTREAM_LOOP: 127.0.0.1:8080 is this proxy's own listener (listen
 *   0.0.0.0:8080): the request would loop`, as a request to it would.
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import type { HealthCheckConfig, StatusRange, UpstreamConfig } from '../../config/config.js';
import { isTlsAlert, tlsConnectOptions, tlsFailureReason, type TlsClientSettings } from '../../wire/tls-client.js';
import { UpstreamLoopError } from '../../errors.js';
import { isProxyShortage } from '../../wire/connection-pool.js';
import { loopErrorFor, loopErrorOf, lookupAvoidingOwnListeners, type OwnListenerMatcher } from '../../wire/own-listeners.js';

/** What one probe found. `ok` is the verdict the rise/fall state machine consumes. */
export interface ProbeResult {
  readonly ok: boolean;
  /** The response status, when a response head arrived. */
  readonly status?: number;
  /** From sending to the response head (or to the failure), ms, rounded. */
  readonly latencyMs: number;
  /** Why the probe failed, one line: `connect ECONNREFUSED`, `timeout after 2000ms`, `status 500`. */
  readonly error?: string;
  /**
   * True when the probe could not be made for want of this proxy's own resources (a connect that
   * failed with EMFILE, ENFILE, ENOBUFS or ENOMEM): no verdict on the upstream, so the rise/fall
   * streaks do not move (a review: with active checks on, running out of descriptors marked every
   * upstream DOWN).
   */
  readonly isInconclusive?: boolean;
}

export interface ProbeOptions {
  /** The whole probe's deadline, connect included (`health_timeout`), ms. */
  readonly timeoutMs: number;
  /** Aborts the probe (the checker stops); it then settles with `error: 'aborted'`. */
  readonly signal?: AbortSignal;
  /** Most response body bytes read before the socket is closed. Default `MAX_PROBE_BODY_BYTES`. */
  readonly maxBodyBytes?: number;
  /** Name resolution; default `dns.lookup`. Tests pass one that answers `::1` before `127.0.0.1`. */
  readonly lookup?: net.LookupFunction;
  /** For an `https://` upstream: the route's TLS settings; default node's (verified against the system store). */
  readonly tls?: TlsClientSettings | undefined;
  /** This proxy's own listeners: a probe whose connection reaches one fails at once (see the file comment). Default: none. */
  readonly ownListeners?: OwnListenerMatcher | undefined;
}

/** The probe's shape, so the scheduler can be given a fake one in tests. */
export type ProbeFunction = (
  upstream: UpstreamConfig,
  check: HealthCheckConfig,
  options: ProbeOptions,
) => Promise<ProbeResult>;

/** 64 KiB: more than any health page needs, little enough to read at every interval. */
export const MAX_PROBE_BODY_BYTES = 64 * 1024;

/** True when `status` lies in one of the inclusive `ranges` (`health_status`, default 200-399). */
export function isHealthyStatus(status: number, ranges: readonly StatusRange[]): boolean {
  return ranges.some((range) => status >= range.from && status <= range.to);
}

/**
 * Probes `upstream` once with `check.method check.path`, Host `upstream.hostHeader`.
 *
 * @returns `{ ok, status?, latencyMs, error? }`; never rejects. `ok` is true when a response head
 *   arrived within `options.timeoutMs` with a status in `check.statuses`. Once the head has arrived
 *   the verdict is fixed: a body cut short by the cap, the deadline or a reset does not change it.
 */
export function probe(upstream: UpstreamConfig, check: HealthCheckConfig, options: ProbeOptions): Promise<ProbeResult> {
  const maxBodyBytes = options.maxBodyBytes ?? MAX_PROBE_BODY_BYTES;
  const startedAt = performance.now();
  const elapsedMs = (): number => Math.round(performance.now() - startedAt);

  // One of this proxy's own listeners is refused before a connection is made (src/wire/own-listeners.ts).
  const loop = loopErrorFor(upstream.host, upstream.port, options.ownListeners);
  if (loop !== undefined) return Promise.resolve({ ok: false, latencyMs: 0, error: `${loop.code}: ${loop.message}` });

  return new Promise<ProbeResult>((resolve) => {
    let result: ProbeResult | undefined; // set once: the verdict
    let headResult: ProbeResult | undefined; // the verdict the response head implies
    let isConnected = false;
    const isTls = upstream.scheme === 'https';
    let isSecured = false; // the TLS handshake is done and the certificate accepted

    const requestOptions: http.RequestOptions & Pick<net.TcpNetConnectOpts, 'autoSelectFamily' | 'lookup'> = {
      host: upstream.host,
      port: upstream.port,
      method: check.method,
      path: check.path,
      headers: { Host: upstream.hostHeader, Connection: 'close', 'User-Agent': 'ini-proxy health check' },
      agent: false,
      autoSelectFamily: true,
      lookup: lookupAvoidingOwnListeners(upstream.port, options.ownListeners, options.lookup),
      ...(isTls && options.tls !== undefined ? tlsConnectOptions(options.tls, upstream.tlsName ?? upstream.host) : {}),
    };
    const upstreamReq = isTls ? https.request(requestOptions) : http.request(requestOptions);

    // 1. Decide once, then tear down; resolve when the request (and its socket) has closed.
    const finish = (verdict: ProbeResult): void => {
      if (result !== undefined) return;
      result = verdict;
      clearTimeout(deadline);
      options.signal?.removeEventListener('abort', onAbort);
      upstreamReq.destroy();
    };
    upstreamReq.on('close', () => {
      finish(headResult ?? { ok: false, latencyMs: elapsedMs(), error: 'connection closed before response' });
      resolve(result!);
    });

    // 2. Deadline and abort.
    const deadline = setTimeout(() => {
      finish(headResult ?? { ok: false, latencyMs: elapsedMs(), error: `timeout after ${options.timeoutMs}ms` });
    }, options.timeoutMs);
    const onAbort = (): void => finish(headResult ?? { ok: false, latencyMs: elapsedMs(), error: 'aborted' });
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });

    // 3. Connection errors (refused, unreachable, reset, malformed response).
    upstreamReq.on('socket', (socket) => {
      socket.once('connect', () => {
        const loop = loopErrorOf(socket, options.ownListeners);
        if (loop !== undefined) finish({ ok: false, latencyMs: elapsedMs(), error: `${loop.code}: ${loop.message}` });
        else isConnected = true;
      });
      if (isTls) socket.once('secureConnect', () => (isSecured = true));
    });
    upstreamReq.on('error', (error) => {
      if (error instanceof UpstreamLoopError) return finish({ ok: false, latencyMs: elapsedMs(), error: `${error.code}: ${error.message}` });
      if (!isConnected && isProxyShortage(error)) {
        return finish({ ok: false, latencyMs: elapsedMs(), error: `no verdict: ${summarizeProbeError(error, false)} (this proxy's own shortage)`, isInconclusive: true });
      }
      const isTlsFailure = isTls && isConnected && (!isSecured || isTlsAlert(error));
      const reason = isTlsFailure ? `tls: ${tlsFailureReason(error)}` : summarizeProbeError(error, isConnected);
      finish(headResult ?? { ok: false, latencyMs: elapsedMs(), error: reason });
    });

    // 4. The response head decides; the body is drained up to the cap.
    upstreamReq.on('response', (upstreamRes) => {
      const status = upstreamRes.statusCode ?? 0;
      const latencyMs = elapsedMs();
      headResult = isHealthyStatus(status, check.statuses)
        ? { ok: true, status, latencyMs }
        : { ok: false, status, latencyMs, error: `status ${status}` };
      let bodyBytes = 0;
      upstreamRes.on('data', (chunk: Buffer) => {
        bodyBytes += chunk.length;
        if (bodyBytes >= maxBodyBytes) finish(headResult!);
      });
      upstreamRes.on('end', () => finish(headResult!));
      upstreamRes.on('error', () => finish(headResult!));
    });

    upstreamReq.end();
  });
}

/**
 * Turns a socket or HTTP parser error into the short reason of a log line: before the connection was
 * up, `connect CODE` (`connect ECONNREFUSED`, `connect ENOTFOUND`); after, `read CODE` (as libuv
 * words it: `read ECONNRESET`), `closed without response` for a clean close before any response, and
 * `bad response HPE_…` for a malformed one.
 */
export function summarizeProbeError(error: unknown, isConnected: boolean): string {
  const code = errorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  if (!isConnected) return `connect ${code ?? message}`;
  if (message === 'socket hang up') return 'closed without response';
  if (code?.startsWith('HPE_')) return `bad response ${code}`;
  return `read ${code ?? message}`;
}

/** `error.code`, or that of the first inner error of an AggregateError (happy eyeballs failing on every address). */
function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  if (error instanceof AggregateError) return errorCode(error.errors[0]);
  return undefined;
}
