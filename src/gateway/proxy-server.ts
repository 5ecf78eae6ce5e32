/**
 * The proxy's listening side: the HTTP/1.1 server of src/wire/http1-server.ts with the `[server]`
 * limits (SPEC 1.2) in front of the request path, the runtime state of routes and upstreams, and
 * graceful shutdown (SPEC 2: stop accepting, let in-flight requests finish up to
 * `shutdown_timeout`). Two listeners feed the one connection loop: the plain one (`listen`) and
 * the HTTPS one (`tls_listen`, src/tls/tls-listener.ts), whose certificates (`tls_cert`, and the
 * ACME one) are read here at start-up and at every reload. Each listener, once bound, joins the
 * proxy's own listeners (src/wire/own-listeners.ts), which new upstream connections and health
 * probes may not reach: a request sent back to the proxy itself would loop.
 */
import type { AddressInfo, Server, Socket } from 'node:net';
import type { Config, ServerConfig, UpstreamConfig } from '../config/config.js';
import { parseCertificatePair, readCertificatePairs, type CertificatePair, type CertificateText } from '../tls/certificate-pair.js';
import { CertificateStore } from '../tls/certificate-store.js';
import { TlsListener } from '../tls/tls-listener.js';
import { buildAccessLogRecord, openAccessLog, type AccessLog, type AccessLogRecord } from './access-log.js';
import { logLine } from '../log/process-log.js';
import { handleRequest, type ProxyContext } from './request-path.js';
import type { Route, RuntimeDeps } from '../upstream/route.js';
import { upstreamTlsWarnings } from '../upstream/upstream-tls.js';
import { RouteTable } from '../upstream/route-table.js';
import { pathWarnings, Router } from './router.js';
import { normalizeClientIp, trustedProxyWarnings } from './client-address.js';
import { resolverWarnings } from '../discovery/resolver-warnings.js';
import { ConnectionPool, poolKey } from '../wire/connection-pool.js';
import { OwnListeners, type ListeningEndpoint } from '../wire/own-listeners.js';
import type { DiscoveredLine, DiscoveryTarget } from '../discovery/discovered-line.js';
import type { Upstream } from '../upstream/upstream.js';
import type { TlsClientSettings } from '../wire/tls-client.js';
import { HealthChecker, type HealthCheckTarget } from '../upstream/health/health-checker.js';
import { unrefTimers, type Timers } from '../timers.js';
import { plural } from '../log/plural.js';
import { CountedWarning } from '../log/counted-warning.js';
import { Http1Server, type ServerAnswer } from '../wire/http1-server.js';
import { AcmeChallengeStore } from './acme-challenge.js';
import { probe as realProbe, type ProbeFunction, type ProbeResult } from '../upstream/health/probe.js';
import type { LimitsProvider } from '../limits/limits.js';
import { LocalLimits } from '../limits/local-limits.js';
import { probeLimit, readOpenFileLimit, type DescriptorBudget } from '../process/descriptor-budget.js';

export interface ProxyServerOptions {
  /** Injected clock/randomness; defaults are the real ones. */
  readonly deps?: Partial<RuntimeDeps>;
  /** Replace the access log (tests collect records). */
  readonly accessLog?: AccessLog;
  /** Replace the active health probe (tests). Default: the real one of src/upstream/health/probe.ts. */
  readonly probe?: ProbeFunction;
  /** The health checker's timers (tests drive its schedule across reloads). Default: the global ones. */
  readonly healthTimers?: Timers;
  /**
   * True in a cluster worker: this process never runs active health checks; the primary does and
   * pushes the results (src/cluster). Default false.
   */
  readonly isHealthCheckDisabled?: boolean;
  /**
   * The session ticket key of the HTTPS listener, TICKET_KEY_BYTES (48) bytes (src/tls/tls-listener.ts): a cluster's primary
   * gives every worker the same one, so a ticket from one worker resumes on another. Default: a
   * random key of this process.
   */
  readonly ticketKeys?: Buffer;
  /** Wall clock for certificate validity (`tls_cert`, and the routes' `tls_ca` / `tls_client_cert`), ms since the epoch. Default `Date.now`. */
  readonly epochNow?: () => number;
  /**
   * The texts of the `tls_cert` pairs, one per pair in file order, served instead of reading the
   * files: a cluster worker serves what its primary read (`certificateTexts`), as nginx's workers
   * serve the certificates their master loaded, whatever the files hold by then. Default: read the files.
   */
  readonly certificateTexts?: readonly CertificateText[];
  /**
   * Makes the routes' `rate_limit` / `conn_limit` state (src/limits/limits.ts), at start and at every
   * reload. Default: this process's own (LocalLimits on the `deps.now` clock).
   */
  readonly limits?: LimitsProvider;
  /**
   * The connection limits of a cluster worker, from its file descriptor limit
   * (src/process/descriptor-budget.ts): a client connection over `maxClientConnections` is closed
   * at once (the first at once in the log, the others counted over REFUSAL_LOG_INTERVAL_MS), and
   * an upstream connection over `maxUpstreamSockets` (pooled and tunnels') a 503
   * PRX_PROXY_RESOURCES when no pooled one is idle. Default: no limits.
   */
  readonly descriptorBudget?: DescriptorBudget;
  /** Timers of the budget's log (`descriptorBudget`); default the global ones, unref'ed. */
  readonly timers?: Timers;
  /** The most health probes in flight at once (HealthCheckerOptions.maxProbesInFlight). Default: `probeLimit` of this process's descriptor limit. */
  readonly maxProbesInFlight?: number;
}

/** The window over which closed client connections are counted for one log line: 10 s. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;

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

/** Called with every finished request (the access log's record): metrics and the status page use it. */
export type RecordObserver = (record: AccessLogRecord) => void;

/** One pool key in use: the arguments `ConnectionPool.retire` takes for it. */
interface PoolTarget {
  readonly host: string;
  readonly port: number;
  readonly tls: TlsClientSettings | undefined;
  readonly tlsName: string | undefined;
}

export class ProxyServer implements DiscoveryTarget {
  /** The listening socket (node:net); every connection is served by `#http1`. */
  readonly server: Server;
  /** The routes and their upstreams' runtime state (TLS settings included); reload and the registry change it. */
  readonly #table: RouteTable;
  /**
   * Active health checks of the routes that have `health_check = on` (SPEC 4). Started by listen();
   * one for the server's life: a reload or a registry change updates its targets.
   */
  readonly #healthChecker: HealthChecker;
  readonly #deps: RuntimeDeps;
  /** Keep-alive connections to the upstreams, on node:net (src/wire/connection-pool.ts). */
  readonly #pool: ConnectionPool;
  /** The bound `listen` and `tls_listen` sockets, which no upstream connection may reach (src/wire/own-listeners.ts). */
  readonly #ownListeners = new OwnListeners();
  /** The pool keys the routes in force connect with (`poolKey`): what leaves it is retired. */
  #poolTargets = new Map<string, PoolTarget>();
  readonly #accessLog: AccessLog;
  readonly #observers = new Set<RecordObserver>();
  readonly #probeObservers = new Set<ProbeObserver>();
  readonly #probe: ProbeFunction;
  readonly #isHealthCheckDisabled: boolean;
  readonly #context: ProxyContext;
  /** The HTTP/1.1 connection loops of the listener's connections (src/wire/http1-server.ts). */
  readonly #http1: Http1Server;
  /** Every client connection not closed yet, upgraded ones included: a shutdown waits for their ends. */
  readonly #clientSockets = new Set<Socket>();
  /** The HTTPS listener (`tls_listen`); undefined without one. */
  readonly #tls: TlsListener | undefined;
  /** The certificate from ACME (`setAcmeCertificate`); kept across reloads. */
  #acmePair: CertificatePair | undefined;
  readonly #epochNow: () => number;
  /**
   * The config the process started with: what a reload cannot change (listeners, the other
   * `[server]` settings, `[admin]`, `[acme]`) stays as it says, and a reload is warned against it.
   */
  readonly #configAtStart: Config;
  /** Client TCP connections open now, on both listeners (counted only with a descriptor budget). */
  #clientConnections = 0;
  /** Client connections closed for the budget (undefined without one). */
  readonly #refusals: CountedWarning | undefined;

  constructor(config: Config, options: ProxyServerOptions = {}) {
    this.#deps = { now: () => performance.now(), random: Math.random, log: logLine, ...options.deps };
    this.#epochNow = options.epochNow ?? Date.now;
    // The certificates first: a broken pair stops the start (ConfigValueError at its tls_cert line).
    // One out of date is served with a warning (certificate-pair.ts): there is nothing better to serve.
    const certificates = this.#readCertificates(config.server, options.certificateTexts, () => true);
    this.#configAtStart = config;
    for (const warning of certificates.warnings) this.#deps.log(`warning: ${warning}`);
    this.#table = new RouteTable(config, this.#deps, options.limits ?? new LocalLimits({ now: this.#deps.now }), this.#epochNow);
    for (const warning of this.#table.tlsWarnings) this.#deps.log(`warning: ${warning}`);
    this.#isHealthCheckDisabled = options.isHealthCheckDisabled ?? false;
    const probe = options.probe ?? realProbe;
    this.#probe = async (upstream, check, probeOptions) => {
      const result = await probe(upstream, check, { ...probeOptions, ownListeners: this.#ownListeners });
      for (const observeProbe of this.#probeObservers) observeProbe(upstream, result);
      return result;
    };
    // Idle upstream connections are closed after 4 s, before the 5 s idle limit of node servers
    // (and most others), so we rarely write into a connection being closed.
    const budget = options.descriptorBudget;
    this.#pool = new ConnectionPool({
      idleTimeoutMs: 4000,
      ownListeners: this.#ownListeners,
      // A tunnel's upstream socket left the pool (detach) but still holds one of its descriptors.
      maxOpen: budget === undefined ? undefined : () => budget.maxUpstreamSockets - this.#context.tunnels.size,
    });
    this.#refusals =
      budget === undefined
        ? undefined
        : new CountedWarning(REFUSAL_LOG_INTERVAL_MS, options.timers ?? unrefTimers, (count, isWindowed) =>
            this.#deps.log(
              `warning: worker ${process.pid} serves at most ${budget.maxClientConnections} client connections with ${budget.openFileLimit} file descriptors (ulimit -n): ` +
                `closed ${plural(count, 'new connection')}${isWindowed ? ` in the last ${REFUSAL_LOG_INTERVAL_MS / 1000} s` : ''}; raise the limit (ulimit -n, systemd's LimitNOFILE)`,
            ),
          );
    const admit = budget === undefined ? undefined : (socket: Socket): boolean => this.#admit(socket, budget);
    this.#poolTargets = this.#currentPoolTargets();
    this.#healthChecker = new HealthChecker({
      routes: this.#healthTargets(),
      log: this.#deps.log,
      probe: this.#probe,
      timers: options.healthTimers,
      // Each probe is a socket: they may not take the descriptors the listeners need (descriptor-budget.ts).
      maxProbesInFlight: options.maxProbesInFlight ?? probeLimit(readOpenFileLimit()),
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
      httpsRedirectPort: config.server.redirectHttps ? config.server.tlsListen?.port : undefined,
      tunnels: new Set(),
      isDraining: false,
      isCutting: false,
      acmeChallenges: config.acme === undefined ? undefined : new AcmeChallengeStore(),
    };

    const { server: s } = config;
    this.#http1 = new Http1Server({
      onRequest: (clientReq, clientRes, isExpectingContinue) => handleRequest(this.#context, clientReq, clientRes, isExpectingContinue),
      onAnswer: (answer) => {
        if (this.#context.accessLog.isEnabled) logServerAnswer(this.#context, answer);
      },
      isDraining: () => this.#context.isDraining,
      headTimeoutMs: s.headerTimeoutMs,
      bodyTimeoutMs: s.bodyTimeoutMs,
      requestTimeoutMs: s.requestTimeoutMs,
      keepAliveTimeoutMs: s.keepaliveTimeoutMs,
      maxHeadBytes: s.maxHeaderSize,
      admit,
    });
    this.#http1.strictTransportSecurity = strictTransportSecurity(config.server);
    this.server = this.#http1.server;
    this.server.on('connection', (socket: Socket) => this.#trackClientSocket(socket));
    this.#tls =
      s.tlsListen === undefined
        ? undefined
        : new TlsListener({
            store: new CertificateStore(certificates.pairs, undefined),
            minVersion: s.tlsMinVersion,
            handshakeTimeoutMs: s.headerTimeoutMs,
            ticketKeys: options.ticketKeys,
            onConnection: (socket, tcpSocket) => {
              this.#trackClientSocket(socket);
              this.#http1.accept(socket, tcpSocket);
            },
            refusePlainRequest: (socket, reason, received) => {
              this.#trackClientSocket(socket);
              this.#http1.refuse(socket, 400, reason, received);
            },
            log: this.#deps.log,
            now: this.#deps.now,
            admit,
          });
  }

  /** Counts a new client connection, or refuses it when `budget.maxClientConnections` are open (ProxyServerOptions.descriptorBudget). */
  #admit(socket: Socket, budget: DescriptorBudget): boolean {
    if (this.#clientConnections >= budget.maxClientConnections) {
      this.#refusals?.note();
      return false;
    }
    this.#clientConnections++;
    socket.on('close', this.#onAdmittedClose);
    return true;
  }

  #trackClientSocket(socket: Socket): void {
    this.#clientSockets.add(socket);
    socket.on('close', this.#onTrackedClose);
  }

  // One 'close' listener each for all client sockets (`close` comes once), not a closure and a
  // `once` wrapper with its state per socket: a heap snapshot of 10,000 idle clients held about
  // 2–3 MB of those. Each is called with the socket as `this`.
  readonly #onAdmittedClose = (): void => {
    this.#clientConnections--;
  };
  readonly #onTrackedClose = deleteOnClose(this.#clientSockets);

  /**
   * Reads every `tls_cert` pair of `server`, or takes `texts` instead (ProxyServerOptions.certificateTexts).
   * @throws ConfigValueError for the first broken pair
   */
  #readCertificates(server: ServerConfig, texts: readonly CertificateText[] | undefined, servesOutOfDate: (certPem: string) => boolean): { pairs: CertificatePair[]; warnings: string[] } {
    return readCertificatePairs(server.tlsCertificates, { minVersion: server.tlsMinVersion, nowMs: this.#epochNow(), servesOutOfDate }, texts);
  }

  /** The certificates served now: `tls_cert` pairs in file order, then the ACME one (for /status and /metrics). */
  get certificates(): readonly CertificatePair[] {
    return this.#tls?.store.pairs ?? [];
  }

  /** The texts of the `tls_cert` pairs served now, in file order (what a cluster primary hands its workers). */
  get certificateTexts(): CertificateText[] {
    return this.certificates.filter((pair) => pair.source === 'tls_cert').map(({ certPem, keyPem }) => ({ certPem, keyPem }));
  }

  /**
   * Serves the certificate ACME issued (PEM: the certificate, then its chain; and its private key)
   * from the next handshake on, in place of the previous ACME one: for the names it lists that no
   * `tls_cert` pair serves, and as the default when there is no `tls_cert` pair (SPEC 1.2
   * `[acme]`). No connection is dropped; the pair survives reloads.
   * @throws TlsCertificateError when the texts are not a valid, matching, currently valid pair
   *   (nothing changes then); Error when there is no `tls_listen`
   */
  setAcmeCertificate(certPem: string, keyPem: string): void {
    const tlsListener = this.#tls;
    if (tlsListener === undefined) throw new Error('setAcmeCertificate: there is no tls_listen to serve the certificate on');
    const { server } = this.config;
    this.#acmePair = parseCertificatePair(certPem, keyPem, 'acme', undefined, { minVersion: server.tlsMinVersion, nowMs: this.#epochNow() });
    const configured = tlsListener.store.pairs.filter((pair) => pair.source === 'tls_cert');
    tlsListener.update(new CertificateStore(configured, this.#acmePair), server.tlsMinVersion);
  }

  get config(): Config {
    return this.#table.config;
  }

  /**
   * Publishes the key authorization of an HTTP-01 challenge `token` (RFC 8555 §8.3), or withdraws it
   * when `keyAuthorization` is undefined: `GET /.well-known/acme-challenge/TOKEN` answers it until
   * then. Without `[acme]` in the config the call does nothing (such paths route as usual).
   */
  setAcmeChallenge(token: string, keyAuthorization: string | undefined): void {
    this.#context.acmeChallenges?.set(token, keyAuthorization);
  }

  /** The published HTTP-01 tokens and key authorizations (a cluster primary replays them to a new worker). */
  get acmeChallenges(): [string, string][] {
    return this.#context.acmeChallenges?.entries() ?? [];
  }

  /** The routes now in force, in file order. */
  get routes(): readonly Route[] {
    return this.#table.routes;
  }

  /** What the server side did so far: requests read, client connections served now (tests and diagnostics). */
  get serverStats(): { readonly requests: number; readonly openConnections: number } {
    return { requests: this.#http1.requestCount, openConnections: this.#http1.size };
  }

  get healthChecker(): HealthChecker {
    return this.#healthChecker;
  }

  /** Registers `observer` for every finished exchange; returns the function that unregisters it. */
  observe(observer: RecordObserver): () => void {
    this.#observers.add(observer);
    return () => this.#observers.delete(observer);
  }

  /** Registers `observer` for every finished active health probe; returns the function that unregisters it. */
  observeProbes(observer: ProbeObserver): () => void {
    this.#probeObservers.add(observer);
    return () => this.#probeObservers.delete(observer);
  }

  /** Upstreams that left `routeName`'s set with requests still in flight on them (RouteTable.leavingUpstreams). */
  leavingUpstreams(routeName: string): readonly Upstream[] {
    return this.#table.leavingUpstreams(routeName);
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

  /** What the discovery lines of `routeName` stand for now (see `setDiscoveredUpstreams`). */
  discoveredLines(routeName: string): readonly DiscoveredLine[] {
    return this.#table.discoveredLines(routeName);
  }

  /**
   * Replaces what the discovery lines (`resolve`, `service=`) of `routeName` stand for, under
   * traffic and without a reload (SPEC 7; src/discovery runs the lookups and calls this): the route
   * is rebuilt with each discovery line expanded into `lines`' upstreams (a line not listed keeps
   * what it had; see RouteTable.setDiscovered for the order and the merging of duplicates). An
   * address that stays keeps its object (health, counters, ejection, effective weight, draining,
   * its health-check streaks and schedule) and its pooled connections, and the balancer continues
   * where it was; a new one starts UP and, with `health_check = on`, is probed at once; one that
   * left gets no new request, those in flight finish, and once no route uses its address any more
   * its pooled connections close (idle ones now, busy ones when their exchange ends) and its probes
   * stop. Does nothing when no route of that name is in force; the lines survive `reload` for the
   * discovery lines that are still there.
   */
  setDiscoveredUpstreams(routeName: string, lines: readonly DiscoveredLine[]): void {
    if (this.#table.setDiscovered(routeName, lines)) this.#routesChanged();
  }

  /**
   * Swaps in a new config without dropping in-flight requests or the listening socket (SIGHUP):
   * new routes and balancers; the runtime state (health, counters, ejection, draining) of every
   * upstream whose route name and address did not change is kept, and so is its place in the health
   * checker: rise/fall streaks, next probe time, probe in flight (HealthChecker.update says what a
   * change of `health_*` settings keeps). New upstreams are probed at once; removed ones' probes are
   * aborted. Requests in flight finish on the objects they started with. The `tls_cert` files
   * are read again (or `certificateTexts` taken, see ProxyServerOptions) and served from the next
   * handshake on (connections keep theirs), with `tls_min_version`, `redirect_https` and `hsts`;
   * the routes' TLS files are read again too (new upstream connections use their new contents).
   * Other `[server]` limits, `listen` and `tls_listen` need a restart.
   * @throws ConfigValueError when a `tls_cert` pair is broken (missing, not PEM, a key that does
   *   not match, out of date and not the certificate served now) or a route's `tls_ca` /
   *   `tls_client_cert` file does not load (or is out of date and not the one in use now):
   *   nothing changed, the old config and certificates keep serving
   */
  reload(config: Config, certificateTexts?: readonly CertificateText[]): ReloadSummary {
    // A certificate out of date is refused unless it is the one served now (certificate-pair.ts);
    // texts come from a cluster primary, which judged them already.
    const served = new Set(this.certificateTexts.map((text) => text.certPem));
    const certificates = this.#readCertificates(config.server, certificateTexts, (certPem) => certificateTexts !== undefined || served.has(certPem));
    const warnings: string[] = [...certificates.warnings, ...trustedProxyWarnings(config.server), ...resolverWarnings(config.server), ...upstreamTlsWarnings(config), ...pathWarnings(config.routes)];
    // Against what runs since the start, not the last reload's file: a reload that puts a setting
    // back as it started needs no restart, and one that keeps a change still waiting says so again.
    const before = this.#configAtStart;
    if (settingsText(before.server.listen) !== settingsText(config.server.listen)) {
      warnings.push('a new [server] listen address takes effect only after a restart');
    }
    if (settingsText(before.server.tlsListen) !== settingsText(config.server.tlsListen)) {
      warnings.push('a new [server] tls_listen address takes effect only after a restart');
    }
    // The other [server] settings need a restart; the warning names those that differ.
    const restartOnly = restartOnlyChanges(before.server, config.server);
    if (restartOnly.length > 0) warnings.push(`[server] ${restartOnly.join(', ')}: a new value takes effect only after a restart`);
    if (settingsText(before.admin) !== settingsText(config.admin)) {
      warnings.push('[admin] changes take effect only after a restart');
    }
    if (settingsText(before.acme) !== settingsText(config.acme)) {
      warnings.push('[acme] changes take effect only after a restart');
    }
    const change = this.#table.reload(config);
    warnings.push(...this.#table.tlsWarnings);
    this.#ownListeners.refreshHostAddresses();
    this.#context.server = { ...this.#context.server, trustedProxies: config.server.trustedProxies };
    const tlsListener = this.#tls;
    if (tlsListener !== undefined) {
      tlsListener.update(new CertificateStore(certificates.pairs, this.#acmePair), config.server.tlsMinVersion);
      this.#context.httpsRedirectPort = config.server.redirectHttps ? this.#tlsPort() : undefined;
      this.#http1.strictTransportSecurity = strictTransportSecurity(config.server);
    }
    this.#routesChanged();
    return { ...change, warnings };
  }

  /**
   * The request path routes by the new table, the health checker watches its upstreams, and the
   * pooled connections of addresses no route connects to any more are retired.
   */
  #routesChanged(): void {
    this.#context.router = new Router(this.#table.routes);
    this.#healthChecker.update(this.#healthTargets());
    const before = this.#poolTargets;
    this.#poolTargets = this.#currentPoolTargets();
    for (const [key, target] of before) {
      if (!this.#poolTargets.has(key)) this.#pool.retire(target.host, target.port, target.tls, target.tlsName);
    }
  }

  /** Every pool key the routes in force connect with, as the request path makes them. */
  #currentPoolTargets(): Map<string, PoolTarget> {
    const targets = new Map<string, PoolTarget>();
    for (const route of this.#table.routes) {
      for (const upstream of route.upstreams) {
        const target = poolTargetOf(upstream, route.upstreamTls);
        targets.set(poolKey(target.host, target.port, target.tls, target.tlsName), target);
      }
    }
    return targets;
  }

  /** What the health checker watches: every route now in force with its runtime upstreams. */
  #healthTargets(): HealthCheckTarget[] {
    return this.#table.routes.map((route) => ({ route: route.config, upstreams: route.upstreams, tls: route.upstreamTls }));
  }

  /**
   * Tells the proxy about a listener of its own that another process bound: a cluster primary,
   * which never listens, learns its workers' `listen` and `tls_listen` endpoints from their
   * `listening` events, so its health probes refuse them too. `listen()` and `listenTls()` add
   * their own.
   */
  addOwnListener(endpoint: ListeningEndpoint): void {
    this.#ownListeners.add(endpoint);
  }

  /**
   * Starts the active health checks (and keeps them running across reloads). `listen()` calls it
   * unless `isHealthCheckDisabled`; a cluster primary, which never listens, calls it itself.
   */
  startHealthChecks(): void {
    this.#healthChecker.start();
  }

  /** Starts listening on `[server] listen` (or `port` when given, e.g. 0 in tests). Resolves with the bound port. */
  async listen(port = this.#configAtStart.server.listen?.port ?? 0, host = this.#configAtStart.server.listen?.host ?? '0.0.0.0'): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const bound = this.server.address() as AddressInfo;
    this.#ownListeners.add({ address: bound.address, port: bound.port, key: 'listen' });
    if (!this.#isHealthCheckDisabled) this.startHealthChecks();
    return bound.port;
  }

  /**
   * Starts the HTTPS listener on `[server] tls_listen` (or `port` when given, e.g. 0 in tests);
   * `redirect_https` sends plain requests to the port it bound. Resolves with the bound port.
   * @throws Error when the config has no `tls_listen`; node's listen errors (EADDRINUSE, EACCES)
   */
  async listenTls(port = this.#configAtStart.server.tlsListen?.port, host = this.#configAtStart.server.tlsListen?.host ?? '0.0.0.0'): Promise<number> {
    const tlsServer = this.#tls?.server;
    if (tlsServer === undefined || port === undefined) throw new Error('listenTls: the config has no tls_listen');
    await new Promise<void>((resolve, reject) => {
      tlsServer.once('error', reject);
      tlsServer.listen(port, host, () => {
        tlsServer.off('error', reject);
        resolve();
      });
    });
    this.#http1.startTimeoutChecks(); // the plain listener may be off: its 'listening' would start them
    const bound = tlsServer.address() as AddressInfo;
    this.#ownListeners.add({ address: bound.address, port: bound.port, key: 'tls_listen' });
    if (this.#context.httpsRedirectPort !== undefined) this.#context.httpsRedirectPort = bound.port;
    return bound.port;
  }

  /** The HTTPS listener's bound port, else its configured one; undefined without `tls_listen`. */
  #tlsPort(): number | undefined {
    const address = this.#tls?.server.address();
    return address !== null && typeof address === 'object' ? address.port : this.#configAtStart.server.tlsListen?.port;
  }

  /**
   * Graceful shutdown: stop accepting, close idle keep-alive connections and HTTPS connections whose
   * handshake has not finished (none carries a request), wait for in-flight
   * requests up to `timeoutMs` (default `shutdown_timeout`), then close whatever is left.
   * Resolves true when everything finished in time.
   */
  async close(timeoutMs = this.#configAtStart.server.shutdownTimeoutMs): Promise<boolean> {
    this.#healthChecker.stop();
    this.#refusals?.stop();
    this.#context.isDraining = true;
    const tlsServer = this.#tls?.server;
    const closed = Promise.all([
      new Promise<void>((resolve) => this.server.close(() => resolve())),
      tlsServer === undefined ? undefined : new Promise<void>((resolve) => tlsServer.close(() => resolve())),
    ]);
    const closeIdleConnections = (): void => {
      this.#http1.closeIdleConnections();
      this.#tls?.closeHandshakes();
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
      this.#context.isCutting = true;
      this.#http1.closeAllConnections();
      for (const tunnel of this.#context.tunnels) tunnel.destroy();
      await closed;
    }
    // A cut connection's requests log themselves when its socket emits 'close', which can come
    // after the server's own 'close': wait for them before the log closes.
    await Promise.all([...this.#clientSockets].map((socket) => new Promise((resolve) => socket.once('close', resolve))));
    // A cut tunnel logs once its upstream side has closed too (bounded: a record must not hold up the exit).
    const tunnelsClosed = [...this.#context.tunnels].map((tunnel) => tunnel.closed);
    await Promise.race([Promise.all(tunnelsClosed), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
    await this.#pool.close();
    await this.#accessLog.close();
    return isDrained;
  }
}

/** The pool key's parts of one upstream, as the request path acquires its connections. */
function poolTargetOf(upstream: Upstream, routeTls: TlsClientSettings): PoolTarget {
  const { config } = upstream;
  const isTls = config.scheme === 'https';
  return { host: config.host, port: config.port, tls: isTls ? routeTls : undefined, tlsName: isTls ? config.tlsName : undefined };
}

/** The `Strict-Transport-Security` value for `hsts` (RFC 6797 §6.1.1), or undefined when it is off. */
function strictTransportSecurity(server: ServerConfig): string | undefined {
  return server.hstsMaxAgeSeconds === undefined ? undefined : `max-age=${server.hstsMaxAgeSeconds}`;
}

/**
 * An access-log line for an answer the server wrote itself (no request object exists). Without a
 * request head (a head refused or cut short, the 400 to a plain HTTP request on the TLS port,
 * which is `refused=plain_http`) the request line is the first line received, as nginx logs it,
 * or `-` when that is not printable ASCII; no method, target or version is made up for it.
 */
function logServerAnswer(context: ProxyContext, answer: ServerAnswer): void {
  const request = answer.httpVersion === undefined ? undefined : { method: answer.method, url: answer.target, httpVersion: answer.httpVersion, headers: {} };
  const refusal = answer.isRefusedUnread ? ('plain_http' as const) : undefined;
  const outcome = { clientIp: normalizeClientIp(answer.clientAddress), status: answer.status, bytesSent: answer.bytesSent, refusal, attempts: [], durationMs: answer.durationMs };
  context.accessLog.write(buildAccessLogRecord(request, outcome, answer.receivedLine));
}

/**
 * The `[server]` settings a reload applies (ProxyServer.reload), and `listen` and `tls_listen`,
 * which have warnings of their own; every other one needs a restart.
 */
const RELOADED_SERVER_KEYS: ReadonlySet<string> = new Set<keyof ServerConfig>([
  'listen',
  'tlsListen',
  'trustedProxies',
  'tlsCertificates',
  'tlsMinVersion',
  'redirectHttps',
  'hstsMaxAgeSeconds',
  // DNS discovery (src/cli/discovery-runner.ts) is reloaded with the same config and asks the new servers.
  'resolvers',
  'resolverTimeoutMs',
]);

/** The `[server]` settings of `before` and `after` that need a restart and differ, by their keys in the file (`header_timeout`). */
function restartOnlyChanges(before: ServerConfig, after: ServerConfig): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]) as Set<keyof ServerConfig>;
  return [...keys]
    .filter((key) => !RELOADED_SERVER_KEYS.has(key) && !key.endsWith('Place') && settingsText(before[key]) !== settingsText(after[key]))
    .map((key) => key.replace(/(?:Ms|Seconds)$/, '').replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`));
}

/** Settings as text to compare, without where they were written (`place`, `…Place`): a line moved is no change. */
function settingsText(settings: unknown): string {
  return JSON.stringify(settings, (key: string, value: unknown) => (key === 'place' || key.endsWith('Place') ? undefined : value)) ?? 'undefined';
}

/** A 'close' listener that takes the closed socket (the listener's `this`) out of `sockets`. */
function deleteOnClose(sockets: Set<Socket>): (this: Socket) => void {
  return function (this: Socket): void {
    sockets.delete(this);
  };
}
