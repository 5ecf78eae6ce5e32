/**
 * The proxy's listening side: a node:http server with the `[server]` limits (SPEC 1.2), the error
 * answers node gives before a request exists (400 bad framing, 431 head too large, 408 too slow,
 * 505 another major HTTP version),
 * `Expect: 100-continue`, and graceful shutdown (SPEC 2: stop accepting, let in-flight requests
 * finish up to `shutdown_timeout`).
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Config, UpstreamConfig } from '../config/config.js';
import { openAccessLog, type AccessLog, type AccessLogRecord } from './access-log.js';
import { logLine } from '../log/process-log.js';
import { rawErrorResponse } from './error-response.js';
import { handleRequest, type ProxyContext } from './request-path.js';
import type { Route, RuntimeDeps } from './route.js';
import { RouteTable } from './route-table.js';
import { Router } from './router.js';
import { normalizeClientIp } from './client-address.js';
import { ConnectionPool } from '../http/connection-pool.js';
import { handleUpgrade } from './upgrade-tunnel.js';
import { HealthChecker, type HealthCheckTarget } from '../health/health-checker.js';
import type { Timers } from '../timers.js';
import { FastLane } from '../http/fast-lane.js';
import { LF } from '../http/field-bytes.js';
import { judgeHttpVersion, readRequestLineVersion } from '../http/request-line-version.js';
import { probe as realProbe, type ProbeFunction, type ProbeResult } from '../health/probe.js';

export interface ProxyServerOptions {
  /** Injected clock/randomness; defaults are the real ones. */
  readonly deps?: Partial<RuntimeDeps>;
  /** Replace the access log (tests collect records). */
  readonly accessLog?: AccessLog;
  /** Replace the active health probe (tests). Default: the real one of src/health/probe.ts. */
  readonly probe?: ProbeFunction;
  /** The health checker's timers (tests drive its schedule across reloads). Default: the global ones. */
  readonly healthTimers?: Timers;
  /**
   * True in a cluster worker: this process never runs active health checks; the primary does and
   * pushes the results (src/cluster). Default false.
   */
  readonly isHealthCheckDisabled?: boolean;
  /**
   * True: node:http parses every request; no fast lane (src/http/fast-lane.ts). Default false.
   * Tests use it to compare the bytes both server sides write.
   */
  readonly isFastLaneDisabled?: boolean;
}

/** Called with every finished active health probe (metrics count them by result). */
export type ProbeObserver = (upstream: UpstreamConfig, result: ProbeResult) => void;

/** What `reload` did, for the log line. */
export interface ReloadSummary {
  /** Upstreams whose address was in the old config too: their runtime state was kept. */
  readonly kept: number;
  readonly added: number;
  readonly removed: number;
  /** Settings that only take effect after a restart (e.g. `listen`). */
  readonly warnings: readonly string[];
}

/** Called with every finished exchange (the access log's record): metrics and the status page use it. */
export type ExchangeObserver = (record: AccessLogRecord) => void;

export class ProxyServer {
  readonly server: http.Server;
  /** The routes and their upstreams' runtime state; reload and the registry change it. */
  readonly #table: RouteTable;
  /**
   * Active health checks of the routes that have `health_check = on` (SPEC 4). Started by listen();
   * one for the server's life: a reload or a registry change updates its targets.
   */
  readonly #healthChecker: HealthChecker;
  readonly #deps: RuntimeDeps;
  /** Keep-alive connections to the upstreams, on node:net (src/http/connection-pool.ts). */
  readonly #pool: ConnectionPool;
  readonly #accessLog: AccessLog;
  readonly #observers = new Set<ExchangeObserver>();
  readonly #probeObservers = new Set<ProbeObserver>();
  readonly #probe: ProbeFunction;
  readonly #isHealthCheckDisabled: boolean;
  readonly #context: ProxyContext;
  /** Simple requests skip node:http's server machinery (src/http/fast-lane.ts); undefined when disabled. */
  readonly #fastLane: FastLane | undefined;
  /** Every client connection not closed yet, whichever side serves it: a shutdown waits for their ends. */
  readonly #clientSockets = new Set<Socket>();

  constructor(config: Config, options: ProxyServerOptions = {}) {
    this.#deps = { now: () => performance.now(), random: Math.random, log: logLine, ...options.deps };
    this.#table = new RouteTable(config, this.#deps);
    this.#isHealthCheckDisabled = options.isHealthCheckDisabled ?? false;
    const probe = options.probe ?? realProbe;
    this.#probe = async (upstream, check, probeOptions) => {
      const result = await probe(upstream, check, probeOptions);
      for (const observeProbe of this.#probeObservers) observeProbe(upstream, result);
      return result;
    };
    // Idle upstream connections are closed after 4 s, before the 5 s idle limit of node servers
    // (and most others), so we rarely write into a connection being closed.
    this.#pool = new ConnectionPool({ idleTimeoutMs: 4000 });
    this.#healthChecker = new HealthChecker({
      routes: this.#healthTargets(),
      log: this.#deps.log,
      probe: this.#probe,
      timers: options.healthTimers,
    });
    this.#accessLog = options.accessLog ?? openAccessLog(config.server.accessLog, config.server.accessLogFormat, config.server.accessLogPlace);
    const accessLog = this.#accessLog;
    const observers = this.#observers;
    this.#context = {
      server: config.server,
      router: new Router(this.#table.routes),
      pool: this.#pool,
      accessLog: {
        get isEnabled() {
          return accessLog.isEnabled || observers.size > 0;
        },
        write(record) {
          accessLog.write(record);
          for (const observe of observers) observe(record);
        },
        close: () => accessLog.close(),
      },
      now: this.#deps.now,
      upgradeSockets: new Set(),
      unloggedUpgrades: new Set(),
      isDraining: false,
    };

    const { server: s } = config;
    // node refuses requestTimeout < headersTimeout at start-up: the head is part of the request.
    const headersTimeoutMs = s.requestTimeoutMs === 0 ? s.headerTimeoutMs : Math.min(s.headerTimeoutMs, s.requestTimeoutMs);
    this.server = http.createServer({
      maxHeaderSize: s.maxHeaderSize,
      headersTimeout: headersTimeoutMs,
      requestTimeout: s.requestTimeoutMs,
      keepAliveTimeout: s.keepaliveTimeoutMs,
      // node checks the two timeouts above only this often (30 s by default): make it fine enough
      // that a 2 s header_timeout fires at about 2 s.
      connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(Math.min(s.headerTimeoutMs, s.requestTimeoutMs || Infinity) / 4))),
      // The proxy answers a missing Host itself, with its one-line body (request-checks.ts).
      requireHostHeader: false,
      // Socket buffers of 256 KiB instead of 16 KiB: a 64 KiB chunk read from an upstream no longer
      // fills the client socket's buffer at once, so large bodies pause and resume the upstream
      // (two epoll changes each time) once per few chunks instead of once per chunk.
      highWaterMark: 256 * 1024,
      noDelay: true,
    });
    // Every header, however many: the total is bounded by max_header_size (node's default keeps 2000 lines).
    this.server.maxHeadersCount = 0;
    this.server.on('request', (clientReq: IncomingMessage, clientRes: ServerResponse) => handleRequest(this.#context, clientReq, clientRes));
    this.server.on('checkContinue', (clientReq: IncomingMessage, clientRes: ServerResponse) => this.#onExpectContinue(clientReq, clientRes));
    this.server.on('upgrade', (clientReq: IncomingMessage, socket: Socket, head: Buffer) => handleUpgrade(this.#context, clientReq, socket, head));
    // An Expect other than 100-continue: the request path answers 417 (request-checks.ts) and logs it.
    this.server.on('checkExpectation', (clientReq: IncomingMessage, clientRes: ServerResponse) => handleRequest(this.#context, clientReq, clientRes));
    // CONNECT asks for a raw tunnel to any host: not something a reverse proxy does (nginx answers
    // 400; 405 says why). Its version is judged first, as every request's (request-checks.ts).
    this.server.on('connect', (clientReq: IncomingMessage, socket: Socket) => {
      socket.on('error', () => {});
      const verdict = judgeHttpVersion(`HTTP/${clientReq.httpVersion}`);
      const status = verdict.kind === 'refused' ? verdict.status : 405;
      const answer = rawErrorResponse(status);
      socket.end(answer);
      if (this.#context.accessLog.isEnabled) logRawAnswer(this.#context, socket, status, answer, 'CONNECT', clientReq.url ?? '-');
    });
    this.server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => onClientError(error, socket, this.#context));
    this.#fastLane = options.isFastLaneDisabled
      ? undefined
      : new FastLane(this.server, {
          onRequest: (clientReq, clientRes) => handleRequest(this.#context, clientReq, clientRes),
          onBadHead: (socket, status) => answerRawError(status, socket, this.#context),
          isDraining: () => this.#context.isDraining,
          headTimeoutMs: headersTimeoutMs,
          keepAliveTimeoutMs: s.keepaliveTimeoutMs,
          maxHeadBytes: Math.floor(s.maxHeaderSize / 2),
        });
    this.server.on('connection', (socket: Socket) => {
      this.#clientSockets.add(socket);
      socket.once('close', () => this.#clientSockets.delete(socket));
    });
  }

  get config(): Config {
    return this.#table.config;
  }

  /** The routes now in force, in file order. */
  get routes(): readonly Route[] {
    return this.#table.routes;
  }

  /** What the fast lane did so far (undefined when it is disabled): tests and diagnostics. */
  get fastLaneStats(): { readonly requests: number; readonly handOvers: number; readonly openConnections: number } | undefined {
    const lane = this.#fastLane;
    return lane === undefined ? undefined : { requests: lane.requestCount, handOvers: lane.handOverCount, openConnections: lane.size };
  }

  get healthChecker(): HealthChecker {
    return this.#healthChecker;
  }

  /** Registers `observer` for every finished exchange; returns the function that unregisters it. */
  observe(observer: ExchangeObserver): () => void {
    this.#observers.add(observer);
    return () => this.#observers.delete(observer);
  }

  /** Registers `observer` for every finished active health probe; returns the function that unregisters it. */
  observeProbes(observer: ProbeObserver): () => void {
    this.#probeObservers.add(observer);
    return () => this.#probeObservers.delete(observer);
  }

  /** The upstreams the admin registry added to `routeName` (see `setRegisteredUpstreams`). */
  registeredUpstreams(routeName: string): readonly UpstreamConfig[] {
    return this.#table.registeredUpstreams(routeName);
  }

  /**
   * Replaces the run-time registered upstreams of `routeName` (admin registry, src/admin): the route
   * is rebuilt with its configured upstreams followed by `configs` (an origin already configured by a
   * `pass` line is skipped), so its balancer includes them. Upstream objects of unchanged origins are
   * kept (counters, health, draining, and their health-check streaks, schedule and probe in flight);
   * new ones are probed at once, removed ones no longer (probe aborted). Requests in
   * flight finish on the objects they started with. The list survives `reload`. A route name not in
   * the config is remembered and applied if a reload brings the route.
   */
  setRegisteredUpstreams(routeName: string, configs: readonly UpstreamConfig[]): void {
    if (this.#table.setRegistered(routeName, configs)) this.#routesChanged();
  }

  /**
   * Swaps in a new config without dropping in-flight requests or the listening socket (SIGHUP):
   * new routes and balancers; the runtime state (health, counters, ejection, draining) of every
   * upstream whose route name and address did not change is kept, and so is its place in the health
   * checker: rise/fall streaks, next probe time, probe in flight (HealthChecker.update says what a
   * change of `health_*` settings keeps). New upstreams are probed at once; removed ones' probes are
   * aborted. Requests in flight finish on the objects they started with. `[server]` limits and
   * `listen` need a restart.
   */
  reload(config: Config): ReloadSummary {
    const warnings: string[] = [];
    const before = this.#table.config;
    if (before.server.listen.host !== config.server.listen.host || before.server.listen.port !== config.server.listen.port) {
      warnings.push('a new [server] listen address takes effect only after a restart');
    }
    // What needs a restart, compared without the parts a reload does apply or that are only places.
    const restartOnly = (server: Config['server']): string =>
      JSON.stringify({ ...server, listen: 0, trustedProxies: 0, accessLogPlace: 0 });
    if (restartOnly(before.server) !== restartOnly(config.server)) {
      warnings.push('[server] settings other than trusted_proxies take effect only after a restart');
    }
    if (JSON.stringify(before.admin) !== JSON.stringify(config.admin)) {
      warnings.push('[admin] changes take effect only after a restart');
    }
    const change = this.#table.reload(config);
    this.#context.server = { ...this.#context.server, trustedProxies: config.server.trustedProxies };
    this.#routesChanged();
    return { ...change, warnings };
  }

  /** The request path routes by the new table, and the health checker watches its upstreams. */
  #routesChanged(): void {
    this.#context.router = new Router(this.#table.routes);
    this.#healthChecker.update(this.#healthTargets());
  }

  /** What the health checker watches: every route now in force with its runtime upstreams. */
  #healthTargets(): HealthCheckTarget[] {
    return this.#table.routes.map((route) => ({ route: route.config, upstreams: route.upstreams }));
  }

  /**
   * Starts the active health checks (and keeps them running across reloads). `listen()` calls it
   * unless `isHealthCheckDisabled`; a cluster primary, which never listens, calls it itself.
   */
  startHealthChecks(): void {
    this.#healthChecker.start();
  }

  /** Starts listening on `[server] listen` (or `port` when given, e.g. 0 in tests). Resolves with the bound port. */
  async listen(port = this.config.server.listen.port, host = this.config.server.listen.host): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    if (!this.#isHealthCheckDisabled) this.startHealthChecks();
    return (this.server.address() as AddressInfo).port;
  }

  /**
   * Graceful shutdown: stop accepting, close idle keep-alive connections, wait for in-flight
   * requests up to `timeoutMs` (default `shutdown_timeout`), then close whatever is left.
   * Resolves true when everything finished in time.
   */
  async close(timeoutMs = this.config.server.shutdownTimeoutMs): Promise<boolean> {
    this.#healthChecker.stop();
    this.#context.isDraining = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const closeIdleConnections = (): void => {
      this.server.closeIdleConnections();
      this.#fastLane?.closeIdleConnections();
    };
    closeIdleConnections();
    // Connections that finish their last response become idle; close them as they do.
    const sweeper = setInterval(closeIdleConnections, 50);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const isDrained = await Promise.race([closed.then(() => true), timedOut]);
    clearInterval(sweeper);
    clearTimeout(timer);
    if (!isDrained) {
      this.server.closeAllConnections();
      this.#fastLane?.closeAllConnections();
      for (const socket of this.#context.upgradeSockets) socket.destroy();
      await closed;
    }
    // A cut connection's requests log themselves when its socket emits 'close', which can come
    // after the server's own 'close': wait for them before the log closes.
    await Promise.all([...this.#clientSockets].map((socket) => new Promise((resolve) => socket.once('close', resolve))));
    // A cut tunnel logs once its upstream side has closed too (bounded: a record must not hold up the exit).
    await Promise.race([Promise.all(this.#context.unloggedUpgrades), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
    await this.#pool.close();
    await this.#accessLog.close();
    return isDrained;
  }

  /**
   * `Expect: 100-continue`: the request path answers 100 once routing, auth and the body limit let
   * the body come (nginx's order); a request refused before that never invites its body.
   */
  #onExpectContinue(clientReq: IncomingMessage, clientRes: ServerResponse): void {
    handleRequest(this.#context, clientReq, clientRes, true);
  }

}

/**
 * A request node:http could not parse or accept: both Content-Length and Transfer-Encoding, bad
 * chunked framing (400), a head over `max_header_size` (431), a head or request too slow (408),
 * a version of another major (505; `HTTP/1.2` is a 400 here, see isOtherMajorVersion).
 * The connection is closed after the answer: its framing cannot be trusted.
 */
function onClientError(error: NodeJS.ErrnoException, socket: Socket, context: ProxyContext): void {
  // Bytes after a request that closes the connection (`Connection: close`, or HTTP/1.0 without
  // keep-alive) are not requests: the answers already due still go out, then node closes
  // (RFC 9112 §9.6). Answering 400 here would throw those answers away.
  if (error.code === 'HPE_CLOSED_CONNECTION') return;
  const pending = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
  if (error.code === 'ECONNRESET' || !socket.writable || pending?.headersSent === true) {
    socket.destroy();
    return;
  }
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : isOtherMajorVersion(error) ? 505 : 400;
  // A request in progress (a slow body, say) is logged by the request path; one node could not
  // even parse is logged here, with what is known of it.
  if (pending === undefined) answerRawError(status, socket, context);
  else socket.end(rawErrorResponse(status));
}

/**
 * Whether node's parse error is about another major HTTP version (505) rather than a malformed
 * request (400), judged by the proxy's version rule (request-line-version.ts). llhttp stops with
 * `HPE_INVALID_VERSION` at every version but 0.9, 1.0, 1.1 and 2.0 (`HTTP/3.0`, `HTTP/2`, but also
 * `HTTP/1.1x`), and also just after `PRI * HTTP/2.0\r\n` when the rest of the HTTP/2 preface does
 * not follow; it pauses with `HPE_PAUSED_H2_UPGRADE` after a whole preface. The request line is
 * read from the bytes node was parsing (`rawPacket`), around where it stopped (`bytesParsed`).
 */
function isOtherMajorVersion(error: NodeJS.ErrnoException & { rawPacket?: unknown; bytesParsed?: unknown }): boolean {
  if (error.code === 'HPE_PAUSED_H2_UPGRADE') return true;
  const { rawPacket: packet, bytesParsed: offset } = error;
  if (error.code !== 'HPE_INVALID_VERSION' || !Buffer.isBuffer(packet) || typeof offset !== 'number') return false;
  // The line llhttp stopped in, or the one whose LF it stopped just after (the preface case).
  const searchFrom = offset - (packet[offset - 1] === LF ? 2 : 1);
  const lineStart = searchFrom < 0 ? 0 : packet.lastIndexOf(LF, searchFrom) + 1;
  const line = readRequestLineVersion(packet, lineStart, packet.length - lineStart);
  return line.kind === 'line' && line.verdict.kind === 'refused' && line.verdict.status === 505;
}

/** Writes `status` as a whole raw response, closes the connection, and logs it. */
function answerRawError(status: number, socket: Socket, context: ProxyContext): void {
  const answer = rawErrorResponse(status);
  socket.end(answer);
  if (context.accessLog.isEnabled) logRawAnswer(context, socket, status, answer);
}

/** An access-log line for an answer written straight to the socket (no request object exists). */
export function logRawAnswer(context: ProxyContext, socket: Socket, status: number, answer: string, method = '-', target = '-'): void {
  context.accessLog.write({
    time: new Date(),
    clientIp: normalizeClientIp(socket.remoteAddress),
    user: undefined,
    method,
    target,
    httpVersion: '1.1',
    status,
    bytesSent: Buffer.byteLength(answer) - answer.indexOf('\r\n\r\n') - 4,
    referer: undefined,
    userAgent: undefined,
    route: undefined,
    attempts: [],
    durationMs: 0,
  });
}
