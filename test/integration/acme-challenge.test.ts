/**
 * HTTP-01 challenge answers on the proxy's plain listener (src/gateway/acme-challenge.ts, RFC 8555
 * §8.3), with real sockets: with `[acme]`, GET/HEAD of a published token is answered by the proxy
 * itself before routing (200, the key authorization exactly), any other token is 404 and nothing
 * goes upstream, and `redirect_https` leaves these paths alone; without `[acme]` such paths route
 * as usual.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request, startProxiedBackend } from '../helpers/proxy-harness.js';

const ACME = '[acme]\ndomains = acme.test\nstorage = /nonexistent/not-used-by-this-test\n';

test('with [acme]: a published token is answered by the proxy, 200 text/plain with the key authorization exactly; others 404; nothing upstream', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => `[server]\ntls_listen = 127.0.0.1:0\n${ACME}[proxy.app]\npath = /\npass = ${url}\n`);
  proxy.proxy.setAcmeChallenge('tok_1-A', 'tok_1-A.thumb');
  const published = await request(proxy.port, { path: '/.well-known/acme-challenge/tok_1-A', headers: { host: 'acme.test' } });
  assert.equal(published.status, 200, `got ${published.status}, want 200`);
  assert.equal(published.body.toString(), 'tok_1-A.thumb', `got ${JSON.stringify(published.body.toString())}, want the key authorization without a newline`);
  assert.equal(published.headers['content-type'], 'text/plain');
  const head = await request(proxy.port, { method: 'HEAD', path: '/.well-known/acme-challenge/tok_1-A', headers: { host: 'acme.test' } });
  assert.equal(head.status, 200);
  assert.equal(head.headers['content-length'], String('tok_1-A.thumb'.length), 'HEAD announces the same length');
  const unknown = await request(proxy.port, { path: '/.well-known/acme-challenge/other', headers: { host: 'acme.test' } });
  assert.equal(unknown.status, 404, `an unknown token: got ${unknown.status}, want 404`);
  proxy.proxy.setAcmeChallenge('tok_1-A', undefined);
  const withdrawn = await request(proxy.port, { path: '/.well-known/acme-challenge/tok_1-A', headers: { host: 'acme.test' } });
  assert.equal(withdrawn.status, 404, `a withdrawn token: got ${withdrawn.status}, want 404`);
  const post = await request(proxy.port, { method: 'POST', path: '/.well-known/acme-challenge/tok_1-A', headers: { host: 'acme.test' }, body: 'x' });
  assert.equal(post.status, 200, 'a POST is not a challenge request: it is routed');
  assert.deepEqual(backend.requests.map((r) => `${r.method} ${r.url}`), ['POST /.well-known/acme-challenge/tok_1-A'], 'only the POST went upstream');
});

test('with [acme] and redirect_https: challenge paths are answered, everything else is redirected', async (t) => {
  const { proxy } = await startProxiedBackend(t, (url) => `[server]\ntls_listen = 127.0.0.1:0\nredirect_https = on\n${ACME}[proxy.app]\npath = /\npass = ${url}\n`);
  proxy.proxy.setAcmeChallenge('tok', 'tok.thumb');
  const challenge = await request(proxy.port, { path: '/.well-known/acme-challenge/tok', headers: { host: 'acme.test' } });
  assert.equal(`${challenge.status} ${challenge.body.toString()}`, '200 tok.thumb');
  const other = await request(proxy.port, { path: '/page', headers: { host: 'acme.test' } });
  assert.equal(other.status, 308, `got ${other.status}, want the redirect`);
});

test('without [acme]: /.well-known/acme-challenge/ paths route as usual, and setAcmeChallenge does nothing', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => `[proxy.app]\npath = /\npass = ${url}\n`);
  proxy.proxy.setAcmeChallenge('tok', 'tok.thumb');
  const response = await request(proxy.port, { path: '/.well-known/acme-challenge/tok', headers: { host: 'acme.test' } });
  assert.equal(`${response.status} ${response.body.toString()}`, '200 ok', 'the backend answered');
  assert.deepEqual(backend.requests.map((r) => r.url), ['/.well-known/acme-challenge/tok']);
});
