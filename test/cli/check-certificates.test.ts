/**
 * `--check` reads every `tls_cert` pair (issue 13 item 2): problems at the line's file:line:column
 * (exit 1), a certificate expiring within 14 days as a `warning:` line (exit 0), and the summary
 * listing each pair with its names and expiry. The errors through the built CLI; the warning
 * through `runCheck` with a chosen clock (the fixtures live 100 years).
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildCli, REPO } from '../helpers/built-cli.js';
import { runCheck } from '../../src/cli/check-config.js';
import { TLS_FIXTURES } from '../tls/https-client.js';

let mainJs = '';
before(async () => {
  mainJs = await buildCli();
});

const dir = mkdtempSync(join(tmpdir(), 'proxy-check-tls-'));
const fixture = (name: string): string => join(TLS_FIXTURES, name);

/** env.ini with `tls_cert` lines from line 4 on; returns the file. */
function configWith(name: string, pairs: readonly [string, string][]): string {
  const lines = pairs.map(([cert, key]) => `tls_cert = ${cert} ${key}`).join('\n');
  const file = join(dir, name);
  writeFileSync(file, `[server]\nlisten = 127.0.0.1:8080\ntls_listen = 127.0.0.1:8443\n${lines}\naccess_log = off\n[proxy.a]\npath = /\npass = http://127.0.0.1:9001\n`);
  return file;
}

function check(file: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [mainJs, '--check', '--config', file], { cwd: REPO, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

test('--check reports every broken pair at its cert or key column and exits 1', () => {
  const missing = join(dir, 'missing.pem');
  const pairs: [string, string][] = [
    [fixture('exact.pem'), fixture('exact.key')],
    [missing, fixture('exact.key')],
    [fixture('exact.pem'), fixture('mismatch.key')],
    [fixture('expired.pem'), fixture('expired.key')],
  ];
  const file = configWith('broken.ini', pairs);
  const keyColumn = (cert: string): number => 12 + cert.length + 1;
  const result = check(file);
  assert.equal(result.status, 1, `got exit ${result.status}, want 1; stderr: ${result.stderr}`);
  assert.equal(result.stdout, '', 'no summary for an invalid config');
  assert.deepEqual(result.stderr.trimEnd().split('\n'), [
    `${file}:5:12: tls_cert '${missing}' cannot be read: ENOENT`,
    `${file}:6:${keyColumn(fixture('exact.pem'))}: tls_cert key '${fixture('mismatch.key')}' does not match the certificate`,
    `${file}:7:12: tls_cert '${fixture('expired.pem')}' expired on 2020-06-01 00:00:00 UTC`,
  ]);
});

test('--check lists each pair with its names and expiry, the first as the default, and exits 0', () => {
  const file = configWith('good.ini', [
    [fixture('default.pem'), fixture('default.key')],
    [fixture('wildcard.pem'), fixture('wildcard.key')],
    [fixture('localhost.pem'), fixture('localhost.key')],
  ]);
  const result = check(file);
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stderr, '');
  const lines = result.stdout.split('\n');
  const from = lines.findIndex((line) => line.startsWith('tls_listen '));
  assert.deepEqual(lines.slice(from, from + 4), [
    'tls_listen 127.0.0.1:8443, TLSv1.2 or later, http/1.1',
    `  tls_cert ${fixture('default.pem')}: default.test, expires 2126-11-07 13:45:08 UTC (the default)`,
    `  tls_cert ${fixture('wildcard.pem')}: *.wild.test, wild.test, expires 2126-11-07 13:45:08 UTC`,
    `  tls_cert ${fixture('localhost.pem')}: localhost, 127.0.0.1, 0:0:0:0:0:0:0:1, expires 2126-11-07 13:45:08 UTC`,
  ]);
});

test('a certificate expiring within 14 days is a warning: line, and the check still passes', () => {
  const file = configWith('soon.ini', [[fixture('exact.pem'), fixture('exact.key')]]);
  const tenDaysBefore = Date.parse('2126-11-07T13:45:08Z') - 10 * 86_400_000 - 60_000;
  const result = runCheck(file, tenDaysBefore);
  assert.equal(result.exitCode, 0);
  assert.deepEqual(result.messages, [`warning: ${file}:4:12: tls_cert '${fixture('exact.pem')}' expires in 10 days, on 2126-11-07 13:45:08 UTC`]);
  assert.match(result.output, /is valid\n$/);
});

test('the proxy does not start with a broken pair: exit 1 with the same message as --check', () => {
  const file = configWith('start.ini', [[fixture('exact.pem'), fixture('mismatch.key')]]);
  const result = spawnSync(process.execPath, [mainJs, '--config', file], { cwd: REPO, encoding: 'utf8', timeout: 60_000 });
  assert.equal(result.status, 1, `got exit ${result.status}, want 1; stderr: ${result.stderr}`);
  assert.equal(result.stderr, `${file}:4:${12 + fixture('exact.pem').length + 1}: tls_cert key '${fixture('mismatch.key')}' does not match the certificate\n`);
});

test('--check reads the [acme] files it names: an unreadable directory_ca, a FIFO as directory_ca (not read), a storage that is a file, a key in it that is not a key (exit 1, at the [acme] place)', () => {
  const acmeConfig = (name: string, keys: string): string => {
    const file = join(dir, name);
    writeFileSync(file, `[server]\nlisten = 127.0.0.1:8080\ntls_listen = 127.0.0.1:8443\naccess_log = off\n[acme]\ndomains = acme.test\n${keys}\n[proxy.a]\npath = /\npass = http://127.0.0.1:9001\n`);
    return file;
  };
  const storageFile = join(dir, 'not-a-directory');
  writeFileSync(storageFile, 'x');
  const storageDir = mkdtempSync(join(dir, 'storage-'));
  writeFileSync(join(storageDir, 'account.key'), 'garbage');
  const fifo = join(dir, 'directory-ca.fifo');
  execFileSync('mkfifo', [fifo]);
  const cases: [string, string, string][] = [
    ['directory_ca', `directory_ca = ${join(dir, 'nope.pem')}\nstorage = ${join(dir, 'fresh-storage')}`, `[acme] directory_ca '${join(dir, 'nope.pem')}' cannot be read: ENOENT`],
    ['directory_ca FIFO', `directory_ca = ${fifo}\nstorage = ${join(dir, 'fresh-storage')}`, `[acme] directory_ca '${fifo}' cannot be read: ENOTREG`],
    ['storage file', `storage = ${storageFile}`, `[acme] storage '${storageFile}' is not a directory`],
    ['bad account key', `storage = ${storageDir}`, `[acme] storage file '${join(storageDir, 'account.key')}' is not a PEM private key`],
  ];
  for (const [what, keys, message] of cases) {
    const file = acmeConfig(`acme-${what.replaceAll(' ', '-')}.ini`, keys);
    const result = runCheck(file, Date.now());
    assert.equal(result.exitCode, 1, `${what}: got exit ${result.exitCode}, want 1`);
    const valueColumn = what.startsWith('directory_ca') ? '7:16' : '7:11'; // the directory_ca or storage value
    assert.deepEqual(result.messages, [`${file}:${valueColumn}: ${message}`], `${what}: got ${JSON.stringify(result.messages)}`);
  }
  const fine = runCheck(acmeConfig('acme-fine.ini', `storage = ${join(dir, 'made-at-first-start')}`), Date.now());
  assert.equal(fine.exitCode, 0, `a storage that does not exist yet is fine (made at the first start): got ${JSON.stringify(fine.messages)}`);
});
