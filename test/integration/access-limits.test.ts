/**
 * SPEC 8 through the real proxy, with real sockets: `access` (403) judged on the client IP of
 * clients bound to distinct loopback addresses, X-Forwarded-For from untrusted and trusted peers,
 * `rate_limit` (429 + Retry-After) on an injected clock, `conn_limit` (429 + Retry-After: 1) with
 * its slot given back however the exchange ends, the order of the checks, ip-hash on the client
 * IP, and the metrics and status lines of what was refused.
 */
import test, { type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { execFile } from 'node:child_process';
import { startBackend, startRawBackend, startTestProxy, headerValues, waitFor, type TestProxy } from '../helpers/proxy-harness.js';
import { LocalLimits, LocalRouteLimits } from '../../src/limits/local-limits.js';
import type { LimitsProvider } from '../../src/limits/limits.js';
import { MetricsCollector } from '../../src/admin/metrics-collector.js';
import { renderMetrics } from '../../src/admin/metrics-exposition.js';
import { buildStatusSnapshot, collectWorkerReport } from '../../src/admin/status-snapshot.js';
import { connectWebSocket, startEchoServer } from '../helpers/websocket.js';
import { hashPassword } from '../../src/auth/password-hash.js';

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** One GET from `localAddress` (a loopback address of its own), on a fresh connection unless `agent` is given. */
function get(port: number, path: string, options: { localAddress?: string; headers?: http.OutgoingHttpHeaders; agent?: http.Agent } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, localAddress: options.localAddress, headers: options.headers, agent: options.agent ?? false }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function proxyFor(t: TestContext, ini: string, options: Parameters<typeof startTestProxy>[1] = {}): Promise<TestProxy> {
  const proxy = await startTestProxy(ini, options);
  t.after(() => proxy.close());
  return proxy;
}

async function backendFor(t: TestContext, handler?: Parameters<typeof startBackend>[0]): Promise<Awaited<ReturnType<typeof startBackend>>> {
  const backend = await startBackend(handler);
  t.after(() => backend.close());
  return backend;
}

/** The conn_limit / rate_limit state of `proxy`'s first route (LocalLimits). */
function limitsOf(proxy: TestProxy): LocalRouteLimits {
  const limits = proxy.proxy.routes[0]!.limits;
  assert.ok(limits instanceof LocalRouteLimits);
  return limits;
}

test('access: allow 127.0.0.2, deny all — by the client address, in order, 403 with a one-line body, logged and not forwarded', async (t) => {
  const backend = await backendFor(t);
  const { port, logs } = await proxyFor(t, `[proxy.a]\npath = /\npass = ${backend.url}\naccess = allow 127.0.0.2\naccess = deny all\n`);
  const allowed = await get(port, '/x', { localAddress: '127.0.0.2' });
  const denied = await get(port, '/x', { localAddress: '127.0.0.3' });
  assert.equal(allowed.status, 200, `127.0.0.2: got ${allowed.status}, want 200`);
  assert.equal(denied.status, 403, `127.0.0.3: got ${denied.status}, want 403`);
  assert.equal(denied.body, 'forbidden: your address is not allowed on this route\n');
  assert.equal(backend.requests.length, 1, 'got the denied request forwarded');
  await waitFor(() => logs.length === 2, 3000, 'two log records');
  const deniedLog = logs.find((record) => record.status === 403)!;
  assert.equal(deniedLog.clientIp, '127.0.0.3');
  assert.equal(deniedLog.refusal, 'access');
  assert.equal(deniedLog.route, 'a');
});

/** In a child process, `times` times one after another: connects to `port`, writes `request`, and resets the connection (RST) at once. */
function resetRightAfterSending(port: number, request: string, times: number): Promise<void> {
  const script =
    `const net = require('node:net');` +
    `const once = () => new Promise((done) => { const s = net.connect(${port}, '127.0.0.1', () => { s.write(${JSON.stringify(request)}); s.resetAndDestroy(); }); s.on('error', () => {}); s.on('close', done); });` +
    `(async () => { for (let i = 0; i < ${times}; i++) await once(); })();`;
  return new Promise((resolve, reject) => execFile(process.execPath, ['-e', script], (error) => (error === null ? resolve() : reject(error))));
}

test('access: a client that resets its connection right after sending a request is still judged by its address, and a denied request never reaches the upstream (a break test)', async (t) => {
  const backend = await startBackend();
  const proxy = await startTestProxy(`[proxy.priv]\npath = /priv\npass = ${backend.url}\naccess = deny 127.0.0.0/8\nretries = 0\n[proxy.pub]\npath = /pub\npass = ${backend.url}\n`);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  assert.equal((await get(proxy.port, '/priv/normal')).status, 403);
  for (let round = 0; round < 5; round++) {
    assert.equal((await get(proxy.port, '/pub/warm')).status, 200); // a pooled upstream connection is ready
    // From another process, so that the RST can arrive before this process reads the request.
    await resetRightAfterSending(proxy.port, 'POST /priv/delete-everything HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n', 20);
    await waitFor(() => proxy.proxy.serverStats.openConnections === 0, 3000, 'the reset connections closed');
  }
  assert.equal((await get(proxy.port, '/pub/last')).status, 200); // on the same pooled connection, after anything sent before
  const forwarded = backend.requests.map((r) => r.url).filter((url) => url.startsWith('/priv'));
  assert.deepEqual(forwarded, [], `got ${JSON.stringify(forwarded)} at the upstream behind deny 127.0.0.0/8`);
  const judged = proxy.logs.filter((r) => r.target === '/priv/delete-everything');
  assert.ok(judged.every((r) => r.clientIp === '127.0.0.1' && r.status !== 200), `got ${JSON.stringify(judged.map((r) => [r.clientIp, r.status]))}`);
});

test('a spoofed X-Forwarded-For from an untrusted peer changes nothing; from a trusted one it decides, and the peer is appended', async (t) => {
  const backend = await backendFor(t);
  const ini = `[server]\ntrusted_proxies = 127.0.0.4\n[proxy.a]\npath = /\npass = ${backend.url}\naccess = allow 127.0.0.2\naccess = deny all\n`;
  const { port, logs } = await proxyFor(t, ini);
  const spoofed = await get(port, '/', { localAddress: '127.0.0.3', headers: { 'X-Forwarded-For': '127.0.0.2' } });
  assert.equal(spoofed.status, 403, `untrusted 127.0.0.3 claiming 127.0.0.2: got ${spoofed.status}, want 403`);
  const viaTrusted = await get(port, '/', { localAddress: '127.0.0.4', headers: { 'X-Forwarded-For': '6.6.6.6, 127.0.0.2' } });
  assert.equal(viaTrusted.status, 200, `trusted 127.0.0.4 for 127.0.0.2: got ${viaTrusted.status}, want 200`);
  const deniedViaTrusted = await get(port, '/', { localAddress: '127.0.0.4', headers: { 'X-Forwarded-For': '127.0.0.2, 127.0.0.3' } });
  assert.equal(deniedViaTrusted.status, 403, `trusted 127.0.0.4 for 127.0.0.3: got ${deniedViaTrusted.status}, want 403`);
  assert.deepEqual(headerValues(backend.requests[0]!.rawHeaders, 'x-forwarded-for'), ['6.6.6.6, 127.0.0.2, 127.0.0.4'], 'X-Forwarded-For appends the peer');
  await waitFor(() => logs.length === 3, 3000, 'three log records');
  assert.deepEqual(logs.map((record) => record.clientIp), ['127.0.0.3', '127.0.0.2', '127.0.0.3'], 'the log names the client IP that was judged');
});

test('trusted_proxies = ::ffff:127.0.0.4 (an IPv4-mapped entry) trusts the IPv4 peer 127.0.0.4: its X-Forwarded-For decides access', async (t) => {
  const backend = await backendFor(t);
  const ini = `[server]\ntrusted_proxies = ::ffff:127.0.0.4\n[proxy.a]\npath = /\npass = ${backend.url}\naccess = allow ::ffff:127.0.0.2\naccess = deny all\n`;
  const { port, logs } = await proxyFor(t, ini);
  const viaTrusted = await get(port, '/', { localAddress: '127.0.0.4', headers: { 'X-Forwarded-For': '127.0.0.2' } });
  assert.equal(viaTrusted.status, 200, `trusted ::ffff:127.0.0.4 for 127.0.0.2: got ${viaTrusted.status}, want 200`);
  const untrusted = await get(port, '/', { localAddress: '127.0.0.3', headers: { 'X-Forwarded-For': '127.0.0.2' } });
  assert.equal(untrusted.status, 403, `untrusted 127.0.0.3 claiming 127.0.0.2: got ${untrusted.status}, want 403`);
  await waitFor(() => logs.length === 2, 3000, 'two log records');
  assert.deepEqual(logs.map((record) => record.clientIp), ['127.0.0.2', '127.0.0.3'], 'the client IP judged and logged');
});

test('ip-hash hashes the client IP: two clients behind one trusted proxy go where they would go directly', async (t) => {
  const one = await backendFor(t);
  const two = await backendFor(t);
  const ini = `[server]\ntrusted_proxies = 127.0.0.1\n[proxy.a]\npath = /\nstrategy = ip-hash\npass = ${one.url}\npass = ${two.url}\n`;
  const { port } = await proxyFor(t, ini);
  const upstreamOf = async (options: Parameters<typeof get>[2]): Promise<string> => {
    const before = one.requests.length;
    await get(port, '/', options);
    return one.requests.length > before ? 'one' : 'two';
  };
  // crc32 mod 2: 127.0.0.2 → 0, 127.0.0.4 → 1 (SPEC 3's ip-hash).
  const direct = [await upstreamOf({ localAddress: '127.0.0.2' }), await upstreamOf({ localAddress: '127.0.0.4' })];
  const behind = [await upstreamOf({ headers: { 'X-Forwarded-For': '127.0.0.2' } }), await upstreamOf({ headers: { 'X-Forwarded-For': '127.0.0.4' } })];
  assert.deepEqual(direct, ['one', 'two']);
  assert.deepEqual(behind, direct, `behind the proxy: got ${behind.join(', ')}, want ${direct.join(', ')}`);
});

test('consistent-hash on client_ip hashes the client IP behind a trusted proxy too', async (t) => {
  const backends = [await backendFor(t), await backendFor(t), await backendFor(t)];
  const passLines = backends.map((backend) => `pass = ${backend.url}\n`).join('');
  const { port } = await proxyFor(t, `[server]\ntrusted_proxies = 127.0.0.1\n[proxy.a]\npath = /\nstrategy = consistent-hash\nhash_key = client_ip\n${passLines}`);
  const upstreamOf = async (options: Parameters<typeof get>[2]): Promise<number> => {
    const before = backends.map((backend) => backend.requests.length);
    await get(port, '/', options);
    return backends.findIndex((backend, i) => backend.requests.length > before[i]!);
  };
  const clients = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6', '127.0.0.7'];
  const direct: number[] = [];
  const behind: number[] = [];
  for (const ip of clients) direct.push(await upstreamOf({ localAddress: ip }));
  for (const ip of clients) behind.push(await upstreamOf({ headers: { 'X-Forwarded-For': ip } }));
  assert.deepEqual(behind, direct, `behind the proxy: got ${behind.join(' ')}, want ${direct.join(' ')}`);
  assert.ok(new Set(direct).size > 1, `got every client on upstream ${direct[0]}: the test shows nothing`);
});

test('rate_limit = 10/s burst=5 on an injected clock: 30 at once → 5 × 200 and 25 × 429 with Retry-After: 1; 250 ms later 2 more; 5 s at 30 req/s → rate × T + burst', async (t) => {
  let now = 0;
  const backend = await backendFor(t);
  const { port, logs } = await proxyFor(t, `[proxy.a]\npath = /\npass = ${backend.url}\nrate_limit = 10/s burst=5\n`, { limits: new LocalLimits({ now: () => now }) });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  t.after(() => agent.destroy());
  const burst = await Promise.all(Array.from({ length: 30 }, () => get(port, '/', { agent })));
  const ok = burst.filter((answer) => answer.status === 200).length;
  const limited = burst.filter((answer) => answer.status === 429);
  assert.equal(ok, 5, `got ${ok} × 200, want 5`);
  assert.equal(limited.length, 25, `got ${limited.length} × 429, want 25`);
  for (const answer of limited) {
    assert.equal(answer.headers['retry-after'], '1');
    assert.equal(answer.body, 'too many requests: over the rate limit of this route, retry later\n');
  }
  now = 250;
  const later = await Promise.all(Array.from({ length: 3 }, () => get(port, '/', { agent })));
  assert.deepEqual(later.map((answer) => answer.status).sort(), [200, 200, 429]);

  // 5 s at 30 req/s from a full bucket (a long pause first): 10/s × 5 s + burst = 55.
  now = 100_000;
  let through = 0;
  for (let i = 0; i < 150; i++) {
    now = 100_000 + (i * 1000) / 30;
    if ((await get(port, '/', { agent })).status === 200) through++;
  }
  assert.ok(Math.abs(through - 55) <= 5.5, `got ${through} × 200 in 5 s at 30 req/s, want 55 within 10%`);
  await waitFor(() => logs.length === 183, 3000, 'every record');
  assert.equal(logs.filter((record) => record.refusal === 'rate_limit').length, 26 + 150 - through);
});

test('conn_limit = 2: 5 concurrent slow requests → 2 through, 3 × 429 with Retry-After: 1; the slots come back when they finish', async (t) => {
  const held: http.ServerResponse[] = [];
  const backend = await backendFor(t, (_req, res) => held.push(res));
  const proxy = await proxyFor(t, `[proxy.a]\npath = /\npass = ${backend.url}\nconn_limit = 2\n`);
  const settled: Answer[] = [];
  const answers = Array.from({ length: 5 }, () => get(proxy.port, '/').then((answer) => (settled.push(answer), answer)));
  await waitFor(() => held.length === 2 && settled.length === 3, 3000, 'two held at the backend and three answered');
  for (const answer of settled) {
    assert.equal(answer.status, 429, `got ${answer.status} while 2 were held, want 429`);
    assert.equal(answer.headers['retry-after'], '1');
    assert.equal(answer.body, 'too many requests: too many requests in flight from your address on this route\n');
  }
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(held.length, 2, `got ${held.length} requests at the backend, want 2`);
  for (const res of held) res.end('slow');
  const statuses = (await Promise.all(answers)).map((answer) => answer.status).sort();
  assert.deepEqual(statuses, [200, 200, 429, 429, 429]);
  await waitFor(() => limitsOf(proxy).connLimiter.size === 0, 3000, 'every slot back');
  held.length = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const inTurn: number[] = [];
  for (let i = 0; i < 3; i++) {
    const answer = get(proxy.port, '/', { agent });
    await waitFor(() => held.length === i + 1, 3000, `request ${i + 1} at the backend`);
    held[i]!.end('ok');
    inTurn.push((await answer).status);
  }
  assert.deepEqual(inTurn, [200, 200, 200], 'requests one after another on one keep-alive connection each got their slot back');
});

test('conn_limit: the slot is given back exactly once however the exchange ends: client gone, upstream refused, retried, 5xx, read timeout, closed tunnel', async (t) => {
  const held: http.ServerResponse[] = [];
  const slow = await backendFor(t, (_req, res) => held.push(res));
  const failing = await backendFor(t, (_req, res) => {
    res.statusCode = 500;
    res.end('boom');
  });
  const refused = await startRawBackend((socket) => socket.destroy());
  t.after(() => refused.close());
  const silent = await startRawBackend(() => {});
  t.after(() => silent.close());
  const echo = await startEchoServer();
  t.after(() => echo.close());
  const ini = [
    `[proxy]\nconn_limit = 1\nmax_fails = 0\n`,
    `[proxy.slow]\npath = /slow\npass = ${slow.url}\n`,
    `[proxy.five]\npath = /five\npass = ${failing.url}\n`,
    `[proxy.refused]\npath = /refused\npass = ${refused.url}\n`,
    `[proxy.retried]\npath = /retried\npass = ${refused.url}\npass = ${slow.url}\n`,
    `[proxy.timeout]\npath = /timeout\npass = ${silent.url}\nread_timeout = 200ms\n`,
    `[proxy.ws]\npath = /ws\npass = http://127.0.0.1:${echo.port}\n`,
  ].join('');
  const proxy = await proxyFor(t, ini);
  const inFlight = (route: string): number => {
    const limits = proxy.proxy.routes.find((candidate) => candidate.name === route)!.limits as LocalRouteLimits;
    return limits.connLimiter.inFlightOf('127.0.0.1');
  };

  // Client gone: abort a held request; the slot comes back, the next request gets in.
  const gone = http.get({ host: '127.0.0.1', port: proxy.port, path: '/slow', agent: false });
  gone.on('error', () => {});
  await waitFor(() => held.length === 1, 3000, 'the held request');
  assert.equal(inFlight('slow'), 1);
  gone.destroy();
  await waitFor(() => inFlight('slow') === 0, 3000, 'the slot of a client that left');

  assert.equal((await get(proxy.port, '/five')).status, 500);
  assert.equal((await get(proxy.port, '/refused')).status, 502);
  const retried = get(proxy.port, '/retried');
  await waitFor(() => held.length === 2, 3000, 'the retried request at its second upstream');
  assert.equal(inFlight('retried'), 1, 'a retry holds one slot, not two');
  held[1]!.end('ok');
  assert.equal((await retried).status, 200);
  assert.equal((await get(proxy.port, '/timeout')).status, 504);
  for (const route of ['five', 'refused', 'retried', 'timeout']) await waitFor(() => inFlight(route) === 0, 3000, `the slot of ${route}`);

  // A tunnel counts until it closes.
  const ws = await connectWebSocket(proxy.port, '/ws');
  assert.equal(inFlight('ws'), 1, 'an open tunnel holds its slot');
  assert.equal((await get(proxy.port, '/ws')).status, 429, 'a second request while the tunnel is open');
  await ws.close();
  await waitFor(() => inFlight('ws') === 0, 3000, 'the slot of the closed tunnel');
  assert.equal((await get(proxy.port, '/ws')).status, 200);
  held[0]?.destroy();
});

test('order: a 403 takes no slot and no token, a conn_limit 429 takes no token, a 401 after its token still spent it', async (t) => {
  const calls: string[] = [];
  const local = new LocalLimits({ now: () => 0 });
  const spy: LimitsProvider = {
    limitsFor(routeName, rateLimit, connLimit) {
      const limits = local.limitsFor(routeName, rateLimit, connLimit);
      if (limits === undefined) return undefined;
      return {
        acquireSlot: (ip) => (calls.push(`slot ${ip}`), limits.acquireSlot(ip)),
        takeToken: (ip) => (calls.push(`token ${ip}`), limits.takeToken(ip)),
      };
    },
  };
  const held: http.ServerResponse[] = [];
  const backend = await backendFor(t, (_req, res) => held.push(res));
  const hash = hashPassword('secret');
  const ini = `[proxy.a]\npath = /\npass = ${backend.url}\naccess = deny 127.0.0.3\nconn_limit = 1\nrate_limit = 1/m burst=2\nauth_basic = r\nauth_user = tom:${hash}\n`;
  const { port } = await proxyFor(t, ini, { limits: spy });
  assert.equal((await get(port, '/', { localAddress: '127.0.0.3' })).status, 403);
  assert.deepEqual(calls, [], 'a denied request asked the limits');

  assert.equal((await get(port, '/', { localAddress: '127.0.0.2' })).status, 401);
  assert.deepEqual(calls, ['slot 127.0.0.2', 'token 127.0.0.2'], 'conn_limit, then rate_limit, then auth');

  const authorization = `Basic ${Buffer.from('tom:secret').toString('base64')}`;
  const holding = get(port, '/', { localAddress: '127.0.0.2', headers: { authorization } });
  await waitFor(() => held.length === 1, 5000, 'the held request');
  calls.length = 0;
  const connLimited = await get(port, '/', { localAddress: '127.0.0.2', headers: { authorization } });
  assert.equal(connLimited.status, 429);
  assert.deepEqual(calls, ['slot 127.0.0.2'], 'a conn_limit 429 took a token');
  held[0]!.end('ok');
  assert.equal((await holding).status, 200);
  const rateLimited = await get(port, '/', { localAddress: '127.0.0.2', headers: { authorization } });
  assert.equal(rateLimited.status, 429, 'the 401 and the 200 spent the burst of 2');
  assert.equal(rateLimited.headers['retry-after'], '60');
});

test('metrics and status: proxy_denied_total, proxy_rate_limited_total{limit} and the last minute per route, exact', async (t) => {
  const epochMs = 1_800_000_000_000;
  const backend = await backendFor(t);
  const ini = `[proxy.a]\npath = /a\npass = ${backend.url}\naccess = deny 127.0.0.3\nrate_limit = 1/m burst=2\n[proxy.b]\npath = /b\npass = ${backend.url}\n`;
  const proxy = await proxyFor(t, ini, { limits: new LocalLimits({ now: () => 0 }) });
  const metrics = new MetricsCollector(() => epochMs);
  const detach = metrics.attach(proxy.proxy);
  t.after(detach);
  await get(proxy.port, '/a', { localAddress: '127.0.0.3' });
  for (let i = 0; i < 5; i++) await get(proxy.port, '/a', { localAddress: '127.0.0.2' });
  await get(proxy.port, '/b');
  await waitFor(() => proxy.logs.length === 7, 3000, 'every record');
  const report = collectWorkerReport(proxy.proxy, metrics.state, 0);
  const snapshot = buildStatusSnapshot(proxy.proxy, [report], { mode: 'single', registry: [], registryNowMs: 0, probeNowMs: 0, epochNowMs: epochMs + 30_000 });
  const lines = renderMetrics(snapshot, metrics.state).split('\n').filter((line) => /^proxy_(denied|rate_limited)_total/.test(line));
  assert.deepEqual(lines, ['proxy_denied_total{route="a"} 1', 'proxy_rate_limited_total{route="a",limit="rate"} 3']);
  assert.deepEqual(
    snapshot.routes.map((route) => route.limits),
    [
      { accessRules: 1, rateLimit: '1/m burst=2', connLimit: null, lastMinute: { denied: 1, rateLimited: 3, connLimited: 0 } },
      { accessRules: 0, rateLimit: null, connLimit: null, lastMinute: { denied: 0, rateLimited: 0, connLimited: 0 } },
    ],
  );
  const aMinuteLater = buildStatusSnapshot(proxy.proxy, [report], { mode: 'single', registry: [], registryNowMs: 0, probeNowMs: 0, epochNowMs: epochMs + 60_000 });
  assert.deepEqual(aMinuteLater.routes[0]!.limits.lastMinute, { denied: 0, rateLimited: 0, connLimited: 0 }, 'the last minute forgets');
  const combined = proxy.logs.filter((record) => record.refusal !== undefined).map((record) => `${record.status} ${record.refusal}`);
  assert.deepEqual(combined, ['403 access', '429 rate_limit', '429 rate_limit', '429 rate_limit']);
});

test('reload: unchanged rate_limit settings keep the buckets, changed ones start full', async (t) => {
  const backend = await backendFor(t);
  const ini = (rate: string): string => `[proxy.a]\npath = /\npass = ${backend.url}\nrate_limit = ${rate}\n`;
  const proxy = await proxyFor(t, ini('1/m burst=1'), { limits: new LocalLimits({ now: () => 0 }) });
  const { parseConfig } = await import('../../src/config/load-config.js');
  assert.equal((await get(proxy.port, '/')).status, 200);
  assert.equal((await get(proxy.port, '/')).status, 429);
  proxy.proxy.reload(parseConfig(`; edited\n${ini('1/m burst=1')}`, 'test.ini'));
  assert.equal((await get(proxy.port, '/')).status, 429, 'got a fresh bucket after a reload that kept the settings');
  proxy.proxy.reload(parseConfig(ini('1/m burst=2'), 'test.ini'));
  assert.equal((await get(proxy.port, '/')).status, 200, 'got the old bucket under new settings');
});
