/**
 * ProxyServer.setDiscoveredUpstreams (issue 14 item 2): a discovery line's addresses change under
 * traffic without a reload. The health checker follows (a new address is probed at once, one that
 * left is no longer probed, DOWN and the streaks of one that stays are kept), retries are
 * recounted, and a route whose lines have no address yet answers 503 with Retry-After.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { discoveredUpstreamConfig, type DiscoveredLine } from '../../src/discovery/discovered-line.js';
import { FakeProbe, FakeTimers, flush, OK, REFUSED } from '../helpers/health-fakes.js';
import { request } from '../helpers/proxy-harness.js';

const LINE = 'http://api.test:8080';
const ini = (extra = ''): string =>
  `[server]\naccess_log = off\n[proxy.api]\npath = /\n${extra}pass = ${LINE} resolve\n`;

/** The line's answer: one member per address. */
function answer(proxy: ProxyServer, addresses: readonly string[]): DiscoveredLine[] {
  const line = proxy.config.routes[0]!.upstreams[0]!;
  return [{ lineOrigin: LINE, upstreams: addresses.map((address) => discoveredUpstreamConfig(line, { address, port: 8080 })) }];
}

const hosts = (proxy: ProxyServer): string[] => proxy.routes[0]!.upstreams.map((upstream) => upstream.config.host);

test('a route whose discovery line has no address yet answers 503 with Retry-After, then serves once it has one', async (t) => {
  const proxy = new ProxyServer(parseConfig(ini(), 'env.ini'), { deps: { log: () => {} } });
  const port = await proxy.listen(0, '127.0.0.1');
  t.after(() => proxy.close(1000));
  const response = await request(port, { path: '/x' });
  assert.equal(response.status, 503, `got ${response.status}, want 503 before any answer`);
  assert.equal(response.headers['retry-after'], String(proxy.routes[0]!.retryAfterSeconds), 'got no Retry-After on the 503');
  proxy.setDiscoveredUpstreams('api', answer(proxy, ['127.0.0.2']));
  assert.deepEqual(hosts(proxy), ['127.0.0.2']);
  assert.deepEqual(proxy.discoveredLines('api').map((line) => line.upstreams.length), [1]);
});

test('retries are recounted as upstreams − 1 on every change when not written; a written one stays', () => {
  const proxy = new ProxyServer(parseConfig(ini(), 'env.ini'), { deps: { log: () => {} } });
  assert.equal(proxy.routes[0]!.config.retries, 0);
  proxy.setDiscoveredUpstreams('api', answer(proxy, ['127.0.0.2', '127.0.0.3', '127.0.0.4']));
  assert.equal(proxy.routes[0]!.config.retries, 2, `got retries ${proxy.routes[0]!.config.retries}, want 3 − 1`);
  proxy.setDiscoveredUpstreams('api', answer(proxy, ['127.0.0.2']));
  assert.equal(proxy.routes[0]!.config.retries, 0);
  const written = new ProxyServer(parseConfig(ini('retries = 1\n'), 'env.ini'), { deps: { log: () => {} } });
  written.setDiscoveredUpstreams('api', answer(written, ['127.0.0.2', '127.0.0.3', '127.0.0.4']));
  assert.equal(written.routes[0]!.config.retries, 1);
});

test('health_check on: a new address appears UP and is probed at once; one that stays keeps DOWN and its streak; one that left is not probed again', async () => {
  const timers = new FakeTimers();
  const fake = new FakeProbe(timers.now);
  const checked = 'health_check = on\nhealth_interval = 1s\nhealth_timeout = 500ms\nhealth_fall = 1\nhealth_rise = 2\n';
  const proxy = new ProxyServer(parseConfig(ini(checked), 'env.ini'), { probe: fake.probe, healthTimers: timers, deps: { log: () => {} } });
  proxy.startHealthChecks();
  proxy.setDiscoveredUpstreams('api', answer(proxy, ['127.0.0.2', '127.0.0.3']));
  const probedHosts = (): string[] => fake.calls.map((call) => call.upstream.host);
  assert.deepEqual(probedHosts(), ['127.0.0.2', '127.0.0.3'], 'got new addresses not probed at once');
  fake.calls[0]!.resolve(REFUSED);
  fake.calls[1]!.resolve(OK);
  await flush();
  const [two, three] = proxy.routes[0]!.upstreams;
  assert.equal(two!.healthState, 'down');
  timers.advance(500); // halfway to the next probes
  proxy.setDiscoveredUpstreams('api', answer(proxy, ['127.0.0.4', '127.0.0.2']));
  assert.deepEqual(hosts(proxy), ['127.0.0.2', '127.0.0.4']);
  assert.equal(proxy.routes[0]!.upstreams[0], two, 'the address that stayed keeps its object');
  assert.equal(two!.healthState, 'down', 'got DOWN lost across the new set, want it kept');
  assert.equal(proxy.routes[0]!.upstreams[1]!.healthState, 'up', 'a new address appears UP');
  assert.deepEqual(probedHosts().slice(2), ['127.0.0.4'], 'only the new address is probed at once (the one that stayed keeps its schedule)');
  timers.advance(500);
  assert.deepEqual(probedHosts().slice(3).sort(), ['127.0.0.2'], `got probes ${probedHosts().slice(3).join(', ')}: .3 left and must not be probed, .4's probe is still out`);
  assert.equal(three!.hasLeft, true, 'the address that left is marked so');
  assert.equal(proxy.healthChecker.upstreams.includes(three!), false);
});

test('a change for a route not in force, or for a line that is not a discovery line, changes nothing', () => {
  const proxy = new ProxyServer(parseConfig(ini(), 'env.ini'), { deps: { log: () => {} } });
  const before = proxy.routes[0];
  proxy.setDiscoveredUpstreams('nope', answer(proxy, ['127.0.0.2']));
  assert.equal(proxy.routes[0], before);
  proxy.setDiscoveredUpstreams('api', [{ lineOrigin: 'http://other.test:8080', upstreams: answer(proxy, ['127.0.0.2'])[0]!.upstreams }]);
  assert.deepEqual(hosts(proxy), []);
});
