/**
 * Reloads that change a route's `pass` path under running heartbeats, with the real processes
 * (`node dist/main.js` and `node dist/main.js heartbeat`) and real SIGHUPs. A registration is the
 * backend's claim "I am alive at this address"; the route's pass path is the proxy's rule for how
 * requests reach it, so a reload that gives the route a path, or takes it away, keeps every running
 * heartbeat registered and its backend gets requests with the route's new path. A reload that
 * removes the route stops the heartbeats with exit code 1 and the reason (the README's promise for
 * an unknown route).
 *
 * Before the fix the heartbeat registered without a path got 400 ("must agree on the path") at its
 * first refresh after the reload gave the route a path, and exited: a live backend dropped out of
 * the route because of a config change on the proxy.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { startCli, type RunningCli } from '../helpers/built-cli.js';
import { get, killAll, spawnCli, waitFor, writeConfig } from '../helpers/cli-process.js';
import { startBackend, type Backend } from '../helpers/proxy-harness.js';

const EVERY_MS = 200;
const TTL_MS = 1_000;

test('a reload that gives the route a pass path, or takes it away, keeps running heartbeats registered and their backends get the new path; removing the route stops them saying why', { timeout: 60_000 }, async (t) => {
  const configured = await startBackend();
  const plain = await startBackend(); // its heartbeat registers the address only
  const withPath = await startBackend(); // its heartbeat registers the URL with the route's path of the moment
  t.after(() => Promise.all([configured, plain, withPath].map((backend) => backend.close())));

  const version = (route: string, passPath: string): string =>
    `[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[admin]\nlisten = 127.0.0.1:0\ntoken = s3cret\n` +
    `[proxy.${route}]\npath = /a\nhealth_check = off\npass = ${configured.url}${passPath}\n`;
  const file = writeConfig(version('a', ''));
  t.after(() => rmSync(dirname(file), { recursive: true, force: true }));
  const proxy = await spawnCli(file);
  const heartbeats: RunningCli[] = [];
  t.after(() => killAll([proxy.pid, ...heartbeats.map((heartbeat) => heartbeat.child.pid)]));
  const proxyPort = Number((await proxy.line(/proxy listening on 127\.0\.0\.1:(\d+)/))[1]);
  const adminPort = Number((await proxy.line(/admin listening on 127\.0\.0\.1:(\d+)/))[1]);

  const startHeartbeat = async (url: string): Promise<RunningCli> => {
    const heartbeat = await startCli(['heartbeat', '--admin', `http://127.0.0.1:${adminPort}`, '--token', 's3cret', '--route', 'a', '--url', url, '--every', `${EVERY_MS}ms`, '--ttl', `${TTL_MS}ms`]);
    heartbeats.push(heartbeat);
    await waitFor(`the heartbeat of ${url} to register`, () => (/registered for route a/.test(heartbeat.stderr()) ? true : undefined));
    return heartbeat;
  };
  let reloads = 0;
  /** Writes the new file atomically, sends SIGHUP and waits for the proxy's `reloaded` line. */
  const reload = async (text: string): Promise<void> => {
    writeFileSync(`${file}.new`, text);
    renameSync(`${file}.new`, file);
    process.kill(proxy.pid, 'SIGHUP');
    reloads++;
    await waitFor(`reload ${reloads}`, () => ((proxy.stderr().match(/^reloaded /gm) ?? []).length === reloads ? true : undefined));
  };
  /**
   * Waits longer than a ttl, so a registration still there was refreshed after the reload, and
   * checks that every heartbeat still runs.
   */
  const outliveTtl = async (what: string): Promise<void> => {
    await new Promise((resolve) => setTimeout(resolve, TTL_MS + 300));
    for (const heartbeat of heartbeats) {
      assert.equal(heartbeat.child.exitCode, null, `${what}: got the heartbeat exited with ${heartbeat.child.exitCode}, want it running; its stderr:\n${heartbeat.stderr()}`);
    }
  };
  /** The paths `backends` received for one GET /a/x each (round robin over the route's upstreams). */
  const pathsReceived = async (backends: readonly Backend[]): Promise<string[]> => {
    for (const backend of backends) backend.requests.length = 0;
    for (let i = 0; i <= backends.length; i++) assert.equal((await get(proxyPort, '/a/x')).status, 200);
    return backends.map((backend) => backend.requests.map((r) => r.url).join(' '));
  };

  await startHeartbeat(plain.url);
  assert.deepEqual(await pathsReceived([plain]), ['/a/x']);

  // 1. The route gets a pass path: the address-only registration follows it.
  await reload(version('a', '/api'));
  await outliveTtl('after the reload that gave the route the pass path /api');
  assert.deepEqual(await pathsReceived([plain]), ['/api/x'], 'got the registered backend requested at these paths, want the route\'s new /api');

  // 2. The route's path is taken away: a registration made with it keeps refreshing too.
  await startHeartbeat(`${withPath.url}/api`);
  await reload(version('a', ''));
  await outliveTtl('after the reload that took the pass path away');
  assert.deepEqual(await pathsReceived([plain, withPath]), ['/a/x', '/a/x'], 'got the registered backends requested at these paths, want the client\'s /a/x');

  // 3. The route is removed: each heartbeat stops at its next refresh, exit code 1, with the reason.
  await reload(version('b', ''));
  for (const heartbeat of heartbeats) {
    const code = await Promise.race([heartbeat.exited, new Promise((resolve) => setTimeout(() => resolve('still running'), 3_000))]);
    assert.equal(code, 1, `got ${String(code)}, want exit code 1 once the route is gone; stderr:\n${heartbeat.stderr()}`);
    assert.match(heartbeat.stderr(), /refused: 404 no route named 'a' any more: a reload removed it; not retrying/);
  }
});
