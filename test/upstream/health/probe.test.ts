/**
 * The health probe against real sockets on port 0 (SPEC 4): status verdicts, refused connections,
 * a server that never answers (aborted at health_timeout), a huge body (capped, socket closed),
 * `localhost` on either address family, and abort; over TLS, a discovered address checked under
 * its line name.
 */
import assert from 'node:assert/strict';
import dns from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import type { HealthCheckConfig } from '../../../src/config/config.js';
import { isHealthyStatus, probe, summarizeProbeError } from '../../../src/upstream/health/probe.js';
import { healthConfig, upstreamConfig } from '../upstream-fixtures.js';
import { OwnListeners } from '../../../src/wire/own-listeners.js';

const servers: net.Server[] = [];
after(() => {
  for (const server of servers) {
    server.close();
    (server as http.Server).closeAllConnections?.();
  }
});

/** An HTTP server on `host`:0 whose every request gets `handler`; resolves to its port. */
async function listen(handler: http.RequestListener, host = '127.0.0.1'): Promise<{ port: number; server: http.Server }> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

/** A port nobody listens on: bind port 0, note it, close. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function check(overrides: Partial<HealthCheckConfig> = {}): HealthCheckConfig {
  return healthConfig(overrides);
}

describe('probe', () => {
  it('200 to HEAD / is ok, with Host host:port and Connection: close', async () => {
    let seen: { method?: string; url?: string; host?: string; connection?: string } = {};
    const { port } = await listen((req, res) => {
      seen = { method: req.method, url: req.url, host: req.headers.host, connection: req.headers.connection };
      res.end();
    });
    const result = await probe(upstreamConfig({ port }), check(), { timeoutMs: 2000 });
    assert.equal(result.ok, true, `got ${JSON.stringify(result)}, want ok`);
    assert.equal(result.status, 200);
    assert.equal(result.error, undefined);
    assert.ok(result.latencyMs >= 0 && result.latencyMs < 2000, `got latencyMs ${result.latencyMs}`);
    assert.deepEqual(seen, { method: 'HEAD', url: '/', host: `127.0.0.1:${port}`, connection: 'close' });
  });

  it('fails with the reason PRX_UPSTREAM_LOOP, making no connection, when the upstream is one of ownListeners (an IP literal or a name all of whose addresses are own)', async () => {
    let connections = 0;
    const { port, server } = await listen((_req, res) => res.end());
    server.on('connection', () => connections++);
    const ownListeners = new OwnListeners(() => []);
    ownListeners.add({ address: '::', port, key: 'listen' }); // both families: every address of localhost
    const literal = await probe(upstreamConfig({ port }), check(), { timeoutMs: 2000, ownListeners });
    const want = `PRX_UPSTREAM_LOOP: 127.0.0.1:${port} is this proxy's own listener (listen [::]:${port}): the request would loop`;
    assert.deepEqual({ ok: literal.ok, error: literal.error }, { ok: false, error: want }, `got ${JSON.stringify(literal)}`);
    const name = await probe(upstreamConfig({ host: 'localhost', port }), check(), { timeoutMs: 2000, ownListeners });
    assert.match(name.error ?? '', /^PRX_UPSTREAM_LOOP: /, `got ${JSON.stringify(name)} for localhost`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // a connection made anyway would have been accepted by now
    assert.equal(connections, 0, `got ${connections} connections at the listener, want none made`);
  });

  it('uses health_method and health_path', async () => {
    let seen = '';
    const { port } = await listen((req, res) => {
      seen = `${req.method} ${req.url}`;
      res.end('fine');
    });
    const result = await probe(upstreamConfig({ port }), check({ method: 'GET', path: '/healthz?x=1' }), { timeoutMs: 2000 });
    assert.equal(result.ok, true, `got ${JSON.stringify(result)}`);
    assert.equal(seen, 'GET /healthz?x=1', `got ${seen}, want GET /healthz?x=1`);
  });

  const statusTable: { status: number; ranges: { from: number; to: number }[]; want: boolean }[] = [
    { status: 500, ranges: [{ from: 200, to: 399 }], want: false },
    { status: 500, ranges: [{ from: 200, to: 499 }], want: false },
    { status: 500, ranges: [{ from: 200, to: 599 }], want: true },
    { status: 404, ranges: [{ from: 200, to: 399 }], want: false },
    { status: 404, ranges: [{ from: 200, to: 499 }], want: true },
    { status: 301, ranges: [{ from: 200, to: 399 }], want: true },
    { status: 204, ranges: [{ from: 200, to: 200 }, { from: 204, to: 204 }], want: true },
  ];
  for (const row of statusTable) {
    const rangesText = row.ranges.map((r) => `${r.from}-${r.to}`).join(',');
    it(`status ${row.status} with health_status ${rangesText} → ${row.want ? 'ok' : 'not ok'}`, async () => {
      const { port } = await listen((_req, res) => {
        res.statusCode = row.status;
        res.end();
      });
      const result = await probe(upstreamConfig({ port }), check({ statuses: row.ranges }), { timeoutMs: 2000 });
      assert.equal(result.ok, row.want, `got ${JSON.stringify(result)}, want ok=${row.want}`);
      assert.equal(result.status, row.status);
      assert.equal(result.error, row.want ? undefined : `status ${row.status}`);
    });
  }

  it('a refused connection is "connect ECONNREFUSED"', async () => {
    const port = await closedPort();
    const result = await probe(upstreamConfig({ port }), check(), { timeoutMs: 2000 });
    assert.deepEqual({ ok: result.ok, error: result.error }, { ok: false, error: 'connect ECONNREFUSED' }, `got ${JSON.stringify(result)}`);
    assert.equal(result.status, undefined);
  });

  it('a refused connection via localhost is "connect ECONNREFUSED" too (every address failing)', async () => {
    const port = await closedPort();
    const result = await probe(upstreamConfig({ host: 'localhost', port }), check(), { timeoutMs: 2000 });
    assert.equal(result.error, 'connect ECONNREFUSED', `got ${JSON.stringify(result)}`);
  });

  it('a server that never answers is "timeout after 150ms", within the timeout, socket closed', async () => {
    let serverSocketClosed: Promise<void> | undefined;
    const { port } = await listen((req) => {
      serverSocketClosed = new Promise((resolve) => req.socket.once('close', () => resolve()));
    });
    const startedAt = performance.now();
    const result = await probe(upstreamConfig({ port }), check(), { timeoutMs: 150 });
    const tookMs = performance.now() - startedAt;
    assert.deepEqual({ ok: result.ok, error: result.error }, { ok: false, error: 'timeout after 150ms' }, `got ${JSON.stringify(result)}`);
    assert.ok(tookMs >= 145 && tookMs < 1000, `got the probe settling after ${Math.round(tookMs)} ms, want about 150`);
    assert.ok(serverSocketClosed, 'got no request at the server');
    await serverSocketClosed;
  });

  it('a connection that is accepted but never gets a head times out (raw TCP server)', async () => {
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => sockets.push(socket));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const result = await probe(upstreamConfig({ port }), check(), { timeoutMs: 100 });
    assert.equal(result.error, 'timeout after 100ms', `got ${JSON.stringify(result)}`);
    await new Promise((resolve) => setImmediate(resolve));
    for (const socket of sockets) socket.destroy();
  });

  it('a huge (endless) body is capped: ok at once, well before the timeout, and the socket closed', async () => {
    let bytesWritten = 0;
    let serverResponseClosed: Promise<void> | undefined;
    const { port } = await listen((_req, res) => {
      serverResponseClosed = new Promise((resolve) => res.once('close', () => resolve()));
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk)) bytesWritten += chunk.length;
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const startedAt = performance.now();
    const result = await probe(upstreamConfig({ port }), check({ method: 'GET' }), { timeoutMs: 3000 });
    const tookMs = performance.now() - startedAt;
    assert.equal(result.ok, true, `got ${JSON.stringify(result)}, want ok`);
    assert.ok(tookMs < 1500, `got ${Math.round(tookMs)} ms, want the cap to end the probe long before the 3000 ms timeout`);
    assert.ok(serverResponseClosed, 'got no request at the server');
    await serverResponseClosed;
    assert.ok(bytesWritten < 64 * 1024 * 1024, `got ${bytesWritten} bytes written, want the probe to stop reading early`);
  });

  it('a status out of range is not ok even when the body is cut short', async () => {
    const { port } = await listen((_req, res) => {
      res.writeHead(503, { 'Content-Length': '1000000' });
      res.write(Buffer.alloc(100_000));
    });
    const result = await probe(upstreamConfig({ port }), check({ method: 'GET' }), { timeoutMs: 2000, maxBodyBytes: 1024 });
    assert.deepEqual({ ok: result.ok, status: result.status, error: result.error }, { ok: false, status: 503, error: 'status 503' });
  });

  it('a connection closed without a response is not ok', async () => {
    const { port } = await listen((req) => req.socket.destroy());
    const result = await probe(upstreamConfig({ port }), check(), { timeoutMs: 2000 });
    assert.equal(result.ok, false, `got ${JSON.stringify(result)}`);
    assert.equal(result.error, 'closed without response', `got ${result.error}`);
  });

  it('localhost works with a server on 127.0.0.1', async () => {
    const { port } = await listen((_req, res) => res.end(), '127.0.0.1');
    const result = await probe(upstreamConfig({ host: 'localhost', port }), check(), { timeoutMs: 2000 });
    assert.equal(result.ok, true, `got ${JSON.stringify(result)}, want ok`);
  });

  it('localhost works with a server on ::1 (when localhost resolves to ::1 here)', async (t) => {
    const addresses = await dns.lookup('localhost', { all: true });
    if (!addresses.some((a) => a.address === '::1')) {
      t.skip('localhost does not resolve to ::1 on this machine; the next test fakes the resolver');
      return;
    }
    const { port } = await listen((_req, res) => res.end(), '::1');
    const result = await probe(upstreamConfig({ host: 'localhost', port }), check(), { timeoutMs: 2000 });
    assert.equal(result.ok, true, `got ${JSON.stringify(result)}, want ok`);
  });

  it('happy eyeballs: localhost answering ::1 first still reaches a server on 127.0.0.1 only', async () => {
    const { port } = await listen((_req, res) => res.end(), '127.0.0.1');
    const lookup = ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
      const answers = [{ address: '::1', family: 6 }, { address: '127.0.0.1', family: 4 }];
      if (options.all) callback(null, answers);
      else callback(null, answers[0]!.address, answers[0]!.family);
    }) as unknown as net.LookupFunction;
    const result = await probe(upstreamConfig({ host: 'localhost', port }), check(), { timeoutMs: 2000, lookup });
    assert.equal(result.ok, true, `got ${JSON.stringify(result)}, want ok via the second address`);
  });

  it('an abort signal ends the probe with "aborted"', async () => {
    const { port } = await listen(() => {});
    const controller = new AbortController();
    const probing = probe(upstreamConfig({ port }), check(), { timeoutMs: 5000, signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    const result = await probing;
    assert.deepEqual({ ok: result.ok, error: result.error }, { ok: false, error: 'aborted' });
  });

  it('an already aborted signal settles at once', async () => {
    const port = await closedPort();
    const result = await probe(upstreamConfig({ port }), check(), { timeoutMs: 5000, signal: AbortSignal.abort() });
    assert.equal(result.error, 'aborted', `got ${JSON.stringify(result)}`);
  });
});

describe('isHealthyStatus / summarizeProbeError', () => {
  it('checks inclusive ranges', () => {
    const ranges = [{ from: 200, to: 399 }];
    const got = [199, 200, 399, 400].map((s) => isHealthyStatus(s, ranges));
    assert.deepEqual(got, [false, true, true, false], `got ${JSON.stringify(got)}`);
  });

  it('words errors by phase', () => {
    const coded = (message: string, code: string) => Object.assign(new Error(message), { code });
    const rows: [unknown, boolean, string][] = [
      [coded('connect ECONNREFUSED 127.0.0.1:1', 'ECONNREFUSED'), false, 'connect ECONNREFUSED'],
      [new AggregateError([coded('x', 'ECONNREFUSED'), coded('y', 'ECONNREFUSED')]), false, 'connect ECONNREFUSED'],
      [coded('getaddrinfo ENOTFOUND nowhere', 'ENOTFOUND'), false, 'connect ENOTFOUND'],
      [coded('read ECONNRESET', 'ECONNRESET'), true, 'read ECONNRESET'],
      [coded('socket hang up', 'ECONNRESET'), true, 'closed without response'],
      [coded('Parse Error: Invalid header', 'HPE_INVALID_HEADER_TOKEN'), true, 'bad response HPE_INVALID_HEADER_TOKEN'],
    ];
    for (const [error, isConnected, want] of rows) {
      const got = summarizeProbeError(error, isConnected);
      assert.equal(got, want, `got ${got}, want ${want}`);
    }
  });
});

describe('probe over TLS of a discovered address', () => {
  it('verifies the certificate against the line name (tlsName) and sends it as SNI, not the address', async () => {
    const pem = (name: string): Buffer => readFileSync(new URL(`../../fixtures/tls/${name}`, import.meta.url));
    const names: (string | false)[] = [];
    const server = https.createServer({ cert: pem('wildcard.pem'), key: pem('wildcard.key') }, (_req, res) => res.end());
    server.on('secureConnection', (socket: tls.TLSSocket & { servername?: string | false }) => names.push(socket.servername ?? false));
    server.on('tlsClientError', () => {});
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const settings = { identity: 't', secureContext: tls.createSecureContext({ ca: pem('ca.pem') }), serverName: undefined, isVerified: true };
    const address = upstreamConfig({ port, scheme: 'https', origin: `https://127.0.0.1:${port}`, hostHeader: 'api.wild.test' });
    const discovered = await probe({ ...address, tlsName: 'api.wild.test' }, check(), { timeoutMs: 2000, tls: settings });
    assert.equal(discovered.ok, true, `got ${discovered.error}, want the probe verified under api.wild.test`);
    assert.deepEqual(names, ['api.wild.test']);
    const bare = await probe(address, check(), { timeoutMs: 2000, tls: settings });
    assert.match(bare.error ?? '', /^tls: /, `got ${bare.error}, want the bare address refused (not in the certificate)`);
  });
});
