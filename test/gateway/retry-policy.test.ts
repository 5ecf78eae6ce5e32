/**
 * Retry safety (SPEC 4) as a table: connect failures always, after the request was sent only
 * idempotent methods without a streamed body, never past the commit point, never beyond `retries`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  UpstreamConnectError,
  UpstreamLoopError,
  UpstreamProtocolError,
  UpstreamResetError,
  UpstreamTimeoutError,
  ClientAbortError,
  UpstreamTlsError,
} from '../../src/errors.js';
import { canRetry, retryErrorKind, type RetryQuestion } from '../../src/gateway/retry-policy.js';

const base: RetryQuestion = {
  errorKind: 'reset',
  method: 'GET',
  wasRequestSent: true,
  hasStreamedBody: false,
  wereResponseBytesSent: false,
  attempt: 1,
  retries: 2,
};

const table: { name: string; question: Partial<RetryQuestion>; want: boolean }[] = [
  // connect failures: always
  { name: 'POST failing at connect', question: { errorKind: 'connect', method: 'POST', wasRequestSent: false }, want: true },
  { name: 'POST failing at connect_timeout', question: { errorKind: 'connect-timeout', method: 'POST', wasRequestSent: false }, want: true },
  { name: 'PATCH failing at connect', question: { errorKind: 'connect', method: 'PATCH', wasRequestSent: false }, want: true },
  // after the request was sent: idempotent methods only
  { name: 'GET reset after sending', question: {}, want: true },
  { name: 'HEAD reset after sending', question: { method: 'HEAD' }, want: true },
  { name: 'OPTIONS reset after sending', question: { method: 'OPTIONS' }, want: true },
  { name: 'PUT reset after sending, body not streamed', question: { method: 'PUT' }, want: true },
  { name: 'DELETE reset after sending', question: { method: 'DELETE' }, want: true },
  { name: 'TRACE reset after sending', question: { method: 'TRACE' }, want: true },
  { name: 'GET read_timeout after sending', question: { errorKind: 'read-timeout' }, want: true },
  { name: 'POST reset after sending', question: { method: 'POST' }, want: false },
  { name: 'PATCH reset after sending', question: { method: 'PATCH' }, want: false },
  { name: 'POST read_timeout after sending', question: { method: 'POST', errorKind: 'read-timeout' }, want: false },
  { name: 'lowercase "get" is not GET (methods are case-sensitive)', question: { method: 'get' }, want: false },
  // streamed body: gone, cannot be replayed
  { name: 'PUT reset after its body was streamed', question: { method: 'PUT', hasStreamedBody: true }, want: false },
  { name: 'GET with a streamed body, reset', question: { hasStreamedBody: true }, want: false },
  // nothing sent: a stale keep-alive connection
  { name: 'POST reset before any byte was sent', question: { method: 'POST', wasRequestSent: false }, want: true },
  // malformed response: reported, not retried
  { name: 'GET with a malformed response', question: { errorKind: 'protocol' }, want: false },
  // commit point
  { name: 'GET reset after response bytes reached the client', question: { wereResponseBytesSent: true }, want: false },
  { name: 'connect failure after response bytes (impossible, still no)', question: { errorKind: 'connect', wereResponseBytesSent: true }, want: false },
  // retries budget
  { name: 'attempt 2 of retries 2 may retry', question: { attempt: 2, retries: 2 }, want: true },
  { name: 'attempt 3 of retries 2 may not', question: { attempt: 3, retries: 2 }, want: false },
  { name: 'retries 0: never, even after a connect failure', question: { errorKind: 'connect', retries: 0 }, want: false },
];

describe('canRetry', () => {
  for (const row of table) {
    it(`${row.name} → ${row.want ? 'retry' : 'no retry'}`, () => {
      const got = canRetry({ ...base, ...row.question });
      assert.equal(got, row.want, `got ${got}, want ${row.want}`);
    });
  }
});

describe('retryErrorKind', () => {
  it('maps the request-path errors of src/errors.ts', () => {
    const rows: [unknown, string | undefined][] = [
      [new UpstreamConnectError('refused'), 'connect'],
      [new UpstreamTimeoutError('slow', 'connect'), 'connect-timeout'],
      [new UpstreamTimeoutError('slow', 'read'), 'read-timeout'],
      [new UpstreamResetError('reset the connection (ECONNRESET)', 'upstream'), 'reset'],
      [new UpstreamProtocolError('bad'), 'protocol'],
      // A handshake that failed sent nothing; an alert on an established connection is a reset.
      [new UpstreamTlsError('certificate has expired', 'handshake', '127.0.0.1:8443'), 'connect'],
      [new UpstreamTlsError('tlsv13 alert certificate required', 'after-handshake', '127.0.0.1:8443'), 'reset'],
      // Refused right after the TCP connect, before any byte: the proxy's own listener.
      [new UpstreamLoopError('127.0.0.1:8080', 'listen 0.0.0.0:8080'), 'connect'],
      [new ClientAbortError('gone'), undefined],
      [new Error('bug'), undefined],
    ];
    for (const [error, want] of rows) {
      const got = retryErrorKind(error);
      assert.equal(got, want, `${String(error)}: got ${got}, want ${want}`);
    }
  });
});
