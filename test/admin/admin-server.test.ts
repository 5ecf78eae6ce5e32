/**
 * The admin listener in single-process mode, over real sockets: /status.json and /metrics count the
 * traffic this test sends (exactly), /metrics parses as exposition format 0.0.4, the status page is
 * self-contained, the registry (register, refresh, expiry on an injected clock, delete, 401/403,
 * traffic and health checks to a registered upstream, survival across reload) and drain/enable.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { adminConnectionLimit, readOpenFileLimit } from '../../src/process/descriptor-budget.js';
import { parseConfig } from '../../src/config/load-config.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { startLocalAdmin, type LocalAdmin } from '../../src/admin/local-admin.js';
import type { StatusSnapshot } from '../../src/admin/status-snapshot.js';
import { startBackend, listenBackend, rawRequest, type Backend } from '../helpers/proxy-harness.js';
import { FakeClock } from './fake-clock.js';
import { parseExposition, sampleValue } from './exposition-parser.js';

interface Setup {
  readonly proxy: ProxyServer;
  readonly proxyPort: number;
  readonly admin: LocalAdmin;
  readonly clock: FakeClock;
  readonly backends: Backend[];
  readonly logs: string[];
  readonly configText: string;
  close(): Promise<void>;
}

async function setup(options: { token?: string | undefined; extraRoute?: string; health?: string; backends?: Backend[] } = {}): Promise<Setup> {
  const backends = options.backends ?? [await startBackend(), await startBackend()];
  const token = 'token' in options ? options.token : 's3cret';
  const configText = [
    '[server]',
    'listen = 127.0.0.1:0',
    'access_log = off',
    '[admin]',
    'listen = 127.0.0.1:0',
    ...(token === undefined ? [] : [`token = ${token}`]),
    '[proxy.a]',
    'path = /a',
    ...backends.slice(0, 2).map((b) => `pass = ${b.url}`),
    options.health ?? 'health_check = off',
    options.extraRoute ?? '',
  ].join('\n');
  const config = parseConfig(configText, 'test.ini');
  const logs: string[] = [];
  const log = (line: string): void => void logs.push(line);
  const proxy = new ProxyServer(config, { deps: { log } });
  const proxyPort = await proxy.listen(0);
  const clock = new FakeClock();
  const admin = await startLocalAdmin(proxy, config.admin!, log, { port: 0, registryNow: clock.now, registryTimers: clock });
  return {
    proxy,
    proxyPort,
    admin,
    clock,
    backends,
    logs,
    configText,
    async close() {
      await admin.stop();
      await proxy.close(100);
      await Promise.all(backends.map((b) => b.close()));
    },
  };
}

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

function request(port: number, method: string, path: string, options: { body?: unknown; token?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: { ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }), ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function statusJson(s: Setup): Promise<StatusSnapshot> {
  const answer = await request(s.admin.port, 'GET', '/status.json');
  assert.equal(answer.status, 200, `got ${answer.status}, want 200: ${answer.body}`);
  return JSON.parse(answer.body) as StatusSnapshot;
}

async function waitFor(what: string, predicate: () => boolean | Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('/status.json and /metrics count exactly the traffic sent, and /metrics parses', async () => {
  const s = await setup();
  try {
    for (let i = 0; i < 10; i++) assert.equal((await request(s.proxyPort, 'GET', '/a/x')).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await request(s.proxyPort, 'GET', '/nowhere')).status, 404);

    const snapshot = await statusJson(s);
    assert.equal(snapshot.mode, 'single');
    assert.equal(snapshot.totals.requests, 13, `got ${snapshot.totals.requests} requests, want 13`);
    assert.deepEqual(snapshot.totals.byStatusClass, { '2xx': 10, '4xx': 3 });
    const route = snapshot.routes[0]!;
    assert.equal(route.strategy, 'round-robin');
    assert.deepEqual(
      route.upstreams.map((u) => [u.address, u.state, u.requestsTotal, u.failuresTotal, u.activeRequests, u.weight, u.effectiveWeight]),
      s.backends.map((b) => [`127.0.0.1:${b.port}`, 'UP', 5, 0, 0, 1, 1]),
    );
    assert.equal(route.upstreams[0]!.strategyState !== null, true, 'got no strategy state, want the balancer state');

    const metrics = await request(s.admin.port, 'GET', '/metrics');
    assert.equal(metrics.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
    const parsed = parseExposition(metrics.body);
    const value = (name: string, labels: Record<string, string>): number | undefined => sampleValue(parsed, name, labels);
    assert.equal(value('proxy_requests_total', { route: 'a', status_class: '2xx' }), 10);
    assert.equal(value('proxy_requests_total', { route: '(none)', status_class: '4xx' }), 3);
    for (const b of s.backends) {
      const labels = { route: 'a', upstream: `127.0.0.1:${b.port}` };
      assert.equal(value('proxy_upstream_requests_total', { ...labels, status_class: '2xx' }), 5, `got ${value('proxy_upstream_requests_total', labels)}, want 5`);
      assert.equal(value('proxy_upstream_up', labels), 1);
      assert.equal(value('proxy_upstream_active_requests', labels), 0);
      assert.equal(value('proxy_upstream_effective_weight', labels), 1);
    }
    assert.equal(value('proxy_request_duration_seconds_count', { route: 'a' }), 10);
    assert.equal(value('proxy_request_duration_seconds_bucket', { route: 'a', le: '+Inf' }), 10);
    assert.equal(parsed.types.get('proxy_request_duration_seconds'), 'histogram');
    assert.equal(parsed.types.get('proxy_retries_total'), 'counter');
  } finally {
    await s.close();
  }
});

test('retries and failed attempts are counted; a probe result is counted by result', async () => {
  const dead = await startBackend();
  await dead.close(); // its port now refuses connections
  const live = await startBackend();
  const s = await setup({ backends: [dead, live], health: 'health_check = on\nhealth_interval = 1m\nmax_fails = 0' });
  try {
    await waitFor('both first probes', () => s.proxy.routes[0]!.upstreams.every((u) => u.lastProbe !== undefined));
    // Round robin starts at the dead one: its connect error is retried on the live one.
    const answer = await request(s.proxyPort, 'GET', '/a');
    assert.equal(answer.status, 200, `got ${answer.status}, want 200 after a retry`);
    const parsed = parseExposition((await request(s.admin.port, 'GET', '/metrics')).body);
    const deadLabels = { route: 'a', upstream: `127.0.0.1:${dead.port}` };
    assert.equal(sampleValue(parsed, 'proxy_retries_total', { route: 'a' }), 1);
    assert.equal(sampleValue(parsed, 'proxy_upstream_requests_total', { ...deadLabels, status_class: 'error' }), 1);
    assert.equal(sampleValue(parsed, 'proxy_upstream_failures_total', deadLabels), 1);
    assert.equal(sampleValue(parsed, 'proxy_health_checks_total', { ...deadLabels, result: 'fail' }), 1);
    assert.equal(sampleValue(parsed, 'proxy_health_checks_total', { route: 'a', upstream: `127.0.0.1:${live.port}`, result: 'ok' }), 1);
    const snapshot = await statusJson(s);
    const deadStatus = snapshot.routes[0]!.upstreams[0]!;
    assert.equal(deadStatus.lastProbe?.ok, false, `got ${JSON.stringify(deadStatus.lastProbe)}, want a failed probe`);
    assert.match(deadStatus.lastProbe?.error ?? '', /ECONNREFUSED/);
  } finally {
    await s.close();
  }
});

test('the status page is one self-contained HTML page with the upstreams and a 1 s poll of status.json', async () => {
  const s = await setup();
  try {
    const page = await request(s.admin.port, 'GET', '/status');
    assert.equal(page.status, 200);
    assert.match(page.headers['content-type'] ?? '', /^text\/html/);
    for (const b of s.backends) assert.ok(page.body.includes(`127.0.0.1:${b.port}`), `got a page without 127.0.0.1:${b.port}`);
    assert.ok(page.body.includes('setInterval(poll, 1000)'), 'got no 1 s refresh');
    assert.ok(page.body.includes('fetch("status.json"'), 'got no status.json poll');
    assert.doesNotMatch(page.body, /<(link|img)\b|<script[^>]+src=|https?:\/\/(?!127\.0\.0\.1)/, 'got an external asset');
  } finally {
    await s.close();
  }
});

test('state-changing calls: missing or wrong token → 401, no token configured → 403; read-only pages open on loopback', async () => {
  const s = await setup();
  try {
    const body = { url: 'http://127.0.0.1:9' };
    const missing = await request(s.admin.port, 'PUT', '/routes/a/upstreams', { body });
    assert.equal(missing.status, 401, `got ${missing.status}, want 401`);
    assert.match(missing.headers['www-authenticate'] ?? '', /^Bearer/);
    assert.equal((await request(s.admin.port, 'PUT', '/routes/a/upstreams', { body, token: 'wrong' })).status, 401);
    assert.equal((await request(s.admin.port, 'POST', '/routes/a/upstreams/drain', { body, token: 's3cre' })).status, 401);
    assert.equal((await request(s.admin.port, 'DELETE', '/routes/a/upstreams?url=http://127.0.0.1:9')).status, 401);
    assert.equal(s.proxy.routes[0]!.upstreams.length, 2, 'got a changed route after refused calls');
    assert.equal((await request(s.admin.port, 'GET', '/metrics')).status, 200);
  } finally {
    await s.close();
  }
  const open = await setup({ token: undefined });
  try {
    const refused = await request(open.admin.port, 'PUT', '/routes/a/upstreams', { body: { url: 'http://127.0.0.1:9' }, token: 'anything' });
    assert.equal(refused.status, 403, `got ${refused.status}, want 403`);
    assert.match(refused.body, /set \[admin\] token/);
    assert.equal((await request(open.admin.port, 'GET', '/status.json')).status, 200);
  } finally {
    await open.close();
  }
});

test('registry: register, traffic and health checks reach it, heartbeat refresh, expiry after ttl, delete', async () => {
  const third = await startBackend();
  const s = await setup({ health: 'health_check = on\nhealth_interval = 1m' });
  try {
    const put = (extra: object = {}): Promise<Answer> =>
      request(s.admin.port, 'PUT', '/routes/a/upstreams', { body: { url: third.url, weight: 1, ttl: '10s', ...extra }, token: 's3cret' });
    const created = await put();
    assert.equal(created.status, 201, `got ${created.status} ${created.body}, want 201`);
    assert.deepEqual(s.proxy.routes[0]!.upstreams.map((u) => u.origin), [...s.backends.map((b) => b.url), third.url]);

    await waitFor('a health probe of the registered upstream', () => third.requests.some((r) => r.method === 'HEAD'));
    await waitFor('its probe result', () => s.proxy.routes[0]!.upstreams[2]!.lastProbe?.ok === true);

    for (let i = 0; i < 6; i++) assert.equal((await request(s.proxyPort, 'GET', '/a')).status, 200);
    const gets = third.requests.filter((r) => r.method === 'GET').length;
    assert.equal(gets, 2, `got ${gets} requests on the registered upstream, want 2 of 6 (round robin over 3)`);

    let snapshot = await statusJson(s);
    assert.deepEqual(snapshot.routes[0]!.upstreams[2]!.registry, { ttlMs: 10_000, expiresInMs: 10_000 });

    s.clock.advance(8_000);
    const refreshed = await put();
    assert.equal(refreshed.status, 200, `got ${refreshed.status}, want 200 for a refresh`);
    s.clock.advance(8_000); // 16 s after the first PUT, 8 s after the refresh: still there
    assert.equal(s.proxy.routes[0]!.upstreams.length, 3, 'got the upstream expired 8 s after a refresh, want it kept');
    s.clock.advance(2_000); // 10 s after the refresh: expired
    assert.equal(s.proxy.routes[0]!.upstreams.length, 2, 'got the upstream still registered after its ttl, want it removed');
    assert.ok(s.logs.some((line) => /expired/.test(line)), 'got no expiry log line');
    snapshot = await statusJson(s);
    assert.equal(snapshot.routes[0]!.upstreams.length, 2);

    assert.equal((await put()).status, 201);
    const deleted = await request(s.admin.port, 'DELETE', `/routes/a/upstreams?url=${encodeURIComponent(third.url)}`, { token: 's3cret' });
    assert.equal(deleted.status, 200, `got ${deleted.status} ${deleted.body}, want 200`);
    assert.equal(s.proxy.routes[0]!.upstreams.length, 2);
    const again = await request(s.admin.port, 'DELETE', '/routes/a/upstreams', { body: { url: third.url }, token: 's3cret' });
    assert.equal(again.status, 404, `got ${again.status}, want 404 for an upstream no longer registered`);
  } finally {
    await s.close();
    await third.close();
  }
});

test('/metrics shows the attempt and probe counters of current upstreams only: a registered upstream\'s series go when it is deleted (a discovery line\'s churned addresses would pile up), and the collector forgets them', async () => {
  const third = await startBackend();
  const s = await setup({ health: 'health_check = on\nhealth_interval = 1m' });
  try {
    const registered = new URL(third.url).host;
    const put = await request(s.admin.port, 'PUT', '/routes/a/upstreams', { body: { url: third.url, ttl: '1m' }, token: 's3cret' });
    assert.equal(put.status, 201, put.body);
    await waitFor('its probe result', () => s.proxy.routes[0]!.upstreams[2]?.lastProbe?.ok === true);
    for (let i = 0; i < 3; i++) assert.equal((await request(s.proxyPort, 'GET', '/a')).status, 200);
    const labels = { route: 'a', upstream: registered };
    const scrape = async () => parseExposition((await request(s.admin.port, 'GET', '/metrics')).body);
    let parsed = await scrape();
    assert.equal(sampleValue(parsed, 'proxy_upstream_requests_total', { ...labels, status_class: '2xx' }), 1);
    assert.equal(sampleValue(parsed, 'proxy_health_checks_total', { ...labels, result: 'ok' }), 1);

    const deleted = await request(s.admin.port, 'DELETE', `/routes/a/upstreams?url=${encodeURIComponent(third.url)}`, { token: 's3cret' });
    assert.equal(deleted.status, 200, deleted.body);
    parsed = await scrape();
    assert.equal(sampleValue(parsed, 'proxy_upstream_requests_total', { ...labels, status_class: '2xx' }), undefined, 'got the deleted upstream\'s attempts still shown');
    assert.equal(sampleValue(parsed, 'proxy_health_checks_total', { ...labels, result: 'ok' }), undefined, 'got its probes still shown');
    assert.equal(sampleValue(parsed, 'proxy_upstream_requests_total', { route: 'a', upstream: new URL(s.backends[0]!.url).host, status_class: '2xx' }), 1, 'the upstreams that stay keep theirs');
    const state = s.admin.metrics.state;
    assert.deepEqual(Object.keys({ ...state.upstreamRequests, ...state.probes }).filter((key) => key.includes(registered)), [], 'got its keys still held');
  } finally {
    await s.close();
    await third.close();
  }
});

test('registry: bad input is refused with 400/404/409 and the message of the pass-line parser', async () => {
  const s = await setup();
  try {
    const put = (route: string, body: unknown): Promise<Answer> => request(s.admin.port, 'PUT', `/routes/${route}/upstreams`, { body, token: 's3cret' });
    const cases: [string, unknown, number, RegExp][] = [
      ['a', { url: 'http://127.0.0.1:99999' }, 400, /invalid port '99999'/],
      ['a', { url: 'ftp://127.0.0.1:9003' }, 400, /invalid upstream URL 'ftp:\/\/127.0.0.1:9003'/],
      ['a', { url: 'http://127.0.0.1:9003', weight: 0 }, 400, /invalid weight '0'/],
      ['a', { url: 'http://127.0.0.1:9003', weight: ' 3' }, 400, /'weight' must be a whole number from 1 to 1000000/],
      ['a', { url: 'http://127.0.0.1:9003', weight: '3 backup' }, 400, /'weight' must be a whole number from 1 to 1000000/],
      ['a', { url: 'http://127.0.0.1:9003', ttl: '5x' }, 400, /invalid duration '5x'/],
      ['a', { url: 'http://127.0.0.1:9003', wieght: 5 }, 400, /^unknown key "wieght" \(did you mean "weight"\?\): a registration has url, weight, backup, ttl$/],
      ['a', { url: 'http://127.0.0.1:9003', priority: 1 }, 400, /^unknown key "priority": a registration has url, weight, backup, ttl$/],
      ['a', { url: 'http://127.0.0.1:9003/v1' }, 400, /must have the pass path of route 'a' or none: the route uses none, got '\/v1'/],
      ['a', '{not json', 400, /not JSON/],
      ['a', '{"url": "http://127.0.0.1:9003", "url": "http://127.0.0.1:9004"}', 400, /^body has the key "url" more than once/],
      ['a', '{"url": "http://127.0.0.1:9003", "\\u0075rl": "http://127.0.0.1:9004"}', 400, /^body has the key "url" more than once/],
      ['a', '{"url": "http://127.0.0.1:9003", "weight": 2, "weight": 3}', 400, /^body has the key "weight" more than once/],
      ['a', { url: s.backends[0]!.url }, 409, /already configured/],
      ['a', { url: s.backends[0]!.url.replace('127.0.0.1', '[::ffff:127.0.0.1]') }, 409, /already configured/],
      ['nope', { url: 'http://127.0.0.1:9003' }, 404, /no route named 'nope'/],
    ];
    for (const [route, body, status, message] of cases) {
      const answer = await put(route, body);
      assert.equal(answer.status, status, `got ${answer.status} for ${JSON.stringify(body)}, want ${status}`);
      assert.match((JSON.parse(answer.body) as { error: string }).error, message);
    }
    const registered = (await request(s.admin.port, 'GET', '/routes/a/upstreams')).body;
    assert.doesNotMatch(registered, /9003|9004/, `got ${registered}, want nothing registered by a refused body`);
  } finally {
    await s.close();
  }
});

test('a path that names no endpoint is a 404 naming the path as received (//routes/…, /routes/x/../a/…); a bad %-escape in a route name is a 400', async () => {
  const s = await setup();
  try {
    const cases: [string, string, number, string][] = [
      ['POST', '//routes/a/upstreams/drain', 404, 'no admin endpoint //routes/a/upstreams/drain'],
      ['PUT', '//x/routes/a/upstreams', 404, 'no admin endpoint //x/routes/a/upstreams'],
      ['GET', '/routes/x/../a/upstreams?url=1', 404, 'no admin endpoint /routes/x/../a/upstreams'],
      ['GET', '/routes/%zz/upstreams', 400, "route name '%zz' has a bad %-escape"],
    ];
    for (const [method, path, status, error] of cases) {
      const answer = await request(s.admin.port, method, path, { body: { url: 'http://127.0.0.1:9003' }, token: 's3cret' });
      assert.equal(answer.status, status, `got ${answer.status} for ${method} ${path}, want ${status}: ${answer.body}`);
      assert.equal((JSON.parse(answer.body) as { error: string }).error, error);
    }
  } finally {
    await s.close();
  }
});

test('registry: one backend is one upstream however its address is spelled ([::ffff:127.0.0.1], [0:0::ffff:7f00:1], 127.0.0.1)', async () => {
  const third = await startBackend();
  const s = await setup();
  try {
    const put = (url: string): Promise<Answer> => request(s.admin.port, 'PUT', '/routes/a/upstreams', { body: { url }, token: 's3cret' });
    const port = new URL(third.url).port;
    const statuses = [];
    for (const url of [`http://[::ffff:127.0.0.1]:${port}`, `http://[0:0::FFFF:7f00:1]:${port}`, third.url]) statuses.push((await put(url)).status);
    assert.deepEqual(statuses, [201, 200, 200], 'got a new upstream for a spelling of one already registered');
    const origins = s.proxy.routes[0]!.upstreams.map((u) => u.origin);
    assert.deepEqual(origins, [...s.backends.map((b) => b.url), third.url], `got upstreams ${origins.join(', ')}`);
    const deleted = await request(s.admin.port, 'DELETE', `/routes/a/upstreams?url=${encodeURIComponent(`http://[::ffff:127.0.0.1]:${port}`)}`, { token: 's3cret' });
    assert.equal(deleted.status, 200, `DELETE by the mapped spelling: got ${deleted.status} ${deleted.body}, want 200`);
    assert.equal(s.proxy.routes[0]!.upstreams.length, 2);
  } finally {
    await s.close();
    await third.close();
  }
});

test('registry: an address no upstream can have (0.0.0.0, [::], multicast) is a 400 saying why, and nothing is added', async () => {
  const s = await setup();
  try {
    const put = (url: string): Promise<Answer> => request(s.admin.port, 'PUT', '/routes/a/upstreams', { body: { url }, token: 's3cret' });
    const answers = [];
    for (const url of ['http://0.0.0.0:9001', 'http://[::]:9001', 'http://224.0.0.1:9001']) {
      const answer = await put(url);
      answers.push(`${answer.status} ${(JSON.parse(answer.body) as { error: string }).error}`);
    }
    assert.deepEqual(answers, [
      '400 0.0.0.0 is the unspecified address and cannot be an upstream (for this host write 127.0.0.1)',
      '400 :: is the unspecified address and cannot be an upstream (for this host write [::1])',
      '400 224.0.0.1 is a multicast address and cannot be an upstream',
    ]);
    assert.equal(s.proxy.routes[0]!.upstreams.length, 2, 'got an upstream added for an unusable address');
  } finally {
    await s.close();
  }
});

test('reload keeps registry entries and their runtime state', async () => {
  const third = await startBackend();
  const s = await setup();
  try {
    assert.equal((await request(s.admin.port, 'PUT', '/routes/a/upstreams', { body: { url: third.url }, token: 's3cret' })).status, 201);
    for (let i = 0; i < 3; i++) await request(s.proxyPort, 'GET', '/a');
    const before = s.proxy.routes[0]!.upstreams[2]!;
    assert.equal(before.requestsTotal, 1);
    const summary = s.proxy.reload(parseConfig(s.configText.replace('[proxy.a]', '[proxy.a]\nstrategy = least-connections'), 'test.ini'));
    assert.equal(summary.kept, 3, `got ${summary.kept} kept, want 3`);
    const after = s.proxy.routes[0]!;
    assert.equal(after.config.strategy, 'least-connections');
    assert.equal(after.upstreams[2], before, 'got a new Upstream object for the registered upstream, want the same one');
    assert.equal(after.upstreams[2]!.requestsTotal, 1);
    assert.equal(s.admin.registry.entries('a').length, 1);
  } finally {
    await s.close();
    await third.close();
  }
});

test('registry: a reload that gives the route a pass path, or takes it away, keeps every registration refreshable; requests reach them with the route\'s path', async () => {
  const plain = await startBackend(); // registered without a path: it follows the route's path
  const withPath = await startBackend(); // registered with the route's path of the moment
  const late = await startBackend(); // registers after the first reload, without a path
  const s = await setup();
  try {
    const put = async (url: string, route = 'a'): Promise<string> => {
      const answer = await request(s.admin.port, 'PUT', `/routes/${route}/upstreams`, { body: { url }, token: 's3cret' });
      return answer.status >= 400 ? `${answer.status} ${(JSON.parse(answer.body) as { error: string }).error}` : String(answer.status);
    };
    // As main-cli's SIGHUP does: the proxy reloads, then the registry reconciles.
    const reload = (text: string): void => {
      s.proxy.reload(parseConfig(text, 'test.ini'));
      s.admin.registry.reconcile();
    };
    const reloadWithPassPath = (passPath: string): void => reload(s.configText.replaceAll(/^pass = (.*)$/gm, `pass = $1${passPath}`));
    /** The path each registered backend received for one GET /a/x that reached it (the route has five upstreams, round robin). */
    const pathsReceived = async (): Promise<string[]> => {
      for (const backend of [plain, withPath, late]) backend.requests.length = 0;
      for (let i = 0; i < 5; i++) assert.equal((await request(s.proxyPort, 'GET', '/a/x')).status, 200);
      return [plain, withPath, late].map((backend) => backend.requests.map((r) => r.url).join(' '));
    };

    assert.equal(await put(plain.url), '201');
    reloadWithPassPath('/api');
    assert.equal(await put(plain.url), '200', 'refresh of a path-less registration after a reload gave the route a path');
    assert.equal(await put(`${withPath.url}/api`), '201', 'a registration with the route\'s path');
    assert.equal(await put(`${late.url}/v1`), "400 a registered URL must have the pass path of route 'a' or none: the route uses '/api', got '/v1' (a URL without a path takes the route's)");
    assert.equal(await put(late.url), '201', 'a new registration without a path on a route with one');
    assert.deepEqual(await pathsReceived(), ['/api/x', '/api/x', '/api/x'], 'paths received by the registered backends, want the route\'s /api');

    reloadWithPassPath('');
    assert.equal(await put(plain.url), '200', 'refresh of a path-less registration after a reload took the path away');
    assert.equal(await put(`${withPath.url}/api`), '200', 'refresh of a registration with the path a reload took away');
    assert.equal(await put(`${late.url}/api`), '200', 'a refresh with a path the route had before the reload');
    assert.equal(await put(`${late.url}/v2`), "400 a registered URL must have the pass path of route 'a' or none: the route uses none, got '/v2' (a URL without a path takes the route's)", 'a path the route never had');
    assert.deepEqual(await pathsReceived(), ['/a/x', '/a/x', '/a/x'], 'paths received by the registered backends, want the client\'s path unchanged');
    assert.deepEqual(s.admin.registry.entries('a').map((entry) => entry.config.origin), [plain.url, withPath.url, late.url]);

    // An entry that expired (here: deleted) after the path changed registers anew with its old path,
    // as a heartbeat that missed its ttl does.
    assert.equal((await request(s.admin.port, 'DELETE', `/routes/a/upstreams?url=${encodeURIComponent(withPath.url)}`, { token: 's3cret' })).status, 200);
    assert.equal(await put(`${withPath.url}/api`), '201', 'a new registration with a path the route had');

    reload(s.configText.replace('[proxy.a]', '[proxy.b]'));
    assert.equal(await put(plain.url), "404 no route named 'a' any more: a reload removed it");
    assert.equal(await put(plain.url, 'c'), "404 no route named 'c'", 'a route the registry never had an entry for');
  } finally {
    await s.close();
    await Promise.all([plain, withPath, late].map((backend) => backend.close()));
  }
});

test('registry: a reload that removes a route drops its registrations, so a later route of the same name starts with none; one whose address a pass line takes over is dropped and its refresh is a 409', async () => {
  const registered = await startBackend();
  const other = await startBackend();
  const s = await setup();
  try {
    const put = async (url: string): Promise<string> => {
      const answer = await request(s.admin.port, 'PUT', '/routes/a/upstreams', { body: { url, ttl: '1h' }, token: 's3cret' });
      return answer.status >= 400 ? `${answer.status} ${(JSON.parse(answer.body) as { error: string }).error}` : String(answer.status);
    };
    const reload = (text: string): void => {
      s.proxy.reload(parseConfig(text, 'test.ini'));
      s.admin.registry.reconcile();
    };
    assert.equal(await put(registered.url), '201');

    // Route a removed, then a different route named a: the old registration must not come back.
    reload(s.configText.replace('[proxy.a]', '[proxy.z]'));
    assert.deepEqual(s.admin.registry.entries(), [], 'registrations after the reload removed route a');
    assert.ok(s.logs.includes(`registry: dropped ${registered.url} of route a: the reload removed the route`), `got logs ${JSON.stringify(s.logs)}`);
    reload(s.configText.replace(/path = \/a\npass = [^\n]+\npass = [^\n]+/, `path = /other\npass = ${other.url}`));
    for (let i = 0; i < 4; i++) assert.equal((await request(s.proxyPort, 'GET', '/other/x')).status, 200);
    assert.equal(registered.requests.length, 0, `the new route a sent ${registered.requests.length} request(s) to the removed route's registration`);
    assert.equal(other.requests.length, 4);

    // A pass line added for a registered address: the registration goes, its refresh is a 409.
    assert.equal(await put(registered.url), '201');
    const withPassLine = s.configText.replace(/path = \/a\npass = [^\n]+\npass = [^\n]+/, `path = /other\npass = ${other.url}\npass = ${registered.url} weight=7`);
    reload(withPassLine);
    assert.deepEqual(s.admin.registry.entries(), []);
    assert.ok(s.logs.includes(`registry: dropped ${registered.url} of route a: the pass line at test.ini:10 configures it now`), `got logs ${JSON.stringify(s.logs)}`);
    assert.equal(await put(registered.url), `409 ${registered.url} is already configured for route 'a' by the pass line at test.ini:10`);
  } finally {
    await s.close();
    await Promise.all([registered, other].map((backend) => backend.close()));
  }
});

test('drain: no new requests to the upstream, its in-flight request finishes; enable brings it back', async () => {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const slow = await listenBackend(
    http.createServer((req, res) => {
      if (req.url === '/a/slow') void released.then(() => res.end('slow done'));
      else res.end('first');
    }),
  );
  const s = await setup({ backends: [slow, await startBackend()] });
  try {
    const inFlight = request(s.proxyPort, 'GET', '/a/slow'); // round robin: the first upstream
    await waitFor('the slow request to be in flight', () => s.proxy.routes[0]!.upstreams[0]!.activeRequests === 1);
    const drained = await request(s.admin.port, 'POST', '/routes/a/upstreams/drain', { body: { url: slow.url }, token: 's3cret' });
    assert.equal(drained.status, 200, `got ${drained.status} ${drained.body}, want 200`);
    assert.equal((JSON.parse(drained.body) as { activeRequests: number }).activeRequests, 1);
    for (let i = 0; i < 4; i++) assert.equal((await request(s.proxyPort, 'GET', '/a')).body, 'ok', 'got a request on the draining upstream');
    assert.equal((await statusJson(s)).routes[0]!.upstreams[0]!.state, 'draining');
    release();
    const finished = await inFlight;
    assert.equal(finished.body, 'slow done', `got ${finished.status} ${finished.body}, want the in-flight request to finish`);

    assert.equal((await request(s.admin.port, 'POST', '/routes/a/upstreams/enable', { body: { url: slow.url }, token: 's3cret' })).status, 200);
    const bodies = [(await request(s.proxyPort, 'GET', '/a')).body, (await request(s.proxyPort, 'GET', '/a')).body].sort();
    assert.deepEqual(bodies, ['first', 'ok'], `got ${bodies}, want both upstreams again`);
    const unknown = await request(s.admin.port, 'POST', '/routes/a/upstreams/drain', { body: { url: 'http://127.0.0.1:9' }, token: 's3cret' });
    assert.equal(unknown.status, 404);
  } finally {
    release();
    await s.close();
  }
});

test('every call that names an upstream (PUT, DELETE, drain, enable) takes it once, from ?url= or the body: twice or none is a 400 saying where they came from', async () => {
  const third = await startBackend();
  const s = await setup();
  try {
    const [x, y] = ['http://127.0.0.1:9003', 'http://127.0.0.1:9004'];
    const hint = (call: string): string => `${call}?url=http://host:port or a {"url": …} body`;
    const cases: [string, string, unknown, number, string][] = [
      ['PUT', `/routes/a/upstreams?url=${x}`, { url: y }, 400, `name the upstream once: got 2 urls (1 in the query, 1 in the body); ${hint('PUT …/upstreams')}`],
      ['PUT', `/routes/a/upstreams?url=${x}&url=${y}`, undefined, 400, `name the upstream once: got 2 urls (2 in the query); ${hint('PUT …/upstreams')}`],
      ['PUT', '/routes/a/upstreams', undefined, 400, `say which upstream: ${hint('PUT …/upstreams')}`],
      ['PUT', '/routes/a/upstreams', { weight: 2 }, 400, `say which upstream: ${hint('PUT …/upstreams')}`],
      ['PUT', '/routes/a/upstreams?weight=2', { url: x }, 400, 'unknown query parameter "weight": the query names the upstream only (?url=…); weight, backup and ttl go in a PUT\'s body'],
      ['PUT', `/routes/a/upstreams?url=${x}`, [1], 400, 'expected a JSON object like {"url": "http://127.0.0.1:9003"}, got an array'],
      ['DELETE', `/routes/a/upstreams?url=${x}&url=${y}`, undefined, 400, `name the upstream once: got 2 urls (2 in the query); ${hint('DELETE …/upstreams')}`],
      ['DELETE', `/routes/a/upstreams?url=${x}`, { url: y }, 400, `name the upstream once: got 2 urls (1 in the query, 1 in the body); ${hint('DELETE …/upstreams')}`],
      ['DELETE', '/routes/a/upstreams', null, 400, 'expected a JSON object like {"url": "http://127.0.0.1:9003"}, got null'],
      ['POST', `/routes/a/upstreams/drain?url=${s.backends[0]!.url}`, { url: s.backends[1]!.url }, 400, `name the upstream once: got 2 urls (1 in the query, 1 in the body); ${hint('POST …/upstreams/drain')}`],
      ['POST', `/routes/a/upstreams/enable?url=${x}&url=${x}`, undefined, 400, `name the upstream once: got 2 urls (2 in the query); ${hint('POST …/upstreams/enable')}`],
      ['POST', '/routes/a/upstreams/enable', undefined, 400, `say which upstream: ${hint('POST …/upstreams/enable')}`],
      ['POST', '/routes/a/upstreams/drain', { url: s.backends[0]!.url, wieght: 1 }, 400, 'unknown key "wieght": POST …/upstreams/drain takes {"url": …} only'],
      ['DELETE', '/routes/a/upstreams', { url: x, ttl: '1s' }, 400, 'unknown key "ttl": DELETE …/upstreams takes {"url": …} only'],
    ];
    for (const [method, path, body, status, error] of cases) {
      const answer = await request(s.admin.port, method, path, { ...(body === undefined ? {} : { body }), token: 's3cret' });
      assert.deepEqual([answer.status, (JSON.parse(answer.body) as { error: string }).error], [status, error], `${method} ${path} ${JSON.stringify(body)}`);
    }
    assert.deepEqual(s.proxy.routes[0]!.upstreams.map((u) => [u.origin, u.isDraining]), s.backends.map((b) => [b.url, false]), 'got a route changed by a refused call');

    // Named once, in either place: the query form works for every call, the body form too.
    const port = new URL(third.url).port;
    const put = await request(s.admin.port, 'PUT', `/routes/a/upstreams?url=${encodeURIComponent(third.url)}`, { body: { weight: 3, ttl: '1m' }, token: 's3cret' });
    assert.equal(put.status, 201, `PUT ?url= with a {"weight", "ttl"} body: got ${put.status} ${put.body}, want 201`);
    assert.deepEqual(s.admin.registry.entries('a').map((e) => [e.config.origin, e.config.weight, e.ttlMs]), [[third.url, 3, 60_000]]);
    const drained = await request(s.admin.port, 'POST', `/routes/a/upstreams/drain?url=http://127.0.0.1:${port}`, { token: 's3cret' });
    assert.equal(drained.status, 200, `drain ?url= without a body: got ${drained.status} ${drained.body}, want 200`);
    assert.equal(s.proxy.routes[0]!.upstreams[2]!.isDraining, true, 'got the upstream the query named not draining');
    const enabled = await request(s.admin.port, 'POST', `/routes/a/upstreams/enable?url=${third.url}`, { token: 's3cret' });
    assert.equal(enabled.status, 200, `enable ?url= without a body: got ${enabled.status} ${enabled.body}, want 200`);
    assert.equal(s.proxy.routes[0]!.upstreams[2]!.isDraining, false, 'got the upstream still draining after enable ?url=');
    const deleted = await request(s.admin.port, 'DELETE', '/routes/a/upstreams', { body: { url: third.url }, token: 's3cret' });
    assert.equal(deleted.status, 200, `DELETE with a {"url"} body: got ${deleted.status} ${deleted.body}, want 200`);
    assert.equal(s.proxy.routes[0]!.upstreams.length, 2);
  } finally {
    await s.close();
    await third.close();
  }
});

test('two Authorization headers are a 400 in either order, on state-changing calls and read-only pages alike', async () => {
  const s = await setup();
  try {
    const body = JSON.stringify({ url: 'http://127.0.0.1:9003' });
    const raw = (method: string, path: string, first: string, second: string, content = ''): Promise<{ text: string }> =>
      rawRequest(
        s.admin.port,
        `${method} ${path} HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer ${second}\r\nContent-Length: ${content.length}\r\nConnection: close\r\n\r\n${content}`,
      );
    for (const [method, path, content] of [['PUT', '/routes/a/upstreams', body], ['GET', '/status.json', '']] as const) {
      for (const [first, second] of [['s3cret', 'wrong'], ['wrong', 's3cret']]) {
        const { text } = await raw(method, path, first!, second!, content);
        const status = text.slice(0, 12);
        assert.equal(status, 'HTTP/1.1 400', `${method} ${path} with Bearer ${first} then Bearer ${second}: got ${JSON.stringify(status)}, want HTTP/1.1 400`);
        assert.ok(text.includes('more than one Authorization header (got 2): send one'), `got ${JSON.stringify(text)}, want the reason`);
      }
    }
    assert.equal(s.admin.registry.entries('a').length, 0, 'got an upstream registered by a request with two Authorization headers');
  } finally {
    await s.close();
  }
});

test('CONNECT to the admin listener is answered 405 with an empty Allow, as the proxy listener answers it, and the listener keeps serving', async () => {
  const s = await setup();
  try {
    const { text, closedByServer } = await rawRequest(s.admin.port, 'CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n');
    const [head = '', body = ''] = text.split('\r\n\r\n');
    assert.equal(head.split('\r\n')[0], 'HTTP/1.1 405 Method Not Allowed', `got ${JSON.stringify(text)}, want a 405`);
    assert.ok(head.split('\r\n').includes('allow: '), `got head ${JSON.stringify(head)}, want an empty Allow`);
    assert.deepEqual(JSON.parse(body), { error: 'method CONNECT not allowed: the admin listener tunnels nothing' });
    assert.equal(closedByServer, true, 'got the connection left open, want it closed after the answer');
    assert.equal((await request(s.admin.port, 'GET', '/status.json')).status, 200, 'got the admin listener not serving after a CONNECT');
  } finally {
    await s.close();
  }
});

test('no admin path takes a trailing slash: /status/, /metrics/, /routes/a/upstreams/, …/drain/ are 404s naming the path', async () => {
  const s = await setup();
  try {
    const cases: [string, string][] = [
      ['GET', '/status/'],
      ['GET', '/status.json/'],
      ['GET', '/metrics/'],
      ['GET', '/routes/a/upstreams/'],
      ['PUT', '/routes/a/upstreams/'],
      ['DELETE', '/routes/a/upstreams/'],
      ['POST', '/routes/a/upstreams/drain/'],
      ['GET', '/routes/a/upstreams/drain/'],
      ['POST', '/routes/a/upstreams/enable/'],
    ];
    for (const [method, path] of cases) {
      const answer = await request(s.admin.port, method, path, { body: { url: s.backends[0]!.url }, token: 's3cret' });
      assert.deepEqual([answer.status, (JSON.parse(answer.body) as { error: string }).error], [404, `no admin endpoint ${path}`], `${method} ${path}`);
    }
    assert.equal(s.proxy.routes[0]!.upstreams[0]!.isDraining, false, 'got the upstream drained through …/drain/');
    assert.equal((await request(s.admin.port, 'GET', '/routes/a/upstreams')).status, 200, 'got the path without a slash refused');
  } finally {
    await s.close();
  }
});

test('the admin listener holds at most adminConnectionLimit connections: one more closes the oldest without a request in flight, so idle ones cannot shut a request out (break tests: idle admin connections took the primary\'s last descriptors; then, with a cap that refused new ones, 64 idle connections shut out every operator and heartbeat)', async () => {
  const s = await setup();
  const sockets: net.Socket[] = [];
  const closed = new Set<net.Socket>();
  try {
    const cap = adminConnectionLimit(readOpenFileLimit());
    for (let i = 0; i < cap; i++) {
      const socket = net.connect(s.admin.port, '127.0.0.1');
      socket.on('error', () => {});
      socket.once('close', () => closed.add(socket));
      sockets.push(socket);
      await new Promise((resolve) => socket.once('connect', resolve));
    }
    await waitFor('the admin server to hold every connection', async () => (await new Promise<number>((resolve) => s.admin.admin.server.getConnections((_, n) => resolve(n)))) === cap);
    const answer = await request(s.admin.port, 'GET', '/status.json');
    assert.equal(answer.status, 200, 'a request gets through however many idle connections are open');
    await waitFor('the oldest idle connection closed', () => closed.has(sockets[0]!));
    assert.equal(closed.size, 1, `got ${closed.size} idle connections closed, want the oldest alone`);
    assert.ok(await new Promise<number>((resolve) => s.admin.admin.server.getConnections((_, n) => resolve(n))) <= cap);
  } finally {
    for (const socket of sockets) socket.destroy();
    await s.close();
  }
});

