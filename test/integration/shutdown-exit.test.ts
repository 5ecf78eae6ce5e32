/**
 * The process ends as soon as its shutdown is complete (SPEC 2): once `node dist/main.js` prints
 * `shut down` after a SIGTERM, nothing may keep its event loop alive (a timer, a socket, a DNS
 * query). Measured as users run it (the private build of built-cli.ts): the time between the
 * `shut down` line reaching stderr and the process's 'exit', with health checks on, after a
 * request served, for one process with a plain and a TLS listener, for `workers = 2` (the primary
 * and its workers), and with a `resolve` line whose DNS server never answers: its lookup in flight
 * used to hold the process up to `resolver_timeout` after `shut down`, and c-ares's retry timer a
 * while longer (nginx and Go's `Shutdown` return once their listeners and connections are closed).
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { buildCli, REPO } from '../helpers/built-cli.js';
import { addressBackend, freePort, get, isAlive, killAll, spawnCli, waitFor, writeConfig, type CliProcess } from '../helpers/cli-process.js';
import { startDnsResponder } from '../helpers/dns-responder.js';

/** The longest the process may live after its `shut down` line, ms. */
const EXIT_AFTER_SHUT_DOWN_MS = 500;
const TLS_FIXTURES = join(REPO, 'test', 'fixtures', 'tls');

before(async () => {
  await buildCli();
});

/** When `shut down` reached stderr (performance.now), recorded as the chunk arrives rather than polled. */
function shutDownSeenAt(cli: CliProcess): Promise<number> {
  return new Promise((resolve) => {
    let text = '';
    cli.child.stderr!.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (/^shut down/m.test(text)) resolve(performance.now());
    });
  });
}

/** SIGTERM, then asserts exit code 0 within EXIT_AFTER_SHUT_DOWN_MS of the `shut down` line. */
async function assertPromptExit(cli: CliProcess): Promise<void> {
  const shutDown = shutDownSeenAt(cli);
  const exitedAt = cli.exited.then((exit) => ({ ...exit, at: performance.now() }));
  process.kill(cli.pid, 'SIGTERM');
  const exit = await exitedAt;
  assert.equal(exit.code, 0, `got exit code ${exit.code} (signal ${exit.signal}), want 0; stderr:\n${cli.stderr()}`);
  // stderr's last chunk may be read just after 'exit': wait for it a little.
  const shutDownAt = await Promise.race([shutDown, new Promise<undefined>((resolve) => setTimeout(resolve, 1000))]);
  assert.ok(shutDownAt !== undefined, `got no 'shut down' line before the exit; stderr:\n${cli.stderr()}`);
  const lingerMs = Math.round(exit.at - shutDownAt);
  assert.ok(lingerMs < EXIT_AFTER_SHUT_DOWN_MS, `got the exit ${lingerMs} ms after 'shut down', want < ${EXIT_AFTER_SHUT_DOWN_MS} ms; stderr:\n${cli.stderr()}`);
}

/** One GET over TLS on a new connection (the fixtures' self-signed default certificate). */
function getTls(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path, agent: false, rejectUnauthorized: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

const routeLines = (backendPort: number): string[] => ['[proxy.a]', 'path = /', `pass = http://127.0.0.1:${backendPort}`, 'health_check = on', 'health_interval = 1s'];

test('one process with a plain and a TLS listener and health checks exits at once after shut down', { timeout: 60_000 }, async () => {
  const backend = await addressBackend('127.0.0.1', 0);
  const backendPort = (backend.address() as AddressInfo).port;
  const file = writeConfig(
    [
      '[server]',
      'listen = 127.0.0.1:0',
      'tls_listen = 127.0.0.1:0',
      `tls_cert = ${join(TLS_FIXTURES, 'default.pem')} ${join(TLS_FIXTURES, 'default.key')}`,
      'access_log = stdout',
      ...routeLines(backendPort),
      '',
    ].join('\n'),
  );
  const cli = await spawnCli(file);
  try {
    const [, plainPort, tlsPort] = await cli.line(/proxy listening on [^\s]+:(\d+) \(http\) and [^\s]+:(\d+) \(https\)/);
    const plain = await get(Number(plainPort), '/x');
    assert.equal(plain.status, 200, `got ${plain.status} over http, want 200`);
    const secure = await getTls(Number(tlsPort), '/x');
    assert.equal(secure, 200, `got ${secure} over https, want 200`);
    await assertPromptExit(cli);
  } finally {
    killAll([cli.pid]);
    await new Promise((resolve) => backend.close(resolve));
  }
});

test('workers = 2: the primary exits at once after shut down, and no worker outlives it', { timeout: 60_000 }, async () => {
  const backend = await addressBackend('127.0.0.1', 0);
  const backendPort = (backend.address() as AddressInfo).port;
  const proxyPort = await freePort();
  const file = writeConfig(['[server]', `listen = 127.0.0.1:${proxyPort}`, 'workers = 2', 'access_log = off', ...routeLines(backendPort), ''].join('\n'));
  const cli = await spawnCli(file);
  const workerPids: number[] = [];
  try {
    await cli.line(/proxy on /);
    // The primary's line comes before its workers listen: the first request that is answered.
    const plain = await waitFor('a worker answering', () => get(proxyPort, '/x'));
    assert.equal(plain.status, 200, `got ${plain.status}, want 200`);
    await assertPromptExit(cli);
    for (const match of cli.stderr().matchAll(/worker (\d+):/g)) workerPids.push(Number(match[1]));
    const alive = workerPids.filter(isAlive);
    assert.deepEqual(alive, [], `got workers ${alive.join(', ')} still running after the primary's exit, want none`);
  } finally {
    killAll([cli.pid, ...workerPids]);
    await new Promise((resolve) => backend.close(resolve));
  }
});

test('a DNS lookup in flight to a silent server does not hold the process after shut down (resolver_timeout 5s)', { timeout: 60_000 }, async () => {
  const dns = await startDnsResponder();
  dns.set('api.test', 'A', 'silence');
  dns.set('api.test', 'AAAA', 'silence');
  const file = writeConfig(
    ['[server]', 'listen = 127.0.0.1:0', 'access_log = off', `resolver = 127.0.0.1:${dns.port}`, 'resolver_timeout = 5s', '[proxy.api]', 'path = /', 'pass = http://api.test:80 resolve', ''].join('\n'),
  );
  const cli = await spawnCli(file);
  try {
    const [, port] = await cli.line(/proxy listening on [^\s]+:(\d+)/);
    const early = await get(Number(port), '/');
    assert.equal(early.status, 503, `got ${early.status} while the name does not resolve, want 503`);
    assert.ok(dns.count('api.test', 'A') > 0, 'the lookup is in flight at the SIGTERM');
    await assertPromptExit(cli);
  } finally {
    killAll([cli.pid]);
    await dns.close();
  }
});

test('SIGUSR2 is ignored with a log line, and SIGQUIT drains like SIGTERM (nginx\'s graceful stop): a request in flight finishes, exit 0', { timeout: 60_000 }, async () => {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const backend = http.createServer((req, res) => {
    if (req.url === '/slow') void released.then(() => res.end('slow done'));
    else res.end('ok');
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const backendPort = (backend.address() as AddressInfo).port;
  const file = writeConfig(['[server]', 'listen = 127.0.0.1:0', 'access_log = off', '[proxy.a]', 'path = /', `pass = http://127.0.0.1:${backendPort}`, ''].join('\n'));
  const cli = await spawnCli(file);
  try {
    const [, port] = await cli.line(/proxy listening on [^\s]+:(\d+)/);
    process.kill(cli.pid, 'SIGUSR2');
    await cli.line(new RegExp(`SIGUSR2 ignored by process ${cli.pid}: SIGHUP reloads the config; SIGTERM, SIGINT and SIGQUIT stop gracefully`));
    assert.equal((await get(Number(port), '/x')).status, 200, 'still serving after SIGUSR2');

    const slow = get(Number(port), '/slow');
    await new Promise((resolve) => setTimeout(resolve, 100)); // the request reaches the backend
    const exited = cli.exited;
    process.kill(cli.pid, 'SIGQUIT');
    await cli.line(/SIGQUIT: no longer accepting connections; waiting for in-flight requests/);
    release();
    const answer = await slow;
    assert.deepEqual([answer.status, answer.body], [200, 'slow done'], 'the request in flight at SIGQUIT finished');
    const exit = await exited;
    assert.equal(exit.code, 0, `got exit code ${exit.code} (signal ${exit.signal}), want 0; stderr:\n${cli.stderr()}`);
  } finally {
    killAll([cli.pid]);
    release();
    await new Promise((resolve) => backend.close(resolve));
  }
});
