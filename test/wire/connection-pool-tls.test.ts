/**
 * The upstream pool over TLS, on real loopback sockets with the test CA's certificates
 * (test/fixtures/tls/): a verified round trip reused LIFO; idle lists keyed by origin and settings
 * identity; TLS 1.3 and 1.2 session resumption on a new connection; no session kept from a refused
 * connection (a resumed session would skip the name check); verification failures as
 * `UpstreamTlsError` with node's words; a handshake that never ends as a connect timeout; and the
 * SNI / verified-name rules of `tlsConnectOptions` as a table.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { ConnectionPool, type UpstreamConnection } from '../../src/wire/connection-pool.js';
import { NO_DNS_SUBJECT_ALT_NAME, tlsConnectOptions, tlsFailureReason, type TlsClientSettings } from '../../src/wire/tls-client.js';
import { ResponseParser } from '../../src/wire/response-parser.js';
import { serializeRequestHead } from '../../src/wire/request-head.js';
import { UpstreamTimeoutError, UpstreamTlsError } from '../../src/errors.js';
import type { Timers } from '../../src/timers.js';

const pem = (name: string): Buffer => readFileSync(new URL(`../fixtures/tls/${name}`, import.meta.url));
const TRUST_TEST_CA = tls.createSecureContext({ ca: pem('ca.pem') });

function settings(identity: string, overrides: Partial<TlsClientSettings> = {}): TlsClientSettings {
  return { identity, secureContext: TRUST_TEST_CA, serverName: undefined, isVerified: true, ...overrides };
}

/** An https backend with certificate `name`, recording each TLS connection's SNI and resumption. */
async function startTlsUpstream(name: string, options: tls.TlsOptions = {}) {
  const server = https.createServer({ cert: pem(`${name}.pem`), key: pem(`${name}.key`), ...options }, (req, res) => res.end(`${name} ${req.url}`));
  server.keepAliveTimeout = 60_000;
  const connections: { servername: string | false; isResumed: boolean; protocol: string | null }[] = [];
  server.on('secureConnection', (socket: tls.TLSSocket) =>
    connections.push({ servername: (socket as tls.TLSSocket & { servername: string | false }).servername, isResumed: socket.isSessionReused(), protocol: socket.getProtocol() }),
  );
  server.on('tlsClientError', () => {});
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    connections,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** GET `path` over a pooled connection; resolves with the body. */
function get(connection: UpstreamConnection, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const body: Buffer[] = [];
    const parser = new ResponseParser({
      method: 'GET',
      onHead: () => {},
      onBody: (chunk) => body.push(Buffer.from(chunk)),
      onComplete: () => {
        connection.handler = undefined;
        resolve(Buffer.concat(body).toString());
      },
    });
    const fail = (error: Error): void => reject(error);
    connection.handler = { onData: (data) => parser.execute(data), onEnd: () => parser.finish(), onError: fail, onClose: () => fail(new Error('closed')), onTimeout: () => {} };
    connection.socket.write(serializeRequestHead('GET', path, ['Host', 'upstream.test']), 'latin1');
  });
}

/** Timers that fire only when told. */
class ManualTimers implements Timers {
  readonly #pending = new Map<number, () => void>();
  #nextId = 1;
  setTimeout(callback: () => void): unknown {
    const id = this.#nextId++;
    this.#pending.set(id, callback);
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.#pending.delete(handle as number);
  }
  fireAll(): void {
    const due = [...this.#pending.values()];
    this.#pending.clear();
    for (const callback of due) callback();
  }
}

const CONNECT = { connectTimeoutMs: 2000 };

describe('ConnectionPool over TLS', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  async function setUp(name = 'localhost', options: tls.TlsOptions = {}) {
    const upstream = await startTlsUpstream(name, options);
    const pool = new ConnectionPool();
    cleanups.push(() => upstream.close(), () => pool.close());
    return { upstream, pool };
  }

  it('verifies, then reuses one TLS connection for sequential requests', async () => {
    const { upstream, pool } = await setUp();
    const tlsSettings = settings('a');
    for (let i = 0; i < 5; i++) {
      const connection = pool.acquireIdle('localhost', upstream.port, tlsSettings) ?? (await pool.acquire('localhost', upstream.port, { ...CONNECT, tls: tlsSettings }));
      assert.ok(connection.socket instanceof tls.TLSSocket, 'want a TLS socket');
      assert.equal(await get(connection, `/${i}`), `localhost /${i}`);
      pool.release(connection);
    }
    assert.equal(upstream.connections.length, 1, `got ${upstream.connections.length} TLS connections, want 1`);
  });

  it('keys idle connections by origin and settings identity: other settings, or plain TCP, never get them', async () => {
    const { upstream, pool } = await setUp();
    const first = settings('first');
    const connection = await pool.acquire('localhost', upstream.port, { ...CONNECT, tls: first });
    assert.equal(await get(connection, '/'), 'localhost /');
    pool.release(connection);
    assert.equal(pool.acquireIdle('localhost', upstream.port, settings('second')), undefined, 'got the connection of other TLS settings');
    assert.equal(pool.acquireIdle('localhost', upstream.port), undefined, 'got a TLS connection for plain TCP');
    assert.equal(pool.acquireIdle('localhost', upstream.port, settings('first')), connection, 'want it back with the same identity');
  });

  it('a discovered address is verified under its line name (tlsName), sent as SNI, and each name has its own connections', async () => {
    const { upstream, pool } = await setUp('wildcard');
    const tlsSettings = settings('discovered');
    const first = await pool.acquire('127.0.0.1', upstream.port, { ...CONNECT, tls: tlsSettings, tlsName: 'a.wild.test' });
    assert.equal(await get(first, '/'), 'wildcard /');
    pool.release(first);
    assert.equal(pool.acquireIdle('127.0.0.1', upstream.port, tlsSettings, 'b.wild.test'), undefined, 'got the connection of another name on the same address');
    assert.equal(pool.acquireIdle('127.0.0.1', upstream.port, tlsSettings), undefined, 'got a connection verified under a name for the bare address');
    const second = await pool.acquire('127.0.0.1', upstream.port, { ...CONNECT, tls: tlsSettings, tlsName: 'b.wild.test' });
    assert.equal(await get(second, '/'), 'wildcard /');
    pool.release(second);
    assert.equal(pool.acquireIdle('127.0.0.1', upstream.port, tlsSettings, 'a.wild.test'), first, 'want the first name its own connection back');
    assert.deepEqual(upstream.connections.map((c) => c.servername), ['a.wild.test', 'b.wild.test']);
    assert.deepEqual(upstream.connections.map((c) => c.isResumed), [false, false], 'got a session of one name resumed under another');
    await assert.rejects(pool.acquire('127.0.0.1', upstream.port, { ...CONNECT, tls: tlsSettings }), UpstreamTlsError, 'the bare address is not in the certificate');
    const pinned = settings('pinned', { serverName: 'wild.test' });
    const third = await pool.acquire('127.0.0.1', upstream.port, { ...CONNECT, tls: pinned, tlsName: 'a.wild.test' });
    assert.equal(await get(third, '/'), 'wildcard /'); // the server has seen the handshake by now
    const names = upstream.connections.map((c) => c.servername);
    assert.equal(names.at(-1), 'wild.test', `got SNI ${names.join(', ')}, want tls_server_name to win over the line name`);
    pool.destroy(third);
  });

  for (const version of ['TLSv1.3', 'TLSv1.2'] as const) {
    it(`resumes the last ${version} session on a new connection`, async () => {
      const { upstream, pool } = await setUp('localhost', { maxVersion: version });
      const tlsSettings = settings('resume');
      for (let i = 0; i < 3; i++) {
        const connection = await pool.acquire('localhost', upstream.port, { ...CONNECT, tls: tlsSettings, isNewRequired: true });
        assert.equal(await get(connection, '/'), 'localhost /');
        pool.destroy(connection);
      }
      assert.deepEqual(
        upstream.connections.map((c) => [c.protocol, c.isResumed]),
        [[version, false], [version, true], [version, true]],
        'want a full handshake first, then resumed sessions',
      );
    });
  }

  for (const version of ['TLSv1.3', 'TLSv1.2'] as const) {
    it(`keeps no ${version} session from a connection whose certificate was refused (a resumed session skips the name check)`, async () => {
      const { upstream, pool } = await setUp('wrong-name', { maxVersion: version });
      const tlsSettings = settings('refused');
      for (let i = 0; i < 2; i++) {
        await assert.rejects(pool.acquire('localhost', upstream.port, { ...CONNECT, tls: tlsSettings }), (error: unknown) => {
          assert.ok(error instanceof UpstreamTlsError, `attempt ${i + 1}: got ${String(error)}, want UpstreamTlsError`);
          assert.match(error.reason, /^Hostname\/IP does not match certificate's altnames/);
          return true;
        });
      }
    });
  }

  for (const { certificate, host, reason } of [
    { certificate: 'expired', host: 'localhost', reason: 'certificate has expired' },
    { certificate: 'unknown-ca', host: 'localhost', reason: 'unable to verify the first certificate' },
    { certificate: 'wrong-name', host: '127.0.0.1', reason: "Hostname/IP does not match certificate's altnames: IP: 127.0.0.1 is not in the cert's list: " },
  ]) {
    it(`rejects ${certificate}.pem with UpstreamTlsError '${reason}'`, async () => {
      const { upstream, pool } = await setUp(certificate);
      await assert.rejects(pool.acquire(host, upstream.port, { ...CONNECT, tls: settings('x') }), (error: unknown) => {
        assert.ok(error instanceof UpstreamTlsError, `got ${String(error)}, want UpstreamTlsError`);
        assert.deepEqual([error.code, error.status, error.phase, error.reason], ['PRX_UPSTREAM_TLS', 502, 'handshake', reason]);
        return true;
      });
      assert.equal(pool.stats().open, 0, 'want the refused socket closed');
    });
  }

  it('accepts a bad certificate when verification is off', async () => {
    const { upstream, pool } = await setUp('expired');
    const connection = await pool.acquire('localhost', upstream.port, { ...CONNECT, tls: settings('off', { isVerified: false }) });
    assert.equal(await get(connection, '/'), 'expired /');
  });

  it('names what a peer that does not speak TLS answered', async () => {
    // Flowing, so it reads our close and ends (a paused socket would keep the server's close waiting).
    const plain = net.createServer((socket) => socket.resume().end('HTTP/1.1 400 Bad Request\r\n\r\n'));
    plain.listen(0, '127.0.0.1');
    await once(plain, 'listening');
    const pool = new ConnectionPool();
    cleanups.push(() => new Promise<void>((resolve) => plain.close(() => resolve())), () => pool.close());
    await assert.rejects(pool.acquire('127.0.0.1', (plain.address() as AddressInfo).port, { ...CONNECT, tls: settings('x') }), (error: unknown) => {
      assert.ok(error instanceof UpstreamTlsError, `got ${String(error)}, want UpstreamTlsError`);
      assert.equal(error.reason, 'wrong version number');
      return true;
    });
  });

  it('counts the TLS handshake in connect_timeout', async () => {
    let hasClientHello = false;
    const silent = net.createServer((socket) => socket.once('data', () => (hasClientHello = true)));
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const timers = new ManualTimers();
    const pool = new ConnectionPool({ timers });
    cleanups.push(() => new Promise<void>((resolve) => silent.close(() => resolve())), () => pool.close());
    const port = (silent.address() as AddressInfo).port;
    const pending = pool.acquire('127.0.0.1', port, { connectTimeoutMs: 5000, tls: settings('x') });
    const deadline = Date.now() + 2000;
    while (!hasClientHello && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.ok(hasClientHello, 'want the ClientHello to arrive');
    timers.fireAll();
    await assert.rejects(pending, (error: unknown) => {
      assert.ok(error instanceof UpstreamTimeoutError, `got ${String(error)}, want UpstreamTimeoutError`);
      assert.equal(error.phase, 'connect');
      assert.equal(error.message, `connect timeout after 5000 ms to 127.0.0.1:${port} (during the TLS handshake)`);
      return true;
    });
  });
});

describe('tlsConnectOptions', () => {
  const other = settings('x', { serverName: '10.0.0.9' });
  const rows: { serverName: string | undefined; host: string; servername: string; verifiedName: string }[] = [
    // The URL's host is SNI and the verified name, except that an IP address is no SNI (RFC 6066 section 3).
    { serverName: undefined, host: 'api.example.com', servername: 'api.example.com', verifiedName: 'api.example.com' },
    { serverName: undefined, host: '127.0.0.1', servername: '', verifiedName: '127.0.0.1' },
    { serverName: undefined, host: '::1', servername: '', verifiedName: '::1' },
    // tls_server_name replaces both.
    { serverName: 'api.example.com', host: '10.0.0.2', servername: 'api.example.com', verifiedName: 'api.example.com' },
    { serverName: '10.0.0.9', host: '10.0.0.9', servername: '', verifiedName: '10.0.0.9' },
    // An IP tls_server_name is still no SNI, and is what is verified (node alone would check the host).
    { serverName: '10.0.0.9', host: 'internal.test', servername: '', verifiedName: '10.0.0.9' },
  ];
  for (const row of rows) {
    it(`tls_server_name ${row.serverName ?? '(unset)'} to ${row.host}: SNI '${row.servername}', verified name ${row.verifiedName}`, () => {
      const options = tlsConnectOptions(settings('x', { serverName: row.serverName }), row.host);
      assert.equal(options.servername, row.servername);
      assert.equal(options.rejectUnauthorized, true);
      const entry = net.isIP(row.verifiedName) === 0 ? `DNS:${row.verifiedName}` : `IP Address:${row.verifiedName}`;
      const cert = { subject: { CN: 'x' }, subjectaltname: entry } as unknown as tls.PeerCertificate;
      assert.equal(options.checkServerIdentity('ignored', cert), undefined, `want ${entry} accepted`);
    });
  }

  it('refuses a certificate without a subjectAltName DNS entry for a name, whatever its CN says (RFC 9525 section 6.3, as Go)', () => {
    const check = tlsConnectOptions(settings('x', {}), 'default.test').checkServerIdentity;
    for (const subjectaltname of [undefined, '', 'IP Address:127.0.0.1', 'URI:spiffe://x/y', 'email:a@default.test']) {
      const cert = { subject: { CN: 'default.test' }, subjectaltname } as unknown as tls.PeerCertificate;
      assert.equal(check('default.test', cert)?.message, NO_DNS_SUBJECT_ALT_NAME, `SAN ${subjectaltname}: want the CN refused`);
    }
    const named = { subject: { CN: 'default.test' }, subjectaltname: 'URI:spiffe://x/y, DNS:default.test' } as unknown as tls.PeerCertificate;
    assert.equal(check('default.test', named), undefined, 'a DNS entry among others is enough');
  });

  it('checks an IP tls_server_name against the certificate, not the host', () => {
    const check = tlsConnectOptions(other, 'internal.test').checkServerIdentity;
    const cert = new (class {})() as tls.PeerCertificate;
    Object.assign(cert, { subject: { CN: 'x' }, subjectaltname: 'IP Address:10.0.0.9' });
    assert.equal(check('internal.test', cert), undefined, 'want 10.0.0.9 accepted by its IP SAN');
    Object.assign(cert, { subjectaltname: 'DNS:internal.test' });
    assert.ok(check('internal.test', cert) instanceof Error, 'want a certificate for the host name refused');
  });

  it('words OpenSSL errors by their reason and node errors by their message', () => {
    const alert = Object.assign(new Error('80:error:0A00045C:SSL routines:ssl3_read_bytes:tlsv13 alert certificate required:rec_layer_s3.c:1601'), {
      code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
      reason: 'tlsv13 alert certificate required',
    });
    assert.equal(tlsFailureReason(alert), 'tlsv13 alert certificate required');
    assert.equal(tlsFailureReason(Object.assign(new Error('certificate has expired'), { code: 'CERT_HAS_EXPIRED' })), 'certificate has expired');
  });
});
