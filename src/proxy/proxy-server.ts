/**
 * The proxy's listening side: a node:http server with the `[server]` limits (SPEC 1.2), the error
 * answers node gives before a request exists (400 bad framing, 431 head too large, 408 too slow),
 * `Expect: 100-continue`, and graceful shutdown (SPEC 2: stop accepting, let in-flight requests
 * finish up to `shutdown_timeout`).
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Config } from '../config/config.js';
import { openAccessLog, type AccessLog, type AccessLogRecord } from './access-log.js';
import { Upstream } from '../upstream/upstream.js';
import { rawErrorResponse, sendErrorResponse } from './error-response.js';
import { handleRequest, type ProxyContext } from './request-path.js';
import { Route, type RuntimeDeps } from './route.js';
import { Router } from './router.js';
import { handleUpgrade } from './upgrade-tunnel.js';
import { HealthChecker } from '../health/health-checker.js';

export interface ProxyServerOptions {
  /** Injected clock/randomness; defaults are the real ones. */
  readonly deps?: Partial<RuntimeDeps>;
  /** Replace the access log (tests collect records). */
  readonly accessLog?: AccessLog;
}

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
  #config: Config;
  #routes: readonly Route[];
  /** Active health checks of the routes that have `health_check = on` (SPEC 4). Started by listen(). */
  #healthChecker: HealthChecker;
  readonly #deps: RuntimeDeps;
  readonly #agent: http.Agent;
  readonly #accessLog: AccessLog;
  readonly #observers = new Set<ExchangeObserver>();
  readonly #context: ProxyContext;
  #isListening = false;

  constructor(config: Config, options: ProxyServerOptions = {}) {
    this.#config = config;
    this.#deps = { now: () => performance.now(), random: Math.random, log: (line) => process.stderr.write(`${line}\n`), ...options.deps };
    this.#routes = config.routes.map((routeConfig) => new Route(routeConfig, this.#deps));
    // Keep-alive pool to the upstreams. Idle sockets are closed after 4 s, before the 5 s idle
    // limit of node servers (and most others), so we rarely write into a socket being closed.
    this.#agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256, scheduling: 'lifo', timeout: 4000 });
    this.#healthChecker = this.#createHealthChecker();
    this.#accessLog = options.accessLog ?? openAccessLog(config.server.accessLog, config.server.accessLogFormat);
    const accessLog = this.#accessLog;
    const observers = this.#observers;
    this.#context = {
      server: config.server,
      router: new Router(this.#routes),
      agent: this.#agent,
      accessLog: {
        write(record) {
          accessLog.write(record);
          for (const observe of observers) observe(record);
        },
        close: () => accessLog.close(),
      },
      now: this.#deps.now,
    };

    const { server: s } = config;
    this.server = http.createServer({
      maxHeaderSize: s.maxHeaderSize,
      // node refuses requestTimeout < headersTimeout at start-up: the head is part of the request.
      headersTimeout: Math.min(s.headerTimeoutMs, s.requestTimeoutMs),
      requestTimeout: s.requestTimeoutMs,
      keepAliveTimeout: s.keepaliveTimeoutMs,
      noDelay: true,
    });
    this.server.on('request', (clientReq: IncomingMessage, clientRes: ServerResponse) => handleRequest(this.#context, clientReq, clientRes));
    this.server.on('checkContinue', (clientReq: IncomingMessage, clientRes: ServerResponse) => this.#onExpectContinue(clientReq, clientRes));
    this.server.on('upgrade', (clientReq: IncomingMessage, socket: Socket, head: Buffer) => handleUpgrade(this.#context, clientReq, socket, head));
    this.server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => onClientError(error, socket));
  }

  get config(): Config {
    return this.#config;
  }

  /** The routes now in force, in file order. */
  get routes(): readonly Route[] {
    return this.#routes;
  }

  get healthChecker(): HealthChecker {
    return this.#healthChecker;
  }

  /** Registers `observer` for every finished exchange; returns the function that unregisters it. */
  observe(observer: ExchangeObserver): () => void {
    this.#observers.add(observer);
    return () => this.#observers.delete(observer);
  }

  /**
   * Swaps in a new config without dropping in-flight requests or the listening socket (SIGHUP):
   * new routes, balancers and health checks; the runtime state (health, counters, ejection,
   * draining) of every upstream whose route name and address did not change is kept. Requests in
   * flight finish on the objects they started with. `[server]` limits and `listen` need a restart.
   */
  reload(config: Config): ReloadSummary {
    const previous = new Map<string, Upstream>();
    for (const route of this.#routes) for (const upstream of route.upstreams) previous.set(`${route.name} ${upstream.origin}`, upstream);
    let kept = 0;
    const routes = config.routes.map((routeConfig) => {
      const upstreams = routeConfig.upstreams.map((upstreamConfig) => {
        const old = previous.get(`${routeConfig.name} ${upstreamConfig.origin}`);
        if (old === undefined) return new Upstream(upstreamConfig, routeConfig.name);
        previous.delete(`${routeConfig.name} ${upstreamConfig.origin}`);
        kept++;
        old.reconfigure(upstreamConfig);
        return old;
      });
      return new Route(routeConfig, this.#deps, upstreams);
    });
    const added = routes.reduce((n, r) => n + r.upstreams.length, 0) - kept;
    const warnings: string[] = [];
    const before = this.#config.server;
    if (before.listen.host !== config.server.listen.host || before.listen.port !== config.server.listen.port) {
      warnings.push('a new [server] listen address takes effect only after a restart');
    }
    if (JSON.stringify({ ...before, listen: 0 }) !== JSON.stringify({ ...config.server, listen: 0 })) {
      warnings.push('[server] settings other than trusted_proxies take effect only after a restart');
    }

    this.#healthChecker.stop();
    this.#config = config;
    this.#routes = routes;
    this.#context.router = new Router(routes);
    this.#context.server = { ...before, trustedProxies: config.server.trustedProxies };
    this.#healthChecker = this.#createHealthChecker();
    if (this.#isListening) this.#healthChecker.start();
    return { kept, added, removed: previous.size, warnings };
  }

  #createHealthChecker(): HealthChecker {
    return new HealthChecker({
      routes: this.#routes.map((route) => ({ route: route.config, upstreams: route.upstreams })),
      log: this.#deps.log,
    });
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
    this.#isListening = true;
    this.#healthChecker.start();
    return (this.server.address() as AddressInfo).port;
  }

  /**
   * Graceful shutdown: stop accepting, close idle keep-alive connections, wait for in-flight
   * requests up to `timeoutMs` (default `shutdown_timeout`), then close whatever is left.
   * Resolves true when everything finished in time.
   */
  async close(timeoutMs = this.config.server.shutdownTimeoutMs): Promise<boolean> {
    this.#healthChecker.stop();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    // Connections that finish their last response become idle; close them as they do.
    const sweeper = setInterval(() => this.server.closeIdleConnections(), 50);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const isDrained = await Promise.race([closed.then(() => true), timedOut]);
    clearInterval(sweeper);
    clearTimeout(timer);
    if (!isDrained) {
      this.server.closeAllConnections();
      await closed;
    }
    this.#agent.destroy();
    await this.#accessLog.close();
    return isDrained;
  }

  /** `Expect: 100-continue`: refuse an over-long body before it is sent, else say "go on" and proxy. */
  #onExpectContinue(clientReq: IncomingMessage, clientRes: ServerResponse): void {
    const maxBodySize = this.#context.server.maxBodySize;
    if (maxBodySize > 0 && Number(clientReq.headers['content-length'] ?? 0) > maxBodySize) {
      sendErrorResponse(clientRes, 413, { shouldClose: true });
      return;
    }
    clientRes.writeContinue();
    handleRequest(this.#context, clientReq, clientRes);
  }
}

/**
 * A request node:http could not parse or accept: both Content-Length and Transfer-Encoding, bad
 * chunked framing (400), a head over `max_header_size` (431), a head or request too slow (408).
 * The connection is closed after the answer: its framing cannot be trusted.
 */
function onClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  const isResponseStarted = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage?.headersSent === true;
  if (error.code === 'ECONNRESET' || !socket.writable || isResponseStarted) {
    socket.destroy();
    return;
  }
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  socket.end(rawErrorResponse(status));
}
