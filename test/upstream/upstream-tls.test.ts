/**
 * A route's TLS client settings built from its `tls_*` keys (src/upstream/upstream-tls.ts): one
 * SecureContext and one settings object per distinct setting; an identity that follows the files'
 * contents (the same across a reload of unchanged files, another one when a file changed); every
 * file problem reported at the key's file:line:column; the `tls_verify = off` warning, and the one
 * for `tls_*` lines that only `http://` upstreams have.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../src/config/load-config.js';
import { ConfigValueError } from '../../src/errors.js';
import { buildRouteTls, upstreamTlsWarnings } from '../../src/upstream/upstream-tls.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));

/** Routes `a`, `b`… each with its own key lines, all passing to one https upstream. */
function config(...routeKeys: string[]) {
  const text = routeKeys.map((keys, index) => `[proxy.${String.fromCharCode(97 + index)}]\npath = /${index}\npass = https://127.0.0.1:8443\n${keys}\n`).join('');
  return parseConfig(text, 'env.ini');
}

describe('buildRouteTls', () => {
  it('shares one settings object, and one SecureContext, between routes with equal settings', () => {
    const built = buildRouteTls(config(`tls_ca = ${FIXTURES}ca.pem`, `tls_ca = ${FIXTURES}ca.pem`, `tls_ca = ${FIXTURES}ca.pem\ntls_server_name = api.test`, '').routes);
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
    const before = buildRouteTls(routes).get('a')!;
    assert.equal(buildRouteTls(routes).get('a')!.identity, before.identity, 'want the same identity for the same contents');
    copyFileSync(`${FIXTURES}other-ca.pem`, caFile);
    assert.notEqual(buildRouteTls(routes).get('a')!.identity, before.identity, 'want a new identity for new contents');
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
        () => buildRouteTls(config(keys).routes),
        (error: unknown) => {
          assert.ok(error instanceof ConfigValueError, `got ${String(error)}, want ConfigValueError`);
          assert.equal(error.message, message);
          return true;
        },
      );
    });
  }

  it('reports a key file that holds no private key at the key', () => {
    assert.throws(() => buildRouteTls(config(clientKeys(cert, cert)).routes), (error: unknown) => {
      assert.ok(error instanceof ConfigValueError);
      assert.match(error.message, new RegExp(`^env\\.ini:5:${keyColumn(cert)}: tls_client_cert key '.*client\\.pem' is not a PEM private key`));
      return true;
    });
  });

  it('builds a client certificate whose key matches', () => {
    const settings = buildRouteTls(config(clientKeys(cert, key)).routes).get('a')!;
    assert.equal(settings.isVerified, true);
  });
});

describe('upstreamTlsWarnings', () => {
  it('warns about every route with https:// upstreams and tls_verify = off, at the tls_verify line (its own or the inherited one)', () => {
    assert.deepEqual(upstreamTlsWarnings(config('', 'tls_verify = off')), [
      "env.ini:8:1: [proxy.b] tls_verify = off: the certificates of its https:// upstreams are not verified, so anyone on the path can pose as them",
    ]);
    assert.deepEqual(upstreamTlsWarnings(config('')), []);
    const inherited = parseConfig('[proxy]\ntls_verify = off\n[proxy.a]\npath = /a\npass = https://127.0.0.1:8443\n[proxy.plain]\npath = /p\npass = http://127.0.0.1:8080\n', 'env.ini');
    assert.deepEqual(upstreamTlsWarnings(inherited), [
      "env.ini:2:1: [proxy.a] tls_verify = off: the certificates of its https:// upstreams are not verified, so anyone on the path can pose as them",
    ], 'the route with only http:// upstreams has nothing to verify');
  });

  it('warns at each tls_* line that only http:// upstreams have: the route\'s own, or a [proxy] one no https:// route inherits', () => {
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
      `env.ini:8:1: tls_verify has no effect: every pass of [proxy.a] ${suffix}`,
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
