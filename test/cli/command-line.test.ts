/**
 * The command line as a user runs it (SPEC 2): `node dist/main.js` after `npm run build`.
 * Exit codes 0/1/2, `--check` summaries and errors with file:line:column, graceful SIGTERM.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { startBackend } from '../helpers/proxy-harness.js';
import { buildCli, REPO as root } from '../helpers/built-cli.js';
import { freePort, get, killAll, spawnCli, waitFor } from '../helpers/cli-process.js';

let main = '';
const dir = mkdtempSync(join(tmpdir(), 'proxy-cli-'));

before(async () => {
  main = await buildCli();
});

function run(args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [main, ...args], { cwd: root, encoding: 'utf8', input, timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function configFile(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

test('--check on the tutorial env.ini prints the routes and upstreams and exits 0', () => {
  const result = run(['--check']);
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /\[proxy\.a\] path \/a/);
  assert.match(result.stdout, /http:\/\/localhost:9001/);
  assert.match(result.stdout, /http:\/\/localhost:9002/);
});

test('--check on a broken file exits 1 with file:line:column and a suggestion', () => {
  const file = configFile('broken.ini', '[proxy.a]\npath = /a\npas = http://localhost:9001\n');
  const result = run(['--check', '--config', file]);
  assert.equal(result.status, 1);
  assert.match(result.stderr, new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:3:1: .*'pas'.*did you mean 'pass'`));
});

test('--check fails (exit 1) when the access_log file cannot be opened, as nginx -t does', () => {
  const file = configFile('badlog.ini', `[server]\naccess_log = ${join(dir, 'no-such-dir', 'x.log')}\n[proxy.a]\npath = /a\npass = http://localhost:9001\n`);
  const result = run(['--check', '--config', file]);
  assert.equal(result.status, 1, result.stdout);
  assert.match(result.stderr, /badlog\.ini:2:14: access_log '.*no-such-dir\/x\.log' cannot be opened for appending: ENOENT/);
});

test('--check and the start refuse an access_log that is a FIFO without a reader at once, at its file:line:column, instead of waiting for a reader (a break test: both hung)', () => {
  const fifo = join(dir, 'access.fifo');
  spawnSync('mkfifo', [fifo]);
  const file = configFile('fifolog.ini', `[server]\nlisten = 127.0.0.1:0\naccess_log = ${fifo}\n[proxy.a]\npath = /a\npass = http://localhost:9001\n`);
  for (const args of [['--check', '--config', file], ['--config', file]]) {
    const result = spawnSync(process.execPath, [main, ...args], { cwd: root, encoding: 'utf8', timeout: 10_000 });
    assert.equal(result.status, 1, `${args.join(' ')}: got status ${result.status} (signal ${result.signal}), want 1`);
    assert.match(result.stderr, /fifolog\.ini:3:14: access_log '.*access\.fifo' cannot be opened for appending: ENXIO, a FIFO without a reader or a socket \(for a pipe or the journal, write access_log = stdout\)/);
  }
});

test('trusted_proxies = 0.0.0.0/0: --check warns at the item and exits 0; the start (workers = 2) warns once in the log', async (t) => {
  const port = await freePort();
  const file = configFile('trust-all.ini', `[server]\nlisten = 127.0.0.1:${port}\naccess_log = off\nworkers = 2\ntrusted_proxies = 10.0.0.1, 0.0.0.0/0\n[proxy.a]\npath = /\npass = http://127.0.0.1:9\n`);
  const warning = `warning: ${file}:5:29: [server] trusted_proxies 0.0.0.0/0 trusts every IPv4 peer: any client can then choose its own client IP with X-Forwarded-For, which defeats access and rate_limit (list only the proxies in front of this one)\n`;
  const check = run(['--check', '--config', file]);
  assert.equal(check.status, 0, check.stderr);
  assert.equal(check.stderr, warning, `--check: got stderr ${JSON.stringify(check.stderr)}, want the warning`);

  const cli = await spawnCli(file);
  t.after(() => killAll([cli.pid]));
  const served = await waitFor('an answer from a worker', () => get(port, '/'));
  assert.equal(served.status, 502, 'the upstream refuses: a worker answered 502');
  const count = cli.stderr().split(warning).length - 1;
  assert.equal(count, 1, `start-up: got the warning ${count} times, want once; stderr:\n${cli.stderr()}`);
  process.kill(cli.pid, 'SIGTERM');
  assert.equal((await cli.exited).code, 0);
});

test('a missing config file exits 1 with a clear message', () => {
  const result = run(['--config', join(dir, 'nope.ini')]);
  assert.equal(result.status, 1);
  assert.match(result.stderr, /nope\.ini/);
});

test('--help prints the whole usage to stdout and exits 0; --version exits 0', () => {
  const help = run(['--help']);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /^Usage:\n[^]*\n {2}node dist\/main\.js --help \| --version\n[^]*Exit codes: 0 success, 1 configuration error, 2 usage error\.\n/);
  assert.equal(help.stderr, '');
  const version = run(['--version']);
  assert.equal(version.status, 0);
  assert.match(version.stdout, /^\d+\.\d+\.\d+\n$/);
});

test('a usage error is one line on stderr, the reason (with "did you mean" for a typo) and where the usage is, exit 2; not the whole usage (found by a break test)', () => {
  const see = "; see 'node dist/main.js --help'\n";
  const cases: [string[], string][] = [
    [['--confg', 'env.ini'], "error: unknown option '--confg' (did you mean --config?)"],
    [['--chek'], "error: unknown option '--chek' (did you mean --check?)"],
    [['--confg=env.ini'], "error: unknown option '--confg=env.ini' (did you mean --config?)"],
    [['simulate', 'a', '--clientip', '10.0.0.1'], "error: unknown option '--clientip' (did you mean --client-ip?)"],
    [['--frobnicate'], "error: unknown option '--frobnicate'"],
    [['-x'], "error: unknown option '-x'"],
    [['simulte', 'a'], "error: unexpected argument 'simulte' (did you mean simulate?)"],
    [['simulate'], 'error: simulate needs a ROUTE name'],
  ];
  for (const [args, reason] of cases) {
    const result = run(args);
    assert.equal(result.status, 2, `${args.join(' ')}: got exit ${result.status}, want 2`);
    assert.equal(result.stderr, `${reason}${see}`, `${args.join(' ')}: got stderr ${JSON.stringify(result.stderr)}, want ${JSON.stringify(reason + see)}`);
    assert.equal(result.stdout, '', `${args.join(' ')}: got stdout ${JSON.stringify(result.stdout)}, want nothing`);
  }
});

test('demo --listen takes a listen address; a bad one is a usage error (exit 2)', () => {
  const bad = run(['demo', '--listen', 'nowhere']);
  assert.equal(bad.status, 2, `got exit code ${bad.status}, want 2: ${bad.stderr}`);
  assert.match(bad.stderr, /--listen: missing port in listen address 'nowhere'/);
  const elsewhere = run(['--check', '--listen', '0.0.0.0:8080']);
  assert.equal(elsewhere.status, 2, `got exit code ${elsewhere.status} for --listen outside demo, want 2`);
});

test('SIGTERM lets an in-flight request finish, then exits 0', async (t) => {
  let release: (() => void) | undefined;
  const backend = await startBackend((_req, res) => {
    release = () => res.end('finished');
  });
  t.after(() => backend.close());
  const file = configFile('run.ini', `[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy.a]\npath = /\npass = ${backend.url}\n`);
  const child = spawn(process.execPath, [main, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let stderr = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /listening on [^\s]+:(\d+)/.exec(stderr);
      if (match) resolve(Number(match[1]));
    });
    child.once('exit', () => reject(new Error(`exited early: ${stderr}`)));
  });
  const response = new Promise<string>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
  while (release === undefined) await new Promise((r) => setTimeout(r, 10));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(child.exitCode, null, 'the proxy must wait for the in-flight request');
  release();
  assert.equal(await response, 'finished');
  assert.equal(await exited, 0);
});
