/**
 * A route's TLS client settings built from its `tls_*` keys (src/upstream/upstream-tls.ts): one
 * SecureContext and one settings object per distinct setting; an identity that follows the files'
 * contents (the same across a reload of unchanged files, another one when a file changed); every
 * file problem reported at the key's file:line:column, the validity of the certificates in the
 * `tls_ca` and `tls_client_cert` files (errors, warnings, used out of date at start-up); the `tls_verify = off` warning, and the one
 * for `tls_*` lines that only `http://` upstreams have.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createPrivateKey } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../src/config/load-config.js';
import { ConfigValueError } from '../../src/errors.js';
import { buildRouteTls, upstreamTlsWarnings } from '../../src/upstream/upstream-tls.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
/** The fixtures (test/fixtures/tls) are valid from 2026-12 for 100 years; `expired.pem` ended 2020-06-01. */
const NOW = { nowMs: Date.parse('2030-01-01T00:00:00Z') };

/** Routes `a`, `b`… each with its own key lines, all passing to one https upstream. */
function config(...routeKeys: string[]) {
  const text = routeKeys.map((keys, index) => `[proxy.${String.fromCharCode(97 + index)}]\npath = /${index}\npass = https://127.0.0.1:8443\n${keys}\n`).join('');
  return parseConfig(text, 'env.ini');
}

describe('buildRouteTls', () => {
  it('shares one settings object, and one SecureContext, between routes with equal settings', () => {
    const built = buildRouteTls(config(`tls_ca = ${FIXTURES}ca.pem`, `tls_ca = ${FIXTURES}ca.pem`, `tls_ca = ${FIXTURES}ca.pem\ntls_server_name = api.test`, '').routes, NOW).settings;
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => built.get(name)!);
    assert.equal(a, b, 'want one object for equal settings');
    assert.notEqual(a!.identity, c!.identity, 'want another identity for another tls_server_name');
    assert.equal(a!.secureContext, c!.secureContext, 'want one SecureContext for the same files');
    assert.notEqual(a!.secureContext, d!.secureContext, 'want another SecureContext for the system store');
    assert.deepEqual([c!.serverName, c!.isVerified], ['api.test', true]);
  });

  it('keeps the identity when a reload finds the same files, and changes it when a file changed', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'upstream-tls-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const caFile = join(dir, 'ca.pem');
    copyFileSync(`${FIXTURES}ca.pem`, caFile);
    const routes = config(`tls_ca = ${caFile}`).routes;
    const before = buildRouteTls(routes, NOW).settings.get('a')!;
    assert.equal(buildRouteTls(routes, NOW).settings.get('a')!.identity, before.identity, 'want the same identity for the same contents');
    copyFileSync(`${FIXTURES}other-ca.pem`, caFile);
    assert.notEqual(buildRouteTls(routes, NOW).settings.get('a')!.identity, before.identity, 'want a new identity for new contents');
  });

  const cert = `${FIXTURES}client.pem`;
  const key = `${FIXTURES}client.key`;
  const clientKeys = (certFile: string, keyFile: string): string => `tls_ca = ${FIXTURES}ca.pem\ntls_client_cert = ${certFile} ${keyFile}`;
  const keyColumn = (certFile: string): number => 'tls_client_cert = '.length + certFile.length + 2;
  for (const { what, keys, message } of [
    { what: 'a missing tls_ca', keys: `tls_ca = ${FIXTURES}nope.pem`, message: `env.ini:4:10: tls_ca '${FIXTURES}nope.pem' cannot be read: ENOENT` },
    {
      what: 'a tls_ca without a certificate',
      keys: `tls_ca = ${FIXTURES}ca.key`,
      message: `env.ini:4:10: tls_ca '${FIXTURES}ca.key' holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)`,
    },
    {
      what: 'a missing client certificate',
      keys: clientKeys(`${FIXTURES}nope.pem`, key),
      message: `env.ini:5:19: tls_client_cert '${FIXTURES}nope.pem' cannot be read: ENOENT`,
    },
    {
      what: 'a missing client key',
      keys: clientKeys(cert, `${FIXTURES}nope.key`),
      message: `env.ini:5:${keyColumn(cert)}: tls_client_cert '${FIXTURES}nope.key' cannot be read: ENOENT`,
    },
    {
      what: 'a key of another certificate',
      keys: clientKeys(cert, `${FIXTURES}mismatch.key`),
      message: `env.ini:5:${keyColumn(cert)}: tls_client_cert key '${FIXTURES}mismatch.key' does not match the certificate in '${cert}'`,
    },
  ]) {
    it(`reports ${what} at its place`, () => {
      assert.throws(
        () => buildRouteTls(config(keys).routes, NOW),
        (error: unknown) => {
          assert.ok(error instanceof ConfigValueError, `got ${String(error)}, want ConfigValueError`);
          assert.equal(error.message, message);
          return true;
        },
      );
    });
  }

  it('reports a key file that holds no private key at the key', () => {
    assert.throws(() => buildRouteTls(config(clientKeys(cert, cert)).routes, NOW), (error: unknown) => {
      assert.ok(error instanceof ConfigValueError);
      assert.match(error.message, new RegExp(`^env\\.ini:5:${keyColumn(cert)}: tls_client_cert key '.*client\\.pem' is not a PEM private key`));
      return true;
    });
  });

  it('reports a key under a passphrase as encrypted, PKCS #8 or traditional, at the key', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'upstream-tls-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const plain = createPrivateKey(readFileSync(key, 'utf8'));
    const encrypted = {
      pkcs8: plain.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }),
      sec1: plain.export({ type: 'sec1', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }),
    };
    for (const [kind, pem] of Object.entries(encrypted)) {
      const file = join(dir, `${kind}.key`);
      writeFileSync(file, pem);
      assert.throws(() => buildRouteTls(config(clientKeys(cert, file)).routes, NOW), (error: unknown) => {
        assert.ok(error instanceof ConfigValueError, `${kind}: got ${String(error)}, want ConfigValueError`);
        assert.equal(error.message, `env.ini:5:${keyColumn(cert)}: tls_client_cert key '${file}' is encrypted with a passphrase; give an unencrypted key (openssl pkey -in KEY -out PLAIN_KEY)`, kind);
        return true;
      });
    }
  });

  it('builds a client certificate whose key matches', () => {
    const settings = buildRouteTls(config(clientKeys(cert, key)).routes, NOW).settings.get('a')!;
    assert.equal(settings.isVerified, true);
  });
});

describe('buildRouteTls: validity of the tls_ca and tls_client_cert certificates', () => {
  const clientKeys = (certFile: string, keyFile: string, caFile = `${FIXTURES}ca.pem`): string => `tls_ca = ${caFile}\ntls_client_cert = ${certFile} ${keyFile}`;
  /** 10 days and a minute before the fixtures' notAfter. */
  const TEN_DAYS_LEFT = { nowMs: Date.parse('2126-11-07T13:45:08Z') - 10 * 86_400_000 - 60_000 };
  const EXPIRED_ON = 'expired on 2020-06-01 00:00:00 UTC';

  /** A PEM file in a temp dir that holds the given fixtures, one after the other. */
  function bundle(t: { after: (fn: () => void) => void }, ...names: string[]): string {
    const dir = mkdtempSync(join(tmpdir(), 'upstream-tls-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'bundle.pem');
    writeFileSync(file, names.map((name) => readFileSync(`${FIXTURES}${name}`, 'latin1')).join(''));
    return file;
  }

  function errorOf(build: () => unknown): string {
    try {
      build();
    } catch (error) {
      assert.ok(error instanceof ConfigValueError, `got ${String(error)}, want ConfigValueError`);
      return error.message;
    }
    assert.fail('got no error, want a ConfigValueError');
  }

  it('--check: an expired client certificate is an error at its place', () => {
    const message = errorOf(() => buildRouteTls(config(clientKeys(`${FIXTURES}expired.pem`, `${FIXTURES}expired.key`)).routes, NOW));
    assert.equal(message, `env.ini:5:19: tls_client_cert '${FIXTURES}expired.pem' ${EXPIRED_ON}`);
  });

  it('--check: a tls_ca whose every certificate is out of date is an error at its place; one expired among valid ones is a warning naming it', (t) => {
    assert.equal(errorOf(() => buildRouteTls(config(`tls_ca = ${FIXTURES}expired.pem`).routes, NOW)), `env.ini:4:10: tls_ca '${FIXTURES}expired.pem' ${EXPIRED_ON}`);
    const twoExpired = bundle(t, 'expired.pem', 'expired.pem');
    assert.equal(
      errorOf(() => buildRouteTls(config(`tls_ca = ${twoExpired}`).routes, NOW)),
      `env.ini:4:10: tls_ca '${twoExpired}' has no certificate valid now: all 2 are out of date, the longest-lived ${EXPIRED_ON}`,
    );
    const mixed = bundle(t, 'ca.pem', 'expired.pem');
    assert.deepEqual(buildRouteTls(config(`tls_ca = ${mixed}`).routes, NOW).warnings, [
      `env.ini:4:10: tls_ca '${mixed}' certificate 2 of 2 (CN=localhost) ${EXPIRED_ON}: it verifies nothing now`,
    ]);
  });


  it('a client certificate and CA certificates expiring within 14 days are warnings at their places, each [proxy] line once', (t) => {
    const built = buildRouteTls(config(clientKeys(`${FIXTURES}client.pem`, `${FIXTURES}client.key`)).routes, TEN_DAYS_LEFT);
    assert.deepEqual(built.warnings, [
      `env.ini:4:10: tls_ca '${FIXTURES}ca.pem' expires in 10 days, on 2126-11-07 13:45:08 UTC`,
      `env.ini:5:19: tls_client_cert '${FIXTURES}client.pem' expires in 10 days, on 2126-11-07 13:45:08 UTC`,
    ]);
    const twoCas = bundle(t, 'ca.pem', 'other-ca.pem');
    const inherited = parseConfig(`[proxy]\ntls_ca = ${twoCas}\n[proxy.a]\npath = /a\npass = https://127.0.0.1:8443\n[proxy.b]\npath = /b\npass = https://127.0.0.1:8444\n`, 'env.ini');
    assert.deepEqual(buildRouteTls(inherited.routes, TEN_DAYS_LEFT).warnings, [
      `env.ini:2:10: tls_ca '${twoCas}' certificate 1 of 2 (CN=ini-proxy test CA) expires in 10 days, on 2126-11-07 13:45:08 UTC`,
      `env.ini:2:10: tls_ca '${twoCas}' certificate 2 of 2 (CN=ini-proxy unrelated CA) expires in 10 days, on 2126-11-07 13:45:08 UTC`,
    ]);
    assert.deepEqual(buildRouteTls(config(clientKeys(`${FIXTURES}client.pem`, `${FIXTURES}client.key`)).routes, NOW).warnings, [], 'want no warning 96 years ahead of expiry');
  });

  it('start-up: a file out of date that usesOutOfDate accepts is used with a warning; the texts read are returned', () => {
    const routes = config(clientKeys(`${FIXTURES}expired.pem`, `${FIXTURES}expired.key`, `${FIXTURES}expired.pem`)).routes;
    const built = buildRouteTls(routes, { ...NOW, usesOutOfDate: () => true });
    assert.deepEqual(built.warnings, [
      `env.ini:4:10: tls_ca '${FIXTURES}expired.pem' ${EXPIRED_ON}: used until it is replaced, and no upstream certificate will verify`,
      `env.ini:5:19: tls_client_cert '${FIXTURES}expired.pem' ${EXPIRED_ON}: used until it is replaced, and upstreams asking for it will refuse it`,
    ]);
    assert.deepEqual([...built.texts], [readFileSync(`${FIXTURES}expired.pem`, 'latin1')]);
    assert.ok(built.settings.get('a') !== undefined);
  });
});

describe('upstreamTlsWarnings', () => {
  it('warns about every route with https:// upstreams and tls_verify = off, at the tls_verify value (its own or the inherited one)', () => {
    assert.deepEqual(upstreamTlsWarnings(config('', 'tls_verify = off')), [
      "env.ini:8:14: [proxy.b] tls_verify = off: the certificates of its https:// upstreams are not verified, so anyone on the path can pose as them",
    ]);
    assert.deepEqual(upstreamTlsWarnings(config('')), []);
    const inherited = parseConfig('[proxy]\ntls_verify = off\n[proxy.a]\npath = /a\npass = https://127.0.0.1:8443\n[proxy.plain]\npath = /p\npass = http://127.0.0.1:8080\n', 'env.ini');
    assert.deepEqual(upstreamTlsWarnings(inherited), [
      "env.ini:2:14: [proxy.a] tls_verify = off: the certificates of its https:// upstreams are not verified, so anyone on the path can pose as them",
    ], 'the route with only http:// upstreams has nothing to verify');
  });

  it('warns at each tls_* value that only http:// upstreams have (tls_verify\'s too, not its column 1): the route\'s own, or a [proxy] one no https:// route inherits', () => {
    const text = [
      '[proxy]',
      'tls_server_name = api.test',
      '[proxy.a]',
      'path = /a',
      'pass = http://127.0.0.1:8080',
      'pass = http://api.test:8080 resolve',
      `tls_ca = ${FIXTURES}ca.pem`,
      'tls_verify = on',
      `tls_client_cert = ${FIXTURES}client.pem ${FIXTURES}client.key`,
      '[proxy.b]',
      'path = /b',
      'pass = http://127.0.0.1:8081',
      '',
    ].join('\n');
    const suffix = 'is http:// (the tls_* keys apply to https:// upstreams only)';
    assert.deepEqual(upstreamTlsWarnings(parseConfig(text, 'env.ini')), [
      `env.ini:2:19: tls_server_name has no effect: every pass of the routes that inherit it (a, b) ${suffix}`,
      `env.ini:7:10: tls_ca has no effect: every pass of [proxy.a] ${suffix}`,
      `env.ini:8:14: tls_verify has no effect: every pass of [proxy.a] ${suffix}`,
      `env.ini:9:19: tls_client_cert has no effect: every pass of [proxy.a] ${suffix}`,
    ]);
    const oneHttps = text.replace('pass = http://127.0.0.1:8081', 'pass = https://127.0.0.1:8443');
    assert.deepEqual(
      upstreamTlsWarnings(parseConfig(oneHttps, 'env.ini')).filter((warning) => warning.includes('tls_server_name')),
      [],
      'a [proxy] line that an https:// route inherits has an effect',
    );
    const discoveredHttps = text.replace('pass = http://api.test:8080 resolve', 'pass = https://api.test:8443 resolve');
    assert.deepEqual(
      upstreamTlsWarnings(parseConfig(discoveredHttps, 'env.ini')),
      [],
      'an https:// discovery line reads the tls_* keys of its route (and so the inherited one)',
    );
  });

  it('warns about no tls_* line when the admin registry may add https:// upstreams ([admin] token)', () => {
    const text = `[admin]\nlisten = 127.0.0.1:9090\ntoken = s3cret\n[proxy.a]\npath = /a\npass = http://127.0.0.1:8080\ntls_ca = ${FIXTURES}ca.pem\n`;
    assert.deepEqual(upstreamTlsWarnings(parseConfig(text, 'env.ini')), []);
    assert.equal(upstreamTlsWarnings(parseConfig(text.replace('token = s3cret\n', ''), 'env.ini')).length, 1, 'got no warning, want one without a token (no registry)');
  });
});
