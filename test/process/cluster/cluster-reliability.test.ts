/**
 * `workers = 2` when a worker dies, with the built CLI: /metrics counters
 * never go down across a SIGKILLed worker; a replacement worker runs the config the primary serves,
 * not the file on disk (broken and rejected, or edited and not reloaded); a worker that cannot
 * start is reported on /status.json and in the log and retried with backoff, and SIGTERM does not
 * wait for it; when no worker can start at all, the primary exits 1; when the primary dies, the
 * workers finish what they serve and exit, and a restarted proxy (systemd's `Restart=always`) serves
 * on the same port. Every process is killed by pid afterwards.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StatusSnapshot } from '../../../src/admin/status-snapshot.js';
import { buildCli } from '../../helpers/built-cli.js';
import { freePort, get, isAlive, killAll, spawnCli, waitFor, writeConfig, type CliProcess } from '../../helpers/cli-process.js';
import { startBackend, type Backend } from '../../helpers/proxy-harness.js';
import { parseExposition } from '../../admin/exposition-parser.js';

let oldBackend: Backend;
let newBackend: Backend;
before(async () => {
  await buildCli();
  oldBackend = await startBackend((_req, res) => res.end('old'));
  newBackend = await startBackend((_req, res) => res.end('new'));
});
after(async () => {
  await Promise.all([oldBackend.close(), newBackend.close()]);
});

interface Cluster {
  readonly cli: CliProcess;
  readonly proxyPort: number;
  readonly adminPort: number;
  status(): Promise<StatusSnapshot>;
  /** Waits until two workers answer; returns their pids. */
  twoWorkers(except?: readonly number[]): Promise<number[]>;
  /** Every pid seen, for cleanup. */
  readonly pids: Set<number>;
}

const configText = (proxyPort: number, adminPort: number, extraServer: readonly string[], routes: readonly string[]): string =>
  ['[server]', `listen = 127.0.0.1:${proxyPort}`, 'workers = 2', 'shutdown_timeout = 5s', ...extraServer, '[admin]', `listen = 127.0.0.1:${adminPort}`, ...routes, ''].join('\n');

async function startCluster(t: { after(fn: () => void): void }, extraServer: readonly string[], routes: readonly string[]): Promise<Cluster & { configFile: string }> {
  const [proxyPort, adminPort] = [await freePort(), await freePort()];
  const configFile = writeConfig(configText(proxyPort, adminPort, extraServer, routes));
  const cli = await spawnCli(configFile);
  const pids = new Set<number>([cli.pid]);
  t.after(() => killAll(pids));
  const status = async (): Promise<StatusSnapshot> => JSON.parse((await get(adminPort, '/status.json')).body) as StatusSnapshot;
  const twoWorkers = (except: readonly number[] = []): Promise<number[]> =>
    waitFor(`two workers answering (not ${except.join(', ')})`, async () => {
      const snapshot = await status();
      const workerPids = snapshot.workers.map((w) => w.pid);
      for (const pid of workerPids) pids.add(pid);
      return workerPids.length === 2 && workerPids.every((pid) => !except.includes(pid)) ? workerPids : undefined;
    });
  return { cli, proxyPort, adminPort, status, twoWorkers, pids, configFile };
}

/** Every counter sample of a /metrics text (`_total`, and histograms' `_bucket`, `_count`, `_sum`), keyed by name and labels. */
async function scrapeCounters(adminPort: number): Promise<Map<string, number>> {
  const exposition = parseExposition((await get(adminPort, '/metrics')).body);
  const counters = new Map<string, number>();
  for (const sample of exposition.samples) {
    const family = sample.name.replace(/_(bucket|count|sum)$/, '');
    const type = exposition.types.get(sample.name) ?? exposition.types.get(family);
    if (type !== 'counter' && type !== 'histogram') continue;
    counters.set(`${sample.name}${JSON.stringify(sample.labels)}`, sample.value);
  }
  return counters;
}

function assertNoCounterWentDown(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>, when: string): void {
  for (const [series, value] of before) {
    const now = after.get(series);
    assert.ok(now !== undefined, `${when}: got series ${series} gone from /metrics`);
    assert.ok(now >= value, `${when}: got ${series} = ${now}, want >= ${value} (the previous scrape)`);
  }
}

test('workers = 2: no /metrics counter goes down when a worker is SIGKILLed between two scrapes', { timeout: 60_000 }, async (t) => {
  const cluster = await startCluster(t, ['access_log = off'], ['[proxy.a]', 'path = /a', `pass = ${oldBackend.url}`, '[proxy.dead]', 'path = /dead', 'pass = http://127.0.0.1:9', 'retries = 0']);
  const [first, second] = await cluster.twoWorkers();
  for (let i = 0; i < 30; i++) assert.equal((await get(cluster.proxyPort, '/a')).status, 200);
  for (let i = 0; i < 6; i++) assert.equal((await get(cluster.proxyPort, '/dead')).status, 502);
  for (let i = 0; i < 4; i++) assert.equal((await get(cluster.proxyPort, '/nowhere')).status, 404);

  const served = await cluster.status();
  const victim = served.workers.find((w) => w.requestsTotal > 0)!;
  assert.ok(served.workers.every((w) => w.requestsTotal > 0), `got ${JSON.stringify(served.workers)}, want traffic on both workers`);
  const scrape1 = await scrapeCounters(cluster.adminPort);
  assert.equal(scrape1.get('proxy_requests_total{"route":"a","status_class":"2xx"}'), 30, 'got the first scrape without every request');
  assert.ok((scrape1.get('proxy_upstream_failures_total{"route":"dead","upstream":"127.0.0.1:9"}') ?? 0) > 0, 'got no upstream failures counted');

  process.kill(victim.pid, 'SIGKILL');
  // Right away: the primary may not even have seen the exit yet (then the worker is silent and counts with its last report).
  const scrape2 = await scrapeCounters(cluster.adminPort);
  assertNoCounterWentDown(scrape1, scrape2, 'just after the SIGKILL');

  const replaced = await cluster.twoWorkers([victim.pid]);
  assert.ok(replaced.includes(first === victim.pid ? second! : first!), `got workers ${replaced}, want the survivor among them`);
  const scrape3 = await scrapeCounters(cluster.adminPort);
  assertNoCounterWentDown(scrape2, scrape3, 'once the replacement runs');
  assert.equal(scrape3.get('proxy_requests_total{"route":"a","status_class":"2xx"}'), 30, 'got the dead worker\'s requests lost or counted twice');
  const totals = (await cluster.status()).totals.requests;
  assert.equal(totals, 40, `got /status.json totals.requests ${totals}, want the 40 requests counted before the death`);
  assert.match(cluster.cli.stderr(), new RegExp(`worker ${victim.pid} exited \\(SIGKILL\\); starting a new one`));
});

test('workers = 2: a replacement worker runs the primary\'s config, not the broken or unreloaded file on disk; SIGHUP then applies the file', { timeout: 40_000 }, async (t) => {
  const oldRoutes = ['[proxy.old]', 'path = /old', `pass = ${oldBackend.url}`];
  const newRoutes = ['[proxy.new]', 'path = /new', `pass = ${newBackend.url}`];
  const cluster = await startCluster(t, ['access_log = off'], oldRoutes);
  const rewrite = (text: string): void => writeFileSync(cluster.configFile, text);
  /** The distinct answers to `count` requests: `200 BODY`, or the status alone for the proxy's own answers. */
  const served = async (path: string, count: number): Promise<Set<string>> => {
    const answers = new Set<string>();
    for (let i = 0; i < count; i++) {
      const answer = await get(cluster.proxyPort, path);
      answers.add(answer.status === 200 ? `200 ${answer.body}` : String(answer.status));
    }
    return answers;
  };
  /** Kills one worker and waits for its replacement to answer; returns the replacement's pid. */
  const replaceOne = async (): Promise<number> => {
    const pids = await cluster.twoWorkers();
    process.kill(pids[0]!, 'SIGKILL');
    const now = await cluster.twoWorkers([pids[0]!]);
    return now.find((pid) => !pids.includes(pid))!;
  };
  /** The requests `pid` counted (per worker, from /status.json). */
  const countOf = async (pid: number): Promise<number> => (await cluster.status()).workers.find((w) => w.pid === pid)?.requestsTotal ?? 0;

  // 1. A broken file on disk, a SIGHUP that is rejected, then a killed worker.
  await cluster.twoWorkers();
  rewrite('[server]\nworkers = 2\n[proxy.old\n');
  cluster.cli.child.kill('SIGHUP');
  await cluster.cli.line(/reload rejected, still serving the previous config: .*env\.ini:3:1/);
  const afterBroken = await replaceOne();
  assert.deepEqual([...(await served('/old', 20))], ['200 old'], 'got /old failing after the replacement');
  assert.ok((await countOf(afterBroken)) > 0, `got no request served by the replacement ${afterBroken}: it is not listening`);
  const mentions = cluster.cli.stderr().split('\n').filter((line) => line.includes('env.ini:3:'));
  assert.deepEqual(mentions.map((line) => line.slice(0, 16)), ['reload rejected,'], `got the broken file read by a replacement:\n${cluster.cli.stderr()}`);
  assert.doesNotMatch(cluster.cli.stderr(), /could not start/);

  // 2. A valid edit on disk, not reloaded, then a killed worker: every worker still runs the old config.
  rewrite(configText(cluster.proxyPort, cluster.adminPort, ['access_log = off'], newRoutes));
  const afterEdit = await replaceOne();
  assert.deepEqual([...(await served('/old', 20))], ['200 old'], 'got the unreloaded edit in some worker (/old gone)');
  assert.deepEqual([...(await served('/new', 6))], ['404'], 'got the unreloaded edit in some worker (/new served)');
  assert.ok((await countOf(afterEdit)) > 0, `got no request served by the replacement ${afterEdit}`);

  // 3. SIGHUP: now the edit applies, in the workers and in a later replacement.
  cluster.cli.child.kill('SIGHUP');
  await cluster.cli.line(/^reloaded .*env\.ini: 1 route/m);
  await waitFor('the reload in every worker', async () => ((await served('/new', 4)).size === 1 && (await served('/new', 1)).has('200 new') ? true : undefined));
  const afterReload = await replaceOne();
  assert.deepEqual([...(await served('/new', 20))], ['200 new'], 'got /new failing after the reload and a replacement');
  assert.deepEqual([...(await served('/old', 4))], ['404'], 'got /old still served after the reload');
  assert.ok((await countOf(afterReload)) > 0, `got no request served by the replacement ${afterReload}`);

  const stoppedAt = Date.now();
  cluster.cli.child.kill('SIGTERM');
  const { code } = await cluster.cli.exited;
  assert.equal(code, 0, `got exit ${code}; stderr:\n${cluster.cli.stderr()}`);
  assert.ok(Date.now() - stoppedAt < 3_000, `got SIGTERM taking ${Date.now() - stoppedAt} ms with nothing in flight`);
});

test('workers = 2: a worker that cannot start (access log directory gone) is reported and retried with backoff; SIGTERM does not wait for it', { timeout: 40_000 }, async (t) => {
  const logDir = join(mkdtempSync(join(tmpdir(), 'proxy-logs-')), 'logs');
  mkdirSync(logDir);
  const cluster = await startCluster(t, [`access_log = ${join(logDir, 'access.log')}`], ['[proxy.a]', 'path = /', `pass = ${oldBackend.url}`]);
  const [victim] = await cluster.twoWorkers();

  rmSync(logDir, { recursive: true });
  process.kill(victim!, 'SIGKILL');
  const failure = /worker (\d+) could not start: [^\n]*access_log '[^']*access\.log' cannot be opened for appending: ENOENT; next attempt in (\d+) s \((\d+) failed start\(s\) in a row\)/g;
  /** Waits for `count` failed starts in the log; returns each one's announced delay (s) and count in a row. */
  const attempts = async (count: number): Promise<{ delayS: number; inRow: number }[]> =>
    waitFor(`${count} failed start(s) logged`, () => {
      const found = [...cluster.cli.stderr().matchAll(failure)];
      return found.length >= count ? found.map((m) => ({ delayS: Number(m[2]), inRow: Number(m[3]) })) : undefined;
    }, 10_000);
  await attempts(1);
  const firstAtMs = Date.now();
  const reported = await cluster.status();
  assert.equal(reported.workerStartFailures.length, 1, `got ${JSON.stringify(reported.workerStartFailures)}, want one slot reported`);
  assert.match(reported.workerStartFailures[0]!.reason, /ENOENT/);
  assert.equal(reported.workerStartFailures[0]!.failedStarts, 1);
  assert.ok(reported.workerStartFailures[0]!.nextAttemptInMs <= 1_000, `got nextAttemptInMs ${reported.workerStartFailures[0]!.nextAttemptInMs}, want <= 1000`);
  assert.equal(reported.workers.length, 1, 'got the failing worker listed as running');
  assert.equal((await get(cluster.proxyPort, '/')).status, 200, 'got the surviving worker not serving');

  const [one, two] = await attempts(2);
  const secondGapMs = Date.now() - firstAtMs;
  assert.deepEqual([one!.delayS, one!.inRow, two!.delayS, two!.inRow], [1, 1, 2, 2], `got the backoff ${JSON.stringify([one, two])}, want 1 s then 2 s`);
  assert.ok(secondGapMs >= 900, `got the second attempt ${secondGapMs} ms after the first failure, want the 1 s backoff`);
  const statusPage = (await get(cluster.adminPort, '/status')).body;
  assert.match(statusPage, /"workerStartFailures":\[\{"slot":\d,"reason":"[^"]*access_log/, 'got /status without the failing worker');

  // The cause is fixed: the next attempt (2 s later) starts, and the report clears.
  mkdirSync(logDir);
  await cluster.cli.line(/worker \d+ started in slot \d after 2 failed start\(s\)/, 6_000);
  await cluster.twoWorkers([victim!]);
  assert.deepEqual((await cluster.status()).workerStartFailures, [], 'got the report kept after the worker started');

  // Broken again: SIGTERM while a slot waits for its next attempt exits at once, with 0.
  const [next] = await cluster.twoWorkers();
  rmSync(logDir, { recursive: true });
  process.kill(next!, 'SIGKILL');
  await waitFor('a third failed start', () => ([...cluster.cli.stderr().matchAll(failure)].length >= 3 ? true : undefined), 10_000);
  const stoppedAt = Date.now();
  cluster.cli.child.kill('SIGTERM');
  const { code } = await cluster.cli.exited;
  assert.equal(code, 0, `got exit ${code}; stderr:\n${cluster.cli.stderr()}`);
  assert.ok(Date.now() - stoppedAt < 3_000, `got SIGTERM waiting ${Date.now() - stoppedAt} ms for a worker that never started`);
});

test('workers = 2: when no worker can start at all (the port is taken), the primary exits 1 and says why', { timeout: 60_000 }, async (t) => {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.after(() => taken.close());
  const proxyPort = (taken.address() as net.AddressInfo).port;
  const cli = await spawnCli(writeConfig(['[server]', `listen = 127.0.0.1:${proxyPort}`, 'access_log = off', 'workers = 2', '[proxy.a]', 'path = /', `pass = ${oldBackend.url}`, ''].join('\n')));
  t.after(() => killAll([cli.pid]));
  const { code } = await cli.exited;
  assert.equal(code, 1, `got exit ${code}, want 1; stderr:\n${cli.stderr()}`);
  assert.match(cli.stderr(), /^error: cannot listen on 127\.0\.0\.1:\d+: EADDRINUSE, another process listens on that address and port \(check listen, tls_listen and \[admin\] listen\)$/m, `got stderr:\n${cli.stderr()}`);
});

test('workers = 2: a worker killed by a signal while node boots (a SIGHUP to the process group) is retried, not the end of the service (found by a break test)', { timeout: 60_000 }, async (t) => {
  // The preload runs in every worker before the program: the first worker to get here signals itself
  // with SIGHUP, which kills it since no handler exists yet, as a SIGHUP during node's boot does.
  const dir = mkdtempSync(join(tmpdir(), 'proxy-boot-signal-'));
  const preload = join(dir, 'hang-up-once.mjs');
  writeFileSync(
    preload,
    `import { openSync } from 'node:fs';\nimport cluster from 'node:cluster';\nif (cluster.isWorker) {\n  try { openSync(${JSON.stringify(join(dir, 'done'))}, 'wx'); process.kill(process.pid, 'SIGHUP'); } catch {}\n}\n`,
  );
  const [proxyPort, adminPort] = [await freePort(), await freePort()];
  const cli = await spawnCli(writeConfig(configText(proxyPort, adminPort, ['access_log = off'], ['[proxy.a]', 'path = /', `pass = ${oldBackend.url}`])), ['--import', preload]);
  const pids = new Set<number>([cli.pid]);
  t.after(() => killAll(pids));
  await cli.line(/worker \d+ could not start: exited \(SIGHUP\) before it was listening; next attempt in 1 s/);
  await waitFor('an answer from the worker that did start', async () => ((await get(proxyPort, '/')).body === 'old' ? true : undefined));
  await waitFor('both workers', async () => {
    const snapshot = JSON.parse((await get(adminPort, '/status.json')).body) as StatusSnapshot;
    for (const worker of snapshot.workers) pids.add(worker.pid);
    return snapshot.workers.length === 2 ? true : undefined;
  });
  assert.ok(isAlive(cli.pid), 'got the primary gone');
  cli.child.kill('SIGTERM');
  assert.equal((await cli.exited).code, 0, `got an unclean exit; stderr:\n${cli.stderr()}`);
});

test('workers = 2: when the primary is SIGKILLed its workers finish the requests in flight and exit; a restarted proxy serves on the same port at once', { timeout: 60_000 }, async (t) => {
  const held: http.ServerResponse[] = [];
  const slow = await startBackend((_req, res) => {
    held.push(res);
    setTimeout(() => res.end('slow done'), 400);
  });
  t.after(() => slow.close());
  const routes = ['[proxy.a]', 'path = /', `pass = ${slow.url}`];
  const cluster = await startCluster(t, ['access_log = off'], routes);
  const workerPids = await cluster.twoWorkers();
  const inFlight = get(cluster.proxyPort, '/slow');
  await waitFor('the request at the backend', () => (held.length === 1 ? true : undefined));

  process.kill(cluster.cli.pid, 'SIGKILL');
  assert.equal(`${(await inFlight).status} ${(await inFlight).body}`, '200 slow done', 'got the request in flight cut by the primary\'s death');
  await waitFor('both workers to exit', () => (workerPids.every((pid) => !isAlive(pid)) ? true : undefined), 8_000);

  // What systemd's Restart=always does next: a new primary binds the same port and serves.
  const restarted = await spawnCli(cluster.configFile);
  cluster.pids.add(restarted.pid);
  const answer = await waitFor('the restarted proxy serving', async () => {
    const reply = await get(cluster.proxyPort, '/');
    return reply.status === 200 ? reply : undefined;
  });
  assert.equal(answer.body, 'slow done');
  restarted.child.kill('SIGTERM');
  assert.equal((await restarted.exited).code, 0, `got the restarted proxy's exit code; stderr:\n${restarted.stderr()}`);
});
