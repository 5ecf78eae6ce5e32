/**
 * The cluster primary (`[server] workers = N | auto`, node:cluster), the role of nginx's master
 * process. It never proxies a request. It owns:
 *
 * - the workers: forks N, forks a new one when one dies unexpectedly;
 * - active health checks, on a model of the routes (a ProxyServer that never listens), whose results
 *   it pushes to the workers (`UpstreamStateMessage`) within `PUSH_INTERVAL_MS` of a change, so a
 *   backend that goes DOWN is DOWN in every worker within one health interval plus that;
 * - the upstream registry and admin drain/enable, applied to the model and pushed the same way;
 * - reload: SIGHUP re-reads the file here; a broken file is rejected with its place and nothing
 *   changes; a valid one is applied to the model and sent to every worker;
 * - the admin listener, which asks every worker for its counters and answers with the totals;
 * - shutdown: SIGTERM/SIGINT tells every worker to drain, waits for them, then exits 0;
 * - log rotation: SIGUSR1 tells every worker to reopen its log files.
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
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Config } from '../config/config.js';
import { ProxyServer } from '../proxy/proxy-server.js';
import { AdminServer } from '../admin/admin-server.js';
import { MetricsCollector, mergeMetrics } from '../admin/metrics-collector.js';
import type { WorkerReport } from '../admin/status-snapshot.js';
import { UpstreamRegistry } from '../admin/upstream-registry.js';
import { reloadOnHangup } from '../cli/run-proxy.js';
import { isMessage, type PrimaryMessage, type ReportMessage, type UpstreamStateMessage } from './cluster-messages.js';

/** How often the primary compares upstream state with what it last pushed: 100 ms. */
export const PUSH_INTERVAL_MS = 100;
/** How long the admin listener waits for a worker's report: 1 s (a missing worker is left out). */
export const REPORT_TIMEOUT_MS = 1_000;

/** `workers = auto` → one per core (`os.availableParallelism()`), else the number. */
export function resolveWorkerCount(workers: number | 'auto'): number {
  return workers === 'auto' ? availableParallelism() : workers;
}

/** Runs the primary until SIGTERM/SIGINT; resolves with the exit code. */
export async function runClusterPrimary(configFile: string, config: Config, workerCount: number, log: (line: string) => void): Promise<number> {
  cluster.setupPrimary({ serialization: 'advanced' });
  const model = new ProxyServer(config, { accessLog: { isEnabled: false, write() {}, close: async () => {} } });
  const probeMetrics = new MetricsCollector();
  probeMetrics.attach(model);
  model.startHealthChecks();

  const workers = new Set<Worker>();
  let isStopping = false;
  let lastPushed = '';

  const broadcast = (message: PrimaryMessage): void => {
    for (const worker of workers) if (worker.isConnected()) worker.send(message);
  };
  const stateMessage = (): UpstreamStateMessage => ({
    type: 'upstream-state',
    routes: model.routes.map((route) => ({
      name: route.name,
      registered: model.registeredUpstreams(route.name),
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

  const registry = new UpstreamRegistry({ target: model, log, onChange: pushIfChanged });

  let nextReportId = 1;
  const pendingReports = new Map<number, (report: WorkerReport) => void>();
  const fork = (): void => {
    const worker = cluster.fork();
    workers.add(worker);
    worker.on('message', (message: unknown) => {
      if (!isMessage(message) || message.type !== 'report') return;
      const { id, report } = message as ReportMessage;
      pendingReports.get(id)?.(report);
    });
    worker.on('listening', () => worker.send(stateMessage()));
    worker.on('exit', (code, signal) => {
      workers.delete(worker);
      if (isStopping) return;
      log(`worker ${worker.process.pid} exited (${signal ?? `code ${code}`}); starting a new one`);
      fork();
    });
  };
  for (let i = 0; i < workerCount; i++) fork();
  log(`primary ${process.pid}: ${workerCount} workers, health checks and registry here; proxy on ${config.server.listen.host}:${config.server.listen.port}`);

  /** Asks every worker for its counters; workers that do not answer in time are left out. */
  const collectReports = async (): Promise<WorkerReport[]> => {
    const asked = [...workers].filter((worker) => worker.isConnected());
    const replies = asked.map(
      (worker) =>
        new Promise<WorkerReport | undefined>((resolve) => {
          const id = nextReportId++;
          const timer = setTimeout(() => {
            pendingReports.delete(id);
            resolve(undefined);
          }, REPORT_TIMEOUT_MS);
          pendingReports.set(id, (report) => {
            clearTimeout(timer);
            pendingReports.delete(id);
            resolve(report);
          });
          worker.send({ type: 'report-request', id } satisfies PrimaryMessage);
        }),
    );
    return (await Promise.all(replies)).filter((report): report is WorkerReport => report !== undefined).sort((a, b) => a.pid - b.pid);
  };

  let admin: AdminServer | undefined;
  if (config.admin !== undefined) {
    admin = new AdminServer({
      config: config.admin,
      proxy: model,
      registry,
      mode: 'cluster',
      collect: async () => {
        const reports = await collectReports();
        return { reports, metrics: mergeMetrics([...reports.map((r) => r.metrics), probeMetrics.state]) };
      },
      onStateChange: pushIfChanged,
      log,
    });
    const port = await admin.listen();
    log(`admin listening on ${config.admin.listen.host}:${port} (totals across ${workerCount} workers)`);
  }

  const stopReloading = reloadOnHangup(
    configFile,
    (next) => {
      const summary = model.reload(next);
      broadcast({ type: 'reload', config: next });
      pushIfChanged();
      return summary;
    },
    (line) => log(line.startsWith('reloaded ') ? `${line} (in ${workers.size} workers)` : line),
  );

  // SIGUSR1 (log rotation): src/main.ts's listener reopens this process's own files; every worker
  // is told to reopen its own.
  const onReopenSignal = (): void => {
    log(`SIGUSR1: telling ${workers.size} worker(s) to reopen their log files`);
    broadcast({ type: 'reopen-logs' });
  };
  process.on('SIGUSR1', onReopenSignal);

  return await new Promise<number>((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      if (isStopping) {
        log(`${signal} again: exiting now`);
        for (const worker of workers) worker.process.kill('SIGKILL');
        process.exit(1);
      }
      isStopping = true;
      log(`${signal}: draining ${workers.size} workers`);
      // A worker exits 1 when its shutdown_timeout ran out and it cut requests (cluster-worker.ts), or
      // is killed at the deadline below.
      let cutCount = 0;
      const exited = [...workers].map(
        (worker) =>
          new Promise<void>((done) => {
            if (worker.isDead()) return done();
            worker.once('exit', (code: number | null) => {
              if (code !== 0) cutCount++;
              done();
            });
          }),
      );
      broadcast({ type: 'shutdown' });
      const deadline = setTimeout(() => {
        for (const worker of workers) worker.process.kill('SIGKILL');
      }, config.server.shutdownTimeoutMs + 2_000);
      void Promise.all(exited).then(async () => {
        clearTimeout(deadline);
        clearInterval(pushTimer);
        stopReloading();
        process.off('SIGUSR1', onReopenSignal);
        registry.close();
        await admin?.close();
        await model.close(0);
        log(cutCount === 0 ? 'shut down' : `shut down: ${cutCount} worker(s) did not drain within shutdown_timeout; requests still in flight were cut (see the access log)`);
        resolve(0);
      });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
