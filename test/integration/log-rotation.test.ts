/**
 * SIGUSR1 as nginx's USR1, with real processes of the built CLI: it never starts node's inspector
 * (nothing listens on 127.0.0.1:9229, no "Debugger listening" line), the proxy keeps serving, and
 * after logrotate-style renaming the next access-log line lands in a new file at the configured path —
 * in one process, and with `workers = 2`, where the primary tells each worker to reopen its file.
 *
 * "Early" is a signal during the proxy's start-up: the config file is a FIFO, so the process is
 * provably inside start-up (blocked reading its config, after src/main.ts ran) when the signal goes.
 * A SIGUSR1 that node itself answered before src/main.ts could listen (sent here by a preload, which
 * runs just before the entry module) opens the inspector, and the guard closes it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StatusSnapshot } from '../../src/admin/status-snapshot.js';
import { request, startBackend, waitFor } from '../helpers/proxy-harness.js';
import { buildCli, REPO, startCli, type RunningCli } from '../helpers/built-cli.js';
import { freePort } from '../helpers/cli-process.js';

/** True when something accepts connections on node's default inspector address. */
function isInspectorListening(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(9229, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

async function assertNoInspector(cli: RunningCli, when: string): Promise<void> {
  assert.equal(await isInspectorListening(), false, `got a listener on 127.0.0.1:9229 ${when}, want none`);
  assert.doesNotMatch(cli.stderr(), /Debugger listening/, `got the inspector started ${when}`);
}

function lines(path: string): string[] {
  return readFileSync(path, 'utf8').split('\n').filter((line) => line !== '');
}

test('SIGUSR1 during start-up and after: no inspector, still serving, and after a rename the next line lands in a new file at the path', { timeout: 60_000 }, async (t) => {
  const backend = await startBackend();
  t.after(() => backend.close());
  const dir = mkdtempSync(join(tmpdir(), 'proxy-usr1-'));
  const accessLog = join(dir, 'access.log');
  const configFifo = join(dir, 'env.ini');
  execFileSync('mkfifo', [configFifo]);
  const cli = await startCli(['--config', configFifo]);
  t.after(() => cli.kill());

  // Opening the FIFO for writing completes once the proxy opened it to read its config: start-up.
  const writer = await open(configFifo, 'w');
  cli.child.kill('SIGUSR1');
  await writer.writeFile(`[server]\nlisten = 127.0.0.1:0\naccess_log = ${accessLog}\n[proxy.a]\npath = /\npass = ${backend.url}\n`);
  await writer.close();
  const port = await cli.port;
  await waitFor(() => cli.stderr().includes('SIGUSR1: '), 3000, 'the early SIGUSR1 to be handled');
  await assertNoInspector(cli, 'after a SIGUSR1 during start-up');

  assert.equal((await request(port, { path: '/first' })).status, 200);
  renameSync(accessLog, `${accessLog}.1`);
  cli.child.kill('SIGUSR1');
  await waitFor(() => cli.stderr().includes(`SIGUSR1: reopened ${accessLog}`), 3000, 'the log file to be reopened');
  await assertNoInspector(cli, 'after a SIGUSR1 while serving');
  assert.equal((await request(port, { path: '/second' })).status, 200);

  await waitFor(() => lines(accessLog).length === 1, 3000, 'the line after rotation');
  assert.match(lines(accessLog)[0]!, /"GET \/second HTTP\/1\.1" 200 /, 'got the wrong line in the new file');
  const rotated = lines(`${accessLog}.1`);
  assert.equal(rotated.length, 1, `got ${rotated.length} lines in the renamed file, want 1`);
  assert.match(rotated[0]!, /"GET \/first HTTP\/1\.1" 200 /);

  cli.child.kill('SIGTERM');
  assert.equal(await cli.exited, 0, `got an unclean exit: ${cli.stderr()}`);
});

test('SIGUSR1 with workers = 2: no inspector in the primary or a worker, and every worker writes its next line to the new file', { timeout: 60_000 }, async (t) => {
  const backend = await startBackend();
  t.after(() => backend.close());
  const dir = mkdtempSync(join(tmpdir(), 'proxy-usr1-cluster-'));
  const accessLog = join(dir, 'access.log');
  const configFile = join(dir, 'env.ini');
  const proxyPort = await freePort(); // the workers' listener is logged by no one: give it a known port
  writeFileSync(configFile, `[server]\nlisten = 127.0.0.1:${proxyPort}\naccess_log = ${accessLog}\nworkers = 2\n[admin]\nlisten = 127.0.0.1:0\n[proxy.a]\npath = /\npass = ${backend.url}\n`);
  const cli = await startCli(['--config', configFile]);
  let workerPids: number[] = [];
  t.after(() => {
    for (const pid of workerPids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    cli.kill();
  });
  await waitFor(() => /admin listening on 127\.0\.0\.1:\d+/.test(cli.stderr()), 8000, 'the admin listener');
  const adminPort = Number(/admin listening on 127\.0\.0\.1:(\d+)/.exec(cli.stderr())![1]);
  const status = async (): Promise<StatusSnapshot> => JSON.parse((await request(adminPort, { path: '/status.json' })).body.toString()) as StatusSnapshot;
  for (const deadline = Date.now() + 8000; workerPids.length < 2; await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for two workers: ${cli.stderr()}`);
    workerPids = (await status().catch(() => undefined))?.workers.map((w) => w.pid) ?? [];
  }
  const served = async (count: number, tag: string): Promise<void> => {
    for (let i = 0; i < count; i++) assert.equal((await request(proxyPort, { path: `/${tag}/${i}` })).status, 200);
  };
  await served(10, 'before');
  renameSync(accessLog, `${accessLog}.1`);
  cli.child.kill('SIGUSR1');
  for (const pid of workerPids) {
    await waitFor(() => cli.stderr().includes(`worker ${pid}: reopened ${accessLog}`), 5000, `worker ${pid} to reopen its file`);
  }
  assert.doesNotMatch(cli.stderr(), /no log file to reopen/, 'the primary, whose workers hold the file, does not say it has none');
  // A SIGUSR1 straight to a worker (systemctl kill signals every process of the unit) is handled there too.
  for (const pid of workerPids) process.kill(pid, 'SIGUSR1');
  await waitFor(() => cli.stderr().split('\n').filter((line) => line === `SIGUSR1: reopened ${accessLog}`).length === 2, 5000, 'both workers to handle their own SIGUSR1');
  await assertNoInspector(cli, 'after SIGUSR1 to the primary and to each worker');

  const before = (await status()).workers.map((w) => w.requestsTotal);
  await served(20, 'after');
  const afterRotation = (await status()).workers.map((w) => w.requestsTotal);
  afterRotation.forEach((count, i) => assert.ok(count > before[i]!, `got worker ${i} serving ${before[i]} → ${count} requests, want both workers serving after the rotation`));
  await waitFor(() => lines(accessLog).length === 20, 3000, '20 lines in the new file');
  assert.ok(lines(accessLog).every((line) => line.includes('/after/')), 'got a pre-rotation line in the new file');
  const rotated = lines(`${accessLog}.1`);
  assert.equal(rotated.length, 10, `got ${rotated.length} lines in the renamed file, want the 10 from before the rotation`);

  cli.child.kill('SIGTERM');
  assert.equal(await cli.exited, 0, `got an unclean exit: ${cli.stderr()}`);
});

test('a SIGUSR1 that node answered before the proxy listened for it: the inspector it opened is closed, and the proxy serves', { timeout: 60_000 }, async (t) => {
  const backend = await startBackend();
  t.after(() => backend.close());
  const dir = mkdtempSync(join(tmpdir(), 'proxy-usr1-boot-'));
  const preload = join(dir, 'signal-self.mjs');
  writeFileSync(preload, "process.kill(process.pid, 'SIGUSR1');\n");
  const config = join(dir, 'env.ini');
  writeFileSync(config, `[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy.a]\npath = /\npass = ${backend.url}\n`);
  const child = spawn(process.execPath, ['--import', preload, await buildCli(), '--config', config], { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  await waitFor(() => /proxy listening on [^\s]+:\d+/.test(stderr), 5000, 'the proxy to listen');
  const port = Number(/proxy listening on [^\s]+:(\d+)/.exec(stderr)![1]);
  // The inspector starts on its own thread; the guard's last check is 1 s after start-up.
  await waitFor(() => stderr.includes("closed node's inspector"), 3000, `the guard to close the inspector: ${stderr}`);
  assert.match(stderr, /Debugger listening/, 'got no inspector started by the preload: the test proves nothing');
  await new Promise((resolve) => setTimeout(resolve, 1200));
  assert.equal(await isInspectorListening(), false, 'got a listener on 127.0.0.1:9229 after the guard, want none');
  assert.equal((await request(port, { path: '/' })).status, 200);
  child.kill('SIGTERM');
  assert.equal(await new Promise((resolve) => child.once('exit', resolve)), 0, `got an unclean exit: ${stderr}`);
});
