/**
 * The HTTPS listener end to end (issue 13 item 1), real sockets on port 0: SNI choosing among three
 * pairs (exact, wildcard, default), `tls_min_version`, ALPN, `redirect_https`, `hsts`,
 * `X-Forwarded-Proto: https`, handshake errors that never crash, and the ACME certificate slot.
 * Test clients trust the private CA (test/fixtures/tls/ca.pem) and verify the chain.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/load-config.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { formatCombined, formatJson, type AccessLogRecord } from '../../src/gateway/access-log.js';
import { TlsCertificateError } from '../../src/errors.js';
import net from 'node:net';
import { PLAIN_REQUEST_REASON } from '../../src/tls/tls-listener.js';
import { headerValues, rawRequest, request, startBackend, waitFor, type Backend } from '../helpers/proxy-harness.js';
import { TLS_FIXTURES, handshake, httpsRequest, tlsCertLine } from '../tls/https-client.js';

interface HttpsProxy {
  readonly proxy: ProxyServer;
  /** Plain port (undefined with `listen = off`) and TLS port. */
  readonly port: number | undefined;
  readonly tlsPort: number;
  /** The proxy's error log. */
  readonly log: string[];
}

/** A proxy from `server` ([server] lines) in front of `backend` on `/`, both listeners on 127.0.0.1:0. */
async function startHttpsProxy(t: TestContext, server: string, backend: Backend, acme = ''): Promise<HttpsProxy> {
  const ini = `[server]\nlisten = 127.0.0.1:0\ntls_listen = 127.0.0.1:0\naccess_log = off\n${server}\n${acme}\n[proxy.all]\npath = /\npass = ${backend.url}\n`;
  const config = parseConfig(ini, 'test.ini');
  const log: string[] = [];
  const proxy = new ProxyServer(config, { deps: { log: (line) => log.push(line) } });
  t.after(() => proxy.close(1000));
  const port = config.server.listen === undefined ? undefined : await proxy.listen(0, '127.0.0.1');
  const tlsPort = await proxy.listenTls(0, '127.0.0.1');
  return { proxy, port, tlsPort, log };
}

async function backendFor(t: TestContext, handler?: Parameters<typeof startBackend>[0]): Promise<Backend> {
  const backend = await startBackend(handler);
  t.after(() => backend.close());
  return backend;
}

/** `rawRequest` from `localAddress`: the log lines name the client by it. */
function exchange(port: number, pieces: string | Buffer | (string | Buffer)[], localAddress: string, idleMs = 1500): Promise<{ text: string; closedByServer: boolean }> {
  return rawRequest(port, pieces, idleMs, localAddress);
}

/** The first bytes a real TLS client sends (its ClientHello, SNI exact.test), read on a plain listener. */
async function clientHello(): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const client = tls.connect({ port, host: '127.0.0.1', servername: 'exact.test' });
  client.on('error', () => {});
  const hello = await new Promise<Buffer>((resolve) => server.once('connection', (socket) => socket.once('data', resolve)));
  client.destroy();
  server.close();
  server.unref();
  return hello;
}

/**
 * A TCP relay to 127.0.0.1:`targetPort` that forwards what its clients send one byte per write
 * (the first byte alone, 20 ms before the rest) and the answers as they come. Returns its port.
 */
async function startTrickleRelay(t: TestContext, targetPort: number): Promise<number> {
  const relay = net.createServer((client) => {
    const upstream = net.connect({ port: targetPort, host: '127.0.0.1', noDelay: true });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.pipe(client);
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    const pending: number[] = [];
    let isPumping = false;
    let sent = 0;
    const pump = (): void => {
      const byte = pending.shift();
      if (byte === undefined || upstream.destroyed) {
        isPumping = false;
        return;
      }
      upstream.write(Buffer.from([byte]));
      sent++;
      if (sent === 1) setTimeout(pump, 20);
      else setImmediate(pump);
    };
    client.on('data', (chunk: Buffer) => {
      pending.push(...chunk);
      if (!isPumping) {
        isPumping = true;
        pump();
      }
    });
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    relay.close();
  });
  return (relay.address() as net.AddressInfo).port;
}

const THREE_PAIRS = [tlsCertLine('default'), tlsCertLine('exact'), tlsCertLine('wildcard')].join('\n');

test('SNI picks among three pairs: exact name, then wildcard, then the first pair for an unknown name and for no SNI', async (t) => {
  const backend = await backendFor(t);
  const { tlsPort } = await startHttpsProxy(t, THREE_PAIRS, backend);
  const cases = [
    { sni: 'exact.test', isNameChecked: true, subject: 'exact.test', san: 'DNS:exact.test' },
    { sni: 'EXACT.test', isNameChecked: true, subject: 'exact.test', san: 'DNS:exact.test' },
    { sni: 'exact.test.', isNameChecked: true, subject: 'exact.test', san: 'DNS:exact.test' },
    { sni: 'a.wild.test', isNameChecked: true, subject: '*.wild.test', san: 'DNS:*.wild.test, DNS:wild.test' },
    { sni: 'wild.test', isNameChecked: true, subject: '*.wild.test', san: 'DNS:*.wild.test, DNS:wild.test' },
    // A wildcard covers exactly one label: a.b.wild.test is not served by *.wild.test.
    { sni: 'a.b.wild.test', isNameChecked: false, subject: 'default.test', san: undefined },
    { sni: 'unknown.test', isNameChecked: false, subject: 'default.test', san: undefined },
    { sni: undefined, isNameChecked: false, subject: 'default.test', san: undefined },
  ];
  // TLS 1.2 too: the default pair is RSA, the others ECDSA, and node adds an SNI pair's certificate
  // to a handshake that holds the default's (certificate-pair.ts: the key types across pairs).
  const versions: (tls.SecureVersion | undefined)[] = [undefined, 'TLSv1.2'];
  for (const c of versions.flatMap((maxVersion) => cases.map((c) => ({ ...c, maxVersion })))) {
    const response = await httpsRequest(tlsPort, { servername: c.sni, isNameChecked: c.isNameChecked, maxVersion: c.maxVersion });
    assert.equal(response.status, 200, `SNI ${c.sni}: got status ${response.status}, want 200`);
    assert.equal(response.socket.authorized, true, `SNI ${c.sni}: the chain must verify against the test CA`);
    assert.equal(response.certificate.subject.CN, c.subject, `SNI ${c.sni} over ${response.socket.getProtocol()}: got CN ${response.certificate.subject.CN}, want ${c.subject}`);
    assert.equal(response.certificate.subjectaltname, c.san, `SNI ${c.sni}: got SAN ${response.certificate.subjectaltname}, want ${c.san}`);
    if (!c.isNameChecked && c.sni !== undefined) {
      // The default certificate does not name what was asked: a client checking names refuses it.
      assert.ok(tls.checkServerIdentity(c.sni, response.certificate) instanceof Error, `SNI ${c.sni}: default.test must not pass a name check for it`);
    }
  }
});

test('X-Forwarded-Proto is https on the TLS listener and http on the plain one', async (t) => {
  const backend = await backendFor(t);
  const { port, tlsPort } = await startHttpsProxy(t, THREE_PAIRS, backend);
  await httpsRequest(tlsPort, { servername: 'exact.test', headers: { 'x-forwarded-proto': 'http' } });
  await request(port!, { headers: { host: 'exact.test' } });
  const protos = backend.requests.map((r) => headerValues(r.rawHeaders, 'x-forwarded-proto'));
  assert.deepEqual(protos, [['https'], ['http']], `got ${JSON.stringify(protos)}, want the client's own header dropped and https then http`);
});

test('TLS 1.2 offers only forward-secret AEAD suites: a client asking for static-RSA AES128-SHA is refused', async (t) => {
  const backend = await backendFor(t);
  const { tlsPort } = await startHttpsProxy(t, THREE_PAIRS, backend);
  await assert.rejects(handshake(tlsPort, { servername: 'default.test', maxVersion: 'TLSv1.2', ciphers: 'AES128-SHA' }), (error: NodeJS.ErrnoException) => {
    assert.equal(error.code, 'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE', `got ${error.code}, want a handshake_failure alert`);
    return true;
  });
  const { socket } = await handshake(tlsPort, { servername: 'default.test', maxVersion: 'TLSv1.2' });
  assert.match(socket.getCipher().name, /^ECDHE-RSA-AES128-GCM-SHA256$/, `got ${socket.getCipher().name}`);
  socket.destroy();
});

test('tls_min_version = TLSv1.3 refuses a TLS 1.2 client with a protocol_version alert; a 1.3 client passes', async (t) => {
  const backend = await backendFor(t);
  const { proxy, tlsPort, log } = await startHttpsProxy(t, `${THREE_PAIRS}\ntls_min_version = TLSv1.3`, backend);
  await assert.rejects(handshake(tlsPort, { servername: 'exact.test', maxVersion: 'TLSv1.2' }), (error: NodeJS.ErrnoException) => {
    assert.equal(error.code, 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION', `got ${error.code}, want the protocol_version alert`);
    return true;
  });
  const response = await httpsRequest(tlsPort, { servername: 'exact.test' });
  assert.equal(response.status, 200);
  assert.equal(response.socket.getProtocol(), 'TLSv1.3');
  assert.equal(proxy.serverStats.requests, 1, 'the refused handshake never reached the HTTP loop');
  assert.ok(log.some((line) => line.startsWith('tls: handshake failed from 127.0.0.1: ERR_SSL_UNSUPPORTED_PROTOCOL: unsupported protocol ')), `got log ${JSON.stringify(log)}`);
});

test('ALPN: http/1.1 is chosen when offered, http/1.0 when only it is (as nginx); a client offering only h2 gets no_application_protocol (as Go)', async (t) => {
  const backend = await backendFor(t);
  const { tlsPort } = await startHttpsProxy(t, THREE_PAIRS, backend);
  const offered = await handshake(tlsPort, { servername: 'exact.test', ALPNProtocols: ['h2', 'http/1.1'] });
  assert.equal(offered.socket.alpnProtocol, 'http/1.1');
  offered.socket.destroy();
  const old = await handshake(tlsPort, { servername: 'exact.test', ALPNProtocols: ['http/1.0'] });
  assert.equal(old.socket.alpnProtocol, 'http/1.0');
  old.socket.destroy();
  await assert.rejects(handshake(tlsPort, { servername: 'exact.test', ALPNProtocols: ['h2'] }), (error: NodeJS.ErrnoException) => {
    assert.equal(error.code, 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL');
    return true;
  });
});

test('a plain HTTP request on the TLS port gets 400 naming https://, Connection: close and a Date, then the close; logged with the client address (nginx and Go answer 400)', async (t) => {
  const backend = await backendFor(t);
  const { tlsPort, log } = await startHttpsProxy(t, `${THREE_PAIRS}\nhsts = 1d`, backend);
  const plain = await exchange(tlsPort, 'GET / HTTP/1.1\r\nHost: exact.test\r\n\r\n', '127.0.0.7');
  const body = `${PLAIN_REQUEST_REASON}\n`;
  const want = new RegExp(
    `^HTTP/1\\.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${body.length}\r\nConnection: close\r\nDate: [A-Z][a-z]{2}, \\d{2} [A-Z][a-z]{2} \\d{4} \\d{2}:\\d{2}:\\d{2} GMT\r\n\r\n`,
  );
  assert.match(plain.text, want, `got ${JSON.stringify(plain.text)}`);
  assert.equal(plain.text.slice(plain.text.indexOf('\r\n\r\n') + 4), body, 'the body: one line naming the HTTPS port and https://; no Strict-Transport-Security over plain HTTP either');
  assert.equal(plain.closedByServer, true, 'the connection is closed after the answer');
  assert.ok(
    log.includes(`tls: handshake failed from 127.0.0.7: ERR_SSL_HTTP_REQUEST: a plain HTTP request was sent to the HTTPS port (repeats not logged for 60 s)`),
    `got log ${JSON.stringify(log)}, want the line naming 127.0.0.7`,
  );
  // A request whose first byte comes alone is answered as soon as that byte is read.
  const split = await exchange(tlsPort, ['P', 'OST / HTTP/1.1\r\nHost: exact.test\r\nContent-Length: 3\r\n\r\nabc'], '127.0.0.8');
  assert.match(split.text, /^HTTP\/1\.1 400 Bad Request\r\n/, `got ${JSON.stringify(split.text)}`);
  // An empty line before the request line is still a plain request (RFC 9112 section 2.2).
  const leadingEmptyLine = await exchange(tlsPort, '\r\nGET / HTTP/1.1\r\nHost: exact.test\r\n\r\n', '127.0.0.8');
  assert.match(leadingEmptyLine.text, /^HTTP\/1\.1 400 Bad Request\r\n/, `got ${JSON.stringify(leadingEmptyLine.text)} after a leading CRLF`);
  assert.deepEqual(backend.requests, [], 'nothing reached the upstream');
  const response = await httpsRequest(tlsPort, { servername: 'exact.test' });
  assert.equal(response.status, 200, 'the listener still serves TLS');
});

test('an answer before any request head logs the line received, as nginx logs $request: a plain HTTP request on the TLS port (refused=plain_http) and a head the plain port refused alike; no header, no made-up version', async (t) => {
  const backend = await backendFor(t);
  const { proxy, port, tlsPort } = await startHttpsProxy(t, THREE_PAIRS, backend);
  const records: AccessLogRecord[] = [];
  proxy.observe((record) => records.push(record));
  const cases: { readonly port: number; readonly bytes: string | Buffer; readonly line: string; readonly refused: boolean }[] = [
    { port: tlsPort, bytes: 'GET /admin/delete?all HTTP/1.1\r\nHost: exact.test\r\nUser-Agent: forged\r\n\r\n', line: '"GET /admin/delete?all HTTP/1.1"', refused: true },
    // Escaped as every field is; an empty line before the request line is skipped (RFC 9112 section 2.2).
    { port: tlsPort, bytes: '\r\nGET /"x\\ HTTP/1.1\r\n\r\n', line: '"GET /\\x22x\\x5C HTTP/1.1"', refused: true },
    // Not printable ASCII: no line is shown, and no version made up.
    { port: tlsPort, bytes: Buffer.from('GET /\x01 HTTP/1.1\r\n\r\n', 'latin1'), line: '"-"', refused: true },
    // The same on the plain listener, for heads its parser refused: a bad field, a garbage request line, a TLS record.
    { port: port!, bytes: 'GET /x HTTP/1.1\r\nHost: a b\r\nBad Name: x\r\n\r\n', line: '"GET /x HTTP/1.1"', refused: false },
    { port: port!, bytes: 'HELLO THERE\r\n\r\n', line: '"HELLO THERE"', refused: false },
    { port: port!, bytes: await clientHello(), line: '"-"', refused: false },
  ];
  for (const [i, { port: to, bytes }] of cases.entries()) {
    await exchange(to, bytes, '127.0.0.7');
    await waitFor(() => records.length === i + 1, 2000, `the log record of case ${i}`);
  }
  for (const [i, { line, refused }] of cases.entries()) {
    const combined = formatCombined(records[i]!);
    const want = `127.0.0.7 - - [${combined.slice(combined.indexOf('[') + 1, combined.indexOf(']'))}] ${line} 400 ${records[i]!.bytesSent} "-" "-" route=- upstream="-" upstream_status="-" duration_ms=${records[i]!.durationMs.toFixed(2)}${refused ? ' refused=plain_http' : ''}`;
    assert.equal(combined, want, `case ${i}: got ${combined}, want ${want}`);
  }
  const json = JSON.parse(formatJson(records[0]!)) as Record<string, unknown>;
  assert.deepEqual(
    [json.method, json.target, json.protocol, json.request_line, json.user_agent, json.refused],
    ['-', '-', '-', 'GET /admin/delete?all HTTP/1.1', null, 'plain_http'],
    `got ${JSON.stringify(json)}: the JSON line shows the line received apart from method, target and protocol, which were never parsed`,
  );
  for (const i of [2, 5]) {
    const unprintable = JSON.parse(formatJson(records[i]!)) as Record<string, unknown>;
    assert.equal(unprintable.request_line, '-', `case ${i}: got request_line ${JSON.stringify(unprintable.request_line)}, want "-" as combined logs it: every record without a head has the key (found by a break test)`);
  }
  assert.deepEqual(backend.requests, [], 'nothing reached the upstream');
});

test('garbage and a broken TLS record on the TLS port are closed without an answer; a silent client is closed after header_timeout, not logged', async (t) => {
  const backend = await backendFor(t);
  const { tlsPort, log } = await startHttpsProxy(t, `${THREE_PAIRS}\nheader_timeout = 300ms`, backend);
  for (const first of [0x00, 0x20, 0x7f, 0x80, 0xff]) {
    const garbage = await exchange(tlsPort, Buffer.from([first, 0x47, 0x45, 0x54, 0x20, 0x2f]), '127.0.0.9');
    assert.equal(garbage.closedByServer, true, `first byte 0x${first.toString(16)}: the connection is closed`);
    assert.equal(garbage.text, '', `first byte 0x${first.toString(16)}: got ${JSON.stringify(garbage.text)}, want no answer`);
  }
  assert.ok(log.some((line) => line.startsWith('tls: handshake failed from 127.0.0.9: not TLS: the first byte 0x00 ')), `got log ${JSON.stringify(log)}`);
  const broken = await exchange(tlsPort, Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5, 6, 7, 8, 9]), '127.0.0.10');
  assert.equal(broken.closedByServer, true, 'a broken TLS record: the connection is closed');
  assert.ok(log.some((line) => line.startsWith('tls: handshake failed from 127.0.0.10: ERR_SSL_')), `got log ${JSON.stringify(log)}, want the broken record logged with its address`);
  const linesBefore = log.length;
  const startedAt = Date.now();
  const silent = await exchange(tlsPort, '', '127.0.0.11', 3000);
  const elapsedMs = Date.now() - startedAt;
  assert.equal(silent.closedByServer, true, 'a client that sends nothing is cut');
  assert.ok(elapsedMs >= 250 && elapsedMs < 2000, `cut after ${elapsedMs} ms, want about header_timeout (300 ms)`);
  assert.deepEqual(log.slice(linesBefore), [], 'a silent client is closed silently, as on the plain listener');
  const response = await httpsRequest(tlsPort, { servername: 'exact.test' });
  assert.equal(response.status, 200, 'the listener still serves after the bad clients');
});

test('a handshake whose client sends a byte at a time still completes (the first byte alone decides, the rest goes to TLS)', async (t) => {
  const backend = await backendFor(t);
  const { tlsPort } = await startHttpsProxy(t, THREE_PAIRS, backend);
  const relayPort = await startTrickleRelay(t, tlsPort);
  for (const maxVersion of ['TLSv1.3', 'TLSv1.2'] as const) {
    const response = await httpsRequest(relayPort, { servername: 'exact.test', maxVersion });
    assert.equal(response.status, 200, `${maxVersion} through a relay writing one byte at a time: got ${response.status}, want 200`);
    assert.equal(response.certificate.subject.CN, 'exact.test', 'SNI still chose the certificate');
  }
});

test('shutdown closes at once the connections whose handshake has not finished (20 half-sent ClientHellos, header_timeout = 5s); a request in flight finishes', { timeout: 10_000 }, async (t) => {
  let onSlowRequest: () => void = () => {};
  const slowRequestArrived = new Promise<void>((resolve) => (onSlowRequest = resolve));
  const backend = await backendFor(t, (req, res) => {
    if (req.url !== '/slow') return void res.end('ok');
    onSlowRequest();
    setTimeout(() => res.end('slow'), 300);
  });
  const ini = `[server]\nlisten = off\ntls_listen = 127.0.0.1:0\naccess_log = off\nheader_timeout = 5s\n${tlsCertLine('exact')}\n[proxy.all]\npath = /\npass = ${backend.url}\n`;
  const log: string[] = [];
  const proxy = new ProxyServer(parseConfig(ini, 'test.ini'), { deps: { log: (line) => log.push(line) } });
  t.after(() => proxy.close(1000));
  const tlsPort = await proxy.listenTls(0, '127.0.0.1');
  const hello = await clientHello();
  const clients: net.Socket[] = [];
  t.after(() => clients.forEach((socket) => socket.destroy()));
  const closed: Promise<void>[] = [];
  for (let i = 0; i < 20; i++) {
    // Half of them sent the start of a ClientHello (a handshake under way), half nothing yet.
    const socket = net.connect({ port: tlsPort, host: '127.0.0.1' });
    socket.on('error', () => {});
    if (i % 2 === 0) socket.write(hello.subarray(0, 50));
    clients.push(socket);
    closed.push(new Promise((resolve) => socket.once('close', () => resolve())));
  }
  // A full exchange after them: by its end the proxy has read what they sent.
  assert.equal((await httpsRequest(tlsPort, { servername: 'exact.test' })).status, 200);
  const inFlight = httpsRequest(tlsPort, { servername: 'exact.test', path: '/slow' });
  await slowRequestArrived;
  const startedAt = Date.now();
  const isDrained = await proxy.close(3000);
  const elapsedMs = Date.now() - startedAt;
  assert.equal(isDrained, true, 'closed within shutdown_timeout, none cut');
  assert.ok(elapsedMs < 1000, `close() took ${elapsedMs} ms, want well under a second (a handshake under way is idle)`);
  await Promise.all(closed);
  const slow = await inFlight;
  assert.deepEqual([slow.status, slow.body], [200, 'slow'], 'the established connection with a request in flight was not closed as a handshake');
  assert.deepEqual(log.filter((line) => line.startsWith('tls:')), [], 'connections closed at shutdown are not logged as failed handshakes');
});

test('a client that leaves during its handshake is logged with its address (node reports it after the socket closed)', async (t) => {
  const backend = await backendFor(t);
  const { tlsPort, log } = await startHttpsProxy(t, THREE_PAIRS, backend);
  const hello = await clientHello();
  const socket = net.connect({ port: tlsPort, host: '127.0.0.1', localAddress: '127.0.0.12' });
  t.after(() => socket.destroy());
  socket.on('error', () => {});
  socket.write(hello.subarray(0, 50));
  // A full exchange after it: by its end the proxy has read those bytes and begun the handshake.
  assert.equal((await httpsRequest(tlsPort, { servername: 'exact.test' })).status, 200);
  socket.end();
  await waitFor(() => log.some((line) => line.startsWith('tls: handshake failed from 127.0.0.12: ')), 3000, 'the log line');
  const lines = log.filter((line) => line.startsWith('tls:'));
  assert.deepEqual(lines, ['tls: handshake failed from 127.0.0.12: ECONNRESET: the client closed the connection during the handshake (repeats not logged for 60 s)'], `got ${JSON.stringify(lines)}`);
});

test('a client asking to renegotiate TLS 1.2 is refused and its connection closed (nginx and HAProxy refuse it too)', { timeout: 5000 }, async (t) => {
  const backend = await backendFor(t);
  const { tlsPort } = await startHttpsProxy(t, THREE_PAIRS, backend);
  const { socket } = await handshake(tlsPort, { servername: 'exact.test', maxVersion: 'TLSv1.2' });
  t.after(() => socket.destroy());
  socket.on('error', () => {});
  const closed = new Promise((resolve) => socket.once('close', resolve));
  let isRenegotiated = false;
  const isStarted = socket.renegotiate({ rejectUnauthorized: false }, (error) => (isRenegotiated = error === null));
  assert.equal(isStarted, true, 'the client could not even ask');
  await closed; // the proxy closes the connection (node calls the callback only if it had succeeded or failed in the handshake)
  assert.equal(isRenegotiated, false, 'got a renegotiation that succeeded, want it refused');
});

test('redirect_https: 308 to the https URL with the host lower-cased, the TLS port, path and query byte for byte; ACME challenges pass', async (t) => {
  const backend = await backendFor(t);
  const { port, tlsPort } = await startHttpsProxy(t, `${THREE_PAIRS}\nredirect_https = on`, backend);
  const cases = [
    { path: '/a/b?x=1&y=%2F', host: 'Exact.TEST:8080', location: `https://exact.test:${tlsPort}/a/b?x=1&y=%2F` },
    { path: '//two//slashes/%7E?', host: 'wild.test', location: `https://wild.test:${tlsPort}//two//slashes/%7E?` },
    { path: '/', host: '[::1]:80', location: `https://[::1]:${tlsPort}/` },
  ];
  for (const c of cases) {
    const response = await request(port!, { method: 'POST', path: c.path, headers: { host: c.host, 'content-length': '3' }, body: 'abc' });
    assert.equal(response.status, 308, `${c.path}: got ${response.status}, want 308`);
    assert.equal(response.headers.location, c.location, `${c.path}: got Location ${response.headers.location}, want ${c.location}`);
    assert.equal(response.headers['strict-transport-security'], undefined, 'no HSTS on the plain listener');
  }
  const challenge = await request(port!, { path: '/.well-known/acme-challenge/token-1', headers: { host: 'exact.test' } });
  assert.equal(challenge.status, 200, `an ACME challenge path: got ${challenge.status}, want it routed (200 from the backend)`);
  assert.deepEqual(backend.requests.map((r) => r.url), ['/.well-known/acme-challenge/token-1'], 'only the ACME challenge reached the upstream');
  const noHost = await rawRequest(port!, 'GET /x HTTP/1.0\r\n\r\n');
  assert.match(noHost.text, /^HTTP\/1\.1 400 /, `a request without Host: got ${noHost.text.split('\r\n')[0]}, want 400`);
  const overTls = await httpsRequest(tlsPort, { servername: 'exact.test', path: '/a' });
  assert.equal(overTls.status, 200, 'HTTPS requests are never redirected');
});

test('hsts: HTTPS responses (relayed and the proxy own) carry Strict-Transport-Security; the upstream own is kept; never on plain', async (t) => {
  const backend = await backendFor(t, (req, res) => {
    if (req.url === '/own') res.setHeader('Strict-Transport-Security', 'max-age=5');
    res.end('ok');
  });
  const { port, tlsPort } = await startHttpsProxy(t, `${THREE_PAIRS}\nhsts = 1d`, backend);
  const relayed = await httpsRequest(tlsPort, { servername: 'exact.test' });
  assert.deepEqual(headerValues(relayed.rawHeaders, 'strict-transport-security'), ['max-age=86400']);
  const own = await httpsRequest(tlsPort, { servername: 'exact.test', path: '/own' });
  assert.deepEqual(headerValues(own.rawHeaders, 'strict-transport-security'), ['max-age=5'], "the upstream's own value, once");
  const proxyAnswer = await httpsRequest(tlsPort, { servername: 'exact.test', headers: { host: 'bad host' } });
  assert.equal(proxyAnswer.status, 400);
  assert.deepEqual(headerValues(proxyAnswer.rawHeaders, 'strict-transport-security'), ['max-age=86400'], "the proxy's own 400 over HTTPS too");
  const plain = await request(port!, { headers: { host: 'exact.test' } });
  assert.deepEqual(headerValues(plain.rawHeaders, 'strict-transport-security'), [], 'never on the plain listener (RFC 6797 §7.2)');
});

test('listen = off: only the HTTPS listener, and its timeouts still apply (header_timeout after the handshake)', async (t) => {
  const backend = await backendFor(t);
  const ini = `[server]\nlisten = off\ntls_listen = 127.0.0.1:0\naccess_log = off\nheader_timeout = 300ms\n${tlsCertLine('exact')}\n[proxy.all]\npath = /\npass = ${backend.url}\n`;
  const proxy = new ProxyServer(parseConfig(ini, 'test.ini'));
  t.after(() => proxy.close(1000));
  const tlsPort = await proxy.listenTls(0, '127.0.0.1');
  assert.equal((await httpsRequest(tlsPort, { servername: 'exact.test' })).status, 200);
  assert.equal(proxy.server.listening, false, 'no plain listener');
  // A client that finishes its handshake and then sends no head: cut at header_timeout, as on the
  // plain listener (the timeout checks run without a plain listener too).
  const { socket } = await handshake(tlsPort, { servername: 'exact.test' });
  t.after(() => socket.destroy());
  const startedAt = Date.now();
  const closedAfterMs = await new Promise<number>((resolve) => {
    socket.on('close', () => resolve(Date.now() - startedAt));
    socket.on('error', () => {});
    setTimeout(() => resolve(Infinity), 3000).unref();
  });
  assert.ok(closedAfterMs < 1500, `an established TLS connection without a request: closed after ${closedAfterMs} ms, want about header_timeout (300 ms)`);
});

test('ACME certificate: before one exists handshakes fail with an alert (logged once); then it serves, and tls_cert pairs keep their names', async (t) => {
  const backend = await backendFor(t);
  const acme = '[acme]\ndomains = acme.test\n';
  // No tls_cert: nothing to serve until setAcmeCertificate.
  const bare = await startHttpsProxy(t, '', backend, acme);
  for (let i = 0; i < 2; i++) {
    await assert.rejects(handshake(bare.tlsPort, { servername: 'localhost' }), (error: NodeJS.ErrnoException) => {
      assert.equal(error.code, 'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE', `got ${error.code}, want a handshake_failure alert`);
      return true;
    });
  }
  await assert.rejects(handshake(bare.tlsPort), /handshake failure/);
  const noCertificateLines = bare.log.filter((line) => line.includes('no certificate to serve yet'));
  assert.equal(noCertificateLines.length, 1, `got ${JSON.stringify(bare.log)}, want one line for three failures`);
  const localhostPem = readFileSync(join(TLS_FIXTURES, 'localhost.pem'), 'utf8');
  const localhostKey = readFileSync(join(TLS_FIXTURES, 'localhost.key'), 'utf8');
  assert.throws(() => bare.proxy.setAcmeCertificate(localhostPem, readFileSync(join(TLS_FIXTURES, 'mismatch.key'), 'utf8')), TlsCertificateError);
  bare.proxy.setAcmeCertificate(localhostPem, localhostKey);
  const served = await httpsRequest(bare.tlsPort, { servername: 'localhost' });
  assert.equal(served.certificate.subject.CN, 'localhost', 'the ACME certificate is the default with no tls_cert');
  const noSni = await handshake(bare.tlsPort, { checkServerIdentity: () => undefined });
  assert.equal(noSni.certificate.subject.CN, 'localhost');
  noSni.socket.destroy();
  assert.deepEqual(bare.proxy.certificates.map((pair) => pair.source), ['acme']);

  // With a tls_cert pair: it stays the default, and the ACME one serves only the names it lacks.
  const mixed = await startHttpsProxy(t, tlsCertLine('exact'), backend, acme);
  mixed.proxy.setAcmeCertificate(localhostPem, localhostKey);
  const cases = [
    { sni: 'exact.test', want: 'exact.test' },
    { sni: 'localhost', want: 'localhost' },
    { sni: 'other.test', want: 'exact.test' },
  ];
  for (const c of cases) {
    const { certificate, socket } = await handshake(mixed.tlsPort, { servername: c.sni, checkServerIdentity: () => undefined });
    socket.destroy();
    assert.equal(certificate.subject.CN, c.want, `SNI ${c.sni}: got ${certificate.subject.CN}, want ${c.want}`);
  }
});

test('session tickets: two proxies given the same ticketKeys resume each other tickets; with their own keys they do not', async (t) => {
  const backend = await backendFor(t);
  const ini = `[server]\nlisten = off\ntls_listen = 127.0.0.1:0\naccess_log = off\n${tlsCertLine('exact')}\n[proxy.all]\npath = /\npass = ${backend.url}\n`;
  const start = async (ticketKeys: Buffer | undefined): Promise<number> => {
    const proxy = new ProxyServer(parseConfig(ini, 'test.ini'), { ticketKeys });
    t.after(() => proxy.close(1000));
    return proxy.listenTls(0, '127.0.0.1');
  };
  /** A request on a new connection: whether it resumed, and the ticket it got. */
  const connect = (port: number, session?: Buffer): Promise<{ isReused: boolean; ticket: Buffer | undefined }> =>
    new Promise((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port, servername: 'exact.test', ca: readFileSync(join(TLS_FIXTURES, 'ca.pem')), session });
      let ticket: Buffer | undefined;
      let isReused = false;
      socket.on('session', (next: Buffer) => (ticket = next));
      socket.once('secureConnect', () => {
        isReused = socket.isSessionReused();
        socket.write('GET / HTTP/1.1\r\nHost: exact.test\r\nConnection: close\r\n\r\n');
      });
      socket.on('data', () => {});
      socket.on('end', () => socket.destroy());
      socket.on('close', () => resolve({ isReused, ticket }));
      socket.on('error', reject);
    });
  const shared = Buffer.alloc(48, 7);
  const [a, b, own] = [await start(shared), await start(shared), await start(undefined)];
  const { ticket } = await connect(a);
  assert.ok(ticket !== undefined, 'the first connection got a ticket');
  assert.equal((await connect(b, ticket)).isReused, true, 'a ticket from A resumes on B (same key)');
  assert.equal((await connect(own, ticket)).isReused, false, 'a proxy with its own key does a full handshake');
});

test('an upstream that dies mid-body, to an HTTP/1.0 client over TLS (a body delimited by the close): the TCP connection under TLS is reset as on plain HTTP, not closed with a FIN that reads as the end (found by a break test)', async (t) => {
  const backend = await backendFor(t, (req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.write(req.url === '/cut' ? 'hello' : 'whole');
    if (req.url === '/cut') setTimeout(() => res.socket?.destroy(), 50);
    else res.end();
  });
  const { tlsPort } = await startHttpsProxy(t, tlsCertLine('default'), backend);
  const http10 = (path: string): Promise<{ text: string; ending: string }> =>
    new Promise((resolve) => {
      const socket = tls.connect({ port: tlsPort, host: '127.0.0.1', ca: readFileSync(join(TLS_FIXTURES, 'ca.pem')), servername: 'default.test' });
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
      socket.on('end', () => resolve({ text, ending: 'end' }));
      socket.on('error', (error: NodeJS.ErrnoException) => resolve({ text, ending: error.code ?? error.message }));
      socket.write(`GET ${path} HTTP/1.0\r\nHost: default.test\r\n\r\n`);
    });
  const cut = await http10('/cut');
  assert.equal(cut.ending, 'ECONNRESET', `got the cut body ended by ${cut.ending} after ${JSON.stringify(cut.text)}, want a reset`);
  assert.match(cut.text, /\r\n\r\nhello$/, 'the bytes before the cut still arrive');
  const complete = await http10('/whole');
  assert.equal(complete.ending, 'end', 'a whole body delimited by the close still ends (close_notify, FIN)');
  assert.match(complete.text, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nwhole$/);
});
