/**
 * `https://` upstreams through the whole proxy, on real loopback sockets (issue 13 item 3): backends
 * are `https.createServer` servers with the private test CA's certificates (test/fixtures/tls/), the
 * proxy trusts `ca.pem` through `tls_ca`. Verified OK; 502 with the reason in the log record for an
 * unknown CA, a name mismatch and an expired certificate; mutual TLS with and without the client
 * certificate, and a node upstream refusing an untrusted one (a close, no alert); one TLS
 * connection for 20 sequential requests; a new connection resuming the session;
 * SNI from `tls_server_name`, none for an IP; two routes with different settings never sharing a
 * connection; a failed verification retried on another upstream and counted by passive health; the
 * active probe over TLS marking the expired-certificate upstream DOWN; a WebSocket-style upgrade
 * tunnelled to a TLS socket; a reload with a broken `tls_ca` rejected.
 */
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../src/config/load-config.js';
import { ConfigValueError } from '../../src/errors.js';
import { rawRequest, request, startTestProxy, waitFor, type TestProxy } from '../helpers/proxy-harness.js';
import { NO_DNS_SUBJECT_ALT_NAME } from '../../src/wire/tls-client.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
const CA = `${FIXTURES}ca.pem`;
const pem = (name: string): Buffer => readFileSync(`${FIXTURES}${name}`);

/** What an https backend saw: one entry per TLS connection (its SNI and whether it resumed). */
interface TlsBackend {
  readonly port: number;
  readonly connections: { readonly servername: string | false; readonly isResumed: boolean }[];
  readonly server: https.Server;
}

/** An https backend with certificate `name` (`localhost`, `expired`…) answering `<name> <path>` (or with `handler`). */
async function startHttpsBackend(
  t: TestContext,
  name: string,
  options: https.ServerOptions = {},
  handler: (req: http.IncomingMessage, res: http.ServerResponse) => void = (req, res) => res.end(`${name} ${req.url}`),
): Promise<TlsBackend> {
  const server = https.createServer({ cert: pem(`${name}.pem`), key: pem(`${name}.key`), ...options }, handler);
  server.keepAliveTimeout = 60_000;
  const connections: { servername: string | false; isResumed: boolean }[] = [];
  server.on('secureConnection', (socket: tls.TLSSocket) => {
    connections.push({ servername: (socket as tls.TLSSocket & { servername: string | false }).servername, isResumed: socket.isSessionReused() });
  });
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return { port: (server.address() as AddressInfo).port, connections, server };
}

async function proxyFor(t: TestContext, ini: string): Promise<TestProxy> {
  const proxy = await startTestProxy(ini);
  t.after(() => proxy.close());
  return proxy;
}

/** One route `/` to `pass`, with extra route keys. */
function oneRoute(pass: string, keys = `tls_ca = ${CA}`): string {
  return `[proxy.a]\npath = /\npass = ${pass}\nretries = 0\n${keys}\n`;
}

describe('https upstreams', () => {
  it('verifies the certificate against tls_ca and answers 200', async (t) => {
    const backend = await startHttpsBackend(t, 'localhost');
    const proxy = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`));
    const res = await request(proxy.port, { path: '/x' });
    assert.equal(res.status, 200, `got ${res.status} ${res.body}, want 200`);
    assert.equal(res.body.toString(), 'localhost /x');
  });

  for (const { certificate, host, reason } of [
    { certificate: 'unknown-ca', host: 'localhost', reason: 'unable to verify the first certificate' },
    { certificate: 'wrong-name', host: 'localhost', reason: "Hostname/IP does not match certificate's altnames: Host: localhost. is not in the cert's altnames: DNS:elsewhere.test" },
    { certificate: 'expired', host: 'localhost', reason: 'certificate has expired' },
  ]) {
    it(`answers 502 for ${certificate}.pem and logs PRX_UPSTREAM_TLS: ${reason}`, async (t) => {
      const backend = await startHttpsBackend(t, certificate);
      const proxy = await proxyFor(t, oneRoute(`https://${host}:${backend.port}`));
      const res = await request(proxy.port);
      assert.equal(res.status, 502, `got ${res.status}, want 502`);
      await waitFor(() => proxy.logs.length === 1, 2000, 'the log record');
      assert.deepEqual(proxy.logs[0]!.attempts, [{ upstream: `localhost:${backend.port}`, error: `PRX_UPSTREAM_TLS: ${reason}` }]);
      assert.equal(backend.connections.length, 0, `got ${backend.connections.length} accepted connections, want 0`);
    });
  }

  it('answers 502 for a certificate without subjectAltName even when its CN is the name (default.pem, CN=default.test)', async (t) => {
    const backend = await startHttpsBackend(t, 'default');
    const proxy = await proxyFor(t, oneRoute(`https://127.0.0.1:${backend.port}`, `tls_ca = ${CA}\ntls_server_name = default.test`));
    const res = await request(proxy.port);
    assert.equal(res.status, 502, `got ${res.status}, want 502`);
    await waitFor(() => proxy.logs.length === 1, 2000, 'the log record');
    assert.equal(proxy.logs[0]!.attempts[0]!.error, `PRX_UPSTREAM_TLS: ${NO_DNS_SUBJECT_ALT_NAME}`);
  });

  it('checks an IP host against the certificate IP SANs and sends no SNI for it', async (t) => {
    const backend = await startHttpsBackend(t, 'localhost');
    const proxy = await proxyFor(t, oneRoute(`https://127.0.0.1:${backend.port}`));
    const res = await request(proxy.port);
    assert.equal(res.status, 200, `got ${res.status} ${res.body}, want 200`);
    assert.deepEqual(backend.connections.map((c) => c.servername), [false], 'want no SNI for an IP address (RFC 6066 section 3)');
  });

  it('sends tls_server_name as SNI and verifies that name', async (t) => {
    const backend = await startHttpsBackend(t, 'localhost');
    const proxy = await proxyFor(t, oneRoute(`https://127.0.0.1:${backend.port}`, `tls_ca = ${CA}\ntls_server_name = localhost`));
    assert.equal((await request(proxy.port)).status, 200);
    assert.deepEqual(backend.connections.map((c) => c.servername), ['localhost']);

    const wrong = await startHttpsBackend(t, 'localhost');
    const mismatched = await proxyFor(t, oneRoute(`https://127.0.0.1:${wrong.port}`, `tls_ca = ${CA}\ntls_server_name = elsewhere.test`));
    assert.equal((await request(mismatched.port)).status, 502, 'want the certificate checked against tls_server_name');
    await waitFor(() => mismatched.logs.length === 1, 2000, 'the log record');
    assert.match(mismatched.logs[0]!.attempts[0]!.error ?? '', /^PRX_UPSTREAM_TLS: Hostname\/IP does not match certificate's altnames: Host: elsewhere\.test\./);
  });

  it('accepts any certificate with tls_verify = off', async (t) => {
    const backend = await startHttpsBackend(t, 'expired');
    const proxy = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`, 'tls_verify = off'));
    const res = await request(proxy.port);
    assert.equal(res.status, 200, `got ${res.status}, want 200`);
  });

  it('presents tls_client_cert for mutual TLS; without it the backend refuses and the answer is 502', async (t) => {
    const backend = await startHttpsBackend(t, 'localhost', { requestCert: true, rejectUnauthorized: true, ca: pem('ca.pem') });
    const withCert = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`, `tls_ca = ${CA}\ntls_client_cert = ${FIXTURES}client.pem ${FIXTURES}client.key`));
    const res = await request(withCert.port);
    assert.equal(res.status, 200, `got ${res.status} ${res.body}, want 200 with the client certificate`);

    const withoutCert = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`));
    const refused = await request(withoutCert.port);
    assert.equal(refused.status, 502, `got ${refused.status}, want 502 without the client certificate`);
    await waitFor(() => withoutCert.logs.length === 1, 2000, 'the log record');
    // TLS 1.3: the server refuses the missing certificate with an alert after our handshake.
    assert.equal(withoutCert.logs[0]!.attempts[0]!.error, 'PRX_UPSTREAM_TLS: tlsv13 alert certificate required');
    const failures = withoutCert.proxy.routes[0]!.upstreams[0]!.failuresTotal;
    assert.equal(failures, 1, `got ${failures} failures, want the alert counted for passive health`);
  });

  it('reports a TLS 1.2 upstream refusing a missing client certificate during the handshake', async (t) => {
    const backend = await startHttpsBackend(t, 'localhost', { requestCert: true, rejectUnauthorized: true, ca: pem('ca.pem'), maxVersion: 'TLSv1.2' });
    const proxy = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`));
    assert.equal((await request(proxy.port)).status, 502);
    await waitFor(() => proxy.logs.length === 1, 2000, 'the log record');
    assert.equal(proxy.logs[0]!.attempts[0]!.error, 'PRX_UPSTREAM_TLS: sslv3 alert handshake failure');
  });

  it('logs a node mutual-TLS upstream refusing an untrusted client certificate as the close it is (node sends no alert), counted for passive health', async (t) => {
    // Node's TLS server accepts any client certificate in OpenSSL's verify callback and, with
    // rejectUnauthorized, destroys the socket after the handshake (lib/_tls_wrap.js
    // onServerSocketSecure): a plain TCP close with no alert, so nothing says TLS. An upstream on
    // OpenSSL or Go sends the alert (`tlsv1 alert unknown ca`), logged PRX_UPSTREAM_TLS as the
    // missing certificate's alert above is.
    const backend = await startHttpsBackend(t, 'localhost', { requestCert: true, rejectUnauthorized: true, ca: pem('ca.pem') });
    const proxy = await proxyFor(
      t,
      oneRoute(`https://localhost:${backend.port}`, `tls_ca = ${CA}\ntls_client_cert = ${FIXTURES}unknown-ca.pem ${FIXTURES}unknown-ca.key`),
    );
    const res = await request(proxy.port);
    assert.equal(res.status, 502, `got ${res.status}, want 502`);
    await waitFor(() => proxy.logs.length === 1, 2000, 'the log record');
    assert.equal(backend.connections.length, 0, `got ${backend.connections.length} accepted connections, want 0: the upstream refused the certificate`);
    assert.deepEqual(proxy.logs[0]!.attempts, [{ upstream: `localhost:${backend.port}`, error: 'PRX_UPSTREAM_RESET: closed the connection before sending a response' }]);
    const failures = proxy.proxy.routes[0]!.upstreams[0]!.failuresTotal;
    assert.equal(failures, 1, `got ${failures} failures, want the refusal counted for passive health`);
  });

  it('carries 20 sequential requests on one TLS connection', async (t) => {
    const backend = await startHttpsBackend(t, 'localhost');
    const proxy = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`));
    for (let i = 0; i < 20; i++) {
      const res = await request(proxy.port, { path: `/${i}` });
      assert.equal(res.body.toString(), `localhost /${i}`);
    }
    assert.equal(backend.connections.length, 1, `got ${backend.connections.length} TLS connections (secureConnection), want 1`);
  });

  it('resumes the TLS session on a new connection', async (t) => {
    // Answers held until two requests are in: the second one needs a second, new connection.
    const held: http.ServerResponse[] = [];
    const backend = await startHttpsBackend(t, 'localhost', {}, (req, res) => {
      if (req.url === '/') return void res.end('first');
      held.push(res);
      if (held.length === 2) for (const response of held) response.end('held');
    });
    const proxy = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`));
    assert.equal((await request(proxy.port)).status, 200);
    const [first, second] = await Promise.all([request(proxy.port, { path: '/1' }), request(proxy.port, { path: '/2' })]);
    assert.deepEqual([first.status, second.status], [200, 200]);
    assert.deepEqual(
      backend.connections.map((c) => c.isResumed),
      [false, true],
      'want a full handshake on the first connection and a resumed session on the second',
    );
  });

  it('never lets two routes with different TLS settings share a connection to one origin', async (t) => {
    const backend = await startHttpsBackend(t, 'localhost');
    const proxy = await proxyFor(
      t,
      `[proxy.a]\npath = /a\npass = https://127.0.0.1:${backend.port}\ntls_ca = ${CA}\n` +
        `[proxy.b]\npath = /b\npass = https://127.0.0.1:${backend.port}\ntls_ca = ${CA}\ntls_server_name = localhost\n`,
    );
    for (const path of ['/a', '/b', '/a', '/b']) assert.equal((await request(proxy.port, { path })).status, 200);
    assert.deepEqual(
      backend.connections.map((c) => c.servername),
      [false, 'localhost'],
      'want one connection per route (each reused by its own route), never one shared',
    );
  });

  it('retries a verification failure on another upstream and counts it for passive health', async (t) => {
    const expired = await startHttpsBackend(t, 'expired');
    const good = await startHttpsBackend(t, 'localhost');
    const proxy = await proxyFor(
      t,
      `[proxy.a]\npath = /\npass = https://localhost:${expired.port}\npass = https://localhost:${good.port}\ntls_ca = ${CA}\nmax_fails = 1\nfail_timeout = 30s\n`,
    );
    const res = await request(proxy.port);
    assert.equal(res.status, 200, `got ${res.status}, want 200 from the second upstream`);
    await waitFor(() => proxy.logs.length === 1, 2000, 'the log record');
    assert.deepEqual(
      proxy.logs[0]!.attempts.map((a) => a.error ?? a.status),
      ['PRX_UPSTREAM_TLS: certificate has expired', 200],
    );
    const ejected = proxy.proxy.routes[0]!.upstreams[0]!;
    assert.equal(ejected.failuresTotal, 1, `got ${ejected.failuresTotal} failures, want 1`);
    // Ejected now: the next requests go straight to the good one, no retry storm on the bad one.
    for (let i = 0; i < 3; i++) await request(proxy.port);
    await waitFor(() => proxy.logs.length === 4, 2000, 'the log records');
    assert.deepEqual(proxy.logs.slice(1).map((r) => r.attempts.length), [1, 1, 1]);
    assert.equal(expired.connections.length, 0);
  });

  it('probes an https upstream with the route TLS settings: the expired certificate is DOWN with the TLS reason', async (t) => {
    const expired = await startHttpsBackend(t, 'expired');
    const good = await startHttpsBackend(t, 'localhost');
    const proxy = await proxyFor(
      t,
      `[proxy.a]\npath = /\npass = https://localhost:${expired.port}\npass = https://localhost:${good.port}\ntls_ca = ${CA}\n` +
        'health_check = on\nhealth_interval = 1h\nhealth_fall = 1\nhealth_rise = 1\n',
    );
    const [bad, fine] = proxy.proxy.routes[0]!.upstreams;
    await waitFor(() => bad!.lastProbe !== undefined && fine!.lastProbe !== undefined, 3000, 'the first probes');
    assert.equal(bad!.healthState, 'down', `got ${bad!.healthState}, want down`);
    assert.equal(bad!.lastProbe?.error, 'tls: certificate has expired');
    assert.equal(fine!.healthState, 'up', `got ${fine!.healthState} (${fine!.lastProbe?.error}), want up`);
    assert.equal(fine!.lastProbe?.status, 200);
  });

  it('tunnels an upgrade to an https upstream', async (t) => {
    let upstreamSide: net.Socket | undefined;
    let socket: net.Socket | undefined;
    // Upgraded sockets belong to no server any more: closed first (after hooks run in order), or
    // the servers' close would wait for them.
    t.after(() => {
      socket?.destroy();
      upstreamSide?.destroy();
    });
    const backend = await startHttpsBackend(t, 'localhost');
    backend.server.on('upgrade', (_req, socket: net.Socket) => {
      upstreamSide = socket;
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
      socket.on('data', (chunk: Buffer) => socket.write(`echo:${chunk.toString()}`));
    });
    const proxy = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`));
    const client = net.connect(proxy.port, '127.0.0.1');
    socket = client;
    let received = '';
    client.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (received.endsWith('\r\n\r\n')) client.write('ping');
    });
    client.write('GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n');
    await waitFor(() => received.endsWith('echo:ping'), 3000, 'the echo through the tunnel');
    assert.match(received, /^HTTP\/1\.1 101 /);
  });

  it('relays a 4 MiB body byte for byte to a client that reads slowly (backpressure over a TLS upstream)', async (t) => {
    // Every byte is its offset's own value, so a chunk overwritten before it left shows as a mismatch.
    const body = Buffer.alloc(4 * 1024 * 1024);
    for (let i = 0; i < body.length; i += 4) body.writeUInt32BE(i, i);
    const backend = await startHttpsBackend(t, 'localhost', {}, (_req, res) => res.end(body));
    const proxy = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`));
    const socket = net.connect(proxy.port, '127.0.0.1');
    t.after(() => socket.destroy());
    socket.write('GET /big HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
    const chunks: Buffer[] = [];
    // Read in small sips with pauses, so the proxy's writes to this client back up.
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      socket.pause();
      setTimeout(() => socket.resume(), 1);
    });
    await new Promise((resolve) => socket.once('close', resolve));
    const answer = Buffer.concat(chunks);
    const headEnd = answer.indexOf('\r\n\r\n') + 4;
    assert.match(answer.subarray(0, headEnd).toString('latin1'), /^HTTP\/1\.1 200 /);
    const received = answer.subarray(headEnd);
    assert.equal(received.length, body.length, `got ${received.length} body bytes, want ${body.length}`);
    const firstDifference = received.findIndex((byte, i) => byte !== body[i]);
    assert.equal(firstDifference, -1, `got a body that differs from byte ${firstDifference} on, want it byte for byte`);
  });

  it('rejects a reload whose tls_ca cannot be read and keeps serving the old config', async (t) => {
    const backend = await startHttpsBackend(t, 'localhost');
    const proxy = await proxyFor(t, oneRoute(`https://localhost:${backend.port}`));
    const broken = parseConfig(oneRoute(`https://localhost:${backend.port}`, `tls_ca = ${FIXTURES}missing-ca.pem`), 'test.ini');
    assert.throws(
      () => proxy.proxy.reload(broken),
      (error: unknown) => error instanceof ConfigValueError && error.message === `test.ini:5:10: tls_ca '${FIXTURES}missing-ca.pem' cannot be read: ENOENT`,
    );
    assert.equal((await request(proxy.port)).status, 200, 'want the old config still serving');
    const notPem = parseConfig(oneRoute(`https://localhost:${backend.port}`, `tls_ca = ${FIXTURES}ca.key`), 'test.ini');
    assert.throws(() => proxy.proxy.reload(notPem), /test\.ini:5:10: tls_ca '.*ca\.key' holds no PEM certificate/);
    const raw = await rawRequest(proxy.port, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.match(raw.text, /^HTTP\/1\.1 200 /);
  });
});
