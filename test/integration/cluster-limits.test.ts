/**
 * Exact limits across `workers = 2` (issue 15 item 3, SPEC 8) with real processes (`node
 * dist/main.js` from a private build) on loopback: one client IP spread over 4 keep-alive
 * connections, which the cluster deals to both workers (each worker's count in /status.json grows),
 * gets `rate_limit = 10/s burst=5` once in total, not once per worker: a burst of 30 gives 5 × 200
 * (at least burst − L: a worker's lease of L tokens can keep one that its connections never ask for)
 * then 429s, 30 req/s for 5 s gives 10 × 5 + 5 = 55 within 10% (and never more than
 * rate × T + burst); `conn_limit = 2` with 5 concurrent slow requests over both workers gives
 * 2 × 200 and 3 × 429 with `Retry-After: 1`. A SIGHUP that keeps the settings keeps the spent
 * bucket, and a worker SIGKILLed while it holds a lease loses only it. Every process is stopped by pid.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { StatusSnapshot } from '../../src/admin/status-snapshot.js';
import { buildCli } from '../helpers/built-cli.js';
import { freePort, get, killAll, spawnCli, waitFor, writeConfig } from '../helpers/cli-process.js';

before(async () => {
  await buildCli();
});

/** One request on `agent` (keep-alive, 4 sockets): status and Retry-After. */
function request(agent: http.Agent, port: number, path: string): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

const countOf = (statuses: readonly number[], status: number): number => statuses.filter((s) => s === status).length;

test('workers = 2: rate_limit = 10/s burst=5 and conn_limit = 2 hold for one client across both workers and 4 keep-alive connections', { timeout: 60_000 }, async () => {
  const backend = http.createServer((req, res) => {
    if (req.url === '/slow') setTimeout(() => res.end('slow'), 700);
    else res.end('ok');
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const backendPort = (backend.address() as AddressInfo).port;
  const [proxyPort, adminPort] = [await freePort(), await freePort()];
  const configFile = writeConfig(
    [
      '[server]',
      `listen = 127.0.0.1:${proxyPort}`,
      'access_log = off',
      'workers = 2',
      '[admin]',
      `listen = 127.0.0.1:${adminPort}`,
      '[proxy.rated]',
      'path = /rated',
      `pass = http://127.0.0.1:${backendPort}/`,
      'rate_limit = 10/s burst=5',
      '[proxy.slow]',
      'path = /slow',
      `pass = http://127.0.0.1:${backendPort}/slow`,
      'conn_limit = 2',
      '',
    ].join('\n'),
  );
  const primary = await spawnCli(configFile);
  let workerPids: number[] = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4, scheduling: 'fifo' });
  try {
    const status = async (): Promise<StatusSnapshot> => JSON.parse((await get(adminPort, '/status.json')).body) as StatusSnapshot;
    const started = await waitFor('both workers listening', async () => ((await status()).workers.length === 2 ? await status() : undefined));
    workerPids = started.workers.map((w) => w.pid);
    /** Each worker's requests so far, by pid. */
    const served = async (): Promise<Map<number, number>> => new Map((await status()).workers.map((w) => [w.pid, w.requestsTotal]));
    const grew = (from: Map<number, number>, to: Map<number, number>): number[] => workerPids.map((pid) => (to.get(pid) ?? 0) - (from.get(pid) ?? 0));
    // Open the 4 keep-alive connections first (node:cluster deals them to the workers in turn), on another route.
    await Promise.all(Array.from({ length: 4 }, () => request(agent, proxyPort, '/nowhere')));

    // 1. A burst of 30 over the 4 connections: 5 × 200 (plus what the rate added meanwhile), then 429 with Retry-After 1.
    const beforeBurst = await served();
    const burstStart = performance.now();
    const burst = await Promise.all(Array.from({ length: 30 }, () => request(agent, proxyPort, '/rated')));
    const burstMs = performance.now() - burstStart;
    const burstStatuses = burst.map((answer) => answer.status);
    const mostInBurst = 5 + Math.floor(burstMs / 100);
    const okInBurst = countOf(burstStatuses, 200);
    // At least burst − L × (workers − 1) = 5 − 1: a worker's lease (L = 1) can keep a token its connections never ask for (see below, burst=3).
    assert.ok(okInBurst >= 4 && okInBurst <= mostInBurst, `got ${okInBurst} × 200 in a burst of 30 over ${burstMs.toFixed(0)} ms, want burst = 5, or 4 when a worker's lease keeps one (at most ${mostInBurst}); statuses ${burstStatuses.join(' ')}`);
    assert.equal(countOf(burstStatuses, 429), 30 - okInBurst, `got statuses ${burstStatuses.join(' ')}, want only 200 and 429`);
    assert.deepEqual(new Set(burst.filter((a) => a.status === 429).map((a) => a.retryAfter)), new Set(['1']), 'got these Retry-After values, want 1');
    const burstServed = grew(beforeBurst, await served());
    assert.ok(burstServed.every((n) => n > 0), `got ${burstServed.join(' and ')} requests per worker in the burst, want both workers serving the client`);

    // 2. conn_limit = 2: 5 concurrent slow requests, each on its own connection (dealt to both workers): 2 × 200, 3 × 429 with Retry-After 1.
    const beforeSlow = await served();
    const slow = await Promise.all(Array.from({ length: 5 }, () => request(new http.Agent({ keepAlive: false }), proxyPort, '/slow')));
    const slowStatuses = slow.map((answer) => answer.status).sort();
    assert.deepEqual(slowStatuses, [200, 200, 429, 429, 429], `got ${slowStatuses.join(' ')} for 5 concurrent requests with conn_limit = 2, want 2 × 200 and 3 × 429`);
    assert.deepEqual(new Set(slow.filter((a) => a.status === 429).map((a) => a.retryAfter)), new Set(['1']));
    const slowServed = grew(beforeSlow, await served());
    assert.ok(slowServed.every((n) => n > 0), `got ${slowServed.join(' and ')} slow requests per worker, want both workers`);

    // The bucket is full again (5 tokens in 0.5 s) and the workers' leases have gone back (IDLE_RETURN_MS, 1 s).
    await new Promise((r) => setTimeout(r, 1_300 - 700));

    // 3. 30 req/s for 5 s over the 4 connections: 10 × 5 + 5 = 55 × 200 within 10%, never more than rate × T + burst.
    const beforeSteady = await served();
    const steadyStart = performance.now();
    const answers: Promise<{ status: number }>[] = [];
    for (let i = 0; i < 150; i++) {
      const dueMs = steadyStart + (i * 1_000) / 30;
      const waitMs = dueMs - performance.now();
      if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs));
      answers.push(request(agent, proxyPort, '/rated'));
    }
    const steady = (await Promise.all(answers)).map((answer) => answer.status);
    const steadySeconds = (performance.now() - steadyStart) / 1_000;
    const okSteady = countOf(steady, 200);
    const most = Math.floor(10 * steadySeconds + 5);
    assert.ok(okSteady >= 49.5 && okSteady <= most, `got ${okSteady} × 200 at 30 req/s over ${steadySeconds.toFixed(2)} s, want 55 within 10% and at most ${most}`);
    assert.equal(countOf(steady, 429), 150 - okSteady);
    const steadyServed = grew(beforeSteady, await served());
    assert.ok(steadyServed.every((n) => n > 0), `got ${steadyServed.join(' and ')} requests per worker at 30 req/s, want both workers`);

    agent.destroy();
    primary.child.kill('SIGTERM');
    assert.equal((await primary.exited).code, 0, `got the primary's exit, want 0; stderr:\n${primary.stderr()}`);
  } finally {
    agent.destroy();
    killAll([primary.pid, ...workerPids]);
    await new Promise((resolve) => backend.close(resolve));
  }
});

test('workers = 2: a SIGHUP that keeps rate_limit keeps the spent bucket; a worker SIGKILLed with a lease loses only it, and the limit still holds', { timeout: 60_000 }, async () => {
  const backend = http.createServer((req, res) => res.end('ok'));
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const backendPort = (backend.address() as AddressInfo).port;
  const [proxyPort, adminPort] = [await freePort(), await freePort()];
  // 1 token a second, 3 at once, so the counts hardly move with the test's own timing.
  const configFile = writeConfig(
    ['[server]', `listen = 127.0.0.1:${proxyPort}`, 'access_log = off', 'workers = 2', '[admin]', `listen = 127.0.0.1:${adminPort}`, '[proxy.rated]', 'path = /', `pass = http://127.0.0.1:${backendPort}`, 'rate_limit = 1/s burst=3', ''].join('\n'),
  );
  const primary = await spawnCli(configFile);
  const pids = new Set<number>();
  let agent = new http.Agent({ keepAlive: true, maxSockets: 4, scheduling: 'fifo' });
  try {
    const status = async (): Promise<StatusSnapshot> => JSON.parse((await get(adminPort, '/status.json')).body) as StatusSnapshot;
    const first = await waitFor('both workers listening', async () => {
      const snapshot = await status();
      return snapshot.workers.length === 2 ? snapshot : undefined;
    });
    for (const w of first.workers) pids.add(w.pid);
    const startedAt = performance.now();
    const burst = await Promise.all(Array.from({ length: 8 }, () => request(agent, proxyPort, '/')));
    const okBurst = countOf(burst.map((a) => a.status), 200);
    // At least burst − L × (workers − 1) = 3 − 1: one worker's lease (L = 1) can keep the third token
    // while the other worker's requests find the bucket empty (SPEC 8 promises the rate within 10%
    // over 10 s windows, not the whole burst at one instant; README "Limits with workers = N").
    const mostInBurst = 3 + Math.floor((performance.now() - startedAt) / 1_000);
    assert.ok(okBurst >= 2 && okBurst <= mostInBurst, `got ${okBurst} × 200 of 8 at once with burst=3, want burst = 3, or 2 when a worker's lease keeps the third (at most rate × T + burst = ${mostInBurst})`);

    // SIGHUP with the same settings: the buckets stay spent (a fresh one would let 3 through again).
    process.kill(primary.pid, 'SIGHUP');
    await primary.line(/reloaded .*\(in 2 workers\)/);
    const afterReload = await Promise.all(Array.from({ length: 4 }, () => request(agent, proxyPort, '/')));
    const okAfterReload = countOf(afterReload.map((a) => a.status), 200);
    const mostSoFar = Math.floor((performance.now() - startedAt) / 1_000) + 3;
    assert.ok(okBurst + okAfterReload <= mostSoFar, `got ${okBurst} + ${okAfterReload} × 200 by the end of the reload, want at most rate × T + burst = ${mostSoFar}, not a fresh burst`);

    // SIGKILL a worker that served the client: a new one starts, every request is answered, and the total stays within rate × T + burst.
    const victim = first.workers[0]!.pid;
    process.kill(victim, 'SIGKILL');
    const replaced = await waitFor('a replacement worker', async () => {
      const snapshot = await status();
      return snapshot.workers.length === 2 && !snapshot.workers.some((w) => w.pid === victim) ? snapshot : undefined;
    });
    for (const w of replaced.workers) pids.add(w.pid);
    agent.destroy();
    agent = new http.Agent({ keepAlive: true, maxSockets: 4, scheduling: 'fifo' });
    const afterKill = await Promise.all(Array.from({ length: 8 }, () => request(agent, proxyPort, '/')));
    const statuses = afterKill.map((a) => a.status);
    assert.equal(countOf(statuses, 200) + countOf(statuses, 429), 8, `got ${statuses.join(' ')}, want every request answered 200 or 429`);
    const total = okBurst + okAfterReload + countOf(statuses, 200);
    const most = Math.floor((performance.now() - startedAt) / 1_000) + 3;
    assert.ok(total <= most, `got ${total} × 200 in all, want at most rate × T + burst = ${most}`);

    agent.destroy();
    primary.child.kill('SIGTERM');
    assert.equal((await primary.exited).code, 0, `got the primary's exit, want 0; stderr:\n${primary.stderr()}`);
  } finally {
    agent.destroy();
    killAll([primary.pid, ...pids]);
    await new Promise((resolve) => backend.close(resolve));
  }
});
