/**
 * DNS discovery on the admin pages (SPEC 7): `/status.json` has one row per discovery line (route,
 * name, kind, line, upstreams now, last result, last answer, last error) and names the line and
 * name each discovered upstream came from; `/metrics` has `proxy_dns_lookups_total{route,name,result}`
 * and `proxy_discovered_upstreams{route,name}`, exact lines. The discovery is a fake view (the
 * lookups are src/discovery's); the addresses are set on the proxy as discovery would set them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { buildStatusSnapshot, type DiscoveryView } from '../../src/admin/status-snapshot.js';
import { renderMetrics } from '../../src/admin/metrics-exposition.js';
import { renderStatusPage } from '../../src/admin/status-page.js';
import { emptyMetrics } from '../../src/admin/metrics-collector.js';
import { discoveredUpstreamConfig } from '../../src/discovery/discovered-line.js';

const CONFIG_TEXT = [
  '[server]',
  'listen = 127.0.0.1:0',
  'access_log = off',
  'resolver = 127.0.0.1:5353',
  '[proxy.api]',
  'path = /api',
  'pass = http://api.test:8080 resolve',
  'pass = http://api.test:9090 resolve',
  'pass = http://web.test service=http',
].join('\n');

/** Two lines of one name (ports 8080 and 9090) and one SRV line, as src/discovery reports them. */
const VIEW: DiscoveryView = {
  lines: [
    {
      routeName: 'api',
      lineOrigin: 'http://api.test:8080',
      kind: 'resolve',
      name: 'api.test',
      place: { file: 'test.ini', line: 7, column: 8 },
      upstreamCount: 2,
      lastAnswerAtMs: Date.UTC(2026, 11, 1, 16, 0, 0),
      lastResult: 'ok',
      lastError: undefined,
    },
    {
      routeName: 'api',
      lineOrigin: 'http://api.test:9090',
      kind: 'resolve',
      name: 'api.test',
      place: { file: 'test.ini', line: 8, column: 8 },
      upstreamCount: 1,
      lastAnswerAtMs: Date.UTC(2026, 11, 1, 16, 0, 1),
      lastResult: 'ok',
      lastError: undefined,
    },
    {
      routeName: 'api',
      lineOrigin: 'http://web.test',
      kind: 'service',
      name: '_http._tcp.web.test',
      place: { file: 'test.ini', line: 9, column: 8 },
      upstreamCount: 0,
      lastAnswerAtMs: undefined,
      lastResult: 'servfail',
      lastError: 'SERVFAIL from 127.0.0.1:5353',
    },
  ],
  lookupCounts: [
    { routeName: 'api', name: '_http._tcp.web.test', result: 'servfail', count: 4 },
    { routeName: 'api', name: 'api.test', result: 'timeout', count: 1 },
    { routeName: 'api', name: 'api.test', result: 'ok', count: 12 },
  ],
};

function snapshotOf(proxy: ProxyServer, discovery?: DiscoveryView): ReturnType<typeof buildStatusSnapshot> {
  return buildStatusSnapshot(proxy, [], { mode: 'single', registry: [], registryNowMs: 0, probeNowMs: 0, ...(discovery === undefined ? {} : { discovery }) });
}

test('/status.json: one row per discovery line with kind, line, upstreams now, last result, last answer and last error', async () => {
  const proxy = new ProxyServer(parseConfig(CONFIG_TEXT, 'test.ini'), { isHealthCheckDisabled: true });
  try {
    const snapshot = snapshotOf(proxy, VIEW);
    assert.deepEqual(snapshot.discovery, [
      { route: 'api', lineOrigin: 'http://api.test:8080', line: 'test.ini:7', kind: 'A/AAAA', name: 'api.test', upstreams: 2, lastResult: 'ok', lastAnswerAt: '2026-12-01T16:00:00.000Z', lastError: null },
      { route: 'api', lineOrigin: 'http://api.test:9090', line: 'test.ini:8', kind: 'A/AAAA', name: 'api.test', upstreams: 1, lastResult: 'ok', lastAnswerAt: '2026-12-01T16:00:01.000Z', lastError: null },
      { route: 'api', lineOrigin: 'http://web.test', line: 'test.ini:9', kind: 'SRV', name: '_http._tcp.web.test', upstreams: 0, lastResult: 'servfail', lastAnswerAt: null, lastError: 'SERVFAIL from 127.0.0.1:5353' },
    ]);
    const page = renderStatusPage(snapshot);
    assert.match(page, /<section id="discovery" class="route"><\/section>/, 'got no discovery section on the page');
    assert.ok(page.includes('"lastError":"SERVFAIL from 127.0.0.1:5353"'), 'got no embedded discovery rows, want them in the initial status');
    assert.deepEqual(snapshotOf(proxy).discovery, [], 'without discovery: got rows, want none');
    assert.deepEqual(snapshotOf(proxy).dnsLookups, []);
  } finally {
    await proxy.close(0);
  }
});

test('/metrics: proxy_dns_lookups_total by route, name and result, proxy_discovered_upstreams summed per route and name (exact lines)', async () => {
  const proxy = new ProxyServer(parseConfig(CONFIG_TEXT, 'test.ini'), { isHealthCheckDisabled: true });
  try {
    const text = renderMetrics(snapshotOf(proxy, VIEW), emptyMetrics());
    const family = (name: string): string[] => text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`# TYPE ${name} `));
    assert.deepEqual(family('proxy_dns_lookups_total'), [
      '# TYPE proxy_dns_lookups_total counter',
      'proxy_dns_lookups_total{route="api",name="_http._tcp.web.test",result="servfail"} 4',
      'proxy_dns_lookups_total{route="api",name="api.test",result="ok"} 12',
      'proxy_dns_lookups_total{route="api",name="api.test",result="timeout"} 1',
    ]);
    assert.deepEqual(family('proxy_discovered_upstreams'), [
      '# TYPE proxy_discovered_upstreams gauge',
      'proxy_discovered_upstreams{route="api",name="_http._tcp.web.test"} 0',
      'proxy_discovered_upstreams{route="api",name="api.test"} 3',
    ]);
    const without = renderMetrics(snapshotOf(proxy), emptyMetrics());
    assert.equal(without.includes('proxy_dns_lookups_total{'), false, 'without discovery: got dns lookup samples, want none');
  } finally {
    await proxy.close(0);
  }
});

test('a discovered upstream shows the name and line it came from, and its own address (not the line name) in /status and /metrics', async () => {
  const config = parseConfig(CONFIG_TEXT, 'test.ini');
  const proxy = new ProxyServer(config, { isHealthCheckDisabled: true });
  try {
    const line = config.routes[0]!.upstreams[0]!;
    proxy.setDiscoveredUpstreams('api', [
      { lineOrigin: line.origin, upstreams: ['127.0.0.2', '127.0.0.3'].map((address) => discoveredUpstreamConfig(line, { address, port: 8080 })) },
    ]);
    const snapshot = snapshotOf(proxy, VIEW);
    const discovered = snapshot.routes[0]!.upstreams.filter((upstream) => upstream.discoveredFrom !== null);
    assert.deepEqual(
      discovered.map((upstream) => [upstream.address, upstream.discoveredFrom]),
      ['127.0.0.2:8080', '127.0.0.3:8080'].map((address) => [address, { name: 'api.test', line: 'test.ini:7', lineOrigin: 'http://api.test:8080' }]),
    );
    const text = renderMetrics(snapshot, emptyMetrics());
    assert.ok(text.includes('proxy_upstream_up{route="api",upstream="127.0.0.2:8080"} 1'), `got ${text.split('\n').filter((l) => l.startsWith('proxy_upstream_up{')).join(' | ')}, want 127.0.0.2:8080`);
    assert.ok(text.includes('proxy_upstream_up{route="api",upstream="127.0.0.3:8080"} 1'));
  } finally {
    await proxy.close(0);
  }
});

test('/metrics shows the attempt and probe counters of the snapshot\'s upstreams only: a retired worker\'s counts of an address that left are not shown again', async () => {
  const proxy = new ProxyServer(parseConfig('[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy.a]\npath = /\npass = http://127.0.0.1:9001\n', 'test.ini'), { isHealthCheckDisabled: true });
  try {
    const metrics = emptyMetrics();
    Object.assign(metrics.upstreamRequests, { 'a\t127.0.0.1:9001\t2xx': 3, 'a\t10.0.0.7:9001\t2xx': 5, 'gone\t127.0.0.1:9001\t5xx': 1 });
    Object.assign(metrics.probes, { 'a\t127.0.0.1:9001\tok': 2, 'a\t10.0.0.7:9001\tfail': 4 });
    const text = renderMetrics(snapshotOf(proxy), metrics);
    const samples = (name: string): string[] => text.split('\n').filter((line) => line.startsWith(`${name}{`));
    assert.deepEqual(samples('proxy_upstream_requests_total'), ['proxy_upstream_requests_total{route="a",upstream="127.0.0.1:9001",status_class="2xx"} 3']);
    assert.deepEqual(samples('proxy_health_checks_total'), ['proxy_health_checks_total{route="a",upstream="127.0.0.1:9001",result="ok"} 2']);
  } finally {
    await proxy.close(0);
  }
});
