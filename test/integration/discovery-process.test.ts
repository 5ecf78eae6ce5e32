/**
 * DNS discovery in one process (`workers = 1`, SPEC 7), as users run it (`node dist/main.js` from a
 * private build) with the test DNS responder on loopback: a name that does not resolve at start-up
 * is not fatal (503 until it resolves, then 200 from the address); SIGHUP with a second discovery
 * line and a new `resolver_timeout` starts its lookups without a restart warning; SIGTERM exits 0 at once (discovery keeps nothing alive). And `simulate`
 * on a discovery route prints the addresses of one lookup and exits, or, when no name resolves,
 * the one line saying so (exit 1).
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { buildCli, REPO } from '../helpers/built-cli.js';
import { addressBackend, freePort, get, killAll, spawnCli, waitFor, writeConfig } from '../helpers/cli-process.js';
import { startDnsResponder } from '../helpers/dns-responder.js';

let mainJs = '';
before(async () => {
  mainJs = await buildCli();
});

const configText = (proxyPort: number, dnsPort: number, passLines: readonly string[], resolverTimeout = '500ms'): string =>
  ['[server]', `listen = 127.0.0.1:${proxyPort}`, 'access_log = off', `resolver = 127.0.0.1:${dnsPort}`, `resolver_timeout = ${resolverTimeout}`, '[proxy.api]', 'path = /', ...passLines.map((line) => `pass = ${line}`), ''].join('\n');

test('one process: 503 while the name does not resolve, 200 once it does; SIGHUP adds a line; SIGTERM exits 0 at once', { timeout: 60_000 }, async () => {
  const dns = await startDnsResponder();
  const backend = await addressBackend('127.0.0.2', 0);
  const port = (backend.address() as AddressInfo).port;
  dns.set('api.test', 'A', 'nxdomain');
  dns.set('api.test', 'AAAA', 'nxdomain');
  dns.set('more.test', 'A', [{ address: '127.0.0.2', ttl: 60 }]);
  dns.set('more.test', 'AAAA', 'nodata');
  const proxyPort = await freePort();
  const file = writeConfig(configText(proxyPort, dns.port, [`http://api.test:${port} resolve`]));
  const cli = await spawnCli(file);
  try {
    await cli.line(/proxy listening on/);
    const early = await get(proxyPort, '/');
    assert.equal(early.status, 503, `got ${early.status} before the name resolves, want 503`);

    dns.set('api.test', 'A', [{ address: '127.0.0.2', ttl: 1 }]);
    dns.set('api.test', 'AAAA', 'nodata');
    // The NXDOMAIN answer was retried after 1 s (backoff), so the address is in within a few seconds.
    const served = await waitFor('200 from 127.0.0.2', async () => {
      const answer = await get(proxyPort, '/');
      return answer.status === 200 ? answer : undefined;
    });
    assert.equal(served.body, '127.0.0.2');

    // A second line and a new resolver_timeout: both apply at the reload (no "only after a restart").
    writeFileSync(file, configText(proxyPort, dns.port, [`http://api.test:${port} resolve`, `http://more.test:${port} resolve`], '700ms'));
    process.kill(cli.pid, 'SIGHUP');
    await cli.line(/reloaded /);
    assert.doesNotMatch(cli.stderr(), /only after a restart/, 'got a restart warning for resolver_timeout, which a reload applies');
    await waitFor('a question for more.test', async () => (dns.count('more.test', 'A') > 0 ? true : undefined));

    const stoppingAt = Date.now();
    process.kill(cli.pid, 'SIGTERM');
    const { code } = await cli.exited;
    assert.equal(code, 0, `got exit code ${code}, want 0; stderr:\n${cli.stderr()}`);
    assert.ok(Date.now() - stoppingAt < 2_000, `got the exit ${Date.now() - stoppingAt} ms after SIGTERM, want at once`);
  } finally {
    killAll([cli.pid]);
    await new Promise((resolve) => backend.close(resolve));
    await dns.close();
  }
});

/** `node dist/main.js simulate ...args`, asynchronously: the responder answers from this process's event loop. */
function runSimulateCli(args: readonly string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [mainJs, 'simulate', ...args], { cwd: REPO, encoding: 'utf8', timeout: 10_000 }, (error, stdout, stderr) =>
      resolve({ status: error === null ? 0 : (error.code as number | null), stdout, stderr }),
    );
  });
}

test('simulate on a discovery route whose name does not resolve: one line on stderr naming it, nothing on stdout, exit 1 (found by a break test: "no upstream" and a table of - picks, exit 0)', async () => {
  const dns = await startDnsResponder();
  try {
    dns.set('gone.test', 'A', 'nxdomain');
    dns.set('gone.test', 'AAAA', 'nxdomain');
    const file = writeConfig(configText(8080, dns.port, ['http://gone.test:8080 resolve']));
    const result = await runSimulateCli(['api', '-n', '2', '--config', file]);
    assert.equal(result.status, 1, `got exit ${result.status}, want 1; stdout:\n${result.stdout}`);
    assert.equal(result.stdout, '', `got stdout:\n${result.stdout}want nothing`);
    assert.match(result.stderr, /^[^\n]*:8:8: route api has no upstream to simulate: its upstreams are known only from DNS, and gone\.test \(nxdomain: [^)\n]*\) did not resolve\n$/, `got stderr:\n${result.stderr}`);
  } finally {
    await dns.close();
  }
});

test('simulate on a discovery route prints the looked-up addresses, and a name that fails as could not resolve', async () => {
  const dns = await startDnsResponder();
  try {
    dns.set('api.test', 'A', [{ address: '127.0.0.2', ttl: 5 }, { address: '127.0.0.3', ttl: 5 }]);
    dns.set('api.test', 'AAAA', 'nodata');
    dns.set('gone.test', 'A', 'nxdomain');
    dns.set('gone.test', 'AAAA', 'nxdomain');
    const file = writeConfig(configText(8080, dns.port, ['http://api.test:8080 resolve', 'http://gone.test:8080 resolve']));
    const result = await runSimulateCli(['api', '-n', '2', '--config', file]);
    assert.equal(result.status, 0, `got exit ${result.status}, want 0; stderr:\n${result.stderr}`);
    assert.match(result.stdout, /^could not resolve gone\.test: nxdomain/m);
    assert.match(result.stdout, /^ {2}a {2}http:\/\/127\.0\.0\.2:8080 {2}weight=1 from api\.test$/m);
    assert.match(result.stdout, /^ {2}b {2}http:\/\/127\.0\.0\.3:8080 {2}weight=1 from api\.test$/m);
    assert.match(result.stdout, /^sequence: a b$/m);
  } finally {
    await dns.close();
  }
});
