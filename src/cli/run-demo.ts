/**
 * `node dist/main.js demo` (SPEC 6): the tutorial's whole setup in one process — web1 on :9001
 * behind Basic auth, web2 on :9002, and the proxy with `env.ini` in front of them — so
 * `curl -u tom:123 localhost:8080/a` and `curl localhost:8080/b` work right away.
 *
 * Everything listens on loopback: web1's credentials are the tutorial's `tom:123`, known to anyone
 * who read it, so the demo is not for the network. The proxy takes the config's port on 127.0.0.1
 * (a loopback host in the config is kept); `--listen HOST:PORT` is the explicit way to widen it.
 */
import { loadConfigFile } from './load-config-file.js';
import type { Server } from 'node:http';
import type { Config, ListenAddress } from '../config/config.js';
import { formatListenAddress } from '../config/values.js';
import { isLoopbackHost } from '../admin/bearer-token.js';
import { startDemoBackend } from '../demo/demo-backend.js';
import { startProxy, waitForShutdown } from './run-proxy.js';
import { STOP_SIGNALS, type ProcessSignals } from '../process/process-signals.js';

/**
 * Runs the demo until SIGTERM, SIGINT or SIGHUP (a closed terminal ends it too); resolves with the
 * exit code. Signals that came while it started are handled once everything listens.
 * @param credentials web1's `user:password`
 * @param listen `--listen`: where the proxy listens; undefined = the config's port on loopback
 */
export async function runDemo(
  configFile: string,
  credentials: string,
  listen: ListenAddress | undefined,
  log: (line: string) => void,
  signals: ProcessSignals,
): Promise<number> {
  const config = demoConfig(loadConfigFile(configFile), listen, log);
  const started: { stop(): Promise<unknown> }[] = [];
  try {
    started.push(closable(await startDemoBackend({ name: 'web1', port: 9001, credentials })));
    started.push(closable(await startDemoBackend({ name: 'web2', port: 9002 })));
    log(`web1 listening on 127.0.0.1:9001 (Basic auth ${credentials.slice(0, credentials.indexOf(':'))}:***)`);
    log('web2 listening on 127.0.0.1:9002');
    const running = await startProxy(config, log);
    started.unshift(running);
    log(`try:  curl -u ${credentials} localhost:${running.port}/a    curl localhost:${running.port}/b`);
  } catch (error) {
    await Promise.all(started.map((server) => server.stop())); // a port in use: leave nothing running
    throw error;
  }
  const stopped = waitForShutdown(started, log, signals, [...STOP_SIGNALS, 'SIGHUP']);
  signals.startUpDone(log);
  return stopped;
}

/** The config with the demo's listen address: `listen`, else the config's own port on loopback. */
function demoConfig(config: Config, listen: ListenAddress | undefined, log: (line: string) => void): Config {
  const configured = config.server.listen ?? { host: '0.0.0.0', port: 8080 };
  if (listen === undefined && isLoopbackHost(configured.host)) return config;
  const address = listen ?? { host: '127.0.0.1', port: configured.port };
  if (listen === undefined) {
    log(`demo: the proxy listens on ${formatListenAddress(address)}, not ${formatListenAddress(configured)} (the demo stays on loopback; --listen ${formatListenAddress(configured)} widens it)`);
  } else if (!isLoopbackHost(listen.host)) {
    // `--listen :8081` means every address, as `listen` in env.ini does: say so, the credentials are public.
    log(`demo: warning: the proxy listens on ${formatListenAddress(address)}, reachable from other machines, and web1's credentials are the tutorial's`);
  }
  return { ...config, server: { ...config.server, listen: address } };
}

/** A node:http server as something `waitForShutdown` can stop. */
function closable(server: Server): { stop(): Promise<void> } {
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
