/**
 * The client's response headers (src/gateway/forward-headers.ts `buildClientResponseHeaders`):
 * what framing the upstream's head may not pass on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildClientResponseHeaders } from '../../src/gateway/forward-headers.js';

test('a 204 or 101 loses its Content-Length (RFC 9110 §8.6; a break test saw a 204 with Content-Length: 4 relayed), a 304 and a 200 keep theirs', () => {
  const upstream = ['Content-Length', '4', 'ETag', '"x"'];
  assert.deepEqual(buildClientResponseHeaders(upstream, 204), ['ETag', '"x"']);
  assert.deepEqual(buildClientResponseHeaders(upstream, 101), ['ETag', '"x"', 'Connection', 'upgrade']);
  assert.deepEqual(buildClientResponseHeaders(upstream, 304), upstream, 'a 304 may say the length of the representation it stands for');
  assert.deepEqual(buildClientResponseHeaders(upstream, 200), upstream);
});
