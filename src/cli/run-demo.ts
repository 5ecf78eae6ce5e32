/**
 * `node dist/main.js demo` (SPEC 6): the tutorial's whole setup in one process — web1 on :9001
 * behind Basic auth, web2 on :9002, and the proxy with `env.ini` in front of them — so
 * `curl -u tom:123 localhost:8080/a` and `curl localhost:8080/b` work right away.
 */
import { loadConfigFile } from './load-config-file.js';
import type { Server } from 'node:http';
import { startDemoBackend } from '../demo/demo-backend.js';
import { startProxy, waitForShutdown } from './run-proxy.js';

export async function runDemo(configFile: string, credentials: string, log: (line: string) => void): Promise<number> {
  const config = loadConfigFile(configFile);
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
  return waitForShutdown(started, log);
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
