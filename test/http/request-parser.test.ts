/**
 * Behaviour of the fast lane's request head recogniser (src/http/request-parser.ts): exact output
 * for simple heads (OWS trimming, duplicates, pipelining, offsets, Connection: close), one case per
 * rule that makes a head "other", and the incomplete / too-large boundaries.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SIMPLE_METHODS, parseSimpleRequestHead } from '../../src/http/request-parser.js';
import type { RequestHeadParse, SimpleRequestHead } from '../../src/http/request-parser.js';
import { head } from './request-corpus.js';

const MAX = 16384;
/** The parser's limit on field lines (MAX_SIMPLE_HEADER_FIELDS, not exported). */
const MAX_SIMPLE_HEADER_FIELDS = 100;
const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');

/** Parses `bytes` from 0 and returns the head, failing when it is not a `request`. */
function parseRequest(bytes: Buffer, start = 0): { head: SimpleRequestHead; end: number } {
  const got = parseSimpleRequestHead(bytes, start, MAX);
  assert.equal(got.kind, 'request', `got ${got.kind}, want request for ${JSON.stringify(bytes.toString('latin1'))}`);
  return got as { head: SimpleRequestHead; end: number };
}

function kindOf(requestLine: string, lines: readonly string[]): RequestHeadParse['kind'] {
  return parseSimpleRequestHead(head(requestLine, lines), 0, MAX).kind;
}

describe('parseSimpleRequestHead: simple heads', () => {
  it('reads method, target and rawHeaders of a plain GET', () => {
    const bytes = latin1('GET /a/b?x=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n');
    assert.deepEqual(parseSimpleRequestHead(bytes, 0, MAX), {
      kind: 'request',
      head: { method: 'GET', target: '/a/b?x=1', rawHeaders: ['Host', 'example.com', 'Accept', '*/*'], isCloseRequested: false },
      end: bytes.length,
    });
  });

  it('takes every simple method', () => {
    assert.deepEqual([...SIMPLE_METHODS], ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH']);
    for (const method of SIMPLE_METHODS) {
      const got = parseRequest(head(`${method} / HTTP/1.1`, ['Host: a']));
      assert.equal(got.head.method, method, `got ${got.head.method}, want ${method}`);
    }
  });

  it('trims SP and HTAB around values, keeps inner whitespace, names as sent', () => {
    const got = parseRequest(latin1('GET / HTTP/1.1\r\nhOsT:\t a \t\r\nX-A:b  c\r\nX-Empty:\r\nX-Blank: \t \r\n\r\n'));
    assert.deepEqual(got.head.rawHeaders, ['hOsT', 'a', 'X-A', 'b  c', 'X-Empty', '', 'X-Blank', '']);
  });

  it('passes obs-text bytes through latin1 unchanged', () => {
    const got = parseRequest(latin1('GET / HTTP/1.1\r\nHost: a\r\nX-A: caf\xe9\x80\xff\r\n\r\n'));
    assert.equal(got.head.rawHeaders[3], 'caf\xe9\x80\xff', `got ${JSON.stringify(got.head.rawHeaders[3])}, want "café\\x80ÿ"`);
  });

  it('keeps duplicate ordinary fields in order', () => {
    const got = parseRequest(head('GET / HTTP/1.1', ['Cookie: a=1', 'Host: a', 'X-B: 1', 'cookie: b=2', 'Cookie: c=3']));
    assert.deepEqual(got.head.rawHeaders, ['Cookie', 'a=1', 'Host', 'a', 'X-B', '1', 'cookie', 'b=2', 'Cookie', 'c=3']);
  });

  it('takes every target character of the pchar set', () => {
    const target = "/azAZ09-._~!$&'()*+,;=:@/?%/?";
    assert.equal(parseRequest(head(`GET ${target} HTTP/1.1`, ['Host: a'])).head.target, target);
  });

  it('takes Content-Length: 0, with OWS, once', () => {
    const got = parseRequest(head('POST /form HTTP/1.1', ['Host: a', 'content-length:  0 ']));
    assert.deepEqual(got.head.rawHeaders, ['Host', 'a', 'content-length', '0']);
  });

  it('takes names that only resemble the special ones', () => {
    const lines = ['Host: a', 'Upgrade-Insecure-Requests: 1', 'Hosts: b', 'X-Upgrade: h2c', 'Expects: x', 'Transfer-Encodings: x', 'Content-Lengths: 5', 'TE: trailers'];
    assert.equal(parseRequest(head('GET / HTTP/1.1', lines)).head.rawHeaders.length, lines.length * 2);
  });

  it('reports Connection: close, case-insensitively and inside a list', () => {
    const cases: [string[], boolean][] = [
      [['Connection: close'], true],
      [['Connection: CLOSE'], true],
      [['Connection: keep-alive'], false],
      [['Connection: keep-alive, close'], true],
      [['Connection: foo ,\tClose'], true],
      [['Connection: closex'], false],
      [['Connection: keep-alive', 'connection: close'], true],
      [[], false],
    ];
    for (const [lines, want] of cases) {
      const got = parseRequest(head('GET / HTTP/1.1', ['Host: a', ...lines])).head.isCloseRequested;
      assert.equal(got, want, `got isCloseRequested ${got} for ${JSON.stringify(lines)}, want ${want}`);
    }
  });

  it('ends at the CRLF CRLF and reads a pipelined second head from there', () => {
    const first = head('GET /1 HTTP/1.1', ['Host: a']);
    const second = head('HEAD /2 HTTP/1.1', ['Host: b', 'Connection: close']);
    const bytes = Buffer.concat([first, second]);
    const one = parseRequest(bytes);
    assert.equal(one.end, first.length, `got end ${one.end}, want ${first.length}`);
    assert.equal(one.head.target, '/1');
    const two = parseRequest(bytes, one.end);
    assert.equal(two.end, bytes.length, `got end ${two.end}, want ${bytes.length}`);
    assert.deepEqual(two.head, { method: 'HEAD', target: '/2', rawHeaders: ['Host', 'b', 'Connection', 'close'], isCloseRequested: true });
  });

  it('starts at an offset and ignores the bytes before it', () => {
    const request = head('DELETE /x HTTP/1.1', ['Host: a']);
    const bytes = Buffer.concat([latin1('\x00garbage\r\n\r\n'), request, latin1('GET /next')]);
    const start = bytes.length - request.length - 'GET /next'.length;
    const got = parseRequest(bytes, start);
    assert.deepEqual(got.head, { method: 'DELETE', target: '/x', rawHeaders: ['Host', 'a'], isCloseRequested: false });
    assert.equal(got.end, start + request.length, `got end ${got.end}, want ${start + request.length}`);
  });
});

describe('parseSimpleRequestHead: other', () => {
  const cases: [string, string, string[]][] = [
    // request line
    ['lowercase method', 'get / HTTP/1.1', ['Host: a']],
    ['unknown method', 'PROPFIND / HTTP/1.1', ['Host: a']],
    ['CONNECT', 'CONNECT a:443 HTTP/1.1', ['Host: a']],
    ['method prefix', 'GE / HTTP/1.1', ['Host: a']],
    ['method with suffix', 'GETS / HTTP/1.1', ['Host: a']],
    ['two spaces after method', 'GET  / HTTP/1.1', ['Host: a']],
    ['two spaces before version', 'GET /  HTTP/1.1', ['Host: a']],
    ['tab separator', 'GET\t/ HTTP/1.1', ['Host: a']],
    ['trailing space', 'GET / HTTP/1.1 ', ['Host: a']],
    ['HTTP/1.0', 'GET / HTTP/1.0', ['Host: a']],
    ['HTTP/2.0', 'GET / HTTP/2.0', ['Host: a']],
    ['lowercase version', 'GET / http/1.1', ['Host: a']],
    ['no version', 'GET /', ['Host: a']],
    // target
    ['absolute-form', 'GET http://a/b HTTP/1.1', ['Host: a']],
    ['asterisk-form', 'OPTIONS * HTTP/1.1', ['Host: a']],
    ['target without slash', 'GET a/b HTTP/1.1', ['Host: a']],
    ['fragment', 'GET /a#b HTTP/1.1', ['Host: a']],
    ['double quote', 'GET /"a" HTTP/1.1', ['Host: a']],
    ['backslash', 'GET /a\\b HTTP/1.1', ['Host: a']],
    ['caret, braces, pipe', 'GET /^{|} HTTP/1.1', ['Host: a']],
    ['angle brackets', 'GET /<a> HTTP/1.1', ['Host: a']],
    ['non-ASCII', 'GET /caf\xe9 HTTP/1.1', ['Host: a']],
    ['control character', 'GET /a\x01 HTTP/1.1', ['Host: a']],
    ['DEL', 'GET /a\x7f HTTP/1.1', ['Host: a']],
    // field lines
    ['space before colon', 'GET / HTTP/1.1', ['Host : a']],
    ['HTAB before colon', 'GET / HTTP/1.1', ['Host: a', 'X\t: b']],
    ['empty name', 'GET / HTTP/1.1', ['Host: a', ': b']],
    ['no colon', 'GET / HTTP/1.1', ['Host: a', 'X-A b']],
    ['non-token name', 'GET / HTTP/1.1', ['Host: a', 'X(A): b']],
    ['obs-fold with SP', 'GET / HTTP/1.1', ['Host: a', 'X-A: b', ' c']],
    ['obs-fold with HTAB', 'GET / HTTP/1.1', ['Host: a', 'X-A: b', '\tc']],
    ['NUL in value', 'GET / HTTP/1.1', ['Host: a', 'X-A: b\x00c']],
    ['DEL in value', 'GET / HTTP/1.1', ['Host: a', 'X-A: b\x7f']],
    ['control character in value', 'GET / HTTP/1.1', ['Host: a', 'X-A: \x1bc']],
    // Host
    ['no Host', 'GET / HTTP/1.1', ['Accept: */*']],
    ['no fields at all', 'GET / HTTP/1.1', []],
    ['two Host fields', 'GET / HTTP/1.1', ['Host: a', 'host: a']],
    // body and protocol switch
    ['Transfer-Encoding', 'POST / HTTP/1.1', ['Host: a', 'Transfer-Encoding: chunked']],
    ['empty transfer-encoding', 'GET / HTTP/1.1', ['Host: a', 'transfer-encoding:']],
    ['Expect', 'PUT / HTTP/1.1', ['Host: a', 'Expect: 100-continue']],
    ['Upgrade', 'GET / HTTP/1.1', ['Host: a', 'Upgrade: websocket']],
    ['Connection: upgrade', 'GET / HTTP/1.1', ['Host: a', 'Connection: keep-alive, Upgrade']],
    ['Connection not a clean token list', 'GET / HTTP/1.1', ['Host: a', 'Connection: close x']],
    ['Connection with an empty element', 'GET / HTTP/1.1', ['Host: a', 'Connection: ,close']],
    ['Proxy-Connection', 'GET / HTTP/1.1', ['Host: a', 'Proxy-Connection: close']],
    // Content-Length
    ['Content-Length: 1', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 1']],
    ['Content-Length: 00', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 00']],
    ['Content-Length: +0', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: +0']],
    ['Content-Length: 0, 0', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0, 0']],
    ['empty Content-Length', 'POST / HTTP/1.1', ['Host: a', 'Content-Length:']],
    ['two Content-Length: 0', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0', 'content-length: 0']],
  ];
  for (const [name, requestLine, lines] of cases) {
    it(`${name} is other`, () => {
      const got = kindOf(requestLine, lines);
      assert.equal(got, 'other', `got ${got}, want other for ${JSON.stringify(head(requestLine, lines).toString('latin1'))}`);
    });
  }

  const rawCases: [string, string][] = [
    ['bare LF after the request line', 'GET / HTTP/1.1\nHost: a\r\n\r\n'],
    ['bare LF after a field line', 'GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n'],
    ['bare CR in a value', 'GET / HTTP/1.1\r\nHost: a\r\nX: b\rc\r\n\r\n'],
    ['CR CR LF after the request line', 'GET / HTTP/1.1\r\r\nHost: a\r\n\r\n'],
    ['empty line before the request line', '\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n'],
    ['request line only', 'GET / HTTP/1.1\r\n\r\n'],
    ['a body after Content-Length: 5', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello'],
  ];
  for (const [name, text] of rawCases) {
    it(`${name} is other`, () => {
      const got = parseSimpleRequestHead(latin1(text), 0, MAX).kind;
      assert.equal(got, 'other', `got ${got}, want other for ${JSON.stringify(text)}`);
    });
  }

  it(`more than ${MAX_SIMPLE_HEADER_FIELDS} field lines is other`, () => {
    const lines = ['Host: a', ...Array.from({ length: MAX_SIMPLE_HEADER_FIELDS - 1 }, (_, i) => `X-${i}: v`)];
    assert.equal(kindOf('GET / HTTP/1.1', lines), 'request', `got ${kindOf('GET / HTTP/1.1', lines)} at ${MAX_SIMPLE_HEADER_FIELDS} fields, want request`);
    lines.push('X-Last: v');
    assert.equal(kindOf('GET / HTTP/1.1', lines), 'other', `got ${kindOf('GET / HTTP/1.1', lines)} at ${lines.length} fields, want other`);
  });
});

describe('parseSimpleRequestHead: incomplete and size limit', () => {
  const full = head('GET /x HTTP/1.1', ['Host: a', 'Accept: */*']);

  it('is incomplete for every proper prefix of a head', () => {
    for (let length = 0; length < full.length; length++) {
      const got = parseSimpleRequestHead(full.subarray(0, length), 0, MAX).kind;
      assert.equal(got, 'incomplete', `got ${got} for the first ${length} bytes, want incomplete`);
    }
  });

  it('is other as soon as the partial bytes are not simple: a head that will never end the simple way goes to node at once', () => {
    for (const partial of [
      'CONNECT a:443 HTTP/1.1\r\n',
      'GET /a HTTP/1.1\r\nHost: h\r\n\n', // ends in a bare LF: node answers 400 at once
      'GET /a HTTP/1.1\r\nHost: h\n',
      'GET /a HTTP/1.0\r\n',
      'GET /a#frag',
      '\x16\x03\x01\x02\x00', // a TLS ClientHello
    ]) {
      const got = parseSimpleRequestHead(latin1(partial), 0, MAX).kind;
      assert.equal(got, 'other', `${JSON.stringify(partial)}: got ${got}, want other`);
    }
  });

  it('is incomplete while every byte so far fits a simple head', () => {
    for (const partial of ['G', 'PAT', 'GET', 'GET ', 'GET /a', 'GET /a HTTP/1.', 'GET /a HTTP/1.1\r', 'GET /a HTTP/1.1\r\nHo', 'GET /a HTTP/1.1\r\nHost: h\r', 'GET /a HTTP/1.1\r\nHost: h\r\n\r']) {
      const got = parseSimpleRequestHead(latin1(partial), 0, MAX).kind;
      assert.equal(got, 'incomplete', `${JSON.stringify(partial)}: got ${got}, want incomplete`);
    }
  });

  it('takes a head of exactly maxHeadBytes and refuses one byte more', () => {
    assert.equal(parseSimpleRequestHead(full, 0, full.length).kind, 'request');
    assert.equal(parseSimpleRequestHead(full, 0, full.length - 1).kind, 'other');
  });

  it('is other, not incomplete, once maxHeadBytes bytes arrived without an end of head', () => {
    const partial = full.subarray(0, full.length - 2);
    assert.equal(parseSimpleRequestHead(partial, 0, partial.length + 1).kind, 'incomplete');
    assert.equal(parseSimpleRequestHead(partial, 0, partial.length).kind, 'other');
  });

  it('counts maxHeadBytes from start, not from the buffer start', () => {
    const bytes = Buffer.concat([Buffer.alloc(100, 0x41), full]);
    assert.equal(parseSimpleRequestHead(bytes, 100, full.length).kind, 'request');
    assert.equal(parseSimpleRequestHead(bytes.subarray(0, bytes.length - 1), 100, full.length).kind, 'incomplete');
  });

  it('is incomplete for an empty buffer and at start === buffer.length', () => {
    assert.equal(parseSimpleRequestHead(Buffer.alloc(0), 0, MAX).kind, 'incomplete');
    assert.equal(parseSimpleRequestHead(full, full.length, MAX).kind, 'incomplete');
  });
});
