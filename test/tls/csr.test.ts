/**
 * The PKCS#10 request of src/tls/acme/csr.ts: the exact DER of the signed part for a fixed key and
 * two names (worked out by hand from the ASN.1 in the file's comment), a signature that verifies,
 * and openssl's own reading of the whole request.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createPrivateKey, createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { certificationRequestInfo, createCsr, csrPem } from '../../src/tls/acme/csr.js';
import { boolean, integer, objectIdentifier, setOf, tlv } from '../../src/tls/acme/der.js';

const fixedKey = createPrivateKey(readFileSync(new URL('../fixtures/tls/localhost.key', import.meta.url)));
const fixedSpki = createPublicKey(fixedKey).export({ type: 'spki', format: 'der' });
const hasOpenssl = spawnSync('openssl', ['version']).status === 0;

test('DER primitives: the X.690 examples', () => {
  const cases: [string, Buffer, string][] = [
    ['BOOLEAN TRUE', boolean(true), '0101ff'],
    ['INTEGER 0', integer(0), '020100'],
    ['INTEGER 127', integer(127), '02017f'],
    ['INTEGER 128 gets a leading zero', integer(128), '02020080'],
    ['OID commonName', objectIdentifier('2.5.4.3'), '0603550403'],
    ['OID extensionRequest (multi-byte arcs)', objectIdentifier('1.2.840.113549.1.9.14'), '06092a864886f70d01090e'],
    ['long form length', tlv(0x04, Buffer.alloc(200)), `0481c8${'00'.repeat(200)}`],
    ['two-byte length', tlv(0x04, Buffer.alloc(300)), `0482012c${'00'.repeat(300)}`],
    ['SET OF is sorted', setOf(integer(2), integer(1)), '3106020101020102'],
  ];
  for (const [name, got, want] of cases) assert.equal(got.toString('hex'), want, `${name}: got ${got.toString('hex')}, want ${want}`);
});

test('certificationRequestInfo: the exact DER for localhost.key and a.test, b.test', () => {
  const spki = fixedSpki.toString('hex');
  assert.equal(spki.length, 182, 'a P-256 SPKI is 91 bytes');
  const want = [
    '30819f', // certificationRequestInfo, 159 bytes
    '020100', // version v1
    '3011', '310f', '300d', '0603550403', '0c06' + Buffer.from('a.test').toString('hex'), // subject CN=a.test
    spki, // subjectPKInfo
    'a02c', // [0] attributes
    '302a', '06092a864886f70d01090e', // extensionRequest
    '311d', '301b', '3019', '0603551d11', // SET { Extensions { Extension subjectAltName
    '0412', '3010', '8206' + Buffer.from('a.test').toString('hex'), '8206' + Buffer.from('b.test').toString('hex'),
  ].join('');
  const got = certificationRequestInfo(['a.test', 'b.test'], fixedSpki).toString('hex');
  assert.equal(got, want, `got ${got}, want ${want}`);
});

test('createCsr: the signature over the request info verifies with the public key', () => {
  const der = createCsr(['a.test', 'b.test'], fixedKey);
  const info = certificationRequestInfo(['a.test', 'b.test'], fixedSpki);
  // CertificationRequest = 30 82 LL LL | info | 30 0a 06 08 <ecdsa-with-SHA256> | 03 LL 00 <sig>
  const head = der.subarray(0, 4).toString('hex');
  assert.match(head, /^3081/, `got head ${head}, want a SEQUENCE with a one-byte long length`);
  assert.deepEqual(der.subarray(3, 3 + info.length), info, 'the request info comes first, unchanged');
  const algorithm = der.subarray(3 + info.length, 3 + info.length + 12).toString('hex');
  assert.equal(algorithm, '300a06082a8648ce3d040302', `got algorithm ${algorithm}, want ecdsa-with-SHA256`);
  const bitString = der.subarray(3 + info.length + 12);
  assert.equal(bitString[0], 0x03, 'the signature is a BIT STRING');
  assert.equal(bitString[2], 0x00, 'with 0 unused bits');
  const signature = bitString.subarray(3);
  assert.equal(bitString[1], signature.length + 1, 'and nothing after it');
  assert.ok(verify('sha256', info, createPublicKey(fixedKey), signature), 'the ECDSA signature (DER) verifies');
});

test('createCsr refuses a key that is not P-256 and a name that is not a DNS name', () => {
  const { privateKey: rsa } = generateKeyPairSync('rsa', { modulusLength: 1024 });
  assert.throws(() => createCsr(['a.test'], rsa), /EC P-256/);
  assert.throws(() => createCsr(['a test'], fixedKey), /not a DNS name/);
  assert.throws(() => createCsr([], fixedKey), /at least one domain/);
});

test('openssl reads the request, verifies its signature and sees the names', { skip: hasOpenssl ? false : 'openssl is not installed' }, (t) => {
  const directory = mkdtempSync(join(tmpdir(), 'csr-'));
  t.after(() => rmSync(directory, { recursive: true, force: true }));
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const file = join(directory, 'request.pem');
  writeFileSync(file, csrPem(createCsr(['acme.test', 'www.acme.test'], privateKey)));
  const text = execFileSync('openssl', ['req', '-in', file, '-noout', '-verify', '-text'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  assert.match(text, /Subject: CN\s*=\s*acme\.test/, `got ${text}, want the subject CN = acme.test`);
  assert.match(text, /DNS:acme\.test, DNS:www\.acme\.test/, `got ${text}, want both names in the subjectAltName`);
  assert.match(text, /ecdsa-with-SHA256/, 'signed ecdsa-with-SHA256');
  assert.match(text, /NIST CURVE: P-256|prime256v1/, 'a P-256 key');

  // A first name longer than ub-common-name (64): no CN, and the subjectAltName is critical.
  const long = `${'a'.repeat(60)}.acme.test`;
  writeFileSync(file, csrPem(createCsr([long], privateKey)));
  const longText = execFileSync('openssl', ['req', '-in', file, '-noout', '-verify', '-text'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  assert.doesNotMatch(longText, /CN\s*=/, `got ${longText}, want an empty subject`);
  assert.match(longText, /X509v3 Subject Alternative Name: critical\s+DNS:a{60}\.acme\.test/, `got ${longText}, want a critical SAN`);
});
