/**
 * ACME against Pebble, Let's Encrypt's test server (skipped with a reason when `pebble` is not
 * installed): real HTTP-01 validation of the proxy's plain listener, names resolved by a test DNS
 * responder that says 127.0.0.1, the certificate served by the proxy's TLS listener
 * (`setAcmeCertificate`). From an empty storage to a certificate issued by Pebble's CA, a restart
 * (a new ProxyServer and manager on the same storage) that reuses it without a single ACME request,
 * and a forced short renewal window that renews it while a TLS connection opened before stays open
 * and keeps working. Then the built CLI, as one process and as a cluster whose primary runs ACME.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/load-config.js';
import type { Config } from '../../src/config/config.js';
import type { AccessLogRecord } from '../../src/gateway/access-log.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { AcmeManager, DEFAULT_RENEWAL_FRACTION } from '../../src/tls/acme/acme-manager.js';
import { httpsTransport, type AcmeTransport } from '../../src/tls/acme/acme-transport.js';
import { startDnsResponder, type DnsResponder } from '../helpers/dns-responder.js';
import { pebbleMissing, startPebble, type Pebble } from '../helpers/pebble.js';
import { startBackend, waitFor, type Backend } from '../helpers/proxy-harness.js';
import { freePort, get, killAll, spawnCli, waitFor as waitForValue, writeConfig } from '../helpers/cli-process.js';

const DOMAINS = ['acme.test', 'www.acme.test'];
const skip = pebbleMissing ?? false;

interface Rig {
  readonly pebble: Pebble;
  readonly dns: DnsResponder;
  readonly backend: Backend;
  /** Pebble's issuing root (management /roots/0), new at every Pebble start. */
  readonly root: string;
  readonly httpPort: number;
  readonly storageDir: string;
  ini(extra?: string): string;
}

/** DNS responder, backend, Pebble validating on a free plain port, an empty storage directory. */
async function rig(t: { after(fn: () => unknown): void }): Promise<Rig> {
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
  const root = await pebble.management('/roots/0');
  assert.match(root, /BEGIN CERTIFICATE/, `got ${root.slice(0, 80)}, want Pebble's root in PEM`);
  const ini = (extra = ''): string =>
    `[server]\nlisten = 127.0.0.1:${httpPort}\ntls_listen = 127.0.0.1:0\n${extra}` +
    `[acme]\ndomains = ${DOMAINS.join(', ')}\nemail = ops@acme.test\ndirectory = ${pebble.directoryUrl}\ndirectory_ca = ${pebble.directoryCaFile}\nstorage = ${storageDir}\n` +
    `[proxy.app]\npath = /\npass = ${backend.url}\n`;
  return { pebble, dns, backend, root, httpPort, storageDir, ini };
}

/** A TLS connection to 127.0.0.1:`port` for `servername`, verified against `ca` (chain and name). */
async function connect(port: number, ca: string, servername: string): Promise<{ socket: tls.TLSSocket; leaf: X509Certificate }> {
  const socket = tls.connect({ port, host: '127.0.0.1', servername, ca });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  return { socket, leaf: socket.getPeerX509Certificate()! };
}

/** One keep-alive GET on an open TLS connection; resolves with the whole response text (the backend answers `ok`). */
async function getOver(socket: tls.TLSSocket, host: string): Promise<string> {
  let text = '';
  const done = new Promise<string>((resolve, reject) => {
    const onData = (data: Buffer): void => {
      text += data.toString('latin1');
      if (text.endsWith('\r\n\r\nok')) {
        socket.off('data', onData);
        resolve(text);
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error(`the connection closed; got ${JSON.stringify(text)}`)));
  });
  socket.write(`GET /kept HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  return await done;
}

/** Pebble logs `Added order` once per newOrder. */
const orderCount = (pebble: Pebble): number => pebble.output().split('Added order').length - 1;

test('ACME against Pebble: from an empty storage to the proxy serving Pebble\'s certificate, reuse at restart, renewal in a forced short window with a connection kept', { skip, timeout: 60_000 }, async (t) => {
  const { pebble, dns, backend, root, httpPort, ini } = await rig(t);
  const config = parseConfig(ini(), 'acme.ini');
  const accessLog: AccessLogRecord[] = [];
  const startProxy = async (): Promise<{ proxy: ProxyServer; tlsPort: number }> => {
    const proxy = new ProxyServer(config, { accessLog: { isEnabled: true, write: (record) => accessLog.push(record), close: async () => {} } });
    t.after(() => proxy.close(2000));
    await proxy.listen(httpPort, '127.0.0.1');
    return { proxy, tlsPort: await proxy.listenTls(0, '127.0.0.1') };
  };

  let acmeRequests = 0;
  const realTransport = httpsTransport(readFileSync(pebble.directoryCaFile, 'utf8'));
  const transport: AcmeTransport = (request) => (acmeRequests++, realTransport(request));
  const logs: string[] = [];
  const newManager = (proxy: ProxyServer, renewalFraction = DEFAULT_RENEWAL_FRACTION): AcmeManager => {
    const manager = new AcmeManager({
      config: config.acme!,
      onCertificate: (certPem, keyPem) => proxy.setAcmeCertificate(certPem, keyPem),
      onChallenge: (token, keyAuthorization) => proxy.setAcmeChallenge(token, keyAuthorization),
      log: (line) => logs.push(line),
      transport,
      renewalFraction,
    });
    t.after(() => manager.stop());
    return manager;
  };
  const failures = (): string[] => logs.filter((line) => line.includes('failed'));

  // 1. Empty storage → a certificate from Pebble's CA, served by the proxy's TLS listener for the domain, within 30 s.
  const startedAt = Date.now();
  const first = await startProxy();
  const firstManager = newManager(first.proxy);
  await firstManager.load();
  firstManager.start();
  await waitFor(() => firstManager.validity !== undefined || failures().length > 0, 30_000, 'the first certificate');
  assert.deepEqual(failures(), [], `got failures, want a certificate; pebble said:\n${pebble.output()}`);
  const firstConnection = await connect(first.tlsPort, root, 'www.acme.test');
  const elapsedMs = Date.now() - startedAt;
  assert.ok(elapsedMs < 30_000, `got ${elapsedMs} ms, want the certificate served within 30 s`);
  const firstSerial = firstConnection.leaf.serialNumber;
  assert.equal(firstConnection.leaf.subjectAltName, 'DNS:acme.test, DNS:www.acme.test', `got ${firstConnection.leaf.subjectAltName}`);
  assert.match(await getOver(firstConnection.socket, 'www.acme.test'), /^HTTP\/1\.1 200 /, 'proxied over the ACME certificate');
  firstConnection.socket.destroy();
  assert.equal(orderCount(pebble), 1, `got ${orderCount(pebble)} orders, want 1`);
  assert.ok(dns.questions.includes('acme.test A'), `got DNS questions ${dns.questions.join(', ')}, want Pebble to have looked up acme.test`);
  const challengeAnswers = accessLog.filter((r) => r.target.startsWith('/.well-known/acme-challenge/')).map((r) => r.status);
  // Pebble fetches each token more than once (it mimics Let's Encrypt's validation from several places).
  assert.ok(challengeAnswers.length >= DOMAINS.length && challengeAnswers.every((status) => status === 200), `got challenge answers ${challengeAnswers.join(', ')}, want 200s, at least one per name`);
  assert.ok(backend.requests.every((r) => !r.url.startsWith('/.well-known/')), 'no challenge request went upstream');
  firstManager.stop();
  await first.proxy.close(2000);

  // 2. Restart: a new ProxyServer and manager on the same storage serve the stored certificate, with not one ACME request.
  const requestsBeforeRestart = acmeRequests;
  const second = await startProxy();
  const secondManager = newManager(second.proxy);
  await secondManager.load();
  secondManager.start();
  assert.equal(acmeRequests, requestsBeforeRestart, `got ${acmeRequests - requestsBeforeRestart} ACME requests at restart, want 0`);
  const afterRestart = await connect(second.tlsPort, root, 'acme.test');
  assert.equal(afterRestart.leaf.serialNumber, firstSerial, 'the restart serves the stored certificate');
  afterRestart.socket.destroy();
  secondManager.stop();
  assert.equal(orderCount(pebble), 1, `got ${orderCount(pebble)} orders after the restart, want still 1`);

  // 3. A renewal window forced to open 2 s from now; a connection opened before stays open and working.
  const { notBeforeMs, notAfterMs } = secondManager.validity!;
  const renewalFraction = 1 - (Date.now() + 2000 - notBeforeMs) / (notAfterMs - notBeforeMs);
  const thirdManager = newManager(second.proxy, renewalFraction);
  await thirdManager.load();
  thirdManager.start();
  const kept = await connect(second.tlsPort, root, 'acme.test');
  assert.equal(kept.leaf.serialNumber, firstSerial, 'before the renewal, the stored certificate');
  assert.match(await getOver(kept.socket, 'acme.test'), /^HTTP\/1\.1 200 /);
  await waitFor(() => thirdManager.validity!.notBeforeMs > notBeforeMs || failures().length > 0, 20_000, 'the renewal');
  thirdManager.stop();
  assert.deepEqual(failures(), [], `got failures, want a renewal; pebble said:\n${pebble.output()}`);
  const renewed = await connect(second.tlsPort, root, 'acme.test');
  assert.notEqual(renewed.leaf.serialNumber, firstSerial, 'a new connection gets the renewed certificate');
  renewed.socket.destroy();
  assert.match(await getOver(kept.socket, 'acme.test'), /^HTTP\/1\.1 200 /, 'the connection opened before the renewal still works');
  kept.socket.destroy();
  assert.equal(orderCount(pebble), 2, `got ${orderCount(pebble)} orders, want 2 (the first and the renewal)`);
});

test('the built CLI with [acme], one process: it orders, and its TLS listener serves Pebble\'s certificate', { skip, timeout: 60_000 }, async (t) => {
  const { pebble, root, ini } = await rig(t);
  const tlsPort = await freePort();
  const cli = await spawnCli(writeConfig(ini().replace('tls_listen = 127.0.0.1:0', `tls_listen = 127.0.0.1:${tlsPort}`)));
  t.after(() => killAll([cli.pid]));
  await cli.line(/acme: new certificate for acme\.test, www\.acme\.test/, 30_000);
  const leaf = await servedLeaf(tlsPort, root);
  assert.equal(leaf.subjectAltName, 'DNS:acme.test, DNS:www.acme.test');
  assert.equal(orderCount(pebble), 1, `got ${orderCount(pebble)} orders, want 1`);
  process.kill(cli.pid, 'SIGTERM');
  const { code } = await cli.exited;
  assert.equal(code, 0, `got exit code ${code}; stderr:\n${cli.stderr()}`);
});

test('the built CLI with [acme] and workers = 2: the primary orders, the workers answer the challenges and serve the certificate, a replacement worker gets it too', { skip, timeout: 60_000 }, async (t) => {
  const { pebble, root, ini } = await rig(t);
  const [tlsPort, adminPort] = [await freePort(), await freePort()];
  const text = ini('workers = 2\n').replace('tls_listen = 127.0.0.1:0', `tls_listen = 127.0.0.1:${tlsPort}`) + `[admin]\nlisten = 127.0.0.1:${adminPort}\n`;
  const cli = await spawnCli(writeConfig(text));
  const workerPids = async (): Promise<number[]> => (JSON.parse((await get(adminPort, '/status.json')).body) as { workers: { pid: number }[] }).workers.map((w) => w.pid);
  const pids = new Set<number>([cli.pid]);
  t.after(() => killAll(pids));
  await cli.line(/acme: new certificate for acme\.test, www\.acme\.test/, 30_000);
  assert.equal(orderCount(pebble), 1, `got ${orderCount(pebble)} orders, want 1: only the primary orders`);
  const before = await waitForValue('two workers', async () => ((await workerPids()).length === 2 ? workerPids() : undefined));
  for (const pid of before) pids.add(pid);
  // Every new connection is dealt to a worker in turn: all of them must show the ACME certificate.
  for (let i = 0; i < 4; i++) assert.equal((await servedLeaf(tlsPort, root)).subjectAltName, 'DNS:acme.test, DNS:www.acme.test', `connection ${i}`);
  // The primary's admin lists it too: the expiry alert must see the certificate the workers serve.
  const listed = (JSON.parse((await get(adminPort, '/status.json')).body) as { certificates: { source: string; names: string[] }[] }).certificates;
  assert.deepEqual(listed.map((c) => [c.source, c.names]), [['acme', ['acme.test', 'www.acme.test']]], `got ${JSON.stringify(listed)} on the primary's /status.json`);
  assert.match((await get(adminPort, '/metrics')).body, /^proxy_tls_certificate_expiry_seconds\{cert="acme",names="acme\.test,www\.acme\.test"\} \d+$/m);

  // A worker that starts later gets the certificate in its start message.
  process.kill(before[0]!, 'SIGKILL');
  const after = await waitForValue('a replacement worker', async () => {
    const now = await workerPids();
    return now.length === 2 && !now.includes(before[0]!) ? now : undefined;
  }, 10_000);
  for (const pid of after) pids.add(pid);
  for (let i = 0; i < 4; i++) {
    const connection = await connect(tlsPort, root, 'acme.test');
    connection.socket.destroy();
    assert.equal(connection.leaf.subjectAltName, 'DNS:acme.test, DNS:www.acme.test', `connection ${i} after the replacement: got no ACME certificate`);
  }
  assert.equal(orderCount(pebble), 1, 'the replacement did not order');
  process.kill(cli.pid, 'SIGTERM');
  const { code } = await cli.exited;
  assert.equal(code, 0, `got exit code ${code}; stderr:\n${cli.stderr()}`);
});

/** The leaf the TLS listener at `port` shows for acme.test, verified against Pebble's `root`; polled (a worker may not have it yet). */
async function servedLeaf(port: number, root: string): Promise<X509Certificate> {
  return await waitForValue('a handshake with the ACME certificate', async () => {
    const connection = await connect(port, root, 'acme.test').catch(() => undefined);
    connection?.socket.destroy();
    return connection?.leaf;
  }, 5_000);
}
