/**
 * src/gateway/request-checks.ts: what a request must satisfy before it is routed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findRequestProblem } from '../../src/gateway/request-checks.js';
import type { ClientRequest } from '../../src/wire/client-side.js';

function request(rawHeaders: string[], httpVersion = '1.1'): ClientRequest {
  return { rawHeaders, httpVersion } as unknown as ClientRequest;
}

test('Host and Authorization are counted in any case: two → 400, no Host in HTTP/1.1 → 400, in HTTP/1.0 fine', () => {
  assert.equal(findRequestProblem(request(['host', 'a', 'HOST', 'b']))?.text, 'bad request: more than one Host header');
  assert.equal(findRequestProblem(request(['Host', 'a', 'authorization', 'x', 'AUTHORIZATION', 'y']))?.text, 'bad request: more than one Authorization header');
  assert.equal(findRequestProblem(request(['X-Host', 'a']))?.text, 'bad request: missing Host header');
  assert.equal(findRequestProblem(request([], '1.0')), undefined);
});

test('Expect: 100-continue in any case passes; anything else → 417; several Expect fields are one list, as node joins them', () => {
  assert.equal(findRequestProblem(request(['Host', 'a', 'expect', ' 100-Continue '])), undefined);
  assert.deepEqual(findRequestProblem(request(['Host', 'a', 'Expect', 'foo'])), { status: 417, text: "expectation failed: only 100-continue is supported, got 'foo'" });
  assert.deepEqual(findRequestProblem(request(['Host', 'a', 'Expect', '100-continue', 'EXPECT', 'bar'])), {
    status: 417,
    text: "expectation failed: only 100-continue is supported, got '100-continue, bar'",
  });
});
