/**
 * ProxyServer.reload: what it applies, what it keeps (upstream state, and the health checker's
 * streaks, schedule and probes in flight), and what it says needs a restart.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../src/config/load-config.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { FakeProbe, FakeTimers, flush, OK, REFUSED } from '../helpers/health-fakes.js';

const base = '[server]\naccess_log = off\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\npass = http://127.0.0.1:9002\n';

test('reload keeps the runtime state of unchanged upstreams and warns only about settings it cannot apply', () => {
  const proxy = new ProxyServer(parseConfig(base, 'env.ini'), { deps: { log: () => {} } });
  const [a] = proxy.routes[0]!.upstreams;
  a!.requestsTotal = 7;

  // trusted_proxies applies at once; moving access_log's line is not a change.
  const trusted = proxy.reload(parseConfig(`\n[server]\ntrusted_proxies = 10.0.0.0/8\naccess_log = off\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\npass = http://127.0.0.1:9003\n`, 'env.ini'));
  assert.deepEqual(trusted, { kept: 1, added: 1, removed: 1, warnings: [] });
  assert.equal(proxy.routes[0]!.upstreams[0], a, 'the same Upstream object, with its counters');
  assert.equal(a!.requestsTotal, 7);

  const restart = proxy.reload(parseConfig(`[server]\naccess_log = off\nheader_timeout = 3s\n[admin]\nlisten = 127.0.0.1:9090\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\n`, 'env.ini'));
  assert.deepEqual(restart.warnings, [
    '[server] header_timeout: a new value takes effect only after a restart',
    '[admin] changes take effect only after a restart',
  ]);
});

test('a new listen or tls_listen address is warned about against the address the proxy started with, not the last reload', () => {
  const at = (listen: string): string => base.replace('[server]\n', `[server]\nlisten = ${listen}\n`);
  const proxy = new ProxyServer(parseConfig(at('127.0.0.1:8080'), 'env.ini'), { deps: { log: () => {} } });
  assert.deepEqual(proxy.reload(parseConfig(at('127.0.0.1:8081'), 'env.ini')).warnings, ['a new [server] listen address takes effect only after a restart']);
  assert.deepEqual(proxy.reload(parseConfig(at('127.0.0.1:8080'), 'env.ini')).warnings, [], 'back to the address listened on: nothing to restart for');
});

test('the restart warnings compare with the config the proxy started with: a setting put back needs nothing, a change still waiting is said again, a line moved is no change', () => {
  const at = (headerTimeout: string, acmeAbove = ''): string =>
    `[server]\naccess_log = off\nheader_timeout = ${headerTimeout}\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\n${acmeAbove}[admin]\nlisten = 127.0.0.1:9090\n`;
  const restart = '[server] header_timeout: a new value takes effect only after a restart';
  const proxy = new ProxyServer(parseConfig(at('3s'), 'env.ini'), { deps: { log: () => {} } });
  assert.deepEqual(proxy.reload(parseConfig(at('9s'), 'env.ini')).warnings, [restart]);
  assert.deepEqual(proxy.reload(parseConfig(at('9s'), 'env.ini')).warnings, [restart], 'still waiting for a restart: said again');
  assert.deepEqual(proxy.reload(parseConfig(at('3s'), 'env.ini')).warnings, [], 'back as it started: nothing to restart for');
  assert.deepEqual(proxy.reload(parseConfig(at('3s', '\n\n'), 'env.ini')).warnings, [], '[admin] moved two lines down: no change');
});

test('a reload of shutdown_timeout, which needs a restart, does not change how long close() waits', async () => {
  const silent = net.createServer(() => {}); // accepts, never answers
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const at = (timeout: string): string =>
    `[server]\naccess_log = off\nshutdown_timeout = ${timeout}\n[proxy.a]\npath = /\npass = http://127.0.0.1:${(silent.address() as AddressInfo).port}\nread_timeout = 30s\n`;
  const proxy = new ProxyServer(parseConfig(at('300ms'), 'env.ini'), { deps: { log: () => {} } });
  const port = await proxy.listen(0, '127.0.0.1');
  proxy.reload(parseConfig(at('20s'), 'env.ini'));
  const client = net.connect(port, '127.0.0.1');
  client.on('error', () => {});
  client.write('GET / HTTP/1.1\r\nHost: h\r\n\r\n');
  await new Promise((resolve) => setTimeout(resolve, 100)); // the request is in flight
  const startedAt = Date.now();
  const isDrained = await proxy.close();
  const tookMs = Date.now() - startedAt;
  client.destroy();
  silent.close();
  assert.equal(isDrained, false, 'the request in flight was cut');
  assert.ok(tookMs < 3000, `close() took ${tookMs} ms, want the 300 ms the proxy started with, not the reloaded 20 s`);
});

test('a reload to trusted_proxies = 0.0.0.0/0 is applied, with the warning that it trusts every peer', () => {
  const proxy = new ProxyServer(parseConfig(base, 'env.ini'), { deps: { log: () => {} } });
  const summary = proxy.reload(parseConfig(base.replace('access_log = off\n', 'access_log = off\ntrusted_proxies = 0.0.0.0/0\n'), 'env.ini'));
  assert.deepEqual(summary.warnings, [
    'env.ini:3:19: [server] trusted_proxies 0.0.0.0/0 trusts every IPv4 peer: any client can then choose its own client IP with X-Forwarded-For, which defeats access and rate_limit (list only the proxies in front of this one)',
  ]);
});

// ProxyServer.reload and the admin registry hand the one health checker the new
// routes with the kept Upstream objects; fake timers and a fake probe make every probe time exact.
const checked = (port1: number, port2: number, extra = ''): string =>
  '[server]\naccess_log = off\n[proxy.a]\npath = /a\nhealth_check = on\nhealth_interval = 1s\nhealth_timeout = 500ms\n' +
  `health_fall = 3\nhealth_rise = 2\n${extra}pass = http://127.0.0.1:${port1}\npass = http://127.0.0.1:${port2}\n`;

function checkedProxy(ini: string) {
  const timers = new FakeTimers();
  const fake = new FakeProbe(timers.now);
  const lines: string[] = [];
  const proxy = new ProxyServer(parseConfig(ini, 'env.ini'), { probe: fake.probe, healthTimers: timers, deps: { log: (line) => lines.push(line) } });
  proxy.startHealthChecks();
  return { proxy, timers, fake, lines, reload: (text: string) => proxy.reload(parseConfig(text, 'env.ini')) };
}

test('reload keeps an unchanged upstream\'s probe in flight, streak and schedule: fall=3, two failures, reload, one failure → DOWN', async () => {
  const t = checkedProxy(checked(9001, 9002));
  const a = t.proxy.routes[0]!.upstreams[0]!;
  for (const atMs of [0, 1000]) {
    assert.equal(t.timers.nowMs, atMs);
    t.fake.answer(9001, REFUSED);
    t.fake.answer(9002, OK);
    await flush();
    t.timers.advance(1000);
  }
  // The third probe went out at 2000 ms; reloads at 2100, 2400, 2700 change nothing about it.
  const third = t.fake.lastFor(9001);
  for (const atMs of [2100, 2400, 2700]) {
    t.timers.advance(atMs - t.timers.nowMs);
    t.reload(checked(9001, 9002));
  }
  assert.equal(t.proxy.routes[0]!.upstreams[0], a, 'got a new Upstream object for an unchanged address');
  assert.equal(third.options.signal!.aborted, false, 'got the probe in flight aborted by a reload');
  assert.deepEqual(t.fake.timesFor(9001), [0, 1000, 2000], `got probes at ${t.fake.timesFor(9001).join(', ')} ms, want none at the reloads`);
  t.fake.answer(9001, REFUSED);
  await flush();
  assert.equal(a.healthState, 'down', 'got UP: the streak restarted at the reload');
  assert.deepEqual(t.lines, ['upstream http://127.0.0.1:9001 of route a is DOWN after 3 failed checks: connect ECONNREFUSED']);
  t.timers.advance(3000 - t.timers.nowMs);
  assert.deepEqual(t.fake.timesFor(9001), [0, 1000, 2000, 3000], `got probes at ${t.fake.timesFor(9001).join(', ')} ms`);
  t.proxy.healthChecker.stop();
});

test('reload: an added upstream is probed at once, a removed one\'s probe is aborted, a new health_path re-probes with it', async () => {
  const t = checkedProxy(checked(9001, 9002));
  t.timers.advance(400);
  const removed = t.fake.lastFor(9002);
  t.reload(checked(9001, 9003));
  assert.deepEqual(t.fake.timesFor(9003), [400], `got probes of the added upstream at ${t.fake.timesFor(9003).join(', ')} ms, want 400`);
  assert.deepEqual(t.fake.timesFor(9001), [0], 'got the unchanged upstream probed at the reload');
  assert.equal(removed.options.signal!.aborted, true, 'got the removed upstream probe not aborted');

  t.timers.advance(100);
  const kept = t.fake.lastFor(9001);
  t.reload(checked(9001, 9003, 'health_path = /healthz\n'));
  assert.equal(kept.options.signal!.aborted, true, 'got the probe of the old path not aborted');
  assert.deepEqual(t.fake.timesFor(9001), [0, 500], `got probes at ${t.fake.timesFor(9001).join(', ')} ms, want one at once`);
  assert.equal(t.fake.lastFor(9001).check.path, '/healthz');
  assert.deepEqual(t.proxy.healthChecker.upstreams.map((u) => u.config.port), [9001, 9003]);
  t.proxy.healthChecker.stop();
});

test('registered upstreams (admin registry) keep their watch across registry changes and reloads; a removed one is no longer probed', async () => {
  const t = checkedProxy(checked(9001, 9002));
  const x = parseConfig(checked(9004, 9005), 'x.ini').routes[0]!.upstreams;
  t.timers.advance(200);
  t.proxy.setRegisteredUpstreams('a', [x[0]!]);
  assert.deepEqual(t.fake.timesFor(9004), [200], `got probes of the registered upstream at ${t.fake.timesFor(9004).join(', ')} ms, want 200`);
  t.timers.advance(100);
  t.proxy.setRegisteredUpstreams('a', [x[0]!, x[1]!]);
  t.reload(checked(9001, 9002));
  assert.deepEqual(t.fake.timesFor(9004), [200], 'got the first registered upstream probed again by a registry change or a reload');
  assert.deepEqual(t.fake.timesFor(9005), [300]);
  assert.deepEqual(t.fake.timesFor(9001), [0]);
  const signal = t.fake.lastFor(9004).options.signal!;
  t.proxy.setRegisteredUpstreams('a', [x[1]!]);
  assert.equal(signal.aborted, true, 'got the unregistered upstream probe not aborted');
  t.fake.answer(9004, OK);
  for (const port of [9001, 9002, 9005]) t.fake.answer(port, OK);
  await flush();
  t.timers.advance(3000);
  assert.deepEqual(t.fake.timesFor(9004), [200], 'got probes of an unregistered upstream');
  t.proxy.healthChecker.stop();
});
