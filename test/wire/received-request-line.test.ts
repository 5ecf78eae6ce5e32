/**
 * The request line read from bytes never parsed as a request (src/wire/received-request-line.ts),
 * for the access log of an answer written before any request head: as received up to the first CR
 * or LF, after empty lines, bounded, printable ASCII only.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_RECEIVED_LINE_BYTES, receivedRequestLine } from '../../src/wire/received-request-line.js';

const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');

test('the first line of the bytes received, or undefined when none can be shown', () => {
  const long = 'GET /' + 'a'.repeat(MAX_RECEIVED_LINE_BYTES);
  const cases: [string, readonly Buffer[], string | undefined][] = [
    ['a whole head', [latin1('GET /a?b=1 HTTP/1.1\r\nHost: h\r\n\r\n')], 'GET /a?b=1 HTTP/1.1'],
    ['a line ended by a bare LF', [latin1('GET /a HTTP/1.1\nHost: h\n')], 'GET /a HTTP/1.1'],
    ['empty lines first (RFC 9112 section 2.2)', [latin1('\r\n\r\n\nGET / HTTP/1.1\r\n')], 'GET / HTTP/1.1'],
    ['a line split across reads', [latin1('GE'), latin1('T / HT'), latin1('TP/1.0\r\n')], 'GET / HTTP/1.0'],
    ['a line not ended yet', [latin1('GET /slow')], 'GET /slow'],
    ['quotes and backslashes (escaped by the log, not here)', [latin1('GET /"\\ HTTP/1.1\r\n')], 'GET /"\\ HTTP/1.1'],
    ['a line longer than the bound: its first bytes', [latin1(`${long}\r\n`)], long.slice(0, MAX_RECEIVED_LINE_BYTES)],
    ['nothing', [], undefined],
    ['only empty lines', [latin1('\r\n\r\n')], undefined],
    ['a control byte', [latin1('GET /\x01 HTTP/1.1\r\n')], undefined],
    ['a tab', [latin1('GET\t/ HTTP/1.1\r\n')], undefined],
    ['DEL', [latin1('GET /\x7f HTTP/1.1\r\n')], undefined],
    ['a byte above ASCII (UTF-8 é)', [Buffer.from('GET /café HTTP/1.1\r\n', 'utf8')], undefined],
    ['a TLS record', [Buffer.from([0x16, 0x03, 0x01, 0x00, 0xf1, 0x01])], undefined],
  ];
  for (const [name, pieces, want] of cases) {
    const got = receivedRequestLine(pieces);
    assert.equal(got, want, `${name}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
});

test('a non-printable byte after the line ends changes nothing: only the first line is read', () => {
  const got = receivedRequestLine([latin1('GET / HTTP/1.1\r\nX: \x01\xff\r\n')]);
  assert.equal(got, 'GET / HTTP/1.1', `got ${JSON.stringify(got)}`);
});
