/**
 * The request line's version rule (src/wire/request-line-version.ts) as tables: each version and
 * the proxy's verdict; request lines read byte by byte, complete, cut short or of another shape.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { judgeHttpVersion, readRequestLineVersion, withHttp11Version, type VersionVerdict } from '../../src/wire/request-line-version.js';

const VERDICTS: readonly [version: string | undefined, verdict: VersionVerdict][] = [
  ['HTTP/1.0', { kind: 'served', httpVersion: '1.0' }],
  ['HTTP/1.1', { kind: 'served', httpVersion: '1.1' }],
  ['HTTP/1.2', { kind: 'served-as-1.1' }],
  ['HTTP/1.9', { kind: 'served-as-1.1' }],
  ['HTTP/2.0', { kind: 'refused', status: 505 }],
  ['HTTP/0.9', { kind: 'refused', status: 505 }],
  ['HTTP/3.0', { kind: 'refused', status: 505 }],
  ['HTTP/9.9', { kind: 'refused', status: 505 }],
  ['HTTP/2', { kind: 'refused', status: 505 }],
  ['HTTP/3', { kind: 'refused', status: 505 }],
  ['HTTP/1', { kind: 'refused', status: 400 }],
  ['HTTP/1.1x', { kind: 'refused', status: 400 }],
  ['HTTP/1.10', { kind: 'refused', status: 400 }],
  ['HTTP/11.1', { kind: 'refused', status: 400 }],
  ['HTTP/20', { kind: 'refused', status: 400 }],
  ['HTTP/2.', { kind: 'refused', status: 400 }],
  ['http/1.1', { kind: 'refused', status: 400 }],
  ['HTTP/1.a', { kind: 'refused', status: 400 }],
  ['HTTPS/1.1', { kind: 'refused', status: 400 }],
  ['1.1', { kind: 'refused', status: 400 }],
  ['', { kind: 'refused', status: 400 }],
  [undefined, { kind: 'refused', status: 400 }],
];

test('judgeHttpVersion: 1.0 and 1.1 served, 1.2–1.9 served as 1.1, another major 505, anything else 400', () => {
  for (const [version, want] of VERDICTS) {
    assert.deepEqual(judgeHttpVersion(version), want, `${JSON.stringify(version)}: got ${JSON.stringify(judgeHttpVersion(version))}, want ${JSON.stringify(want)}`);
  }
});

test('readRequestLineVersion: a whole line gives the verdict and where the version starts', () => {
  const cases: [line: string, verdict: VersionVerdict, versionStart: number][] = [
    ['GET /x HTTP/1.1\r\n', { kind: 'served', httpVersion: '1.1' }, 7],
    ['GET /x HTTP/1.2\r\nHost: h\r\n\r\n', { kind: 'served-as-1.1' }, 7],
    ['PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', { kind: 'refused', status: 505 }, 6],
    ['CONNECT h:443 HTTP/3\r\n', { kind: 'refused', status: 505 }, 14],
    ['GET /caf\xe9 HTTP/2.0\r\n', { kind: 'refused', status: 505 }, 10],
    ['GET /x http/1.1\r\n', { kind: 'refused', status: 400 }, 7],
    ['GET /x\r\nHost: h\r\n\r\n', { kind: 'refused', status: 400 }, 6],
  ];
  for (const [line, verdict, versionStart] of cases) {
    const got = readRequestLineVersion(Buffer.from(line, 'latin1'), 0, 1000);
    assert.deepEqual(got, { kind: 'line', verdict, versionStart }, `${JSON.stringify(line)}: got ${JSON.stringify(got)}`);
  }
});

test('readRequestLineVersion: every cut-short prefix of a line is incomplete; a byte that breaks the shape is other at once', () => {
  const line = 'PROPFIND /a?b=c HTTP/1.2\r\n';
  for (let length = 0; length < line.length; length++) {
    const got = readRequestLineVersion(Buffer.from(line.slice(0, length), 'latin1'), 0, 1000);
    assert.equal(got.kind, 'incomplete', `${JSON.stringify(line.slice(0, length))}: got ${got.kind}, want incomplete`);
  }
  const others = [
    '\x16\x03\x01', // a TLS ClientHello
    '\r\nGET / HTTP/1.1\r\n', // an empty line first
    ' GET / HTTP/1.1\r\n',
    'G@T / HTTP/1.1\r\n',
    'GET\t/ HTTP/1.1\r\n',
    'GET  / HTTP/1.1\r\n',
    'GET /a b HTTP/1.1\r\n',
    'GET / HTTP/1.1 \r\n',
    'GET / \r\n',
    'GET / HTTP/1.1\n',
    'GET / HTTP/1.1\r\r\n',
    'GET /\x00 HTTP/1.1\r\n',
    'GET /\x7f HTTP/1.1\r\n',
  ];
  for (const bytes of others) {
    const got = readRequestLineVersion(Buffer.from(bytes, 'latin1'), 0, 1000);
    assert.equal(got.kind, 'other', `${JSON.stringify(bytes)}: got ${got.kind}, want other`);
  }
});

test('readRequestLineVersion: reads from `start`, and a line not ended within maxBytes is other', () => {
  const buffer = Buffer.from('xxGET / HTTP/2.0\r\n', 'latin1');
  assert.deepEqual(readRequestLineVersion(buffer, 2, 1000), { kind: 'line', verdict: { kind: 'refused', status: 505 }, versionStart: 8 });
  assert.deepEqual(readRequestLineVersion(buffer, 2, 16), { kind: 'line', verdict: { kind: 'refused', status: 505 }, versionStart: 8 }, 'exactly maxBytes: taken');
  assert.equal(readRequestLineVersion(buffer, 2, 15).kind, 'other', 'one byte over maxBytes: other');
  assert.equal(readRequestLineVersion(Buffer.from('GET /aaaa', 'latin1'), 0, 9).kind, 'other', 'maxBytes reached without an end: other, not incomplete');
});

test('withHttp11Version: a copy with HTTP/1.x read as HTTP/1.1, the original unchanged', () => {
  const original = Buffer.from('GET /x HTTP/1.7\r\nHost: h\r\n\r\n', 'latin1');
  const copy = withHttp11Version(original, 7);
  assert.equal(copy.toString('latin1'), 'GET /x HTTP/1.1\r\nHost: h\r\n\r\n');
  assert.equal(original.toString('latin1'), 'GET /x HTTP/1.7\r\nHost: h\r\n\r\n');
});
