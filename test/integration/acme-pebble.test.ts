/**
 * ACME against Pebble, Let's Encrypt's test server (skipped with a reason when `pebble` is not
 * installed): real HTTP-01 validation of the proxy's plain listener, names resolved by a test DNS
 * responder that says 127.0.0.1. From an empty storage to a certificate issued by Pebble's CA, a
 * restart that reuses it without a single ACME request, and a forced short renewal window that
 * renews it while a TLS connection opened before stays open and working.
 *
 * The certificate is served by a `tls.Server` fed by the manager's `onCertificate` through
 * `setSecureContext` — what the proxy's TLS listener does with `setAcmeCertificate`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../src/config/load-config.js';
import type { AccessLogRecord } from '../../src/gateway/access-log.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { AcmeManager, DEFAULT_RENEWAL_FRACTION } from '../../src/tls/acme/acme-manager.js';
import { httpsTransport, type AcmeTransport } from '../../src/tls/acme/acme-transport.js';
import { startDnsResponder } from '../helpers/dns-responder.js';
import { freePort, pebbleMissing, startPebble } from '../helpers/pebble.js';
import { startBackend, waitFor } from '../helpers/proxy-harness.js';

const DOMAINS = ['acme.test', 'www.acme.test'];

/** A TLS echo server whose certificate is whatever `setAcmeCertificate` last got, swapped without touching open connections. */
async function startTlsEcho(): Promise<{ port: number; setAcmeCertificate(certPem: string, keyPem: string): void; close(): Promise<void> }> {
  const server = tls.createServer({}, (socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    setAcmeCertificate: (cert, key) => server.setSecureContext({ cert, key }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A TLS connection to `port` for `servername`, verified against `ca`, and the leaf it was shown. */
async function connect(port: number, ca: string, servername: string): Promise<{ socket: tls.TLSSocket; leaf: X509Certificate }> {
  const socket = tls.connect({ port, host: '127.0.0.1', servername, ca });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  return { socket, leaf: socket.getPeerX509Certificate()! };
}

async function echo(socket: tls.TLSSocket, text: string): Promise<string> {
  socket.write(text);
  return await new Promise((resolve) => socket.once('data', (data: Buffer) => resolve(data.toString())));
}

test('ACME against Pebble: issue from an empty storage, reuse at restart, renew in a forced short window with a connection kept', { skip: pebbleMissing ?? false, timeout: 60_000 }, async (t) => {
  const storageDir = join(mkdtempSync(join(tmpdir(), 'acme-pebble-')), 'storage');
  t.after(() => rmSync(join(storageDir, '..'), { recursive: true, force: true }));
  const backend = await startBackend();
  t.after(() => backend.close());
  const dns = await startDnsResponder();
  t.after(() => dns.close());

  // Pebble validates HTTP-01 on the proxy's plain port, so that port is chosen first.
  const httpPort = await freePort();
  const pebble = await startPebble({ httpPort, dnsPort: dns.port });
  t.after(() => pebble.stop());
  const config = parseConfig(
    `[server]\nlisten = 127.0.0.1:${httpPort}\ntls_listen = 127.0.0.1:0\n` +
      `[acme]\ndomains = ${DOMAINS.join(', ')}\nemail = ops@acme.test\ndirectory = ${pebble.directoryUrl}\ndirectory_ca = ${pebble.directoryCaFile}\nstorage = ${storageDir}\n` +
      `[proxy.app]\npath = /\npass = ${backend.url}\n`,
    'acme.ini',
  );
  const accessLog: AccessLogRecord[] = [];
  const proxy = new ProxyServer(config, { accessLog: { isEnabled: true, write: (record) => accessLog.push(record), close: async () => {} } });
  await proxy.listen(httpPort, '127.0.0.1');
  t.after(() => proxy.close(2000));
  const root = await pebble.management('/roots/0');
  assert.match(root, /BEGIN CERTIFICATE/, `got ${root.slice(0, 80)}, want Pebble's root in PEM`);
  const served = await startTlsEcho();
  t.after(() => served.close());

  let requests = 0;
  const realTransport = httpsTransport(readFileSync(pebble.directoryCaFile, 'utf8'));
  const transport: AcmeTransport = (req) => (requests++, realTransport(req));
  const logs: string[] = [];
  const newManager = (renewalFraction = DEFAULT_RENEWAL_FRACTION): AcmeManager => {
    const manager = new AcmeManager({
      config: config.acme!,
      onCertificate: (certPem, keyPem) => served.setAcmeCertificate(certPem, keyPem),
      onChallenge: (token, keyAuthorization) => proxy.setAcmeChallenge(token, keyAuthorization),
      log: (line) => logs.push(line),
      transport,
      renewalFraction,
    });
    t.after(() => manager.stop());
    return manager;
  };

  // 1. Empty storage → a certificate from Pebble's CA, served for the domain, within 30 s.
  const startedAt = Date.now();
  const first = newManager();
  await first.start();
  await waitFor(() => first.validity !== undefined || logs.some((l) => l.includes('failed')), 30_000, 'the first certificate');
  assert.equal(first.validity !== undefined, true, `got ${logs.join(' | ')}\n${pebble.output()}, want a certificate`);
  const elapsedMs = Date.now() - startedAt;
  assert.ok(elapsedMs < 30_000, `got ${elapsedMs} ms, want the certificate within 30 s`);
  const firstConnection = await connect(served.port, root, 'www.acme.test').catch(async () => {
    // Pebble's chain is leaf + intermediate: the root alone verifies it.
    throw new Error(`the served certificate does not verify against Pebble's root:\n${pebble.output()}`);
  });
  const firstSerial = firstConnection.leaf.serialNumber;
  assert.equal(firstConnection.leaf.subjectAltName, 'DNS:acme.test, DNS:www.acme.test', `got ${firstConnection.leaf.subjectAltName}`);
  firstConnection.socket.destroy();
  assert.ok(dns.questions.includes('acme.test A'), `got DNS questions ${dns.questions.join(', ')}, want Pebble to have looked up acme.test`);
  const challengeLogs = accessLog.filter((r) => r.target.startsWith('/.well-known/acme-challenge/')).map((r) => r.status);
  // Pebble fetches each token more than once (it mimics Let's Encrypt's validation from several places).
  assert.ok(challengeLogs.length >= DOMAINS.length && challengeLogs.every((status) => status === 200), `got challenge answers ${challengeLogs.join(', ')}, want 200s, at least one per name, from the plain listener`);
  assert.equal(backend.requests.length, 0, 'no challenge request went upstream');
  first.stop();

  // 2. Restart with the same storage: the stored certificate, and not one ACME request.
  const requestsBeforeRestart = requests;
  const second = newManager();
  await second.start();
  assert.equal(requests, requestsBeforeRestart, `got ${requests - requestsBeforeRestart} ACME requests at restart, want 0`);
  const afterRestart = await connect(served.port, root, 'acme.test');
  assert.equal(afterRestart.leaf.serialNumber, firstSerial, 'the restart serves the stored certificate');
  afterRestart.socket.destroy();
  second.stop();

  // 3. A renewal window forced to open 2 s from now; a connection opened before it stays open and working.
  const { notBeforeMs, notAfterMs } = second.validity!;
  const renewalFraction = 1 - (Date.now() + 2000 - notBeforeMs) / (notAfterMs - notBeforeMs);
  const third = newManager(renewalFraction);
  await third.start();
  const kept = await connect(served.port, root, 'acme.test');
  assert.equal(kept.leaf.serialNumber, firstSerial, 'before the renewal, the stored certificate');
  assert.equal(await echo(kept.socket, 'before'), 'before');
  await waitFor(() => third.validity!.notBeforeMs > notBeforeMs || logs.some((l) => l.includes('failed')), 20_000, 'the renewal');
  third.stop();
  assert.ok(third.validity!.notBeforeMs > notBeforeMs, `got ${logs.join(' | ')}, want a renewed certificate`);
  const renewed = await connect(served.port, root, 'acme.test');
  assert.notEqual(renewed.leaf.serialNumber, firstSerial, 'a new connection gets the renewed certificate');
  renewed.socket.destroy();
  assert.equal(await echo(kept.socket, 'after'), 'after', 'the connection opened before the renewal still works');
  assert.equal(kept.leaf.serialNumber, firstSerial, 'on the certificate it started with');
  kept.socket.destroy();
  assert.equal(logs.filter((l) => l.includes('failed')).length, 0, `got ${logs.join(' | ')}`);
});
