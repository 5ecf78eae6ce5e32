/**
 * The combined access-log line (src/gateway/access-log.ts): each attempt's upstream status, and its
 * error too when a response's body failed after its head went out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatCombined, formatJson, jsonText, type AccessLogRecord } from '../../src/gateway/access-log.js';

const record = (attempts: AccessLogRecord['attempts']): AccessLogRecord => ({
  time: new Date(Date.UTC(2026, 10, 30, 12, 0, 0)),
  clientIp: '127.0.0.1',
  user: undefined,
  method: 'GET',
  target: '/a',
  httpVersion: '1.1',
  status: 200,
  bytesSent: 5,
  referer: undefined,
  userAgent: 'curl',
  route: 'a',
  attempts,
  durationMs: 1.5,
});

test('upstream_status: the status, the error of a failed attempt, and both for a body that failed after its head', () => {
  const line = formatCombined(
    record([
      { upstream: 'h:1', error: 'PRX_UPSTREAM_CONNECT' },
      { upstream: 'h:2', status: 200, error: 'PRX_UPSTREAM_RESET' },
    ]),
  );
  assert.match(line, / upstream="h:1, h:2" upstream_status="PRX_UPSTREAM_CONNECT, 200 PRX_UPSTREAM_RESET" /, `got ${line}`);
  const clean = formatCombined(record([{ upstream: 'h:2', status: 200 }]));
  assert.equal(
    clean,
    '127.0.0.1 - - [30/Nov/2026:12:00:00 +0000] "GET /a HTTP/1.1" 200 5 "-" "curl" route=a upstream="h:2" upstream_status="200" duration_ms=1.50',
  );
});

test('fields are escaped as nginx escapes them: quotes, backslashes, control bytes and bytes above ASCII as \\xHH', () => {
  // Header values arrive as latin1 strings, one character per byte: `café` sent as UTF-8 is `cafÃ©`.
  const utf8Agent = Buffer.from('café "x"\\\n\xff', 'utf8').toString('latin1');
  const line = formatCombined({ ...record([]), userAgent: utf8Agent });
  assert.match(line, / "caf\\xC3\\xA9 \\x22x\\x22\\x5C\\x0A\\xC3\\xBF" route=a /, `got ${line}`);
});

test('combined: the user name, decoded text in an unquoted field, is written as its UTF-8 bytes with spaces escaped too, so it cannot shift the fields after it (a break test)', () => {
  const line = formatCombined({ ...record([]), user: 'x - - [01/Jan/2020 "GET /admin" é\u202e' });
  assert.match(line, /^127\.0\.0\.1 - x\\x20-\\x20-\\x20\[01\/Jan\/2020\\x20\\x22GET\\x20\/admin\\x22\\x20\\xC3\\xA9\\xE2\\x80\\xAE \[/, `got ${line}`);
  assert.equal(line.split(' ').length, formatCombined({ ...record([]), user: 'tom' }).split(' ').length, 'as many fields as for a plain name');
  assert.match(formatCombined({ ...record([]), user: 'tom' }), /^127\.0\.0\.1 - tom \[/);
});

test('upstream_status keeps a TLS reason on the line and inside its quotes, whatever the certificate says', () => {
  const reason = `PRX_UPSTREAM_TLS: Hostname/IP does not match certificate's altnames: Host: a. is not in the cert's altnames: DNS:x" evil="1`;
  const line = formatCombined(record([{ upstream: 'h:443', error: reason }]));
  assert.ok(
    line.includes(`upstream_status="PRX_UPSTREAM_TLS: Hostname/IP does not match certificate's altnames: Host: a. is not in the cert's altnames: DNS:x\\x22 evil=\\x221"`),
    `got ${line}`,
  );
});

test('a request refused by access or a limit ends its line with refused=…, its JSON with "refused"', () => {
  const limited: AccessLogRecord = { ...record([]), clientIp: '127.0.0.2', status: 429, bytesSent: 66, refusal: 'rate_limit' };
  assert.equal(
    formatCombined(limited),
    '127.0.0.2 - - [30/Nov/2026:12:00:00 +0000] "GET /a HTTP/1.1" 429 66 "-" "curl" route=a upstream="-" upstream_status="-" duration_ms=1.50 refused=rate_limit',
  );
  assert.equal(JSON.parse(formatJson({ ...limited, status: 403, refusal: 'access' })).refused, 'access');
  assert.equal('refused' in JSON.parse(formatJson(record([]))), false, 'got "refused" on a line that was not refused');
});

test('json: every record without a request head has request_line, "-" when the line received is not printable, as combined logs it; a request with a head has none (found by a break test)', () => {
  const noHead = (receivedLine: string | undefined): AccessLogRecord => ({ ...record([]), method: '-', target: '-', httpVersion: undefined, receivedLine, status: 400 });
  const cases: [receivedLine: string | undefined, want: string][] = [
    ['GET /a HTTP/1.1', 'GET /a HTTP/1.1'],
    [undefined, '-'],
  ];
  for (const [receivedLine, want] of cases) {
    const json = JSON.parse(formatJson(noHead(receivedLine))) as Record<string, unknown>;
    assert.equal(json.request_line, want, `received ${JSON.stringify(receivedLine)}: got request_line ${JSON.stringify(json.request_line)}, want ${JSON.stringify(want)}`);
    assert.match(formatCombined(noHead(receivedLine)), new RegExp(` "${want}" 400 `), 'combined logs the same');
  }
  const headed = JSON.parse(formatJson(record([]))) as Record<string, unknown>;
  assert.equal('request_line' in headed, false, `got ${JSON.stringify(headed)}: a request with a head has method, target and protocol, no request_line`);
});

test('json: a User-Agent or Referer that is UTF-8 is logged as its text; other bytes one character each, so the line stays valid JSON; separators and controls escaped', () => {
  // header values arrive one character per byte (latin1): `café` in UTF-8 is the four bytes c a f C3 A9
  const utf8Cafe = Buffer.from('café', 'utf8').toString('latin1');
  const line = formatJson({ ...record([]), userAgent: utf8Cafe, referer: 'http://h/\u00e9' });
  const json = JSON.parse(line) as Record<string, unknown>;
  assert.equal(json.user_agent, 'café', `got ${line}`);
  assert.equal(json.referer, 'http://h/\u00e9', 'a lone 0xE9 is not UTF-8: kept as the byte it was (U+00E9)');
  // Line and paragraph separators, C1 and bidirectional controls are escaped, so the line stays one line and displays as itself (a review).
  const tricky = Buffer.from('a\u2028b\u202ec', 'utf8').toString('latin1'); // valid UTF-8: decoded
  const escaped = formatJson({ ...record([]), userAgent: tricky, referer: 'r\x85' }); // a lone 0x85: one character, a C1 control
  assert.doesNotMatch(escaped, /[\u0080-\u009f\u2028\u2029\u202a-\u202e]/, `got ${JSON.stringify(escaped)}`);
  assert.match(escaped, /"referer":"r\\u0085","user_agent":"a\\u2028b\\u202ec"/);
  const parsed = JSON.parse(escaped) as Record<string, unknown>;
  assert.deepEqual([parsed.user_agent, parsed.referer], ['a\u2028b\u202ec', 'r\u0085'], 'the same text once parsed');
  const marks = formatJson({ ...record([]), userAgent: Buffer.from('a\u200eb\u200fc\u061cd\u2066e', 'utf8').toString('latin1') });
  assert.match(marks, /"user_agent":"a\\u200eb\\u200fc\\u061cd\\u2066e"/, 'every Bidi_Control character is escaped (a break test: U+200E, U+200F and U+061C were not)');
  assert.equal(jsonText('curl/8'), 'curl/8');
  assert.equal(jsonText(undefined), undefined);
  assert.equal(formatCombined({ ...record([]), userAgent: utf8Cafe }).includes('"caf\\xC3\\xA9"'), true, 'combined still shows the bytes, as nginx');
});
