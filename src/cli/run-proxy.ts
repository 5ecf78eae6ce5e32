/**
 * `node dist/main.js [--config F]`: load the config, start the proxy, and shut down gracefully on
 * SIGTERM/SIGINT (SPEC 2): stop accepting, let in-flight requests finish up to `shutdown_timeout`,
 * exit 0. A second signal exits at once. The signals come from a `SignalSource`: in `run`, the
 * latch that holds them from the first moment (process-signals.ts). With `[acme]`, the
 * certificate manager runs beside the proxy (`loadAcme`): challenges on the plain listener, its
 * certificate on the TLS one. With `resolve` / `service=` pass lines, DNS discovery runs beside it
 * too (discovery-runner.ts): its first lookups start before the listeners open, and a name that
 * does not resolve yet is not fatal (its route answers 503 until it does, SPEC 7).
 */
import type { AcmeConfig, Config } from '../config/config.js';
import { AcmeManager, type AcmeTarget } from '../tls/acme/acme-manager.js';
import { formatListenAddress } from '../config/values.js';
import { ProxyServer, type ReloadSummary } from '../gateway/proxy-server.js';
import { loadConfigFile } from './load-config-file.js';
import { DiscoveryRunner } from './discovery-runner.js';
import { keepYoungGenerationSmall } from '../process/young-generation.js';
import { STOP_SIGNALS, type LifecycleSignal, type SignalSource } from '../process/process-signals.js';

/** What a running proxy needs to be stopped; `run` and `demo` both use it. */
export interface RunningProxy {
  readonly proxy: ProxyServer;
  /** The plain listener's port; undefined with `listen = off`. */
  readonly port: number | undefined;
  /** The HTTPS listener's port; undefined without `tls_listen`. */
  readonly tlsPort: number | undefined;
  /** DNS discovery for the proxy's routes (idle without discovery lines); `reload` follows SIGHUP with it. */
  readonly discovery: DiscoveryRunner;
  /** Reloads the proxy (ProxyServer.reload), then discovery with the same config. @throws as ProxyServer.reload */
  reload(config: Config): ReloadSummary;
  stop(): Promise<boolean>;
}

/**
 * SIGHUP: reload the config file (nginx `-s reload`). A file that fails to load is rejected with its
 * file:line:column and the running config keeps serving; a good one goes to `apply` (a ProxyServer's
 * `reload`, or the cluster primary's, which also tells the workers), which reads the `tls_cert`
 * files and a route's `tls_ca` and `tls_client_cert` files, and rejects the reload the same way
 * when one does not load (the old config and certificates keep serving). Returns the function that
 * stops listening.
 */
export function reloadOnHangup(
  configFile: string,
  apply: (config: Config) => ReloadSummary,
  log: (line: string) => void,
  signals: SignalSource = process,
): () => void {
  const onHangup = (): void => {
    let config: Config;
    let summary: ReloadSummary;
    try {
      config = loadConfigFile(configFile, true);
      summary = apply(config);
    } catch (error) {
      log(`reload rejected, still serving the previous config: ${(error as Error).message}`);
      return;
    }
    log(`reloaded ${configFile}: ${config.routes.length} route(s); upstreams kept ${summary.kept}, added ${summary.added}, removed ${summary.removed}`);
    for (const warning of summary.warnings) log(`warning: ${warning}`);
  };
  signals.on('SIGHUP', onHangup);
  return () => signals.off('SIGHUP', onHangup);
}

/**
 * Starts the proxy for `config` on its listeners (`listen` unless off, `tls_listen` when set), then
 * `startBeside` (the single process's admin listener) once they listen, and logs where it listens
 * only when all of them do: a listener that cannot be opened is reported alone, never after a line
 * saying the proxy is on (as the cluster primary orders it). When `startBeside` throws, the proxy
 * is closed and the error rethrown.
 * @throws ConfigValueError for a broken `tls_cert` pair; node's listen errors; what `startBeside` throws
 */
export async function startProxy(
  config: Config,
  log: (line: string) => void,
  startBeside?: (proxy: ProxyServer, discovery: DiscoveryRunner) => Promise<void>,
): Promise<RunningProxy> {
  keepYoungGenerationSmall();
  const proxy = new ProxyServer(config);
  const { listen, tlsListen } = config.server;
  const discovery = new DiscoveryRunner({ target: proxy, log });
  let acme: AcmeManager | undefined;
  try {
    discovery.apply(config);
    // [acme]: the stored certificate is in place before the first handshake; orders start once the
    // plain listener answers the challenges.
    acme = config.acme === undefined ? undefined : await loadAcme(config.acme, proxy, log);
    const port = listen === undefined ? undefined : await proxy.listen();
    const tlsPort = tlsListen === undefined ? undefined : await proxy.listenTls();
    await startBeside?.(proxy, discovery);
    const addresses = [
      ...(listen === undefined ? [] : [`${formatListenAddress({ host: listen.host, port: port! })} (http)`]),
      ...(tlsListen === undefined ? [] : [`${formatListenAddress({ host: tlsListen.host, port: tlsPort! })} (https)`]),
    ];
    log(`proxy listening on ${addresses.join(' and ')} with ${config.routes.length} route(s) from ${config.file}`);
    acme?.start();
    const reload = (next: Config): ReloadSummary => {
      const summary = proxy.reload(next);
      discovery.apply(next);
      return summary;
    };
    const stop = (): Promise<boolean> => {
      acme?.stop();
      discovery.stop();
      return proxy.close();
    };
    return { proxy, port, tlsPort, discovery, reload, stop };
  } catch (error) {
    acme?.stop();
    discovery.stop();
    await proxy.close(0);
    throw error;
  }
}

/**
 * The certificate manager of `[acme]` (src/tls/acme/acme-manager.ts) for `target`, with its storage
 * read and a usable stored certificate already handed over; its `start()` begins ordering and
 * renewing. `target` is a ProxyServer in a single process, the cluster primary's hand-off to its
 * workers otherwise.
 * @throws AcmeError from AcmeManager.load (an unusable storage directory or account key, an unreadable directory_ca)
 */
export async function loadAcme(acme: AcmeConfig, target: AcmeTarget, log: (line: string) => void): Promise<AcmeManager> {
  const manager = new AcmeManager({
    config: acme,
    onChallenge: (token, keyAuthorization) => target.setAcmeChallenge(token, keyAuthorization),
    onCertificate: (certPem, keyPem) => target.setAcmeCertificate(certPem, keyPem),
    log,
  });
  await manager.load();
  log(`acme: certificates for ${acme.domains.join(', ')} from ${acme.directoryUrl}, stored in ${acme.storageDir}`);
  return manager;
}

/**
 * Runs until one of `stopSignals` (SIGTERM, SIGINT, SIGQUIT) comes, then drains (SPEC 2). Resolves with exit code 0, also when
 * `shutdown_timeout` ran out and connections were cut (the log says so); a second signal exits 1 at once.
 */
export function waitForShutdown(
  stoppables: readonly { stop(): Promise<unknown> }[],
  log: (line: string) => void,
  signals: SignalSource,
  stopSignals: readonly LifecycleSignal[] = STOP_SIGNALS,
): Promise<number> {
  return new Promise((resolve) => {
    let isStopping = false;
    const onSignal = (signal: string): void => {
      if (isStopping) {
        log(`${signal} again: exiting now`);
        process.exit(1);
      }
      isStopping = true;
      log(`${signal}: no longer accepting connections; waiting for in-flight requests`);
      void Promise.all(stoppables.map((s) => s.stop())).then(
        (results) => {
          // A proxy's stop() is false when shutdown_timeout ran out and connections were cut.
          log(results.includes(false) ? 'shut down: shutdown_timeout ran out, the requests still in flight were cut (see the access log)' : 'shut down');
          resolve(0);
        },
        (error: unknown) => {
          log(`shut down, with an error while stopping: ${(error as Error)?.message ?? String(error)}`);
          resolve(0);
        },
      );
    };
    for (const signal of stopSignals) signals.on(signal, onSignal);
  });
}
