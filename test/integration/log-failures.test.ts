/**
 * Logs never stop traffic (SPEC 2), with real processes of the built CLI: when the reader of the
 * access log (stdout or stderr) goes away after one line, as `| head -1` or a restarted journald do,
 * the proxy keeps answering 200 — with `workers = 1` and `2` — and `/metrics` counts the dropped lines in
 * `proxy_log_lines_dropped_total`. Printing commands (`--check`, `--help`, `simulate`) whose stdout
 * is closed exit 0 without a stack trace.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request, startBackend, waitFor, type Backend } from '../helpers/proxy-harness.js';
import { buildCli, REPO } from '../helpers/built-cli.js';
import { freePort } from '../helpers/cli-process.js';

/** A running CLI whose stdout and stderr the test reads, and may close. */
interface PipedCli {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  readonly exited: Promise<number | null>;
}

async function spawnCli(t: { after(fn: () => void): void }, args: readonly string[]): Promise<PipedCli> {
  const child = spawn(process.execPath, [await buildCli(), ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

function writeConfig(backend: Backend, proxyPort: number, adminPort: number, lines: readonly string[]): string {
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-log-failures-')), 'env.ini');
  writeFileSync(file, ['[server]', `listen = 127.0.0.1:${proxyPort}`, ...lines, '[admin]', `listen = 127.0.0.1:${adminPort}`, '[proxy.a]', 'path = /', `pass = ${backend.url}`, ''].join('\n'));
  return file;
}

/** `proxy_log_lines_dropped_total{log="…"}` from /metrics. */
async function droppedLines(adminPort: number, log: 'access' | 'error'): Promise<number> {
  const text = (await request(adminPort, { path: '/metrics' })).body.toString();
  const match = new RegExp(`^proxy_log_lines_dropped_total\\{log="${log}"\\} (\\d+)$`, 'm').exec(text);
  assert.ok(match, `got no proxy_log_lines_dropped_total{log="${log}"} in /metrics:\n${text}`);
  return Number(match[1]);
}

/** Waits until `port` accepts connections (the cluster's workers log no listening line). */
async function waitForListener(port: number): Promise<void> {
  for (const deadline = Date.now() + 8000; ; await new Promise((r) => setTimeout(r, 50))) {
    const isUp = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (isUp) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port}`);
  }
}

async function assertTenRequestsServed(proxyPort: number): Promise<void> {
  for (let i = 0; i < 10; i++) {
    const response = await request(proxyPort, { path: `/after-close/${i}` });
    assert.equal(response.status, 200, `got ${response.status} for request ${i + 1} after the reader left, want 200`);
  }
}

for (const workers of [1, 2]) {
  test(`access_log = stdout, workers = ${workers}: a reader that exits after one line leaves the proxy serving; the lines are dropped and counted`, { timeout: 60_000 }, async (t) => {
    const backend = await startBackend();
    t.after(() => backend.close());
    const [proxyPort, adminPort] = [await freePort(), await freePort()];
    const cli = await spawnCli(t, ['--config', writeConfig(backend, proxyPort, adminPort, ['access_log = stdout', `workers = ${workers}`])]);
    await waitForListener(proxyPort);
    await waitFor(() => cli.stderr().includes('admin listening'), 8000, 'the admin listener');

    assert.equal((await request(proxyPort, { path: '/first' })).status, 200);
    await waitFor(() => cli.stdout().includes('\n'), 3000, 'the first access-log line');
    cli.child.stdout!.destroy(); // the reader exits after one line

    await assertTenRequestsServed(proxyPort);
    const dropped = await droppedLines(adminPort, 'access');
    assert.ok(dropped >= 10 - workers, `got ${dropped} dropped access-log lines, want at least ${10 - workers} (every line after each process's first failed write)`);
    assert.match(cli.stderr(), /stdout: EPIPE; its lines are dropped from now on/);
    assert.equal(cli.child.exitCode, null, `got the proxy exited: ${cli.stderr()}`);

    cli.child.kill('SIGTERM');
    assert.equal(await cli.exited, 0, `got an unclean exit: ${cli.stderr()}`);
  });
}

for (const workers of [1, 2]) {
  test(`access_log = stderr, workers = ${workers}: with stderr closed after start-up the proxy keeps serving; access and error lines are dropped and counted`, { timeout: 60_000 }, async (t) => {
    const backend = await startBackend();
    t.after(() => backend.close());
    const [proxyPort, adminPort] = [await freePort(), await freePort()];
    const cli = await spawnCli(t, ['--config', writeConfig(backend, proxyPort, adminPort, ['access_log = stderr', `workers = ${workers}`])]);
    await waitForListener(proxyPort);
    await waitFor(() => cli.stderr().includes('admin listening'), 8000, 'the admin listener');
    cli.child.stderr!.destroy(); // the reader (journald, say) goes away

    await assertTenRequestsServed(proxyPort);
    cli.child.kill('SIGHUP'); // a reload writes its line to the error log, which is dead too
    for (const deadline = Date.now() + 3000; (await droppedLines(adminPort, 'error')) === 0; await new Promise((r) => setTimeout(r, 50))) {
      if (Date.now() > deadline) throw new Error('got no dropped error-log line after SIGHUP, want the reload line dropped and counted');
    }
    assert.equal((await request(proxyPort, { path: '/after-reload' })).status, 200, 'got the proxy not serving after a reload with stderr closed');
    const dropped = await droppedLines(adminPort, 'access');
    assert.ok(dropped >= 10 - workers, `got ${dropped} dropped access-log lines, want at least ${10 - workers}`);

    cli.child.kill('SIGTERM');
    assert.equal(await cli.exited, 0);
  });
}

test('--check, --help and simulate with stdout closed exit 0 without a stack trace; so does `--check | head -1`', { timeout: 60_000 }, async (t) => {
  const backend = await startBackend();
  t.after(() => backend.close());
  const config = writeConfig(backend, 8080, 9090, ['access_log = off']);
  for (const args of [['--check', '--config', config], ['--help'], ['simulate', 'a', '-n', '1000', '--config', config]]) {
    const cli = await spawnCli(t, args);
    cli.child.stdout!.destroy(); // closed before the command prints anything
    const code = await cli.exited;
    assert.equal(code, 0, `got exit code ${code} for ${args[0]} with stdout closed, want 0; stderr: ${cli.stderr()}`);
    assert.doesNotMatch(cli.stderr(), /\n\s+at |Error/, `got a stack trace for ${args[0]}: ${cli.stderr()}`);
  }

  const mainJs = await buildCli();
  const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) =>
    execFile('bash', ['-c', `"${process.execPath}" "${mainJs}" --check --config "${config}" | head -1; echo "exit=\${PIPESTATUS[0]}"`], { cwd: REPO }, (error, out, err) =>
      error === null ? resolve({ stdout: out, stderr: err }) : reject(error),
    ),
  );
  assert.match(stdout, /\nexit=0\n$/, `got ${JSON.stringify(stdout)}, want one line of the summary, then exit=0`);
  assert.equal(stdout.split('\n').length, 3, `got ${JSON.stringify(stdout)}, want exactly one line from head`);
  assert.doesNotMatch(stderr, /\n\s+at |Error/, `got a stack trace: ${stderr}`);
});

for (const workers of [1, 2]) {
  test(`access_log = stdout, workers = ${workers}: a reader that stalls does not keep the proxy alive after SIGTERM; it exits 0 about a second after "shut down" (a break test: 25 s and more, and with workers every one was killed at the deadline)`, { timeout: 60_000 }, async (t) => {
    const backend = await startBackend();
    t.after(() => backend.close());
    const [proxyPort, adminPort] = [await freePort(), await freePort()];
    const cli = await spawnCli(t, ['--config', writeConfig(backend, proxyPort, adminPort, ['access_log = stdout', `workers = ${workers}`, 'shutdown_timeout = 2s'])]);
    await waitForListener(proxyPort);
    await waitFor(() => cli.stderr().includes('admin listening'), 8000, 'the admin listener');
    cli.child.stdout!.pause(); // the reader stalls: the pipe fills, then node queues the lines
    const userAgent = 'u'.repeat(1000);
    await Promise.all(Array.from({ length: 10 }, async () => {
      for (let i = 0; i < 100; i++) assert.equal((await request(proxyPort, { path: '/', headers: { 'User-Agent': userAgent } })).status, 200);
    }));
    const stoppedAt = Date.now();
    cli.child.kill('SIGTERM');
    const exit = await Promise.race([cli.exited, new Promise<'still running'>((resolve) => setTimeout(resolve, 10_000, 'still running'))]);
    assert.equal(exit, 0, `got ${exit} 10 s after SIGTERM, want exit code 0: ${cli.stderr()}`);
    assert.ok(Date.now() - stoppedAt < 6000, `exited ${Date.now() - stoppedAt} ms after SIGTERM, want within shutdown_timeout (2 s) and the 1 s for the log`);
    assert.match(cli.stderr(), /shut down\n/);
    assert.doesNotMatch(cli.stderr(), /did not drain/, 'nothing was in flight: no worker may be reported as cut');
  });
}
