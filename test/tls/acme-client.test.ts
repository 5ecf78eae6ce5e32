/**
 * The ACME client (src/tls/acme/acme-client.ts) against the in-memory server of
 * test/helpers/fake-acme-server.ts: the order of requests of RFC 8555 §7.1, the JWS of every POST
 * (§6.2: ES256 r||s, jwk then kid, POST-as-GET), nonces used once (§6.5) and badNonce retried,
 * the key authorization (§8.1), and problem documents as AcmeError.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { AcmeClient, parseRetryAfter } from '../../src/tls/acme/acme-client.js';
import { createCsr } from '../../src/tls/acme/csr.js';
import { jwkThumbprint, keyAuthorization, publicJwk } from '../../src/tls/acme/jws.js';
import { AcmeError } from '../../src/errors.js';
import { FakeAcmeServer } from '../helpers/fake-acme-server.js';

const skip = spawnSync('openssl', ['version']).status === 0 ? false : 'openssl is not installed (the fake ACME server signs with it)';
/** Timers that fire at once: a poll never really waits in a unit test. */
const immediateTimers = { setTimeout: (callback: () => void): unknown => (queueMicrotask(callback), 0), clearTimeout: (): void => {} };

function setUp(): { server: FakeAcmeServer; client: AcmeClient; csr: Buffer; publishes: [string, string | undefined][]; publish: (token: string, value: string | undefined) => void } {
  const server = new FakeAcmeServer();
  const { privateKey: accountKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const { privateKey: certificateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const client = new AcmeClient({ directoryUrl: server.directoryUrl, accountKey, email: 'ops@acme.test', transport: server.transport, timers: immediateTimers, now: Date.now });
  const publishes: [string, string | undefined][] = [];
  const publish = (token: string, value: string | undefined): void => {
    publishes.push([token, value]);
    if (value === undefined) server.published.delete(token);
    else server.published.set(token, value);
  };
  return { server, client, csr: createCsr(['acme.test', 'www.acme.test'], certificateKey), publishes, publish };
}

test('the RFC 8555 §7.1 conversation: directory, nonce, account, order, authorization, challenge, finalize, poll, download', { skip }, async () => {
  const { server, client, csr, publishes, publish } = setUp();
  const chain = await client.obtainCertificate(['acme.test', 'www.acme.test'], csr, publish);
  const leaf = new X509Certificate(chain);
  assert.equal(leaf.subjectAltName, 'DNS:acme.test, DNS:www.acme.test', `got ${leaf.subjectAltName}, want both names`);
  const steps = server.requests.map((r) => `${r.method} ${r.url.replace('https://acme.fake', '')}`);
  const want = ['GET /directory', 'HEAD /nonce', 'POST /account', 'POST /order', 'POST /authz/1', 'POST /chall/1', 'POST /authz/1', 'POST /order/1', 'POST /order/1/finalize', 'POST /order/1', 'POST /cert/1'];
  assert.deepEqual(steps, want, `got ${steps.join(', ')}, want ${want.join(', ')}`);
  assert.equal(publishes.length, 2, 'published once, withdrawn once');
  assert.equal(publishes[1]![1], undefined, 'the token is withdrawn after validation');
});

test('every POST is an ES256 flattened JWS: 64-byte r||s, jwk on newAccount only, kid after, POST-as-GET with an empty payload, each nonce once', { skip }, async () => {
  const { server, client, csr, publish } = setUp();
  await client.obtainCertificate(['acme.test', 'www.acme.test'], csr, publish);
  const posts = server.requests.filter((r) => r.method === 'POST');
  for (const post of posts) {
    assert.equal(post.signatureBytes, 64, `${post.url}: got a ${post.signatureBytes}-byte signature, want 64 (r||s, RFC 7518 §3.4)`);
    assert.equal(post.header!.alg, 'ES256');
    assert.equal(post.header!.url, post.url, 'the protected url is the request URL');
  }
  const account = posts[0]!;
  assert.ok('jwk' in account.header! && !('kid' in account.header!), 'newAccount is signed with the jwk');
  assert.deepEqual(account.payload, { termsOfServiceAgreed: true, contact: ['mailto:ops@acme.test'] });
  for (const post of posts.slice(1)) assert.equal(post.header!.kid, 'https://acme.fake/account/1', `${post.url}: got kid ${String(post.header!.kid)}, want the account URL`);
  const reads = posts.filter((p) => p.url.includes('/authz/') || p.url.endsWith('/order/1') || p.url.includes('/cert/'));
  for (const read of reads) assert.equal(read.payload, '', `${read.url}: a read is POST-as-GET (empty payload)`);
  assert.deepEqual(posts.find((p) => p.url.includes('/chall/'))!.payload, {}, 'the challenge is answered with {}');
  const nonces = posts.map((p) => p.header!.nonce);
  assert.equal(new Set(nonces).size, nonces.length, 'no nonce is used twice');
  assert.equal(server.requests.filter((r) => r.method === 'HEAD').length, 1, 'one HEAD newNonce; then every Replay-Nonce is used');
});

test('badNonce is retried with the nonce of the error answer, up to 3 times', { skip }, async () => {
  const { server, client, csr, publish } = setUp();
  server.badNonces = 3;
  await client.obtainCertificate(['acme.test'], csr, publish);
  const accountPosts = server.requests.filter((r) => r.url === 'https://acme.fake/account').length;
  assert.equal(accountPosts, 4, `got ${accountPosts} newAccount POSTs, want 1 + 3 retries`);
  assert.equal(server.requests.filter((r) => r.method === 'HEAD').length, 1, 'the retries use the Replay-Nonce of the badNonce answer');

  const second = setUp();
  second.server.badNonces = 4;
  await assert.rejects(second.client.obtainCertificate(['acme.test'], second.csr, second.publish), (error: unknown) => {
    assert.ok(error instanceof AcmeError, `got ${String(error)}, want an AcmeError`);
    assert.equal(error.problemType, 'urn:ietf:params:acme:error:badNonce');
    return true;
  });
});

test('a problem document becomes an AcmeError with its type and detail (RFC 7807)', { skip }, async () => {
  const { server, client, csr, publish } = setUp();
  server.orderProblem = { type: 'urn:ietf:params:acme:error:rejectedIdentifier', detail: 'acme.test is forbidden by policy', status: 400 };
  await assert.rejects(client.obtainCertificate(['acme.test'], csr, publish), (error: unknown) => {
    assert.ok(error instanceof AcmeError);
    assert.equal(error.code, 'PRX_ACME');
    assert.equal(error.status, 400);
    assert.equal(error.message, 'ACME POST https://acme.fake/order: status 400: urn:ietf:params:acme:error:rejectedIdentifier: acme.test is forbidden by policy');
    return true;
  });
});

test('a wrong key authorization makes the authorization invalid: AcmeError, and the token is withdrawn', { skip }, async () => {
  const { server, client, csr, publishes } = setUp();
  const publishWrong = (token: string, value: string | undefined): void => {
    publishes.push([token, value]);
    if (value !== undefined) server.published.set(token, `${token}.wrong`);
  };
  await assert.rejects(client.obtainCertificate(['acme.test'], csr, publishWrong), /^AcmeError: ACME authorization for acme\.test is invalid: urn:ietf:params:acme:error:unauthorized: the key authorization did not match$/);
  assert.equal(publishes.at(-1)![1], undefined, 'withdrawn on failure too');
});

test('key authorization = token "." base64url(SHA-256 of the RFC 7638 thumbprint input)', () => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicJwk(privateKey);
  // RFC 7638 §3.2: the required members of an EC key, in lexicographic order, no whitespace.
  const sorted = Object.fromEntries(Object.entries({ y: jwk.y, x: jwk.x, kty: 'EC', crv: 'P-256' }).sort(([a], [b]) => (a < b ? -1 : 1)));
  const want = createHash('sha256').update(JSON.stringify(sorted)).digest('base64url');
  assert.equal(jwkThumbprint(jwk), want);
  assert.equal(keyAuthorization('tok-1_A', jwk), `tok-1_A.${want}`);
});

test('Retry-After: seconds or an HTTP-date, cut to 0..60 s', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const cases: [string | undefined, number | undefined][] = [
    [undefined, undefined],
    ['3', 3000],
    ['0', 0],
    ['3600', 60_000],
    ['Thu, 01 Jan 2026 00:00:05 GMT', 5000],
    ['Wed, 31 Dec 2025 23:59:00 GMT', 0],
    ['soon', undefined],
  ];
  for (const [value, want] of cases) assert.equal(parseRetryAfter(value, now), want, `Retry-After ${value}: got ${parseRetryAfter(value, now)}, want ${want}`);
});

test('an order that stays processing with Retry-After: 0 is polled on our schedule (250 ms doubling to 4 s) and given up after the 120 s budget, never in a busy loop', { skip, timeout: 10_000 }, async () => {
  const { server, csr, publish } = setUp();
  server.isStuckProcessing = true;
  let nowMs = 0;
  const waits: number[] = [];
  const clockTimers = {
    setTimeout: (callback: () => void, ms: number): unknown => {
      waits.push(ms);
      nowMs += ms;
      setImmediate(callback); // yields to the event loop, so a busy poll still meets the test's timeout
      return 0;
    },
    clearTimeout: (): void => {},
  };
  const { privateKey: accountKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const client = new AcmeClient({ directoryUrl: server.directoryUrl, accountKey, email: undefined, transport: server.transport, timers: clockTimers, now: () => nowMs });
  await assert.rejects(client.obtainCertificate(['acme.test', 'www.acme.test'], csr, publish), (error: AcmeError) => {
    assert.match(error.message, /^ACME https:\/\/acme\.fake\/order\/1 still processing after \d+ ms of polling$/);
    return true;
  });
  const orderWaits = waits.slice(-32);
  assert.ok(waits.every((ms) => ms >= 250), `got waits ${waits.join(', ')} ms, want none under 250 ms despite Retry-After: 0`);
  assert.ok(nowMs <= 120_000, `got ${nowMs} ms of polling, want at most the 120 s budget`);
  assert.ok(waits.length < 40, `got ${waits.length} polls in 120 s, want about 30`);
  assert.deepEqual(orderWaits.slice(-3), [4000, 4000, 4000], 'the schedule ends at 4 s between polls');
});
