/**
 * A cluster worker (`[server] workers = N`, node:cluster): it runs the proxy on the shared listening
 * socket, without health checks of its own; the primary probes and pushes the results here
 * (`UpstreamStateMessage`), with draining and registry changes. It answers report requests with its
 * counters, applies reloaded configs the primary sends, and drains on `shutdown`, SIGTERM/SIGINT or
 * when the primary goes away. SIGHUP is ignored: the primary reloads and tells the workers. SIGUSR1
 * (src/main.ts) and the primary's `reopen-logs` message both reopen the worker's log files.
 */
import cluster from 'node:cluster';
import type { Config } from '../config/config.js';
import { ProxyServer } from '../proxy/proxy-server.js';
import { keepYoungGenerationSmall } from '../cli/young-generation.js';
import { MetricsCollector } from '../admin/metrics-collector.js';
import { collectWorkerReport } from '../admin/status-snapshot.js';
import { reopenLogFiles } from '../log/process-log.js';
import { isMessage, type PrimaryMessage, type ReportMessage, type UpstreamStateMessage } from './cluster-messages.js';

/** Runs one worker until it is told to stop; resolves with the exit code. */
export async function runClusterWorker(config: Config, log: (line: string) => void): Promise<number> {
  keepYoungGenerationSmall();
  const proxy = new ProxyServer(config, { isHealthCheckDisabled: true });
  const metrics = new MetricsCollector();
  metrics.attach(proxy);
  await proxy.listen();

  return await new Promise<number>((resolve) => {
    let isStopping = false;
    const stop = (why: string): void => {
      if (isStopping) return;
      isStopping = true;
      log(`worker ${process.pid}: ${why}: draining`);
      void proxy.close().then((isDrained) => {
        process.off('message', onMessage);
        // Through the cluster API: a bare process.disconnect() makes node's cluster code exit the
        // worker with 0, and the primary could not tell a drained worker from one that cut requests.
        if (process.connected) cluster.worker?.disconnect();
        resolve(isDrained ? 0 : 1);
      });
    };
    const onMessage = (message: unknown): void => {
      if (!isMessage(message)) return;
      const typed = message as PrimaryMessage;
      switch (typed.type) {
        case 'upstream-state':
          applyUpstreamState(proxy, typed);
          break;
        case 'reload':
          proxy.reload(typed.config);
          break;
        case 'report-request': {
          const reply: ReportMessage = { type: 'report', id: typed.id, report: collectWorkerReport(proxy, metrics.state, performance.now()) };
          process.send?.(reply);
          break;
        }
        case 'shutdown':
          stop('shutdown requested by the primary');
          break;
        case 'reopen-logs':
          reopenLogFiles(`worker ${process.pid}`);
          break;
      }
    };
    process.on('message', onMessage);
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGHUP', () => {}); // the primary reloads and sends the config
    process.on('disconnect', () => stop('the primary went away'));
  });
}

/**
 * Copies the primary's view into this worker: registered upstreams (rebuilding a route only when its
 * list changed), then health state, draining and the last probe of every upstream. A new successful
 * probe restores the full effective weight, as it does in the process that probed (SPEC 4).
 */
export function applyUpstreamState(proxy: ProxyServer, message: UpstreamStateMessage): void {
  for (const pushed of message.routes) {
    if (JSON.stringify(proxy.registeredUpstreams(pushed.name)) !== JSON.stringify(pushed.registered)) {
      proxy.setRegisteredUpstreams(pushed.name, pushed.registered);
    }
    const route = proxy.routes.find((candidate) => candidate.name === pushed.name);
    if (route === undefined) continue;
    for (const state of pushed.upstreams) {
      const upstream = route.upstreams.find((candidate) => candidate.origin === state.origin);
      if (upstream === undefined) continue;
      upstream.healthState = state.healthState;
      upstream.isDraining = state.isDraining;
      if (state.lastProbe !== undefined && state.lastProbe.atMs !== upstream.lastProbe?.atMs) {
        upstream.lastProbe = state.lastProbe;
        if (state.lastProbe.ok) upstream.restoreWeight();
      }
    }
  }
}
