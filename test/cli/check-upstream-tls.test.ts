/**
 * The route `tls_*` files and `tls_verify = off` as an operator meets them on the command line
 * (SPEC 2, SPEC 1.2): `--check` warns about `tls_verify = off` and still exits 0; a `tls_ca` that
 * cannot be read or a client key that does not match fails `--check` and the start with the key's
 * file:line:column (exit 1); a SIGHUP whose file names a broken `tls_ca` is rejected and the running
 * proxy keeps serving through its https upstream.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import https from 'node:https';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { buildCli, REPO } from '../helpers/built-cli.js';
import { freePort, get, killAll, spawnCli, waitFor, writeConfig } from '../helpers/cli-process.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
let main = '';

before(async () => {
  main = await buildCli();
});

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [main, ...args], { cwd: REPO, encoding: 'utf8', timeout: 20_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const route = (keys: string): string => `[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy.a]\npath = /\npass = https://localhost:8443\n${keys}\n`;

test('--check warns about tls_verify = off, naming the route and its place, and exits 0', () => {
  const file = writeConfig(route('tls_verify = off'));
  const result = run(['--check', '--config', file]);
  assert.equal(result.status, 0, result.stderr);
  assert.ok(
    result.stderr.includes(`warning: ${file}:7:1: [proxy.a] tls_verify = off: the certificates of its https:// upstreams are not verified`),
    `got stderr ${JSON.stringify(result.stderr)}, want the tls_verify warning`,
  );
  assert.match(result.stdout, /^ {6}tls_verify off$/m, 'want the summary to show the setting');
});

test('--check and the start fail with exit 1 at the tls_ca value when the file cannot be read', () => {
  const file = writeConfig(route(`tls_ca = ${FIXTURES}missing.pem`));
  for (const args of [['--check', '--config', file], ['--config', file]]) {
    const result = run(args);
    assert.equal(result.status, 1, `${args.join(' ')}: got exit ${result.status}, want 1 (${result.stderr})`);
    assert.ok(result.stderr.includes(`${file}:7:10: tls_ca '${FIXTURES}missing.pem' cannot be read: ENOENT`), `${args.join(' ')}: got ${result.stderr}`);
  }
});

test('--check lists the tls_* settings of a route in its summary', () => {
  const file = writeConfig(route(`tls_ca = ${FIXTURES}ca.pem\ntls_server_name = api.test\ntls_client_cert = ${FIXTURES}client.pem ${FIXTURES}client.key`));
  const result = run(['--check', '--config', file]);
  assert.equal(result.status, 0, result.stderr);
  assert.ok(
    result.stdout.includes(`      tls_ca ${FIXTURES}ca.pem, tls_server_name api.test, tls_client_cert ${FIXTURES}client.pem ${FIXTURES}client.key\n`),
    `got ${result.stdout}`,
  );
  assert.equal(result.stderr, '', 'want no warning while tls_verify is on');
});

test('--check fails at the key of a tls_client_cert whose key belongs to another certificate', () => {
  const cert = `${FIXTURES}client.pem`;
  const file = writeConfig(route(`tls_client_cert = ${cert} ${FIXTURES}mismatch.key`));
  const result = run(['--check', '--config', file]);
  assert.equal(result.status, 1, result.stdout);
  const column = 'tls_client_cert = '.length + cert.length + 2;
  assert.ok(result.stderr.includes(`${file}:7:${column}: tls_client_cert key '${FIXTURES}mismatch.key' does not match the certificate in '${cert}'`), `got ${result.stderr}`);
});

test('SIGHUP with a broken tls_ca is rejected and the https upstream keeps being served', async (t) => {
  const backend = https.createServer({ cert: readFileSync(`${FIXTURES}localhost.pem`), key: readFileSync(`${FIXTURES}localhost.key`) }, (_req, res) => res.end('over tls'));
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => backend.close(() => resolve())));
  const pass = `https://localhost:${(backend.address() as AddressInfo).port}`;
  const port = await freePort();
  const text = (ca: string): string => `[server]\nlisten = 127.0.0.1:${port}\naccess_log = off\n[proxy.a]\npath = /\npass = ${pass}\ntls_ca = ${ca}\n`;
  const file = writeConfig(text(`${FIXTURES}ca.pem`));
  const cli = await spawnCli(file);
  t.after(() => killAll([cli.pid]));
  await cli.line(/proxy listening on/);
  assert.deepEqual(await get(port, '/'), { status: 200, body: 'over tls' });

  writeFileSync(file, text(`${FIXTURES}ca.key`));
  process.kill(cli.pid, 'SIGHUP');
  await cli.line(/reload rejected, still serving the previous config: .*env\.ini:7:10: tls_ca '.*ca\.key' holds no PEM certificate/);
  assert.deepEqual(await get(port, '/'), { status: 200, body: 'over tls' });
  process.kill(cli.pid, 'SIGTERM');
  const exit = await waitFor('the exit', () => cli.exited, 8000);
  assert.equal(exit.code, 0);
});
