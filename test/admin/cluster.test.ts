/**
 * `[server] workers = 2` with real processes (`node dist/main.js --config FILE`, from a private
 * build of src/): requests are served by both workers (each worker's count in /status.json), a backend
 * stopped during the run is DOWN in both workers within one check period, a registered upstream
 * reaches both workers and survives SIGHUP, and SIGTERM on the primary drains both workers (slow
 * requests in flight in each finish with 200, every process exits). Processes are cleaned up by pid.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StatusSnapshot } from '../../src/admin/status-snapshot.js';
import { listenBackend, startBackend } from '../helpers/proxy-harness.js';

import { buildCli, REPO as ROOT } from '../helpers/built-cli.js';
import { freePort } from '../helpers/cli-process.js';

let mainJs = '';
before(async () => {
  mainJs = await buildCli();
});

function get(port: number, path: string, options: { method?: string; body?: string; token?: string } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        agent: false,
        headers: {
          ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
          ...(options.body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(options.body)) }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 8_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('workers = 2: both serve, a stopped backend is DOWN in both within one check period, registry survives SIGHUP, SIGTERM drains both', { timeout: 60_000 }, async () => {
  const slow = await listenBackend(
    http.createServer((req, res) => {
      if (req.url === '/a/slow') setTimeout(() => res.end('slow done'), 700);
      else res.end('one');
    }),
  );
  const doomed = await startBackend((_req, res) => res.end('two'));
  const registered = await listenBackend(
    http.createServer((req, res) => {
      if (req.url === '/a/slow') setTimeout(() => res.end('slow done'), 700);
      else res.end('three');
    }),
  );
  const [proxyPort, adminPort] = [await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'proxy-cluster-'));
  const configFile = join(dir, 'env.ini');
  const configText = (strategy: string): string =>
    [
      '[server]',
      `listen = 127.0.0.1:${proxyPort}`,
      'access_log = off',
      'workers = 2',
      'shutdown_timeout = 5s',
      '[admin]',
      `listen = 127.0.0.1:${adminPort}`,
      'token = s3cret',
      '[proxy.a]',
      'path = /a',
      `pass = ${slow.url}`,
      `pass = ${doomed.url}`,
      `strategy = ${strategy}`,
      'health_check = on',
      'health_interval = 500ms',
      'health_timeout = 300ms',
      'health_fall = 1',
      'health_rise = 1',
      'max_fails = 0',
      '',
    ].join('\n');
  writeFileSync(configFile, configText('round-robin'));

  let stderr = '';
  const primary: ChildProcess = spawn(process.execPath, [mainJs, '--config', configFile], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  primary.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => primary.once('exit', (code) => resolve(code)));
  let workerPids: number[] = [];
  const status = async (): Promise<StatusSnapshot> => JSON.parse((await get(adminPort, '/status.json')).body) as StatusSnapshot;
  try {
    const initial = await waitFor('two workers reporting', async () => {
      const snapshot = await status();
      return snapshot.workers.length === 2 && snapshot.routes[0]!.upstreams.every((u) => u.lastProbe !== null) ? snapshot : undefined;
    });
    assert.equal(initial.mode, 'cluster');
    workerPids = initial.workers.map((w) => w.pid);
    assert.ok(!workerPids.includes(primary.pid!), 'got the primary among the workers');

    // 1. Requests are served by both workers (a new connection each; the primary deals them round robin).
    for (let i = 0; i < 40; i++) assert.equal((await get(proxyPort, '/a')).status, 200);
    const served = await status();
    assert.equal(served.totals.requests, 40, `got ${served.totals.requests} requests in total, want 40`);
    for (const worker of served.workers) assert.ok(worker.requestsTotal > 0, `got ${JSON.stringify(served.workers)}, want traffic on both workers`);
    assert.equal(served.routes[0]!.upstreams.reduce((sum, u) => sum + u.requestsTotal, 0), 40);

    // 1b. A worker that does not answer (stopped) is listed as silent, not dropped without a word (a break test).
    assert.deepEqual(served.silentWorkers, []);
    process.kill(workerPids[0]!, 'SIGSTOP');
    try {
      const silent = await status();
      assert.deepEqual(silent.silentWorkers, [{ pid: workerPids[0] }], `got silentWorkers ${JSON.stringify(silent.silentWorkers)}`);
      assert.deepEqual(silent.workers.map((w) => w.pid), [workerPids[1]]);
    } finally {
      process.kill(workerPids[0]!, 'SIGCONT');
    }
    await waitFor('the stopped worker answering again', async () => ((await status()).silentWorkers.length === 0 ? true : undefined));

    // 2. A backend stopped during the run: DOWN in both workers within one check period (500 ms) plus the push.
    const stoppedAt = Date.now();
    await doomed.close();
    const down = await waitFor('DOWN in both workers', async () => {
      const snapshot = await status();
      const upstream = snapshot.routes[0]!.upstreams[1]!;
      return upstream.state === 'DOWN' && upstream.workers.length === 2 && upstream.workers.every((w) => w.healthState === 'down') ? snapshot : undefined;
    });
    const elapsedMs = Date.now() - stoppedAt;
    assert.ok(elapsedMs < 500 + 400, `got DOWN in both workers after ${elapsedMs}ms, want within one 500 ms check period (+ push)`);
    assert.equal(down.routes[0]!.upstreams[1]!.workers.length, 2);
    for (let i = 0; i < 6; i++) assert.equal((await get(proxyPort, '/a')).body, 'one', 'got a request on the DOWN upstream');

    // 3. A registered upstream reaches both workers and survives SIGHUP.
    const put = await get(adminPort, '/routes/a/upstreams', { method: 'PUT', body: JSON.stringify({ url: registered.url, ttl: '1m' }), token: 's3cret' });
    assert.equal(put.status, 201, `got ${put.status} ${put.body}`);
    await waitFor('the registered upstream in both workers', async () => ((await status()).routes[0]!.upstreams[2]?.workers.length === 2 ? true : undefined));
    writeFileSync(configFile, configText('least-connections'));
    primary.kill('SIGHUP');
    const reloaded = await waitFor('the reload', async () => {
      const snapshot = await status();
      return snapshot.routes[0]!.strategy === 'least-connections' ? snapshot : undefined;
    });
    assert.equal(reloaded.routes[0]!.upstreams[2]?.origin, registered.url, 'got the registered upstream lost on reload');
    const bodies = new Set<string>();
    for (let i = 0; i < 10; i++) bodies.add((await get(proxyPort, '/a')).body);
    assert.ok(bodies.has('three'), `got ${[...bodies]}, want the registered upstream to serve after the reload`);

    // 4. SIGTERM drains both workers: slow requests in flight in each one finish with 200.
    const inFlight = Array.from({ length: 4 }, () => get(proxyPort, '/a/slow'));
    await waitFor('a slow request in flight in each worker', async () => {
      const snapshot = await status();
      return snapshot.workers.every((w) => w.activeRequests >= 1) && snapshot.workers.reduce((n, w) => n + w.activeRequests, 0) === 4 ? true : undefined;
    }).catch(async () => {
      const snapshot = await status();
      throw new Error(`got workers ${JSON.stringify(snapshot.workers)}, want a slow request in each`);
    });
    primary.kill('SIGTERM');
    const answers = await Promise.all(inFlight);
    assert.deepEqual(
      answers.map((a) => `${a.status} ${a.body}`),
      Array(4).fill('200 slow done'),
      'got in-flight requests cut by SIGTERM',
    );
    assert.equal(await exited, 0, `got the primary's exit code, want 0; stderr:\n${stderr}`);
    await waitFor('both workers to exit', async () => (workerPids.every((pid) => !isAlive(pid)) ? true : undefined), 3_000);
    assert.match(stderr, /SIGTERM: draining 2 workers/);
    assert.match(stderr, /\nshut down\n/, 'a drained shutdown says so plainly');
  } finally {
    for (const pid of [primary.pid, ...workerPids]) if (pid !== undefined && isAlive(pid)) process.kill(pid, 'SIGKILL');
    await Promise.all([slow.close(), registered.close()]);
  }
});

test('workers = 2: a shutdown that runs out of shutdown_timeout says that requests were cut', { timeout: 60_000 }, async () => {
  const held: http.ServerResponse[] = [];
  const hanging = await listenBackend(http.createServer((_req, res) => void held.push(res)));
  const proxyPort = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'proxy-cluster-'));
  const configFile = join(dir, 'env.ini');
  writeFileSync(
    configFile,
    ['[server]', `listen = 127.0.0.1:${proxyPort}`, 'access_log = off', 'workers = 2', 'shutdown_timeout = 300ms', '[proxy.a]', 'path = /', `pass = ${hanging.url}`, ''].join('\n'),
  );
  let stderr = '';
  const primary: ChildProcess = spawn(process.execPath, [mainJs, '--config', configFile], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  primary.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => primary.once('exit', (code) => resolve(code)));
  try {
    const isListening = (): Promise<true | undefined> =>
      new Promise((resolve) => {
        const socket = net.connect(proxyPort, '127.0.0.1', () => (socket.destroy(), resolve(true)));
        socket.on('error', () => resolve(undefined));
      });
    await waitFor('the workers listening', isListening);
    const inFlight = get(proxyPort, '/hang').catch((error: Error) => ({ status: 0, body: error.message }));
    await waitFor('the request at the backend', async () => (held.length === 1 ? true : undefined));
    primary.kill('SIGTERM');
    await inFlight;
    assert.equal(await exited, 0, `got the primary's exit code, want 0; stderr:\n${stderr}`);
    // The worker with the request cuts it; the other one drains at once, or was still starting and just exits (not counted).
    assert.match(stderr, /shut down: 1 worker\(s\) did not drain within shutdown_timeout; requests still in flight were cut/, `got stderr:\n${stderr}`);
  } finally {
    if (primary.pid !== undefined && isAlive(primary.pid)) process.kill(primary.pid, 'SIGKILL');
    for (const res of held) res.destroy();
    await hanging.close();
  }
});
