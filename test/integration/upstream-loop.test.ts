/**
 * An upstream that is the proxy's own listener (src/wire/own-listeners.ts), through the real proxy
 * on loopback: the request is answered 502 `PRX_UPSTREAM_LOOP` at once with one extra accepted
 * connection and no second request (before, it looped through the proxy until sockets ran out), a
 * route with a real backend beside it serves every request from the backend, the HTTPS listener and
 * upgrade requests are guarded the same way, and a health probe to it fails with that reason. The
 * proxy's address may come from a `pass` line, a DNS answer or a registry entry: all three are here.
 * Every request here has a hard deadline, so a proxy that loops fails the test instead of hanging it.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/load-config.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import type { AccessLogRecord } from '../../src/gateway/access-log.js';
import { rawRequest, startBackend, waitFor } from '../helpers/proxy-harness.js';
import { addressBackend, freePort } from '../helpers/cli-process.js';
import { discoveredUpstreamConfig } from '../../src/discovery/discovered-line.js';
import { TLS_FIXTURES, tlsCertLine } from '../tls/https-client.js';
import { parseRegisteredUpstream } from '../../src/admin/upstream-registry.js';

interface LoopProxy {
  readonly proxy: ProxyServer;
  readonly port: number;
  readonly logs: AccessLogRecord[];
  /** Connections the plain listener accepted so far. */
  accepted(): number;
}

/** A proxy on `127.0.0.1:PORT` (a free port chosen first, so the routes can name it) with the routes `routes(PORT)`. */
async function startLoopProxy(t: TestContext, routes: (port: number) => string, server = ''): Promise<LoopProxy> {
  const port = await freePort();
  const config = parseConfig(`[server]\nlisten = 127.0.0.1:${port}\n${server}\n${routes(port)}`, 'test.ini');
  const logs: AccessLogRecord[] = [];
  const proxy = new ProxyServer(config, { accessLog: { isEnabled: true, write: (record) => logs.push(record), close: async () => {} }, deps: { log: () => {} } });
  let accepted = 0;
  proxy.server.on('connection', () => accepted++);
  t.after(() => proxy.close(500));
  await proxy.listen();
  return { proxy, port, logs, accepted: () => accepted };
}

/** GET `path` on a new connection; rejects when no answer came within `deadlineMs` (a loop never answers). */
function get(port: number, path: string, deadlineMs = 1500): Promise<{ status: number; body: string; elapsedMs: number }> {
  const startedAt = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false, signal: AbortSignal.timeout(deadlineMs) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, elapsedMs: Date.now() - startedAt }));
    });
    req.on('error', (error) => reject(new Error(`no answer to GET ${path} within ${deadlineMs} ms: ${error.message}`)));
  });
}

test('a route whose pass is the proxy itself answers 502 PRX_UPSTREAM_LOOP at once, without making a connection to itself', async (t) => {
  const { proxy, port, logs, accepted } = await startLoopProxy(t, (port) => `[proxy.self]\npath = /\npass = http://127.0.0.1:${port}\nmax_fails = 0\n`);
  const res = await get(port, '/x');
  assert.equal(res.status, 502, `got ${res.status}, want 502`);
  assert.ok(res.elapsedMs < 1000, `answered after ${res.elapsedMs} ms, want within 1 s`);
  await waitFor(() => logs.length === 1, 1000, 'the access-log record');
  assert.deepEqual(logs[0]!.attempts, [{ upstream: `127.0.0.1:${port}`, error: 'PRX_UPSTREAM_LOOP' }]);
  // The client's connection and nothing else: the loop connection is refused before it is made.
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(accepted(), 1, `got ${accepted()} accepted connections, want 1 (the client's)`);
  assert.equal(proxy.serverStats.requests, 1, `got ${proxy.serverStats.requests} requests read, want 1`);
  assert.equal(logs.length, 1, `got ${logs.length} access-log records, want 1: the refused connection logs nothing of its own`);
});

test('beside a real backend, the proxy itself is refused once and ejected: 20 of 20 requests get 200 from the backend', async (t) => {
  const backend = await startBackend((_req, res) => res.end('from the backend'));
  t.after(() => backend.close());
  const { port, logs } = await startLoopProxy(t, (port) => `[proxy.mixed]\npath = /\npass = http://127.0.0.1:${port}\npass = ${backend.url}\n`);
  for (let i = 0; i < 20; i++) {
    const res = await get(port, `/r${i}`);
    assert.equal(`${res.status} ${res.body}`, '200 from the backend', `request ${i}: got ${res.status} ${res.body}, want 200 from the backend`);
  }
  assert.equal(backend.requests.length, 20, `got ${backend.requests.length} requests at the backend, want 20`);
  await waitFor(() => logs.length === 20, 1000, 'the 20 access-log records');
  const refused = logs.flatMap((record) => record.attempts).filter((attempt) => attempt.error === 'PRX_UPSTREAM_LOOP');
  // max_fails = 1 (the default): the first refusal ejects the proxy's own address for fail_timeout.
  assert.equal(refused.length, 1, `got ${refused.length} attempts refused as loops, want 1: ${JSON.stringify(logs.map((record) => record.attempts))}`);
});

test('a DNS answer with the proxy\'s own address among the backends routes every request to the real one', async (t) => {
  const { proxy, port, logs } = await startLoopProxy(t, (port) => `[proxy.api]\npath = /\npass = http://api.test:${port} resolve\n`);
  // The backend on the same port as the proxy, on another loopback address: what a record set
  // of 127.0.0.1 and 127.0.0.2 for api.test names.
  const backend = await addressBackend('127.0.0.2', port);
  t.after(() => new Promise<void>((resolve) => backend.close(() => resolve())));
  const passLine = proxy.config.routes[0]!.upstreams[0]!;
  proxy.setDiscoveredUpstreams('api', [{ lineOrigin: passLine.origin, upstreams: ['127.0.0.1', '127.0.0.2'].map((address) => discoveredUpstreamConfig(passLine, { address, port })) }]);
  for (let i = 0; i < 20; i++) {
    const res = await get(port, `/r${i}`);
    assert.equal(`${res.status} ${res.body}`, '200 127.0.0.2', `request ${i}: got ${res.status} ${res.body}, want 200 from 127.0.0.2`);
  }
  await waitFor(() => logs.length === 20, 1000, 'the 20 access-log records');
  const refused = logs.flatMap((record) => record.attempts).filter((attempt) => attempt.error === 'PRX_UPSTREAM_LOOP');
  assert.deepEqual(refused, [{ upstream: `127.0.0.1:${port}`, error: 'PRX_UPSTREAM_LOOP' }], 'want one refusal of the own address, then ejected');
});

test('a registry entry naming the proxy itself, beside a configured backend: 10 of 10 requests get 200 from the backend', async (t) => {
  const backend = await startBackend((_req, res) => res.end('from the backend'));
  t.after(() => backend.close());
  const { proxy, port, logs } = await startLoopProxy(t, () => `[proxy.a]\npath = /\npass = ${backend.url}\n`);
  proxy.setRegisteredUpstreams('a', [parseRegisteredUpstream({ url: `http://127.0.0.1:${port}` }, 'a')]);
  assert.equal(proxy.routes[0]!.upstreams.length, 2, 'want the registered upstream beside the configured one');
  for (let i = 0; i < 10; i++) {
    const res = await get(port, `/r${i}`);
    assert.equal(`${res.status} ${res.body}`, '200 from the backend', `request ${i}: got ${res.status} ${res.body}, want 200 from the backend`);
  }
  await waitFor(() => logs.length === 10, 1000, 'the 10 access-log records');
  const refused = logs.flatMap((record) => record.attempts).filter((attempt) => attempt.error === 'PRX_UPSTREAM_LOOP');
  assert.equal(refused.length, 1, `got ${refused.length} attempts refused as loops, want 1 (then ejected)`);
});

test('an https:// pass naming the proxy\'s own tls_listen is refused before a connection is made', async (t) => {
  const tlsPort = await freePort();
  const { proxy, port, logs } = await startLoopProxy(
    t,
    () => `[proxy.self]\npath = /\npass = https://127.0.0.1:${tlsPort}\ntls_server_name = localhost\ntls_ca = ${join(TLS_FIXTURES, 'ca.pem')}\nmax_fails = 0\n`,
    `tls_listen = 127.0.0.1:${tlsPort}\n${tlsCertLine('localhost')}\n`,
  );
  await proxy.listenTls();
  const res = await get(port, '/x');
  assert.equal(res.status, 502, `got ${res.status}, want 502`);
  await waitFor(() => logs.length === 1, 1000, 'the access-log record');
  assert.equal(logs[0]!.attempts.at(-1)?.error, 'PRX_UPSTREAM_LOOP', `got ${JSON.stringify(logs[0]!.attempts)}, want PRX_UPSTREAM_LOOP`);
  assert.equal(proxy.serverStats.requests, 1, `got ${proxy.serverStats.requests} requests read, want 1`);
});

test('an upgrade request to the proxy itself gets 502, not a tunnel into itself', async (t) => {
  const { proxy, port, logs } = await startLoopProxy(t, (port) => `[proxy.self]\npath = /\npass = http://127.0.0.1:${port}\nmax_fails = 0\n`);
  const upgrade = 'GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n';
  const res = await rawRequest(port, upgrade, 1000);
  assert.match(res.text, /^HTTP\/1\.1 502 /, `got ${JSON.stringify(res.text.slice(0, 40))}, want a 502`);
  await waitFor(() => logs.length === 1, 1000, 'the access-log record');
  assert.equal(logs[0]!.attempts[0]?.error, 'PRX_UPSTREAM_LOOP');
  assert.equal(proxy.serverStats.requests, 1, `got ${proxy.serverStats.requests} requests read, want 1`);
});

test('a health probe to the proxy itself fails with the reason PRX_UPSTREAM_LOOP and sends no request', async (t) => {
  const backend = await startBackend();
  t.after(() => backend.close());
  const { proxy, port } = await startLoopProxy(
    t,
    (port) => `[proxy.checked]\npath = /\npass = http://127.0.0.1:${port}\npass = ${backend.url}\nhealth_check = on\nhealth_interval = 1h\nhealth_fall = 1\n`,
  );
  const [self, real] = proxy.routes[0]!.upstreams;
  await waitFor(() => self!.lastProbe !== undefined && real!.lastProbe !== undefined, 2000, 'the first probes');
  const want = `PRX_UPSTREAM_LOOP: 127.0.0.1:${port} is this proxy's own listener (listen 127.0.0.1:${port}): the request would loop`;
  assert.equal(self!.lastProbe!.error, want, `got ${self!.lastProbe!.error}, want ${want}`);
  assert.equal(self!.healthState, 'down', `got ${self!.healthState}, want down after health_fall = 1`);
  assert.equal(real!.lastProbe!.ok, true, 'the real backend: got a failed probe, want ok');
  assert.equal(proxy.serverStats.requests, 0, `got ${proxy.serverStats.requests} requests read by the proxy, want 0: the probe wrote nothing`);
});
