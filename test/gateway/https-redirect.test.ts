/**
 * `redirect_https`'s Location as a table (src/gateway/https-redirect.ts): the request's host
 * lower-cased without its port, the HTTPS port unless 443, the target's path and query byte for
 * byte, ACME challenge paths exempt, no host → nothing to redirect to.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ClientRequest } from '../../src/wire/client-side.js';
import { readRequestTarget, type RequestTarget } from '../../src/gateway/request-target.js';
import { httpsRedirectLocation } from '../../src/gateway/https-redirect.js';
import { ACME_CHALLENGE_PREFIX } from '../../src/gateway/acme-challenge.js';

function target(url: string, host: string | undefined): RequestTarget {
  const read = readRequestTarget({ url, rawHeaders: host === undefined ? [] : ['Host', host], httpVersion: '1.1' } as unknown as ClientRequest);
  assert.ok(!('status' in read), `${url} must be a valid target`);
  return read;
}

test('the Location of a redirect to https', () => {
  const table: [url: string, host: string | undefined, httpsPort: number, want: string | 'exempt' | undefined, method?: string, extra?: { body?: unknown; upgrade?: string }][] = [
    ['/a/b?x=1', 'Example.COM:8080', 8443, 'https://example.com:8443/a/b?x=1'],
    ['/a/b?x=1', 'example.com', 443, 'https://example.com/a/b?x=1'],
    ['/%61dmin//x/../y?q=%2F&r', 'example.com.', 443, 'https://example.com/%61dmin//x/../y?q=%2F&r'],
    ['/', '[::1]:8080', 8443, 'https://[::1]:8443/'],
    ['http://Other.example:81/p?q', 'example.com', 443, 'https://other.example/p?q'],
    [`${ACME_CHALLENGE_PREFIX}token`, 'example.com', 443, 'exempt'],
    [`${ACME_CHALLENGE_PREFIX}Tok-en_9`, 'example.com', 443, 'exempt', 'HEAD'],
    // Only exactly the prefix and one token is a challenge: nothing rides the exemption past the redirect.
    [`${ACME_CHALLENGE_PREFIX}token`, 'example.com', 443, `https://example.com${ACME_CHALLENGE_PREFIX}token`, 'POST'],
    [`${ACME_CHALLENGE_PREFIX}../../admin`, 'example.com', 443, `https://example.com${ACME_CHALLENGE_PREFIX}../../admin`],
    [`${ACME_CHALLENGE_PREFIX}%2e%2e/%2e%2e/admin`, 'example.com', 443, `https://example.com${ACME_CHALLENGE_PREFIX}%2e%2e/%2e%2e/admin`],
    [`${ACME_CHALLENGE_PREFIX}a/b`, 'example.com', 443, `https://example.com${ACME_CHALLENGE_PREFIX}a/b`],
    [ACME_CHALLENGE_PREFIX, 'example.com', 443, `https://example.com${ACME_CHALLENGE_PREFIX}`],
    [`${ACME_CHALLENGE_PREFIX}token?x=1`, 'example.com', 443, `https://example.com${ACME_CHALLENGE_PREFIX}token?x=1`],
    [`${ACME_CHALLENGE_PREFIX}token`, 'example.com', 443, `https://example.com${ACME_CHALLENGE_PREFIX}token`, 'GET', { upgrade: 'websocket' }],
    [`${ACME_CHALLENGE_PREFIX}token`, 'example.com', 443, `https://example.com${ACME_CHALLENGE_PREFIX}token`, 'GET', { body: {} }],
    ['/.well-known/acme-challenge', 'example.com', 443, 'https://example.com/.well-known/acme-challenge'],
    ['/x', undefined, 443, undefined],
  ];
  for (const [url, host, httpsPort, want, method = 'GET', extra = {}] of table) {
    const clientReq = { method, body: extra.body, upgrade: extra.upgrade } as Pick<ClientRequest, 'method' | 'body' | 'upgrade'>;
    const got = httpsRedirectLocation(clientReq, target(url, host), httpsPort);
    assert.equal(got, want, `${method} ${url} with Host ${host}: got ${got}, want ${want}`);
  }
});
