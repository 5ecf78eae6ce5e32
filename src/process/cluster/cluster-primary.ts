/**
 * The cluster primary (`[server] workers = N | auto`, node:cluster), the role of nginx's master
 * process. It never proxies a request. It owns:
 *
 * - the workers: forks N and hands each the config it serves (a worker never reads the file, so a
 *   replacement runs what the others run); forks a new one at once when a running
 *   worker dies; a worker that cannot start is reported (log, `/status`) and tried again with
 *   backoff (restart-backoff.ts); when no worker has started yet, that is fatal (exit 1, as a
 *   single process that cannot listen);
 * - active health checks, on a model of the routes (a ProxyServer that never listens, told the
 *   workers' listening endpoints so that it refuses to probe them: own-listeners.ts), whose results
 *   it pushes to the workers (`UpstreamStateMessage`) within `PUSH_INTERVAL_MS` of a change, so a
 *   backend that goes DOWN is DOWN in every worker within one health interval plus that;
 * - the upstream registry and admin drain/enable, applied to the model and pushed the same way;
 * - DNS discovery (`resolve` / `service=` lines, SPEC 7): the one Discovery of the cluster runs
 *   here against the model, and every new set is pushed at once (not at the next interval), so the
 *   DNS servers see one resolver's queries however many workers run, and a worker that starts
 *   later gets the current sets in its `start` message. Workers never ask DNS;
 * - reload: SIGHUP re-reads the file here; a broken file is rejected with its place and nothing
 *   changes; a valid one is applied to the model and sent to every worker;
 * - the admin listener, which asks every worker for its counters and answers with the totals,
 *   keeping the counts of workers that died (counter-ledger.ts), so no counter goes down;
 * - shutdown: SIGTERM/SIGINT tells every worker to drain, waits for them (a worker still starting
 *   just exits), then exits 0. Signals that came during start-up are handled once it is done.
 * - log rotation: SIGUSR1 tells every worker to reopen its log files.
 * - the per-client limits: the token buckets of `rate_limit` and the in-flight counts of
 *   `conn_limit` (limit-bank.ts), which the workers lease in batches (lease-limits.ts), so a client
 *   gets its limit once across all workers; a worker that dies loses only its leases. The model's
 *   own limits serve nothing (it never listens).
 * - `[acme]`: the certificate manager (src/tls/acme) runs here and nowhere else, so one account
 *   orders one certificate; every challenge token and certificate goes to every worker, and a
 *   worker that starts later gets the current ones in its `start` message. Orders begin once a
 *   worker listens (the challenges are answered on the plain listener).
 *
 * When the primary itself dies (SIGKILL, a crash), the listening socket dies with it (node:cluster's
 * round-robin scheduling: the primary accepts and hands connections to the workers), so nothing
 * new can be accepted; the workers notice the closed IPC channel, finish the requests in flight
 * (up to `shutdown_timeout`) and exit. The service is gone until a supervisor starts it again, and
 * the new primary can bind the port at once (the README ships a systemd unit with
 * `Restart=always`). nginx's orphaned workers keep serving on the listening sockets they inherited,
 * but with nobody to reload, replace or stop them; here there is one clear state.
 *
 * What is per worker (as nginx without a `zone` shared-memory block): each worker has its own
 * Upstream objects, so active requests, effective weight, passive failure counts and ejections,
 * and every strategy's private state (round-robin cursors, SWRR current weights) are counted per
 * worker. Health state, draining and the registry are the primary's and are the same everywhere.
 * Consequences: least-connections and power-of-two-choices compare only the requests the deciding
 * worker itself has in flight (with N workers an upstream may already carry N long requests while
 * each worker sees one); round robin is exact per worker, not globally; and an upstream is ejected
 * by a worker only after `max_fails` failures seen by that worker. `/status.json` shows both the
 * totals and each worker's view.
 */
import cluster, { type Address, type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { randomBytes } from 'node:crypto';
import { TICKET_KEY_BYTES } from '../../tls/tls-listener.js';
import type { Config } from '../../config/config.js';
import { formatListenAddress } from '../../config/values.js';
import { ProxyServer } from '../../gateway/proxy-server.js';
import { checkAccessLogPath } from '../../gateway/access-log.js';
import { AdminServer } from '../../admin/admin-server.js';
import { MetricsCollector, mergeMetrics, upstreamPairsOf } from '../../admin/metrics-collector.js';
import type { WorkerReport, WorkerStartFailure } from '../../admin/status-snapshot.js';
import { UpstreamRegistry } from '../../admin/upstream-registry.js';
import { loadAcme, reloadOnHangup } from '../../cli/run-proxy.js';
import { DiscoveryRunner, hasDiscoveryLines } from '../../cli/discovery-runner.js';
import type { AcmeManager } from '../../tls/acme/acme-manager.js';
import { STOP_SIGNALS, type ProcessSignals } from '../process-signals.js';
import { whenWorkerGone } from './worker-gone.js';
import { isMessage, type AcmeState, type PrimaryMessage, type UpstreamStateMessage, type WorkerMessage } from './cluster-messages.js';
import { CounterLedger } from './counter-ledger.js';
import { LimitBank } from './limit-bank.js';
import { restartDelayMs } from './restart-backoff.js';
import { noteLogFilesInWorkers } from '../../log/process-log.js';

/** How often the primary compares upstream state with what it last pushed: 100 ms. */
export const PUSH_INTERVAL_MS = 100;
/** How often the primary drops its full, unleased buckets: 1 s. */
export const BANK_SWEEP_INTERVAL_MS = 1_000;
/** How long the admin listener waits for a worker's report: 1 s (a silent worker counts with its last report). */
export const REPORT_TIMEOUT_MS = 1_000;

/** `workers = auto` → one per core (`os.availableParallelism()`), else the number. */
export function resolveWorkerCount(workers: number | 'auto'): number {
  return workers === 'auto' ? availableParallelism() : workers;
}

/** One of the N places for a worker: the worker in it now, and its restart state. */
interface WorkerSlot {
  /** 1..N, as `/status` names it. */
  readonly number: number;
  worker: Worker | undefined;
  /** The worker in the slot is listening. */
  isStarted: boolean;
  /** Failed starts in a row (0 once a worker started). */
  failedStarts: number;
  /** The last failed start while the slot waits or tries again; `retryAtMs` on `Date.now()`'s clock. */
  failure: { readonly reason: string; readonly retryAtMs: number } | undefined;
  retryTimer: NodeJS.Timeout | undefined;
}

/**
 * Runs the primary until SIGTERM/SIGINT; resolves with the exit code (1 when no worker could start).
 * @throws ConfigFileError / ConfigValueError when `access_log` cannot be opened; the admin listener's listen error
 */
export async function runClusterPrimary(signals: ProcessSignals, configFile: string, config: Config, workerCount: number, log: (line: string) => void): Promise<number> {
  cluster.setupPrimary({ serialization: 'advanced' });
  noteLogFilesInWorkers(); // SIGUSR1 here says it tells the workers, not that this process has no file
  // Workers open the access log; a path that cannot be opened fails the start here, as with one process.
  checkAccessLogPath(config.server.accessLog, config.server.accessLogPlace);
  const model = new ProxyServer(config, { accessLog: { isEnabled: false, write() {}, close: async () => {} } });
  const probeMetrics = new MetricsCollector();
  probeMetrics.attach(model);
  model.startHealthChecks();

  /**
   * The config a new worker gets: the last good reload's routes on the `[server]` settings the
   * workers started with (those need a restart, see ProxyServer.reload), whatever the file says now.
   */
  let served = config;
  /** One session ticket key for every worker (src/tls/tls-listener.ts), for this primary's life. */
  const ticketKeys = randomBytes(TICKET_KEY_BYTES);
  const slots: WorkerSlot[] = Array.from({ length: workerCount }, (_, index) => ({
    number: index + 1,
    worker: undefined,
    isStarted: false,
    failedStarts: 0,
    failure: undefined,
    retryTimer: undefined,
  }));
  const liveWorkers = (): Worker[] => slots.flatMap((slot) => (slot.worker?.isConnected() ? [slot.worker] : []));
  const ledger = new CounterLedger();
  let hasAnyStarted = false;
  let isStopping = false;
  let lastPushed = '';

  const broadcast = (message: PrimaryMessage): void => {
    for (const worker of liveWorkers()) worker.send(message);
  };
  const stateMessage = (): UpstreamStateMessage => ({
    type: 'upstream-state',
    routes: model.routes.map((route) => ({
      name: route.name,
      registered: model.registeredUpstreams(route.name),
      discovered: model.discoveredLines(route.name),
      upstreams: route.upstreams.map((u) => ({ origin: u.origin, healthState: u.healthState, isDraining: u.isDraining, lastProbe: u.lastProbe })),
    })),
  });
  const pushIfChanged = (): void => {
    const message = stateMessage();
    const text = JSON.stringify(message);
    if (text === lastPushed) return;
    lastPushed = text;
    broadcast(message);
  };
  const pushTimer = setInterval(pushIfChanged, PUSH_INTERVAL_MS);
  // A worker that is gone gets nothing: its exit is handled below (bank.workerGone).
  const bank = new LimitBank({ send: (workerId, message) => void cluster.workers?.[workerId]?.send(message) });
  const bankTimer = setInterval(() => bank.sweep(), BANK_SWEEP_INTERVAL_MS).unref();

  const registry = new UpstreamRegistry({ target: model, log, onChange: pushIfChanged });
  // Each new set goes to the workers at once: the model's route is rebuilt, then pushed.
  const discovery = new DiscoveryRunner({
    target: {
      setDiscoveredUpstreams: (routeName, lines) => {
        model.setDiscoveredUpstreams(routeName, lines);
        pushIfChanged();
      },
    },
    log,
  });

  // [acme]: the model keeps the published tokens (for workers that start later) and the certificate
  // (for the admin's /status and /metrics); `acmeCertificate` is what a starting worker is handed.
  let acmeCertificate: AcmeState['certificate'];
  const acmeState = (): AcmeState | undefined => (config.acme === undefined ? undefined : { challenges: model.acmeChallenges, certificate: acmeCertificate });
  let acme: AcmeManager | undefined;
  try {
    acme =
      config.acme === undefined
        ? undefined
        : await loadAcme(
            config.acme,
            {
              setAcmeChallenge: (token, keyAuthorization) => {
                model.setAcmeChallenge(token, keyAuthorization);
                broadcast({ type: 'acme-challenge', token, keyAuthorization });
              },
              setAcmeCertificate: (certPem, keyPem) => {
                model.setAcmeCertificate(certPem, keyPem); // the primary's /status and /metrics list it too
                acmeCertificate = { certPem, keyPem };
                broadcast({ type: 'acme-certificate', certPem, keyPem });
              },
            },
            log,
          );
  } catch (error) {
    clearInterval(pushTimer);
    clearInterval(bankTimer);
    registry.close();
    await model.close(0);
    throw error;
  }
  discovery.apply(config);

  let nextReportId = 1;
  const pendingReports = new Map<number, (report: WorkerReport) => void>();

  /** Asks every started worker for its counters; a worker that does not answer in time is left out (and listed by `silentWorkerPids`). */
  const collectReports = async (): Promise<{ readonly workerId: number; readonly pid: number; readonly report?: WorkerReport }[]> => {
    const asked = slots.flatMap((slot) => (slot.isStarted && slot.worker?.isConnected() ? [slot.worker] : []));
    const replies = asked.map(
      (worker) =>
        new Promise<{ workerId: number; pid: number; report?: WorkerReport }>((resolve) => {
          const id = nextReportId++;
          const pid = worker.process.pid ?? 0;
          const timer = setTimeout(() => {
            pendingReports.delete(id);
            resolve({ workerId: worker.id, pid });
          }, REPORT_TIMEOUT_MS);
          pendingReports.set(id, (report) => {
            clearTimeout(timer);
            pendingReports.delete(id);
            resolve({ workerId: worker.id, pid, report });
          });
          worker.send({ type: 'report-request', id } satisfies PrimaryMessage);
        }),
    );
    return (await Promise.all(replies)).sort((a, b) => a.pid - b.pid);
  };
  const startFailures = (): WorkerStartFailure[] =>
    slots.flatMap((slot) =>
      slot.failure === undefined
        ? []
        : [{ slot: slot.number, reason: slot.failure.reason, failedStarts: slot.failedStarts, nextAttemptInMs: Math.max(0, slot.failure.retryAtMs - Date.now()) }],
    );

  // The admin listener starts before any worker, so a port in use fails the start with nothing to clean up but the model.
  // Its line is logged after the proxy's, once a worker listens, in the order of a single process.
  let admin: AdminServer | undefined;
  let adminLine: string | undefined;
  if (config.admin !== undefined) {
    admin = new AdminServer({
      config: config.admin,
      proxy: model,
      registry,
      mode: 'cluster',
      discovery,
      collect: async () => {
        const replies = await collectReports();
        const answers = replies.flatMap((reply) => (reply.report === undefined ? [] : [{ workerId: reply.workerId, report: reply.report }]));
        const reports = answers.map((answer) => answer.report);
        const carried = ledger.carried(new Set(answers.map((answer) => answer.workerId)));
        probeMetrics.forgetUpstreams(upstreamPairsOf(model));
        return {
          reports,
          carried,
          metrics: mergeMetrics([...reports.map((report) => report.metrics), carried.metrics, probeMetrics.state]),
          workerStartFailures: startFailures(),
          silentWorkerPids: replies.flatMap((reply) => (reply.report === undefined ? [reply.pid] : [])),
        };
      },
      onStateChange: pushIfChanged,
      log,
    });
    try {
      const port = await admin.listen();
      adminLine = `admin listening on ${config.admin.listen.host}:${port} (totals across ${workerCount} workers)`;
    } catch (error) {
      acme?.stop();
      discovery.stop();
      clearInterval(pushTimer);
      clearInterval(bankTimer);
      registry.close();
      await model.close(0);
      throw error;
    }
  }

  const stopReloading = reloadOnHangup(
    configFile,
    (next) => {
      const summary = model.reload(next);
      registry.reconcile(); // registrations of removed routes, or of addresses a pass line took over, go
      served = { ...next, server: servedServerSettings(config.server, next.server) };
      broadcast({ type: 'reload', config: next, certificates: model.certificateTexts });
      discovery.apply(next);
      pushIfChanged();
      return summary;
    },
    (line) => log(line.startsWith('reloaded ') ? `${line} (in ${liveWorkers().length} workers)` : line),
    signals,
  );

  // SIGUSR1 (log rotation): src/main.ts's listener reopens this process's own files; every worker
  // is told to reopen its own.
  const onReopenSignal = (): void => {
    log(`SIGUSR1: telling ${liveWorkers().length} worker(s) to reopen their log files`);
    broadcast({ type: 'reopen-logs' });
  };
  process.on('SIGUSR1', onReopenSignal);

  let finish: (exitCode: number) => void = () => {};
  const finished = new Promise<number>((resolve) => (finish = resolve));

  /** Tells every worker to drain, waits for them (killed at the deadline), closes the rest, then finishes with `exitCode`. */
  const shutDown = (exitCode: number): void => {
    isStopping = true;
    const running = slots.flatMap((slot) => (slot.worker === undefined ? [] : [{ worker: slot.worker, isStarted: slot.isStarted }]));
    for (const slot of slots) clearTimeout(slot.retryTimer);
    // A started worker exits 1 when its shutdown_timeout ran out and it cut requests (cluster-worker.ts);
    // one still starting has nothing in flight and just exits.
    let cutCount = 0;
    const exited = running.map(
      ({ worker, isStarted }) =>
        new Promise<void>((done) => {
          if (worker.isDead()) return done();
          worker.once('exit', (code: number | null) => {
            if (isStarted && code !== 0) cutCount++;
            done();
          });
        }),
    );
    broadcast({ type: 'shutdown' });
    const deadline = setTimeout(() => {
      for (const { worker } of running) worker.process.kill('SIGKILL');
    }, config.server.shutdownTimeoutMs + 2_000);
    acme?.stop();
    discovery.stop();
    void Promise.all(exited).then(async () => {
      clearTimeout(deadline);
      clearInterval(pushTimer);
      clearInterval(bankTimer);
      stopReloading();
      process.off('SIGUSR1', onReopenSignal);
      registry.close();
      await admin?.close();
      await model.close(0);
      if (exitCode === 0) {
        log(cutCount === 0 ? 'shut down' : `shut down: ${cutCount} worker(s) did not drain within shutdown_timeout; requests still in flight were cut (see the access log)`);
      }
      finish(exitCode);
    });
  };

  // The start-up line names the ports bound, as single-process mode does, and comes only once the
  // first worker has started (every listener listens): a listener that cannot be opened is reported
  // alone (see onGone), never after a line saying the proxy is on. A `listen` on port 0 is bound
  // when the first worker listens (node:cluster shares one socket per address, so every worker
  // reports the same port); a worker listens on `listen` before `tls_listen`, so the first new port
  // reported belongs to the first listener still on port 0.
  const listeners = [
    ...(config.server.listen === undefined ? [] : [{ host: config.server.listen.host, port: config.server.listen.port, scheme: 'http' }]),
    ...(config.server.tlsListen === undefined ? [] : [{ host: config.server.tlsListen.host, port: config.server.tlsListen.port, scheme: 'https' }]),
  ];
  const logStarted = (): void => {
    const bound = listeners.map((listener) => `${formatListenAddress(listener)} (${listener.scheme})`);
    log(`primary ${process.pid}: ${workerCount} workers, health checks${hasDiscoveryLines(config) ? ', DNS discovery' : ''} and registry here; proxy on ${bound.join(' and ')}`);
    if (adminLine !== undefined) log(adminLine);
  };
  const noteBoundPort = (port: number): void => {
    if (listeners.some((listener) => listener.port === port)) return;
    const unbound = listeners.find((listener) => listener.port === 0);
    if (unbound !== undefined) unbound.port = port;
  };

  const startWorker = (slot: WorkerSlot): void => {
    slot.retryTimer = undefined;
    slot.isStarted = false;
    const worker = cluster.fork();
    slot.worker = worker;
    let startFailure: string | undefined;
    // Started once every listener listens: a worker whose `tls_listen` fails after its `listen` bound
    // is a start failure (it exits), not a crash of a started worker to replace at once.
    let listeningCount = 0;
    // A message to a worker that is going away fails with EPIPE; its exit is handled below. A fork
    // that failed (no descriptor or process left for it: EMFILE, ENFILE, EAGAIN) emits 'error' and
    // never 'exit' (a break test: a worker killed while the primary had no descriptor free was
    // never replaced): that is a start that failed, retried with backoff like any other.
    let isForkFailed = false;
    worker.on('error', (error: NodeJS.ErrnoException) => {
      if (worker.process.pid !== undefined || isForkFailed) return;
      isForkFailed = true;
      startFailure = `the fork failed: ${error.code ?? error.message}${error.code === 'EMFILE' || error.code === 'ENFILE' ? ' (no file descriptor left: raise ulimit -n)' : ''}`;
      onGone(null, null);
    });
    worker.on('message', (message: unknown) => {
      if (!isMessage(message)) return;
      const typed = message as WorkerMessage;
      switch (typed.type) {
        case 'start-request':
          worker.send(
            isStopping
              ? { type: 'shutdown' }
              : ({ type: 'start', config: served, upstreamState: stateMessage(), ticketKeys, acme: acmeState(), certificates: model.certificateTexts } satisfies PrimaryMessage),
          );
          break;
        case 'start-failed':
          startFailure = typed.reason;
          break;
        case 'report':
          ledger.record(worker.id, typed.report);
          pendingReports.get(typed.id)?.(typed.report);
          break;
        case 'limits-request':
          bank.handle(worker.id, typed);
          break;
      }
    });
    worker.on('listening', (address: Address) => {
      // The workers' shared listeners are this process's own too: its health probes refuse them (own-listeners.ts).
      if (typeof address.address === 'string' && address.port > 0) model.addOwnListener({ address: address.address, port: address.port, key: listenerKey(config, address.port) });
      if (address.port > 0) noteBoundPort(address.port);
      if (++listeningCount < listeners.length) return;
      if (slot.failure !== undefined) log(`worker ${worker.process.pid} started in slot ${slot.number} after ${slot.failedStarts} failed start(s)`);
      slot.isStarted = true;
      slot.failedStarts = 0;
      slot.failure = undefined;
      // The first worker listening: the proxy is on, and the challenges can be answered now, so ACME may order.
      if (!hasAnyStarted) {
        logStarted();
        acme?.start();
      }
      hasAnyStarted = true;
    });
    // Gone = exited and its IPC channel read to the end, so its last report and its start failure are
    // in (worker-gone.ts: the wait for the channel is bounded).
    void whenWorkerGone(worker).then(({ code, signal }) => onGone(code, signal));
    const onGone = (code: number | null, signal: string | null): void => {
      ledger.retire(worker.id);
      bank.workerGone(worker.id);
      slot.worker = undefined;
      if (isStopping) return;
      const how = signal ?? `code ${code}`;
      const who = worker.process.pid === undefined ? `in slot ${slot.number}` : String(worker.process.pid);
      if (slot.isStarted) {
        log(`worker ${worker.process.pid} exited (${how}); starting a new one`);
        return startWorker(slot);
      }
      const reason = startFailure ?? `exited (${how}) before it was listening`;
      // Before any worker ever listened, a worker that could not start means the next one cannot
      // either (a port taken, a config the worker refuses): stop. Not one ended by a signal (a SIGHUP
      // to the process group that reached it while node was booting): that one is retried. The
      // worker's own reason is the one line a single process prints for it (a listener that cannot
      // be opened: listen-failure.ts), so the two modes fail with the same words.
      if (!hasAnyStarted && signal === null) {
        log(startFailure === undefined ? `error: worker ${who} could not start: ${reason}; stopping` : `error: ${startFailure}`);
        return shutDown(1);
      }
      slot.failedStarts++;
      const delayMs = restartDelayMs(slot.failedStarts);
      slot.failure = { reason, retryAtMs: Date.now() + delayMs };
      log(`worker ${who} could not start: ${reason}; next attempt in ${delayMs / 1000} s (${slot.failedStarts} failed start(s) in a row)`);
      slot.retryTimer = setTimeout(() => startWorker(slot), delayMs);
    };
  };
  for (const slot of slots) startWorker(slot);

  const onSignal = (signal: string): void => {
    if (isStopping) {
      log(`${signal} again: exiting now`);
      for (const slot of slots) slot.worker?.process.kill('SIGKILL');
      process.exit(1);
    }
    log(`${signal}: draining ${liveWorkers().length} workers`);
    shutDown(0);
  };
  for (const signal of STOP_SIGNALS) signals.on(signal, onSignal);
  signals.startUpDone(log);
  return await finished;
}

/**
 * The `[server]` settings a worker started after a reload runs: those of the start (the rest needs
 * a restart, see ProxyServer.reload), with the ones a reload applies taken from `reloaded`.
 */
function servedServerSettings(started: Config['server'], reloaded: Config['server']): Config['server'] {
  return {
    ...started,
    trustedProxies: reloaded.trustedProxies,
    tlsCertificates: reloaded.tlsCertificates,
    tlsMinVersion: reloaded.tlsMinVersion,
    redirectHttps: reloaded.redirectHttps,
    hstsMaxAgeSeconds: reloaded.hstsMaxAgeSeconds,
    resolvers: reloaded.resolvers,
    resolverTimeoutMs: reloaded.resolverTimeoutMs,
  };
}

/**
 * Which config key a worker's listener at the bound `port` serves, for the loop error's words: the
 * one configured with that port, else the one configured with port 0 (when both are 0 the event
 * does not tell them apart, and `listen` is named).
 */
function listenerKey(config: Config, port: number): 'listen' | 'tls_listen' {
  const { listen, tlsListen } = config.server;
  if (tlsListen?.port === port || listen === undefined) return 'tls_listen';
  if (listen.port === port || tlsListen === undefined) return 'listen';
  return tlsListen.port === 0 && listen.port !== 0 ? 'tls_listen' : 'listen';
}
