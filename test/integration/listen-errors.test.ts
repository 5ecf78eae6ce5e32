/**
 * A listener that cannot be opened is a configuration error (exit 1) with one line saying which
 * address and what the failure means, never a crash with a stack trace (`node dist/main.js` as
 * users run it): a port another process holds (EADDRINUSE) and an address that is none of this
 * host's (EADDRNOTAVAIL; 192.0.2.1 is TEST-NET-1, never assigned; nothing is sent to it).
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { buildCli, REPO } from '../helpers/built-cli.js';
import { killAll, spawnCli, writeConfig } from '../helpers/cli-process.js';

before(async () => {
  await buildCli();
});

const config = (listen: string): string => writeConfig(['[server]', `listen = ${listen}`, 'access_log = off', '[proxy.a]', 'path = /', 'pass = http://127.0.0.1:9', ''].join('\n'));

test('a busy port and an address of no interface: exit 1 with one error line naming the address and the reason, no stack trace', { timeout: 60_000 }, async () => {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const busyPort = (holder.address() as AddressInfo).port;
  const cases: [string, RegExp][] = [
    [`127.0.0.1:${busyPort}`, new RegExp(`^error: cannot listen on 127\\.0\\.0\\.1:${busyPort}: EADDRINUSE, another process listens on that address and port \\(check listen, tls_listen and \\[admin\\] listen\\)$`, 'm')],
    ['192.0.2.1:8080', /^error: cannot listen on 192\.0\.2\.1:8080: EADDRNOTAVAIL, that address is none of this host's \(see `ip addr`\) \(check listen, tls_listen and \[admin\] listen\)$/m],
  ];
  try {
    for (const [listen, line] of cases) {
      const cli = await spawnCli(config(listen));
      try {
        const exit = await cli.exited;
        assert.equal(exit.code, 1, `listen = ${listen}: got exit ${exit.code} (signal ${exit.signal}), want 1; stderr:\n${cli.stderr()}`);
        assert.match(cli.stderr(), line, `listen = ${listen}`);
        assert.doesNotMatch(cli.stderr(), /fatal|\n\s+at /, `listen = ${listen}: a stack trace in stderr:\n${cli.stderr()}`);
      } finally {
        killAll([cli.pid]);
      }
    }
  } finally {
    await new Promise((resolve) => holder.close(resolve));
  }
});

test('workers = 2: a tls_listen that cannot be opened while listen can is a start failure: exit 1 with the reason, not workers replaced without end', { timeout: 60_000 }, async () => {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const busyPort = (holder.address() as AddressInfo).port;
  const file = writeConfig(
    [
      '[server]',
      'listen = 127.0.0.1:0',
      `tls_listen = 127.0.0.1:${busyPort}`,
      `tls_cert = ${join(REPO, 'test', 'fixtures', 'tls', 'default.pem')} ${join(REPO, 'test', 'fixtures', 'tls', 'default.key')}`,
      'workers = 2',
      'access_log = off',
      '[proxy.a]',
      'path = /',
      'pass = http://127.0.0.1:9',
      '',
    ].join('\n'),
  );
  const cli = await spawnCli(file);
  try {
    const exit = await Promise.race([cli.exited, new Promise<undefined>((resolve) => setTimeout(resolve, 20_000))]);
    assert.ok(exit !== undefined, `the primary was still running after 20 s; stderr:\n${cli.stderr()}`);
    assert.equal(exit.code, 1, `got exit ${exit.code} (signal ${exit.signal}), want 1; stderr:\n${cli.stderr()}`);
    assert.match(cli.stderr(), new RegExp(`^error: cannot listen on 127\\.0\\.0\\.1:${busyPort}: EADDRINUSE, another process listens on that address and port .*\\)$`, 'm'));
    assert.doesNotMatch(cli.stderr(), /proxy on /, 'the start-up line says the proxy is on, but no worker started');
    assert.doesNotMatch(cli.stderr(), /starting a new one/, 'a worker that never had every listener is not a started worker to replace');
  } finally {
    killAll([cli.pid]);
    await new Promise((resolve) => holder.close(resolve));
  }
});

/**
 * Starts the proxy with `busyPort` held by another socket, in a single process and with
 * `workers = 2` (`lines(busyPort)` is the config for one), and asserts the one listen-failure line
 * on stderr and exit 1 in both.
 */
async function assertBusyPortAlone(lines: (busyPort: number) => string[]): Promise<void> {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const busyPort = (holder.address() as AddressInfo).port;
  const want = `error: cannot listen on 127.0.0.1:${busyPort}: EADDRINUSE, another process listens on that address and port (check listen, tls_listen and [admin] listen)\n`;
  try {
    for (const workers of [[], ['workers = 2']]) {
      const [server, ...rest] = lines(busyPort);
      const file = writeConfig([server!, ...workers, ...rest, ''].join('\n'));
      const cli = await spawnCli(file);
      const mode = workers.join('') || 'one process';
      try {
        const exit = await Promise.race([cli.exited, new Promise<undefined>((resolve) => setTimeout(resolve, 20_000))]);
        assert.ok(exit !== undefined, `${mode}: still running after 20 s; stderr:\n${cli.stderr()}`);
        assert.equal(exit.code, 1, `${mode}: got exit ${exit.code} (signal ${exit.signal}), want 1`);
        assert.equal(cli.stderr(), want, `${mode}: got stderr:\n${cli.stderr()}want:\n${want}`);
      } finally {
        killAll([cli.pid]);
      }
    }
  } finally {
    await new Promise((resolve) => holder.close(resolve));
  }
}

test('a busy port, with workers unset and with workers = 2: the same one line on stderr (the listen failure), exit 1, and no start-up line before it (found by a break test)', { timeout: 60_000 }, async () => {
  await assertBusyPortAlone((busyPort) => ['[server]', `listen = 127.0.0.1:${busyPort}`, 'access_log = off', '[proxy.a]', 'path = /', 'pass = http://127.0.0.1:9']);
});

test('a busy [admin] listen, with workers unset and with workers = 2: the same one line on stderr (the listen failure), exit 1, and no start-up line before it (found by a break test)', { timeout: 60_000 }, async () => {
  await assertBusyPortAlone((busyPort) => ['[server]', 'listen = 127.0.0.1:0', 'access_log = off', '[admin]', `listen = 127.0.0.1:${busyPort}`, '[proxy.a]', 'path = /', 'pass = http://127.0.0.1:9']);
});

test('with [admin], a single process logs the start-up line first and then the admin listener, in the cluster primary order', { timeout: 30_000 }, async () => {
  const file = writeConfig(['[server]', 'listen = 127.0.0.1:0', 'access_log = off', '[admin]', 'listen = 127.0.0.1:0', '[proxy.a]', 'path = /', 'pass = http://127.0.0.1:9', ''].join('\n'));
  const cli = await spawnCli(file);
  try {
    await cli.line(/admin listening on/);
    const lines = cli.stderr().split('\n').filter((line) => /listening on/.test(line)).map((line) => line.split(' ')[0]);
    assert.deepEqual(lines, ['proxy', 'admin'], `got stderr:\n${cli.stderr()}want the proxy line, then the admin line`);
  } finally {
    killAll([cli.pid]);
  }
});
