/**
 * The admin listener of a single-process proxy (`[server] workers = 1`): one MetricsCollector fed by
 * the proxy's own exchanges and probes, one registry that rebuilds the proxy's routes, and the
 * AdminServer over both. The cluster primary wires the same pieces differently (src/cluster).
 */
import type { AdminConfig } from '../config/config.js';
import type { Timers } from '../timers.js';
import type { ProxyServer } from '../gateway/proxy-server.js';
import { AdminServer } from './admin-server.js';
import { MetricsCollector, upstreamPairsOf } from './metrics-collector.js';
import { collectWorkerReport, type DiscoveryView } from './status-snapshot.js';
import { UpstreamRegistry } from './upstream-registry.js';

export interface LocalAdmin {
  readonly admin: AdminServer;
  readonly registry: UpstreamRegistry;
  readonly metrics: MetricsCollector;
  readonly port: number;
  /** `admin listening on HOST:PORT (…)`, for the caller to log after the proxy's own start-up line. */
  readonly listeningLine: string;
  /** Closes the listener, clears registry timers and detaches the collector. */
  stop(): Promise<void>;
}

export interface LocalAdminOptions {
  /** Registry clock, ms. Default `Date.now`. */
  readonly registryNow?: () => number;
  /** Registry expiry timers. Default the global ones. */
  readonly registryTimers?: Timers;
  /** The proxy's clock (passive ejection), ms. Default `performance.now`, as the proxy's. */
  readonly proxyNow?: () => number;
  /** Override `[admin] listen`'s port (tests pass 0). */
  readonly port?: number;
  /** The proxy's DNS discovery (src/cli/discovery-runner.ts), shown on the pages. */
  readonly discovery?: DiscoveryView;
}

/** Starts the admin listener for `proxy` on `config.listen`; its `listeningLine` says where it listens. */
export async function startLocalAdmin(proxy: ProxyServer, config: AdminConfig, log: (line: string) => void, options: LocalAdminOptions = {}): Promise<LocalAdmin> {
  const metrics = new MetricsCollector();
  const detach = metrics.attach(proxy);
  const registry = new UpstreamRegistry({
    target: proxy,
    log,
    ...(options.registryNow === undefined ? {} : { now: options.registryNow }),
    ...(options.registryTimers === undefined ? {} : { timers: options.registryTimers }),
  });
  const proxyNow = options.proxyNow ?? (() => performance.now());
  const admin = new AdminServer({
    config,
    proxy,
    registry,
    mode: 'single',
    ...(options.discovery === undefined ? {} : { discovery: options.discovery }),
    collect: async () => {
      metrics.forgetUpstreams(upstreamPairsOf(proxy));
      return { reports: [collectWorkerReport(proxy, metrics.state, proxyNow())], metrics: metrics.state };
    },
    log,
    ...(options.registryNow === undefined ? {} : { registryNow: options.registryNow }),
  });
  const port = await admin.listen(options.port ?? config.listen.port);
  const { host } = config.listen;
  return {
    admin,
    registry,
    metrics,
    port,
    listeningLine: `admin listening on ${host.includes(':') ? `[${host}]` : host}:${port} (/status, /status.json, /metrics${config.token === undefined ? '; no token: state-changing calls refused' : ''})`,
    async stop() {
      registry.close();
      detach();
      await admin.close();
    },
  };
}
