/**
 * The loop guard as an operator meets it (`node dist/main.js` from a private build, loopback only):
 * a route whose pass is the proxy's own `listen` answers 502 within a
 * second and the process's open file descriptors (`/proc/PID/fd`) do not grow (a break tester saw
 * ~14,000 of them after 5 s of one looping request); the access-log line names `PRX_UPSTREAM_LOOP`.
 * With `workers = 2` the workers refuse it likewise, and the primary's health probe (it never
 * listens itself: it learns the workers' listening endpoints) reports the reason on `/status.json`.
 * Every request has a hard deadline, so a proxy that loops fails the test instead of hanging it.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readdirSync } from 'node:fs';
import type { StatusSnapshot } from '../../src/admin/status-snapshot.js';
import { buildCli } from '../helpers/built-cli.js';
import { freePort, get, killAll, spawnCli, waitFor, writeConfig } from '../helpers/cli-process.js';

before(async () => {
  await buildCli();
});

/** Open file descriptors of process `pid`. */
function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** GET `path` on a new connection; rejects when no answer came within `deadlineMs` (a loop never answers). */
function getWithin(port: number, path: string, deadlineMs: number): Promise<{ status: number; elapsedMs: number }> {
  const startedAt = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false, signal: AbortSignal.timeout(deadlineMs) }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, elapsedMs: Date.now() - startedAt }));
    });
    req.on('error', (error) => reject(new Error(`no answer to GET ${path} within ${deadlineMs} ms: ${error.message}`)));
  });
}

test('a pass naming the proxy itself answers 502 within 1 s, the fds do not grow, the access log says PRX_UPSTREAM_LOOP', { timeout: 60_000 }, async (t) => {
  const port = await freePort();
  const file = writeConfig(`[server]\nlisten = 127.0.0.1:${port}\naccess_log = stderr\n[proxy.self]\npath = /\npass = http://127.0.0.1:${port}\nmax_fails = 0\n`);
  const cli = await spawnCli(file);
  t.after(() => killAll([cli.pid]));
  await cli.line(/proxy listening on 127\.0\.0\.1:\d+/);
  const fdsBefore = openFds(cli.pid);
  for (let i = 0; i < 5; i++) {
    const res = await getWithin(port, `/loop${i}`, 1500);
    assert.equal(res.status, 502, `request ${i}: got ${res.status}, want 502`);
    assert.ok(res.elapsedMs < 1000, `request ${i}: answered after ${res.elapsedMs} ms, want within 1 s`);
  }
  const fdsAfter = openFds(cli.pid);
  assert.ok(fdsAfter - fdsBefore <= 4, `got ${fdsAfter} open fds after 5 requests, ${fdsBefore} before: want at most 4 more`);
  const logged = await cli.line(/"GET \/loop4 HTTP\/1\.1" 502 .*/);
  assert.match(logged[0], /PRX_UPSTREAM_LOOP/, `got the access-log line ${logged[0]}, want PRX_UPSTREAM_LOOP in it`);
});

test('workers = 2: every worker answers 502 at once, and the primary\'s probe reports PRX_UPSTREAM_LOOP on /status.json', { timeout: 60_000 }, async (t) => {
  const [port, adminPort] = [await freePort(), await freePort()];
  const file = writeConfig(
    [
      '[server]',
      `listen = 127.0.0.1:${port}`,
      'access_log = off',
      'workers = 2',
      '[admin]',
      `listen = 127.0.0.1:${adminPort}`,
      '[proxy.self]',
      'path = /',
      `pass = http://127.0.0.1:${port}`,
      // The same address, probed on a route of its own (a DOWN upstream would get 503 before any connect).
      '[proxy.probed]',
      'path = /probed',
      `pass = http://127.0.0.1:${port}`,
      'health_check = on',
      // The first probe goes out before the workers listen (refused): the next ones meet the listener.
      'health_interval = 300ms',
      'health_timeout = 250ms',
      'health_fall = 1',
      '',
    ].join('\n'),
  );
  const cli = await spawnCli(file);
  let workerPids: number[] = [];
  t.after(() => killAll([...workerPids, cli.pid]));
  const status = async (): Promise<StatusSnapshot> => JSON.parse((await get(adminPort, '/status.json')).body) as StatusSnapshot;
  const want = `PRX_UPSTREAM_LOOP: 127.0.0.1:${port} is this proxy's own listener (listen 127.0.0.1:${port}): the request would loop`;
  let lastReason: string | undefined;
  let lastWorkerCount = 0;
  // 30 s: on a fresh clone the first CLI build runs beside the other test files, and two workers start slowly then.
  const started = await waitFor(`two workers and a probe failing with ${want}`, async () => {
    const snapshot = await status();
    lastReason = snapshot.routes[1]!.upstreams[0]!.lastProbe?.error;
    lastWorkerCount = snapshot.workers.length;
    return snapshot.workers.length === 2 && lastReason === want ? snapshot : undefined;
  }, 30_000).catch((error: Error) => {
    throw new Error(`${error.message}; the last probe reason: ${lastReason}; workers: ${lastWorkerCount}`);
  });
  workerPids = started.workers.map((worker) => worker.pid);

  const fdsBefore = workerPids.map(openFds);
  // New connections, so node:cluster deals them to both workers.
  for (let i = 0; i < 10; i++) {
    const res = await getWithin(port, `/loop${i}`, 1500);
    assert.equal(res.status, 502, `request ${i}: got ${res.status}, want 502`);
    assert.ok(res.elapsedMs < 1000, `request ${i}: answered after ${res.elapsedMs} ms, want within 1 s`);
  }
  const fdsAfter = workerPids.map(openFds);
  workerPids.forEach((pid, index) => {
    assert.ok(fdsAfter[index]! - fdsBefore[index]! <= 4, `worker ${pid}: got ${fdsAfter[index]} open fds after 10 requests, ${fdsBefore[index]} before: want at most 4 more`);
  });
  // Each worker refused it (counted as a failure of the upstream; counters reach the primary
  // within 1 s). A worker that started listening late gets its turn from later connections.
  const statuses = new Set<number>();
  await waitFor('both workers counting refusals', async () => {
    statuses.add((await getWithin(port, '/more', 1500)).status);
    const workers = (await status()).routes[0]!.upstreams[0]!.workers;
    return workers.length === 2 && workers.every((worker) => worker.failuresTotal > 0) ? true : undefined;
  }, 10_000);
  assert.deepEqual([...statuses], [502], `got the statuses ${[...statuses].join(', ')}, want only 502`);
});
