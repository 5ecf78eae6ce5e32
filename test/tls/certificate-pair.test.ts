/**
 * Certificates are configuration (issue 13 item 2): every problem of a `tls_cert` pair is reported
 * at the line's file:line:column — the certificate path's column for certificate problems, the key
 * path's for key problems — with the clock injected, so "expired", "not yet valid" and "expiring
 * within 14 days" are exact with the long-lived fixtures.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/load-config.js';
import { checkCertificateFiles, checkCertificates, readCertificatePairs } from '../../src/tls/certificate-pair.js';
import { ConfigValueError } from '../../src/errors.js';
import { TLS_FIXTURES } from './https-client.js';

const DAY_MS = 86_400_000;
/** exact.pem's validity (scripts/make-test-certificates.sh: 100 years from its making). */
const EXACT_NOT_BEFORE = Date.parse('2026-12-01T13:45:08Z');
const EXACT_NOT_AFTER = Date.parse('2126-11-07T13:45:08Z');
const LATER = Date.parse('2030-01-01T00:00:00Z');

/** The `tls_cert` line of `[server]` for CERT KEY (fixture names), parsed: line 3, the cert path at column 12. */
function certificateLine(cert: string, key: string) {
  const certPath = join(TLS_FIXTURES, cert);
  const keyPath = join(TLS_FIXTURES, key);
  const config = parseConfig(`[server]\ntls_listen = 127.0.0.1:0\ntls_cert = ${certPath} ${keyPath}\n[proxy.a]\npath = /\npass = http://127.0.0.1:9\n`, 'env.ini');
  return { files: config.server.tlsCertificates[0]!, certPath, keyPath, keyColumn: 12 + certPath.length + 1 };
}

test('each broken pair is reported at the cert path column (certificate problems) or the key path column (key problems)', () => {
  const cases = [
    { cert: 'missing.pem', key: 'exact.key', nowMs: LATER, want: (l: Line) => [`env.ini:3:12: tls_cert '${l.certPath}' cannot be read: ENOENT`] },
    {
      cert: 'missing.pem',
      key: 'missing.key',
      nowMs: LATER,
      want: (l: Line) => [`env.ini:3:12: tls_cert '${l.certPath}' cannot be read: ENOENT`, `env.ini:3:${l.keyColumn}: tls_cert key '${l.keyPath}' cannot be read: ENOENT`],
    },
    { cert: 'exact.key', key: 'exact.key', nowMs: LATER, want: (l: Line) => [`env.ini:3:12: tls_cert '${l.certPath}' holds no PEM certificate`] },
    { cert: 'exact.pem', key: 'exact.pem', nowMs: LATER, want: (l: Line) => [`env.ini:3:${l.keyColumn}: tls_cert key '${l.keyPath}' holds no PEM private key`] },
    { cert: 'exact.pem', key: 'mismatch.key', nowMs: LATER, want: (l: Line) => [`env.ini:3:${l.keyColumn}: tls_cert key '${l.keyPath}' does not match the certificate`] },
    { cert: 'expired.pem', key: 'expired.key', nowMs: LATER, want: (l: Line) => [`env.ini:3:12: tls_cert '${l.certPath}' expired on 2020-06-01 00:00:00 UTC`] },
    {
      cert: 'exact.pem',
      key: 'exact.key',
      nowMs: EXACT_NOT_BEFORE - DAY_MS,
      want: (l: Line) => [`env.ini:3:12: tls_cert '${l.certPath}' is not valid before 2026-12-01 13:45:08 UTC`],
    },
  ];
  for (const c of cases) {
    const line = certificateLine(c.cert, c.key);
    const check = checkCertificateFiles(line.files, { minVersion: 'TLSv1.2', nowMs: c.nowMs });
    const got = check.errors.map((error) => error.message);
    assert.deepEqual(got, c.want(line), `${c.cert} ${c.key}: got ${JSON.stringify(got)}`);
    assert.equal(check.pair, undefined);
    assert.ok(check.errors.every((error) => error instanceof ConfigValueError));
  }
});

type Line = ReturnType<typeof certificateLine>;

test('a key under a passphrase is reported as encrypted at the key path column, not as missing', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'certificate-pair-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const keyPath = join(dir, 'exact.key');
  const plain = createPrivateKey(readFileSync(join(TLS_FIXTURES, 'exact.key'), 'utf8'));
  writeFileSync(keyPath, plain.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }));
  const certPath = join(TLS_FIXTURES, 'exact.pem');
  const config = parseConfig(`[server]\ntls_listen = 127.0.0.1:0\ntls_cert = ${certPath} ${keyPath}\n[proxy.a]\npath = /\npass = http://127.0.0.1:9\n`, 'env.ini');
  const check = checkCertificateFiles(config.server.tlsCertificates[0]!, { minVersion: 'TLSv1.2', nowMs: LATER });
  const want = `env.ini:3:${12 + certPath.length + 1}: tls_cert key '${keyPath}' is encrypted with a passphrase; give an unencrypted key (openssl pkey -in KEY -out PLAIN_KEY)`;
  assert.deepEqual(
    check.errors.map((error) => error.message),
    [want],
  );
  // Only the first key counts, the one node reads: a plain key followed by an encrypted one serves.
  writeFileSync(keyPath, `${plain.export({ type: 'pkcs8', format: 'pem' })}${readFileSync(keyPath, 'utf8')}`);
  const plainFirst = checkCertificateFiles(config.server.tlsCertificates[0]!, { minVersion: 'TLSv1.2', nowMs: LATER });
  assert.deepEqual(plainFirst.errors.map((error) => error.message), [], 'a plain first key');
  assert.deepEqual(plainFirst.pair?.dnsNames, ['exact.test']);
});

test('a certificate expiring within 14 days is served with a warning; 15 days left is quiet', () => {
  const line = certificateLine('exact.pem', 'exact.key');
  const soon = checkCertificateFiles(line.files, { minVersion: 'TLSv1.2', nowMs: EXACT_NOT_AFTER - 10 * DAY_MS - 3_600_000 });
  assert.deepEqual(soon.errors, []);
  assert.deepEqual(soon.warnings, [`env.ini:3:12: tls_cert '${line.certPath}' expires in 10 days, on 2126-11-07 13:45:08 UTC`]);
  assert.deepEqual(soon.pair?.dnsNames, ['exact.test']);
  const oneDay = checkCertificateFiles(line.files, { minVersion: 'TLSv1.2', nowMs: EXACT_NOT_AFTER - 1.5 * DAY_MS });
  assert.deepEqual(oneDay.warnings, [`env.ini:3:12: tls_cert '${line.certPath}' expires in 1 day, on 2126-11-07 13:45:08 UTC`]);
  const hours = checkCertificateFiles(line.files, { minVersion: 'TLSv1.2', nowMs: EXACT_NOT_AFTER - 3_600_000 });
  assert.deepEqual(hours.warnings, [`env.ini:3:12: tls_cert '${line.certPath}' expires within a day, on 2126-11-07 13:45:08 UTC`]);
  const later = checkCertificateFiles(line.files, { minVersion: 'TLSv1.2', nowMs: EXACT_NOT_AFTER - 15 * DAY_MS });
  assert.deepEqual(later.warnings, [], `got ${JSON.stringify(later.warnings)}, want none with 15 days left`);
});

test('start-up and reload read the pairs in order and stop at the first broken one', () => {
  const good = certificateLine('exact.pem', 'exact.key').files;
  const broken = certificateLine('exact.pem', 'mismatch.key').files;
  const { pairs } = readCertificatePairs([good], { minVersion: 'TLSv1.2', nowMs: LATER });
  assert.deepEqual(pairs.map((pair) => pair.serialNumber), ['EBD1BD1E89CC17456A114B4621C3D0D5']);
  assert.throws(() => readCertificatePairs([good, broken], { minVersion: 'TLSv1.2', nowMs: LATER }), /does not match the certificate/);
});

test('a certificate out of date is served with a warning when servesOutOfDate says so for its text, and an error otherwise', () => {
  const line = certificateLine('expired.pem', 'expired.key');
  const asked: string[] = [];
  const served = checkCertificateFiles(line.files, {
    minVersion: 'TLSv1.2',
    nowMs: LATER,
    servesOutOfDate: (certPem) => {
      asked.push(certPem);
      return true;
    },
  });
  assert.deepEqual(served.errors, []);
  assert.deepEqual(served.warnings, [`env.ini:3:12: tls_cert '${line.certPath}' expired on 2020-06-01 00:00:00 UTC: served until it is replaced, and clients will refuse it`]);
  assert.equal(served.pair?.notAfterMs, Date.parse('2020-06-01T00:00:00Z'));
  assert.deepEqual(asked, [readFileSync(line.certPath, 'utf8')], 'asked about the certificate text read from the file');
  const refused = checkCertificateFiles(line.files, { minVersion: 'TLSv1.2', nowMs: LATER, servesOutOfDate: () => false });
  assert.deepEqual(
    refused.errors.map((error) => error.message),
    [`env.ini:3:12: tls_cert '${line.certPath}' expired on 2020-06-01 00:00:00 UTC`],
  );
  assert.equal(refused.pair, undefined);
});

test('given the texts, the pairs are built from them and the files are not read', () => {
  const gone = certificateLine('missing.pem', 'missing.key').files; // neither file exists
  const text = { certPem: readFileSync(join(TLS_FIXTURES, 'exact.pem'), 'utf8'), keyPem: readFileSync(join(TLS_FIXTURES, 'exact.key'), 'utf8') };
  const { pairs } = readCertificatePairs([gone], { minVersion: 'TLSv1.2', nowMs: LATER }, [text]);
  assert.deepEqual(pairs.map((pair) => [pair.serialNumber, pair.certFile]), [['EBD1BD1E89CC17456A114B4621C3D0D5', join(TLS_FIXTURES, 'missing.pem')]]);
  assert.throws(() => readCertificatePairs([gone, gone], { minVersion: 'TLSv1.2', nowMs: LATER }, [text]), /1 certificate texts for 2 tls_cert pairs/);
});

test('an RSA pair after an ECDSA default is refused at its place (node would serve the default for its names); ECDSA after an RSA default is fine', () => {
  const rsa = certificateLine('default.pem', 'default.key').files;
  const ecdsa = certificateLine('exact.pem', 'exact.key').files;
  const options = { minVersion: 'TLSv1.2' as const, nowMs: LATER };
  assert.deepEqual(readCertificatePairs([rsa, ecdsa], options).pairs.map((pair) => pair.keyType), ['rsa', 'ec']);
  const want = `env.ini:3:12: tls_cert '${join(TLS_FIXTURES, 'default.pem')}' has an RSA key, the default pair '${join(TLS_FIXTURES, 'exact.pem')}' an ECDSA one: node would keep serving the default's certificate for its names; put the RSA pair first, or use one key type for every pair`;
  assert.throws(() => readCertificatePairs([ecdsa, rsa], options), (error: ConfigValueError) => {
    assert.equal(error.message, want);
    return true;
  });
  const checks = checkCertificates([ecdsa, rsa], options);
  assert.deepEqual(checks.map((check) => check.errors.map((error) => error.message)), [[], [want]], '--check reports it at the RSA pair');
});
