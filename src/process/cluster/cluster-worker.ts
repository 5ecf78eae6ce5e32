/**
 * A cluster worker (`[server] workers = N`, node:cluster): it runs the proxy on the shared listening
 * socket, without health checks or DNS lookups of its own; the primary probes and resolves and
 * pushes the results here (`UpstreamStateMessage`), with draining and registry changes. It never reads the config file: it
 * asks the primary, which answers with the config it serves and the `tls_cert` certificates it read,
 * so a replacement worker runs and serves what the others do even when a file on disk is broken or
 * edited and not reloaded.
 * It listens on `listen` and `tls_listen` (each when set), the HTTPS one with the session ticket key
 * the primary gives every worker. A worker that cannot start (the access log cannot be opened, listen fails) says why and exits;
 * the primary reports it and tries again with backoff. It answers report requests with its
 * counters and also pushes them every `REPORT_PUSH_INTERVAL_MS`, applies reloaded configs the
 * primary sends, and drains on `shutdown`, SIGTERM/SIGINT or when the primary goes away (then
 * nothing new comes in, and the requests in flight finish), in any phase (before its config came it
 * just exits). With `[acme]` it answers the challenge tokens and serves the certificate the primary
 * sends (it never talks to the ACME server itself). SIGHUP is ignored: the primary reloads and
 * tells the workers. SIGUSR1 (src/main.ts) and the primary's `reopen-logs` message both reopen the
 * worker's log files. Its `rate_limit` and `conn_limit` spend leases of the primary's buckets and
 * slots (lease-limits.ts), so a client gets its limit once across all workers. It holds no more
 * connections than its file descriptor limit leaves room for (src/process/descriptor-budget.ts).
 */
import cluster from 'node:cluster';
import type { Config } from '../../config/config.js';
import { ProxyServer } from '../../gateway/proxy-server.js';
import { keepYoungGenerationSmall } from '../young-generation.js';
import { STOP_SIGNALS, type ProcessSignals } from '../process-signals.js';
import { isListenFailure, listenFailure } from '../listen-failure.js';
import { MetricsCollector, upstreamPairsOf } from '../../admin/metrics-collector.js';
import { collectWorkerReport } from '../../admin/status-snapshot.js';
import { reopenLogFiles } from '../../log/process-log.js';
import { LeaseLimits, SWEEP_INTERVAL_MS } from './lease-limits.js';
import { descriptorBudget, readOpenFileLimit } from '../descriptor-budget.js';
import { isMessage, type AcmeState, type PrimaryMessage, type ReportMessage, type StartMessage, type UpstreamStateMessage, type WorkerMessage } from './cluster-messages.js';

/** How often a worker pushes its counters to the primary unasked: 1 s (what a SIGKILL can lose, counter-ledger.ts). */
export const REPORT_PUSH_INTERVAL_MS = 1_000;

/** Runs one worker until it is told to stop; resolves with the exit code (1: it could not start, or its drain cut requests). */
export async function runClusterWorker(signals: ProcessSignals, log: (line: string) => void): Promise<number> {
  keepYoungGenerationSmall();
  const metrics = new MetricsCollector();
  let proxy: ProxyServer | undefined;
  /** Settles once the start is over: the running proxy, or undefined when it failed. */
  let started: Promise<ProxyServer | undefined> | undefined;
  let isStopping = false;
  let pushTimer: NodeJS.Timeout | undefined;
  // A message to a primary that went away is dropped; the waiting requests are let through (lease-limits.ts).
  const limits = new LeaseLimits({ send: (message) => process.connected && process.send!(message, undefined, undefined, () => {}) });
  const sweepTimer = setInterval(() => limits.sweep(), SWEEP_INTERVAL_MS).unref();

  return await new Promise<number>((resolve) => {
    const send = (message: WorkerMessage): Promise<void> =>
      new Promise((sent) => {
        if (!process.connected) return sent();
        process.send?.(message, undefined, undefined, () => sent());
      });
    const report = (id: number): ReportMessage => {
      metrics.forgetUpstreams(upstreamPairsOf(proxy!));
      return { type: 'report', id, report: collectWorkerReport(proxy!, metrics.state, performance.now()) };
    };
    /** Leaves through the cluster API: a bare process.disconnect() makes node's cluster code exit the worker with 0. */
    const leave = (exitCode: number): void => {
      clearInterval(pushTimer);
      clearInterval(sweepTimer);
      process.off('message', onMessage);
      if (process.connected) cluster.worker?.disconnect();
      resolve(exitCode);
    };

    const start = async ({ config, upstreamState, ticketKeys, acme, certificates }: StartMessage): Promise<ProxyServer | undefined> => {
      try {
        // Descriptors kept free for the primary's hand-offs: a worker without one is never given a connection again (descriptor-budget.ts).
        const openFileLimit = readOpenFileLimit();
        proxy = new ProxyServer(config, {
          isHealthCheckDisabled: true,
          ticketKeys: Buffer.from(ticketKeys),
          limits,
          certificateTexts: certificates,
          descriptorBudget: openFileLimit === undefined ? undefined : descriptorBudget(openFileLimit),
        });
        metrics.attach(proxy);
        applyUpstreamState(proxy, upstreamState);
        if (acme !== undefined) applyAcmeState(proxy, acme);
        if (config.server.listen !== undefined) await proxy.listen();
        if (config.server.tlsListen !== undefined) await proxy.listenTls();
      } catch (error) {
        await proxy?.close(0);
        proxy = undefined;
        await send({ type: 'start-failed', reason: isListenFailure(error) ? listenFailure(error) : ((error as Error)?.message ?? String(error)) });
        if (!isStopping) leave(1);
        return undefined;
      }
      pushTimer = setInterval(() => void send(report(0)), REPORT_PUSH_INTERVAL_MS).unref();
      return proxy;
    };

    const stop = (why: string): void => {
      if (isStopping) return;
      isStopping = true;
      void (started ?? Promise.resolve(undefined)).then(async (running) => {
        if (running === undefined) return leave(0);
        log(`worker ${process.pid}: ${why}: draining`);
        leave((await running.close()) ? 0 : 1);
      });
    };

    const onMessage = (message: unknown): void => {
      if (!isMessage(message)) return;
      const typed = message as PrimaryMessage;
      if (typed.type === 'shutdown') return stop('shutdown requested by the primary');
      if (typed.type === 'reopen-logs') return reopenLogFiles(`worker ${process.pid}`);
      if (typed.type === 'start') {
        if (started === undefined && !isStopping) started = start(typed);
        return;
      }
      if (proxy === undefined) return; // before the start: the start message carries what this said
      switch (typed.type) {
        case 'upstream-state':
          applyUpstreamState(proxy, typed);
          break;
        case 'reload':
          // The certificates as the primary read them: every worker serves the same ones.
          try {
            proxy.reload(typed.config, typed.certificates);
          } catch (error) {
            log(`worker ${process.pid}: reload rejected, still serving the previous config: ${(error as Error).message}`);
          }
          break;
        case 'limits-grant':
          limits.applyGrant(typed);
          break;
        case 'slot-recall':
          limits.recall(typed);
          break;
        case 'report-request':
          void send(report(typed.id));
          break;
        case 'acme-challenge':
          proxy.setAcmeChallenge(typed.token, typed.keyAuthorization);
          break;
        case 'acme-certificate':
          try {
            proxy.setAcmeCertificate(typed.certPem, typed.keyPem);
          } catch (error) {
            log(`worker ${process.pid}: the ACME certificate was refused, still serving the previous one: ${(error as Error).message}`);
          }
          break;
      }
    };
    process.on('message', onMessage);
    // node's cluster module exits a worker at once when its primary goes away ("Unexpected
    // disconnect, primary exited", lib/internal/cluster/child.js), cutting the requests in flight.
    // Marking the exit as chosen, before that listener runs, lets this worker drain them first.
    process.prependListener('disconnect', () => {
      if (cluster.worker !== undefined) cluster.worker.exitedAfterDisconnect = true;
    });
    process.on('disconnect', () => stop('the primary went away'));
    for (const signal of STOP_SIGNALS) signals.on(signal, () => stop(signal));
    // SIGHUP has no listener here: the latch keeps it from ending the worker, and the primary reloads.
    signals.startUpDone(log); // stop() waits for a start in progress
    void send({ type: 'start-request' });
  });
}

/**
 * Copies the primary's view into this worker: registered upstreams and discovered addresses
 * (rebuilding a route only when its list changed), then health state, draining and the last probe
 * of every upstream (after the lists, so a newly discovered address gets its state too). A new successful
 * probe restores the full effective weight, as it does in the process that probed (SPEC 4).
 */
export function applyUpstreamState(proxy: ProxyServer, message: UpstreamStateMessage): void {
  for (const pushed of message.routes) {
    if (JSON.stringify(proxy.registeredUpstreams(pushed.name)) !== JSON.stringify(pushed.registered)) {
      proxy.setRegisteredUpstreams(pushed.name, pushed.registered);
    }
    if (JSON.stringify(proxy.discoveredLines(pushed.name)) !== JSON.stringify(pushed.discovered)) {
      proxy.setDiscoveredUpstreams(pushed.name, pushed.discovered);
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

/** The primary's ACME state for a worker that starts now: every token being validated, and the certificate (before the TLS listener accepts). */
function applyAcmeState(proxy: ProxyServer, acme: AcmeState): void {
  for (const [token, keyAuthorization] of acme.challenges) proxy.setAcmeChallenge(token, keyAuthorization);
  if (acme.certificate !== undefined) proxy.setAcmeCertificate(acme.certificate.certPem, acme.certificate.keyPem);
}
