/**
 * The route `tls_*` files and `tls_verify = off` as an operator meets them on the command line
 * (SPEC 2, SPEC 1.2): `--check` warns about `tls_verify = off` and still exits 0; a `tls_ca` that
 * cannot be read or a client key that does not match fails `--check` and the start with the key's
 * file:line:column (exit 1); a SIGHUP whose file names a broken `tls_ca` is rejected and the running
 * proxy keeps serving through its https upstream. An expired client certificate fails `--check` and
 * is used with a warning at the start; certificates expiring within 14 days are warnings; a `tls_*`
 * line that only `http://` upstreams have is a warning.
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
import { runCheck } from '../../src/cli/check-config.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
let main = '';

before(async () => {
  main = await buildCli();
});

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [main, ...args], { cwd: REPO, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const route = (keys: string): string => `[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy.a]\npath = /\npass = https://localhost:8443\n${keys}\n`;

test('--check warns about tls_verify = off, naming the route and its place, and exits 0', () => {
  const file = writeConfig(route('tls_verify = off'));
  const result = run(['--check', '--config', file]);
  assert.equal(result.status, 0, result.stderr);
  assert.ok(
    result.stderr.includes(`warning: ${file}:7:14: [proxy.a] tls_verify = off: the certificates of its https:// upstreams are not verified`),
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

test('an expired tls_client_cert fails --check at its value (exit 1); the start and a reload that keeps it use it with a warning', async (t) => {
  const cert = `${FIXTURES}expired.pem`;
  const port = await freePort();
  const text = `[server]\nlisten = 127.0.0.1:${port}\naccess_log = off\n[proxy.a]\npath = /\npass = https://localhost:8443\ntls_client_cert = ${cert} ${FIXTURES}expired.key\n`;
  const file = writeConfig(text);
  const checked = run(['--check', '--config', file]);
  assert.equal(checked.status, 1, `got exit ${checked.status}, want 1 (${checked.stderr})`);
  const expired = `${file}:7:19: tls_client_cert '${cert}' expired on 2020-06-01 00:00:00 UTC`;
  assert.ok(checked.stderr.includes(expired), `got ${checked.stderr}, want ${expired}`);

  const cli = await spawnCli(file);
  t.after(() => killAll([cli.pid]));
  await cli.line(/proxy listening on/);
  assert.ok(cli.stderr().includes(`warning: ${expired}: used until it is replaced`), `got ${cli.stderr()}, want the warning at start-up`);
  process.kill(cli.pid, 'SIGHUP');
  await cli.line(/reloaded .*\n(?:.*\n)*?warning: .*expired on 2020-06-01 00:00:00 UTC: used until it is replaced/);
  process.kill(cli.pid, 'SIGTERM');
  assert.equal((await waitFor('the exit', () => cli.exited, 8000)).code, 0);
});

test('--check warns at a tls_* line of a route whose every pass is http://, and exits 0', () => {
  const file = writeConfig(`[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy.a]\npath = /\npass = http://127.0.0.1:9001\ntls_ca = ${FIXTURES}ca.pem\n`);
  const result = run(['--check', '--config', file]);
  assert.equal(result.status, 0, result.stderr);
  const want = `warning: ${file}:7:10: tls_ca has no effect: every pass of [proxy.a] is http:// (the tls_* keys apply to https:// upstreams only)\n`;
  assert.equal(result.stderr, want);
});

test('runCheck: a tls_ca and a tls_client_cert expiring within 14 days are warning: lines, and the check passes', () => {
  const file = writeConfig(route(`tls_ca = ${FIXTURES}ca.pem\ntls_client_cert = ${FIXTURES}client.pem ${FIXTURES}client.key`));
  const tenDaysBefore = Date.parse('2126-11-07T13:45:08Z') - 10 * 86_400_000 - 60_000;
  const result = runCheck(file, tenDaysBefore);
  assert.equal(result.exitCode, 0);
  assert.deepEqual(result.messages, [
    `warning: ${file}:7:10: tls_ca '${FIXTURES}ca.pem' expires in 10 days, on 2126-11-07 13:45:08 UTC`,
    `warning: ${file}:8:19: tls_client_cert '${FIXTURES}client.pem' expires in 10 days, on 2126-11-07 13:45:08 UTC`,
  ]);
});
