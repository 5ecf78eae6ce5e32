/**
 * The certificate store's SNI rule (src/tls/certificate-store.ts) as a table: the worked example of
 * its doc comment, case, one-label wildcards, the default, first-pair-wins for a name two pairs
 * serve, and tls_cert before ACME.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { parseCertificatePair, servedNames, type CertificatePair } from '../../src/tls/certificate-pair.js';
import { CertificateStore } from '../../src/tls/certificate-store.js';
import { TLS_FIXTURES } from './https-client.js';

const NOW = Date.parse('2030-01-01T00:00:00Z');

function pair(name: string, source: 'tls_cert' | 'acme' = 'tls_cert'): CertificatePair {
  const certPem = readFileSync(join(TLS_FIXTURES, `${name}.pem`), 'utf8');
  const keyPem = readFileSync(join(TLS_FIXTURES, `${name}.key`), 'utf8');
  return parseCertificatePair(certPem, keyPem, source, source === 'acme' ? undefined : `${name}.pem`, { minVersion: 'TLSv1.2', nowMs: NOW });
}

test('names served: SAN DNS and IP entries; the CN only when there is no SAN DNS entry', () => {
  const cases = [
    { file: 'exact', dnsNames: ['exact.test'], ipAddresses: [] },
    { file: 'wildcard', dnsNames: ['*.wild.test', 'wild.test'], ipAddresses: [] },
    { file: 'default', dnsNames: ['default.test'], ipAddresses: [] }, // CN only
    { file: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '0:0:0:0:0:0:0:1'] },
  ];
  for (const c of cases) {
    const names = servedNames(new X509Certificate(readFileSync(join(TLS_FIXTURES, `${c.file}.pem`))));
    assert.deepEqual(names, { dnsNames: c.dnsNames, ipAddresses: c.ipAddresses }, `${c.file}.pem: got ${JSON.stringify(names)}`);
  }
});

test('SNI: exact before wildcard, a wildcard covers one label, else the first pair (the worked example)', () => {
  const store = new CertificateStore([pair('default'), pair('exact'), pair('wildcard')], undefined);
  const table: [string, string][] = [
    ['exact.test', 'exact.pem'],
    ['EXACT.TEST', 'exact.pem'],
    ['a.wild.test', 'wildcard.pem'],
    ['wild.test', 'wildcard.pem'],
    ['a.b.wild.test', 'default.pem'],
    ['unknown.test', 'default.pem'],
    ['test', 'default.pem'],
    ['', 'default.pem'],
  ];
  for (const [sni, want] of table) {
    const got = store.select(sni)?.certFile;
    assert.equal(got, want, `SNI '${sni}': got ${got}, want ${want}`);
  }
  assert.equal(store.defaultPair?.certFile, 'default.pem');
});

test('a name two pairs serve goes to the earlier one; tls_cert pairs before the ACME one, which is the default only alone', () => {
  const renewedFirst = new CertificateStore([pair('exact-renewed'), pair('exact')], undefined);
  assert.equal(renewedFirst.select('exact.test')?.certFile, 'exact-renewed.pem', 'the first pair in file order wins');

  const acme = pair('exact', 'acme');
  const withTlsCert = new CertificateStore([pair('wildcard')], acme);
  assert.equal(withTlsCert.select('exact.test')?.source, 'acme', 'ACME serves the names no tls_cert pair serves');
  assert.equal(withTlsCert.select('unknown.test')?.certFile, 'wildcard.pem', 'the default stays the first tls_cert pair');
  const acmeOverlap = new CertificateStore([pair('exact')], pair('exact-renewed', 'acme'));
  assert.equal(acmeOverlap.select('exact.test')?.source, 'tls_cert', 'tls_cert takes precedence for the names it serves');
  const acmeOnly = new CertificateStore([], acme);
  assert.equal(acmeOnly.select('anything.test')?.source, 'acme', 'with no tls_cert pair the ACME one is the default');
  assert.equal(new CertificateStore([], undefined).select('exact.test'), undefined, 'no certificate at all: nothing to serve');
});
