/**
 * Hot reload of certificates (issue 13 item 2, SPEC 2 SIGHUP): the tls_cert files are copied to a
 * temp dir, the proxy serves the copies, and SIGHUP (the real `reloadOnHangup`, fed by an event
 * emitter) re-reads them. A renewed certificate is served to new connections while a keep-alive
 * connection opened before goes on; a broken file is rejected with its place and the old
 * certificate keeps serving.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { EventEmitter } from 'node:events';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { loadConfigFile } from '../../src/cli/load-config-file.js';
import { reloadOnHangup } from '../../src/cli/run-proxy.js';
import type { SignalSource } from '../../src/process/process-signals.js';
import { startBackend } from '../helpers/proxy-harness.js';
import { CA, certificateDir, httpsRequest } from '../tls/https-client.js';

const EXACT_SERIAL = 'EBD1BD1E89CC17456A114B4621C3D0D5';
const RENEWED_SERIAL = '6F8E170FBBEFFA72EF7EF010A0AD03CA';

test('SIGHUP serves a renewed certificate to new connections, keeps a keep-alive one, and rejects broken files', async (t) => {
  const { dir, copy, certPath, configFile } = certificateDir('proxy-tls-reload-');
  const backend = await startBackend();
  // Line 4 is the tls_cert line; the certificate path starts at column 12.
  writeFileSync(configFile, `[server]\nlisten = 127.0.0.1:0\ntls_listen = 127.0.0.1:0\ntls_cert = ${certPath} ${join(dir, 'exact.key')}\naccess_log = off\n[proxy.all]\npath = /\npass = ${backend.url}\n`);
  const log: string[] = [];
  const proxy = new ProxyServer(loadConfigFile(configFile), { deps: { log: (line) => log.push(line) } });
  const tlsPort = await proxy.listenTls(0, '127.0.0.1');
  const signals = new EventEmitter();
  const stopReloading = reloadOnHangup(configFile, (config) => proxy.reload(config), (line) => log.push(line), signals as unknown as SignalSource);
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: CA, servername: 'exact.test' });
  t.after(async () => {
    stopReloading();
    agent.destroy();
    await proxy.close(1000);
    await backend.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const serialOfNewConnection = async (): Promise<string> => (await httpsRequest(tlsPort, { servername: 'exact.test' })).certificate.serialNumber;
  const hangUp = (): string => {
    const before = log.length;
    signals.emit('SIGHUP');
    return log.slice(before).join('\n');
  };

  const first = await httpsRequest(tlsPort, { servername: 'exact.test', agent });
  assert.equal(first.certificate.serialNumber, EXACT_SERIAL);
  const keptSocket: TLSSocket = first.socket;

  // Renewed: the files are replaced, then SIGHUP.
  copy('exact-renewed.pem', 'exact.pem');
  copy('exact-renewed.key', 'exact.key');
  assert.match(hangUp(), /^reloaded /, 'the renewed pair is accepted');
  const second = await httpsRequest(tlsPort, { servername: 'exact.test', agent });
  assert.equal(second.status, 200, 'the keep-alive connection opened before the reload still works');
  assert.equal(second.socket, keptSocket, 'the same connection carried the second request');
  assert.equal(await serialOfNewConnection(), RENEWED_SERIAL, 'a new connection gets the renewed certificate');
  assert.deepEqual(proxy.certificates.map((pair) => pair.serialNumber), [RENEWED_SERIAL]);

  // Broken files: each reload is rejected with its place, and the renewed certificate keeps serving.
  const broken = [
    { write: () => writeFileSync(certPath, 'not a certificate\n'), want: `reload rejected, still serving the previous config: ${configFile}:4:12: tls_cert '${certPath}' holds no PEM certificate` },
    {
      write: () => {
        copy('exact.pem', 'exact.pem'); // the old certificate with the renewed key
      },
      want: `reload rejected, still serving the previous config: ${configFile}:4:${12 + certPath.length + 1}: tls_cert key '${join(dir, 'exact.key')}' does not match the certificate`,
    },
    {
      write: () => {
        copy('expired.pem', 'exact.pem');
        copy('expired.key', 'exact.key');
      },
      want: `reload rejected, still serving the previous config: ${configFile}:4:12: tls_cert '${certPath}' expired on 2020-06-01 00:00:00 UTC`,
    },
  ];
  for (const file of broken) {
    file.write();
    assert.equal(hangUp(), file.want);
    assert.equal(await serialOfNewConnection(), RENEWED_SERIAL, 'the previous certificate still serves');
  }
  const third = await httpsRequest(tlsPort, { servername: 'exact.test', agent });
  assert.equal(third.socket, keptSocket, 'the keep-alive connection survived the rejected reloads too');
  assert.equal(backend.requests.length, 3 + 1 + broken.length, 'every request reached the upstream');
});

test('a certificate that expired while served: a reload keeping it is accepted with a warning, one putting another out-of-date certificate in its place is rejected; a start serves it with a warning', async (t) => {
  const { dir, copy, certPath, configFile } = certificateDir('proxy-tls-expired-');
  const backend = await startBackend();
  const writeConfig = (path: string): void =>
    writeFileSync(configFile, `[server]\nlisten = 127.0.0.1:0\ntls_listen = 127.0.0.1:0\ntls_cert = ${certPath} ${join(dir, 'exact.key')}\naccess_log = off\n[proxy.all]\npath = ${path}\npass = ${backend.url}\n`);
  writeConfig('/');
  const log: string[] = [];
  let nowMs = Date.parse('2026-12-01T00:00:00Z');
  const proxy = new ProxyServer(loadConfigFile(configFile), { deps: { log: (line) => log.push(line) }, epochNow: () => nowMs });
  const tlsPort = await proxy.listenTls(0, '127.0.0.1');
  const signals = new EventEmitter();
  const stopReloading = reloadOnHangup(configFile, (config) => proxy.reload(config), (line) => log.push(line), signals as unknown as SignalSource);
  t.after(async () => {
    stopReloading();
    await proxy.close(1000);
    await backend.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const hangUp = (): string => {
    const before = log.length;
    signals.emit('SIGHUP');
    return log.slice(before).join('\n');
  };

  nowMs = Date.parse('2127-01-01T00:00:00Z'); // exact.pem ran out on 2126-11-07 while served
  writeConfig('/v2/');
  const kept = hangUp();
  assert.equal(
    kept,
    `reloaded ${configFile}: 1 route(s); upstreams kept 1, added 0, removed 0\n` +
      `warning: ${configFile}:4:12: tls_cert '${certPath}' expired on 2126-11-07 13:45:08 UTC: served until it is replaced, and clients will refuse it`,
  );
  assert.equal((await httpsRequest(tlsPort, { servername: 'exact.test', path: '/' })).status, 404, 'the old route is gone');
  const served = await httpsRequest(tlsPort, { servername: 'exact.test', path: '/v2/' });
  assert.equal(served.status, 200, 'the new route is in force');
  assert.equal(served.certificate.serialNumber, EXACT_SERIAL, 'the certificate served is still the one that expired');

  copy('expired.pem', 'exact.pem');
  copy('expired.key', 'exact.key');
  assert.equal(hangUp(), `reload rejected, still serving the previous config: ${configFile}:4:12: tls_cert '${certPath}' expired on 2020-06-01 00:00:00 UTC`);

  const restartLog: string[] = [];
  const restarted = new ProxyServer(loadConfigFile(configFile), { deps: { log: (line) => restartLog.push(line) }, epochNow: () => nowMs });
  await restarted.close(0);
  assert.deepEqual(restartLog, [`warning: ${configFile}:4:12: tls_cert '${certPath}' expired on 2020-06-01 00:00:00 UTC: served until it is replaced, and clients will refuse it`]);
});
