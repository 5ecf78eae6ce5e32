/**
 * The heartbeat client against a real admin listener: the first PUT registers at once, each
 * `--every` refreshes (injected timers), a failure is logged and retried, stop() deregisters; and
 * the command line parses `heartbeat` with its flags.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { startLocalAdmin } from '../../src/admin/local-admin.js';
import { startHeartbeat } from '../../src/cli/heartbeat.js';
import { parseArguments } from '../../src/cli/arguments.js';
import { UsageError } from '../../src/errors.js';
import { startBackend } from '../helpers/proxy-harness.js';
import { FakeClock } from './fake-clock.js';

test('heartbeat registers, refreshes every period, retries after failures and deregisters on stop', async () => {
  const configured = await startBackend();
  const registered = await startBackend();
  const config = parseConfig(
    `[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[admin]\nlisten = 127.0.0.1:0\ntoken = s3cret\n[proxy.a]\npath = /a\npass = ${configured.url}\n`,
    't.ini',
  );
  const proxy = new ProxyServer(config, { deps: { log: () => {} } });
  await proxy.listen(0);
  const registryClock = new FakeClock();
  const admin = await startLocalAdmin(proxy, config.admin!, () => {}, { port: 0, registryNow: registryClock.now, registryTimers: registryClock });
  const beatClock = new FakeClock();
  const logs: string[] = [];
  let puts = 0;
  let shouldFail = false;
  const countingFetch: typeof fetch = async (input, init) => {
    if (init?.method === 'PUT') {
      puts++;
      if (shouldFail) throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 127.0.0.1:9090') }); // as undici's fetch fails
    }
    return fetch(input, init);
  };
  const options = { admin: `http://127.0.0.1:${admin.port}`, token: 's3cret', route: 'a', url: registered.url, weight: 3, everyMs: 3_000, ttlMs: 10_000 };
  const heartbeat = startHeartbeat(options, { fetch: countingFetch, timers: beatClock, log: (line) => logs.push(line) });
  try {
    assert.equal(await heartbeat.firstBeat, true, `got a refused first beat: ${logs.join('; ')}`);
    const entry = admin.registry.entries('a')[0];
    assert.equal(entry?.config.origin, registered.url);
    assert.equal(entry?.config.weight, 3);
    assert.equal(entry?.ttlMs, 10_000);
    assert.equal(proxy.routes[0]!.upstreams.length, 2);

    const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 50));
    await settle(); // the next beat is armed after the first one settles
    registryClock.advance(3_000);
    beatClock.advance(3_000);
    await settle();
    assert.equal(puts, 2, `got ${puts} PUTs, want 2 after one period`);
    assert.equal(admin.registry.entries('a')[0]?.refreshedAtMs, registryClock.nowMs, 'got no refresh');

    shouldFail = true;
    beatClock.advance(3_000);
    await settle();
    assert.equal(puts, 3);
    assert.ok(logs.some((line) => /failed: fetch failed \(connect ECONNREFUSED 127\.0\.0\.1:9090\); retrying in 3000ms/.test(line)), `got logs ${logs.join('; ')}`);
    shouldFail = false;
    beatClock.advance(3_000);
    await settle();
    assert.equal(puts, 4, `got ${puts} PUTs, want the heartbeat to keep trying`);

    assert.equal(await heartbeat.stop(), true);
    assert.equal(admin.registry.entries('a').length, 0, 'got the upstream still registered after stop');
    assert.equal(proxy.routes[0]!.upstreams.length, 1);
    beatClock.advance(30_000);
    await settle();
    assert.equal(puts, 4, 'got a PUT after stop');
  } finally {
    await admin.stop();
    await proxy.close(100);
    await configured.close();
    await registered.close();
  }
});

test('heartbeat command line: flags, defaults, and errors', () => {
  const command = parseArguments(['heartbeat', '--admin', 'http://127.0.0.1:9090', '--token', 'T', '--route', 'a', '--url', 'http://127.0.0.1:9003', '--weight', '2']);
  assert.deepEqual(command, {
    kind: 'heartbeat',
    admin: 'http://127.0.0.1:9090',
    token: 'T',
    route: 'a',
    url: 'http://127.0.0.1:9003',
    weight: 2,
    everyMs: 3_000,
    ttlMs: 10_000,
  });
  const custom = parseArguments(['heartbeat', '--admin', 'http://h:1', '--token', 'T', '--route', 'a', '--url', 'http://x:1', '--every', '500ms', '--ttl', '2s']);
  assert.equal(custom.kind === 'heartbeat' && custom.everyMs, 500);
  const withToken = ['--token', 'T'];
  for (const [argv, reason] of [
    [['heartbeat', '--admin', 'http://h:1', '--route', 'a', ...withToken], /needs --url/],
    [['heartbeat', '--admin', 'nope', '--route', 'a', '--url', 'http://x:1', ...withToken], /--admin must be a URL/],
    [['heartbeat', '--admin', 'http://h:1', '--route', 'a', '--url', 'http://x:1', '--weight', '0', ...withToken], /--weight/],
    [['heartbeat', '--admin', 'http://h:1', '--route', 'a', '--url', 'http://x:1', '--every', '10s', '--ttl', '5s', ...withToken], /--ttl/],
    [['heartbeat', '--admin', 'http://h:1', '--route', 'a', '--url', 'http://x:1', '-n', '3', ...withToken], /-n/],
  ] as const) {
    assert.throws(() => parseArguments(argv), (error: unknown) => error instanceof UsageError && reason.test(error.message), `got no UsageError matching ${reason} for ${argv.join(' ')}`);
  }
  const savedToken = process.env['PROXY_ADMIN_TOKEN'];
  delete process.env['PROXY_ADMIN_TOKEN'];
  try {
    assert.throws(
      () => parseArguments(['heartbeat', '--admin', 'http://h:1', '--route', 'a', '--url', 'http://x:1']),
      /heartbeat needs --token \(or the PROXY_ADMIN_TOKEN environment variable\)/,
    );
  } finally {
    if (savedToken !== undefined) process.env['PROXY_ADMIN_TOKEN'] = savedToken;
  }
});

test('a wrong token is a permanent refusal: the heartbeat stops instead of retrying forever', async () => {
  const configured = await startBackend();
  const config = parseConfig(
    `[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[admin]\nlisten = 127.0.0.1:0\ntoken = s3cret\n[proxy.a]\npath = /a\npass = ${configured.url}\n`,
    't.ini',
  );
  const proxy = new ProxyServer(config, { deps: { log: () => {} } });
  await proxy.listen(0);
  const admin = await startLocalAdmin(proxy, config.admin!, () => {}, { port: 0 });
  const beatClock = new FakeClock();
  let puts = 0;
  const countingFetch: typeof fetch = async (input, init) => {
    if (init?.method === 'PUT') puts++;
    return fetch(input, init);
  };
  const options = { admin: `http://127.0.0.1:${admin.port}`, token: 'wrong', route: 'a', url: 'http://127.0.0.1:9', weight: undefined, everyMs: 3_000, ttlMs: 10_000 };
  const heartbeat = startHeartbeat(options, { fetch: countingFetch, timers: beatClock, log: () => {} });
  try {
    assert.equal(await heartbeat.firstBeat, false);
    assert.match(await heartbeat.refused, /refused: 401 .*; not retrying/);
    beatClock.advance(30_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(puts, 1, `got ${puts} PUTs, want no retry after a 401`);
  } finally {
    await admin.stop();
    await proxy.close(100);
    await configured.close();
  }
});
