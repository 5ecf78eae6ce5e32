/**
 * Behaviour of the request head parser (src/wire/request-parser.ts): exact output for valid heads
 * (every target form, versions, OWS trimming, duplicates, pipelining, offsets), the body framing
 * of RFC 9112 §6.3, keep-alive (§9.3), upgrade and Expect, one case per refusal with its status,
 * and the incomplete / 414 / 431 boundaries.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseRequestHead } from '../../src/wire/request-parser.js';
import type { RequestHead, RequestHeadParse } from '../../src/wire/request-parser.js';
import { head } from './request-corpus.js';

const MAX = 16384;
const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');
const parse = (bytes: Buffer, start = 0, maxHeadBytes = MAX, maxTargetBytes?: number): RequestHeadParse =>
  parseRequestHead(bytes, start, maxTargetBytes === undefined ? { maxHeadBytes } : { maxHeadBytes, maxTargetBytes });

/** Parses `bytes` from `start` and returns the head, failing when it is not a `request`. */
function parseRequest(bytes: Buffer, start = 0): { head: RequestHead; end: number } {
  const got = parse(bytes, start);
  assert.equal(got.kind, 'request', `got ${JSON.stringify(got)}, want request for ${JSON.stringify(bytes.toString('latin1'))}`);
  return got as { head: RequestHead; end: number };
}

/** `request`, `incomplete`, or `invalid <status>`. */
function verdictOf(bytes: Buffer, maxHeadBytes = MAX): string {
  const got = parse(bytes, 0, maxHeadBytes);
  return got.kind === 'invalid' ? `invalid ${got.status}` : got.kind;
}

const plainHead = (fields: Partial<RequestHead>): RequestHead => ({
  method: 'GET',
  target: '/',
  httpVersion: '1.1',
  rawHeaders: ['Host', 'a'],
  body: { kind: 'none' },
  isKeepAlive: true,
  upgrade: undefined,
  isExpectingContinue: false,
  ...fields,
});

describe('parseRequestHead: valid heads', () => {
  it('reads method, target, version and rawHeaders of a plain GET', () => {
    const bytes = latin1('GET /a/b?x=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n');
    assert.deepEqual(parse(bytes), {
      kind: 'request',
      head: plainHead({ target: '/a/b?x=1', rawHeaders: ['Host', 'example.com', 'Accept', '*/*'] }),
      end: bytes.length,
    });
  });

  it('takes any token as the method, case kept', () => {
    for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'PROPFIND', 'M-SEARCH', 'get', "!#$%&'*+-.^_`|~9"]) {
      const got = parseRequest(head(`${method} / HTTP/1.1`, ['Host: a']));
      assert.equal(got.head.method, method, `got ${got.head.method}, want ${method}`);
    }
  });

  it("takes every request-target form as sent (RFC 9112 §3.2); judging one is the request path's", () => {
    const cases: [string, string][] = [
      ['OPTIONS', '/'],
      ['GET', "/azAZ09-._~!$&'()*+,;=:@/?%/?"],
      ['GET', '/a#b'],
      ['GET', '/"a"{|}^\\<>`'],
      ['GET', '//double'],
      ['GET', 'http://example.com:8080/x?y'],
      ['GET', 'svn+ssh.1-x://h'],
      ['OPTIONS', '*'],
      ['GET', '*'],
      ['CONNECT', 'example.com:443'],
      ['CONNECT', '[::1]:8443'],
      ['CONNECT', '10.0.0.1:0'],
    ];
    for (const [method, target] of cases) {
      const got = parseRequest(head(`${method} ${target} HTTP/1.1`, ['Host: a']));
      assert.equal(got.head.target, target, `got ${got.head.target}, want ${target}`);
    }
  });

  it('reads HTTP/1.0 as 1.0 and HTTP/1.2 … HTTP/1.9 as 1.1', () => {
    const cases: [string, string][] = [['HTTP/1.0', '1.0'], ['HTTP/1.1', '1.1'], ['HTTP/1.2', '1.1'], ['HTTP/1.9', '1.1']];
    for (const [version, want] of cases) {
      const got = parseRequest(head(`GET / ${version}`, ['Host: a'])).head.httpVersion;
      assert.equal(got, want, `${version}: got ${got}, want ${want}`);
    }
  });

  it('trims SP and HTAB around values, keeps inner whitespace, names as sent', () => {
    const got = parseRequest(latin1('GET / HTTP/1.1\r\nhOsT:\t a \t\r\nX-A:b  c\r\nX-Empty:\r\nX-Blank: \t \r\n\r\n'));
    assert.deepEqual(got.head.rawHeaders, ['hOsT', 'a', 'X-A', 'b  c', 'X-Empty', '', 'X-Blank', '']);
  });

  it('passes obs-text bytes in values through latin1 unchanged', () => {
    const got = parseRequest(latin1('GET / HTTP/1.1\r\nHost: a\r\nX-A: caf\xe9\x80\xff\r\n\r\n'));
    assert.equal(got.head.rawHeaders[3], 'caf\xe9\x80\xff', `got ${JSON.stringify(got.head.rawHeaders[3])}, want "café\\x80ÿ"`);
  });

  it('keeps duplicate fields in order, and reads a head without fields', () => {
    const got = parseRequest(head('GET / HTTP/1.1', ['Cookie: a=1', 'Host: a', 'X-B: 1', 'cookie: b=2', 'Cookie: c=3']));
    assert.deepEqual(got.head.rawHeaders, ['Cookie', 'a=1', 'Host', 'a', 'X-B', '1', 'cookie', 'b=2', 'Cookie', 'c=3']);
    assert.deepEqual(parseRequest(latin1('GET / HTTP/1.1\r\n\r\n')).head.rawHeaders, []);
  });

  it('reads a head with more fields than its scratch space starts with', () => {
    const lines = Array.from({ length: 1000 }, (_, i) => `X-${i}: ${i}`);
    const got = parseRequest(head('GET / HTTP/1.1', lines)).head.rawHeaders;
    assert.equal(got.length, 2000, `got ${got.length} entries, want 2000`);
    assert.deepEqual(got.slice(-2), ['X-999', '999']);
  });

  it('skips empty lines (CRLF or bare LF) before the request line (RFC 9112 §2.2)', () => {
    const request = head('GET /x HTTP/1.1', ['Host: a']);
    const bytes = Buffer.concat([latin1('\r\n\n\r\n'), request]);
    const got = parseRequest(bytes);
    assert.equal(got.head.target, '/x');
    assert.equal(got.end, bytes.length, `got end ${got.end}, want ${bytes.length}`);
    assert.equal(verdictOf(latin1('\r\n\r\n')), 'incomplete');
    assert.equal(verdictOf(latin1('\r')), 'incomplete');
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
    assert.deepEqual(two.head, plainHead({ method: 'HEAD', target: '/2', rawHeaders: ['Host', 'b', 'Connection', 'close'], isKeepAlive: false }));
  });

  it('starts at an offset and ignores the bytes before and after the head', () => {
    const request = head('DELETE /x HTTP/1.1', ['Host: a']);
    const bytes = Buffer.concat([latin1('\x00garbage\r\n\r\n'), request, latin1('GET /next')]);
    const start = bytes.length - request.length - 'GET /next'.length;
    const got = parseRequest(bytes, start);
    assert.deepEqual(got.head, plainHead({ method: 'DELETE', target: '/x' }));
    assert.equal(got.end, start + request.length, `got end ${got.end}, want ${start + request.length}`);
  });
});

describe('parseRequestHead: body framing (RFC 9112 §6.3)', () => {
  const cases: [string, string, string[], RequestHead['body']][] = [
    ['no framing field', 'POST / HTTP/1.1', ['Host: a'], { kind: 'none' }],
    ['Content-Length: 0', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0'], { kind: 'none' }],
    ['Content-Length: 00 (1*DIGIT)', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 00'], { kind: 'none' }],
    ['Content-Length with OWS', 'PUT / HTTP/1.1', ['Host: a', 'content-length: \t42 '], { kind: 'length', length: 42 }],
    ['Content-Length 2^53 - 1', 'PUT / HTTP/1.1', ['Host: a', 'Content-Length: 9007199254740991'], { kind: 'length', length: 9007199254740991 }],
    ['Content-Length in HTTP/1.0', 'POST / HTTP/1.0', ['Content-Length: 5'], { kind: 'length', length: 5 }],
    ['chunked', 'POST / HTTP/1.1', ['Host: a', 'Transfer-Encoding: chunked'], { kind: 'chunked' }],
    ['CHUNKED, any case', 'POST / HTTP/1.1', ['Host: a', 'transfer-encoding: ChUnKeD'], { kind: 'chunked' }],
    ['chunked with OWS', 'POST / HTTP/1.1', ['Host: a', 'Transfer-Encoding:  chunked \t'], { kind: 'chunked' }],
    ['Content-Length on a GET', 'GET / HTTP/1.1', ['Host: a', 'Content-Length: 3'], { kind: 'length', length: 3 }],
  ];
  for (const [name, requestLine, lines, want] of cases) {
    it(name, () => {
      const got = parseRequest(head(requestLine, lines)).head.body;
      assert.deepEqual(got, want, `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    });
  }
});

describe('parseRequestHead: keep-alive, upgrade, Expect', () => {
  it('keeps HTTP/1.1 alive unless Connection: close; HTTP/1.0 only with Connection: keep-alive (RFC 9112 §9.3)', () => {
    const cases: [string, string[], boolean][] = [
      ['HTTP/1.1', [], true],
      ['HTTP/1.1', ['Connection: close'], false],
      ['HTTP/1.1', ['Connection: CLOSE'], false],
      ['HTTP/1.1', ['Connection: keep-alive, close'], false],
      ['HTTP/1.1', ['Connection: foo ,\tClose'], false],
      ['HTTP/1.1', ['Connection: ,close,'], false],
      ['HTTP/1.1', ['Connection: closex'], true],
      ['HTTP/1.1', ['Connection: keep-alive', 'connection: close'], false],
      ['HTTP/1.2', ['Connection: keep-alive'], true],
      ['HTTP/1.0', [], false],
      ['HTTP/1.0', ['Connection: keep-alive'], true],
      ['HTTP/1.0', ['Connection: Keep-Alive'], true],
      ['HTTP/1.0', ['Connection: keep-alive, close'], false],
      ['HTTP/1.0', ['Connection: keep-alivex'], false],
      ['HTTP/1.1', ['Proxy-Connection: close'], true], // no standard field: ignored, as nginx and Go
      ['HTTP/1.0', ['Proxy-Connection: keep-alive'], false],
    ];
    for (const [version, lines, want] of cases) {
      const got = parseRequest(head(`GET / ${version}`, ['Host: a', ...lines])).head.isKeepAlive;
      assert.equal(got, want, `${version} ${JSON.stringify(lines)}: got isKeepAlive ${got}, want ${want}`);
    }
  });

  it('reports an upgrade only with Connection: upgrade and an Upgrade field, in HTTP/1.1', () => {
    const cases: [string, string[], string | undefined][] = [
      ['HTTP/1.1', ['Connection: Upgrade', 'Upgrade: websocket'], 'websocket'],
      ['HTTP/1.1', ['connection: keep-alive, upgrade', 'upgrade: h2c'], 'h2c'],
      ['HTTP/1.1', ['Upgrade: websocket', 'Connection: upgrade'], 'websocket'],
      ['HTTP/1.1', ['Connection: upgrade', 'Upgrade: a', 'Upgrade: b'], 'a, b'],
      ['HTTP/1.1', ['Upgrade: websocket'], undefined],
      ['HTTP/1.1', ['Connection: upgrade'], undefined],
      ['HTTP/1.1', ['Connection: upgrades', 'Upgrade: websocket'], undefined],
      ['HTTP/1.0', ['Connection: upgrade', 'Upgrade: websocket'], undefined],
    ];
    for (const [version, lines, want] of cases) {
      const got = parseRequest(head(`GET / ${version}`, ['Host: a', ...lines])).head.upgrade;
      assert.equal(got, want, `${version} ${JSON.stringify(lines)}: got upgrade ${got}, want ${want}`);
    }
  });

  it('reports Expect: 100-continue, case-insensitively, in HTTP/1.1 only (RFC 9110 §10.1.1)', () => {
    const cases: [string, string[], boolean][] = [
      ['HTTP/1.1', ['Expect: 100-continue'], true],
      ['HTTP/1.1', ['expect: 100-Continue '], true],
      ['HTTP/1.1', ['Expect: 100-continues'], false],
      ['HTTP/1.1', ['Expect: 200-ok'], false],
      ['HTTP/1.1', [], false],
      ['HTTP/1.0', ['Expect: 100-continue'], false],
    ];
    for (const [version, lines, want] of cases) {
      const got = parseRequest(head(`PUT / ${version}`, ['Host: a', ...lines])).head.isExpectingContinue;
      assert.equal(got, want, `${version} ${JSON.stringify(lines)}: got ${got}, want ${want}`);
    }
  });

  it('reads names that only resemble the special ones as ordinary fields', () => {
    const lines = ['Host: a', 'Upgrade-Insecure-Requests: 1', 'X-Upgrade: h2c', 'Expects: 100-continue', 'Transfer-Encodings: x', 'Content-Lengths: 5', 'Content-Lengtx: 5', 'Connections: close', 'TE: trailers'];
    const got = parseRequest(head('GET / HTTP/1.1', lines)).head;
    assert.deepEqual(got, plainHead({ rawHeaders: lines.flatMap((line) => line.split(': ')) }));
  });
});

describe('parseRequestHead: refusals', () => {
  // name, head text, status
  const cases: [string, string, number][] = [
    // request line
    ['empty method', ' / HTTP/1.1\r\n\r\n', 400],
    ['non-token method', 'G(T / HTTP/1.1\r\n\r\n', 400],
    ['non-ASCII method', 'G\xc9T / HTTP/1.1\r\n\r\n', 400],
    ['two spaces after method', 'GET  / HTTP/1.1\r\n\r\n', 400],
    ['two spaces before version', 'GET /  HTTP/1.1\r\n\r\n', 400],
    ['tab separator', 'GET\t/ HTTP/1.1\r\n\r\n', 400],
    ['trailing space', 'GET / HTTP/1.1 \r\n\r\n', 400],
    ['three parts after the method', 'GET / x HTTP/1.1\r\n\r\n', 400],
    ['no version (HTTP/0.9 simple request)', 'GET /\r\n\r\n', 400],
    ['lowercase version', 'GET / http/1.1\r\n\r\n', 400],
    ['HTTP/1', 'GET / HTTP/1\r\n\r\n', 400],
    ['HTTP/1.10', 'GET / HTTP/1.10\r\n\r\n', 400],
    ['HTTP/11.1', 'GET / HTTP/11.1\r\n\r\n', 400],
    ['HTTP/2.0', 'GET / HTTP/2.0\r\n\r\n', 505],
    ['HTTP/0.9', 'GET / HTTP/0.9\r\n\r\n', 505],
    ['HTTP/3', 'GET / HTTP/3\r\n\r\n', 505],
    ['the HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 505],
    ['authority-form without CONNECT', 'GET example.com:443 HTTP/1.1\r\n\r\n', 400],
    ['relative target', 'GET a/b HTTP/1.1\r\n\r\n', 400],
    ['query-only target', 'GET ?x HTTP/1.1\r\n\r\n', 400],
    ['scheme without //', 'GET http:x HTTP/1.1\r\n\r\n', 400],
    ['scheme only', 'GET http:// HTTP/1.1\r\n\r\n', 400],
    ['asterisk and more', 'OPTIONS *x HTTP/1.1\r\n\r\n', 400],
    ['CONNECT to a path', 'CONNECT /x HTTP/1.1\r\n\r\n', 400],
    ['CONNECT without a port', 'CONNECT example.com HTTP/1.1\r\n\r\n', 400],
    ['CONNECT with an empty port', 'CONNECT example.com: HTTP/1.1\r\n\r\n', 400],
    ['CONNECT with a userinfo', 'CONNECT u@example.com:443 HTTP/1.1\r\n\r\n', 400],
    ['CONNECT with a non-numeric port', 'CONNECT example.com:https HTTP/1.1\r\n\r\n', 400],
    ['control character in target', 'GET /a\x01 HTTP/1.1\r\n\r\n', 400],
    ['DEL in target', 'GET /a\x7f HTTP/1.1\r\n\r\n', 400],
    ['non-ASCII in target', 'GET /caf\xe9 HTTP/1.1\r\n\r\n', 400],
    ['bare LF after the request line', 'GET / HTTP/1.1\nHost: a\r\n\r\n', 400],
    ['CR CR LF after the request line', 'GET / HTTP/1.1\r\r\nHost: a\r\n\r\n', 400],
    ['bare CR before the request line', '\rGET / HTTP/1.1\r\n\r\n', 400],
    ['a TLS ClientHello', '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03', 400],
    // field lines
    ['whitespace before the first field', 'GET / HTTP/1.1\r\n Host: a\r\n\r\n', 400],
    ['space before colon', 'GET / HTTP/1.1\r\nHost : a\r\n\r\n', 400],
    ['HTAB before colon', 'GET / HTTP/1.1\r\nX\t: b\r\n\r\n', 400],
    ['empty name', 'GET / HTTP/1.1\r\n: b\r\n\r\n', 400],
    ['no colon', 'GET / HTTP/1.1\r\nX-A b\r\n\r\n', 400],
    ['non-token name', 'GET / HTTP/1.1\r\nX(A): b\r\n\r\n', 400],
    ['non-ASCII name', 'GET / HTTP/1.1\r\nX-\xe9: b\r\n\r\n', 400],
    ['obs-fold with SP', 'GET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n', 400],
    ['obs-fold with HTAB', 'GET / HTTP/1.1\r\nX-A: b\r\n\tc\r\n\r\n', 400],
    ['NUL in value', 'GET / HTTP/1.1\r\nX-A: b\x00c\r\n\r\n', 400],
    ['DEL in value', 'GET / HTTP/1.1\r\nX-A: b\x7f\r\n\r\n', 400],
    ['ESC in value', 'GET / HTTP/1.1\r\nX-A: \x1bc\r\n\r\n', 400],
    ['bare CR in a value', 'GET / HTTP/1.1\r\nX: b\rc\r\n\r\n', 400],
    ['bare LF after a field line', 'GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n', 400],
    ['bare LF ending the head', 'GET / HTTP/1.1\r\nHost: a\r\n\n', 400],
    ['bare CR ending the head', 'GET / HTTP/1.1\r\nHost: a\r\n\rX', 400],
    // Content-Length
    ['Content-Length: +1', 'POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n', 400],
    ['Content-Length: -1', 'POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n', 400],
    ['Content-Length: 0x1', 'POST / HTTP/1.1\r\nContent-Length: 0x1\r\n\r\n', 400],
    ['Content-Length: 1 0', 'POST / HTTP/1.1\r\nContent-Length: 1 0\r\n\r\n', 400],
    ['Content-Length list', 'POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n', 400],
    ['empty Content-Length', 'POST / HTTP/1.1\r\nContent-Length:\r\n\r\n', 400],
    ['Content-Length above 2^53 - 1', 'POST / HTTP/1.1\r\nContent-Length: 9007199254740992\r\n\r\n', 400],
    ['two equal Content-Length (as nginx)', 'POST / HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\n', 400],
    ['two different Content-Length', 'POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n', 400],
    // Transfer-Encoding
    ['Content-Length and Transfer-Encoding', 'POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n', 400],
    ['Transfer-Encoding and Content-Length: 0', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n', 400],
    ['Transfer-Encoding in HTTP/1.0', 'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n', 400],
    ['Transfer-Encoding: gzip (final coding not chunked)', 'POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n', 400],
    ['Transfer-Encoding: chunked, gzip', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n', 400],
    ['Transfer-Encoding: identity', 'POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n', 400],
    ['Transfer-Encoding: xchunked', 'POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n', 400],
    ['Transfer-Encoding: chunked, chunked', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n', 400],
    ['Transfer-Encoding: chunked twice in two fields', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n', 400],
    ['Transfer-Encoding with a parameter', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked;q=1\r\n\r\n', 400],
    ['Transfer-Encoding with an empty element', 'POST / HTTP/1.1\r\nTransfer-Encoding: , chunked\r\n\r\n', 400],
    ['empty Transfer-Encoding', 'POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n', 400],
    ['Transfer-Encoding: gzip, chunked (a coding the proxy cannot decode)', 'POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 501],
    ['Transfer-Encoding: gzip then chunked in two fields', 'POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n', 501],
  ];
  for (const [name, text, status] of cases) {
    it(`${name} → ${status}`, () => {
      const got = parse(latin1(text));
      assert.equal(got.kind === 'invalid' ? got.status : got.kind, status, `got ${JSON.stringify(got)}, want invalid ${status} for ${JSON.stringify(text)}`);
      assert.ok(got.kind === 'invalid' && got.reason.length > 0 && !got.reason.includes('\n'), `got reason ${JSON.stringify(got)}, want one line`);
    });
  }

  it('judges the version as soon as the request line ended, before any field', () => {
    assert.deepEqual(parse(latin1('GET / HTTP/2.0\r\nHost')), { kind: 'invalid', status: 505, reason: 'HTTP version not supported' });
    assert.equal(verdictOf(latin1('GET /caf\xe9 HTTP/2.0\r\n')), 'invalid 505', 'a non-ASCII target under another version');
    assert.equal(verdictOf(latin1('GET /caf\xe9 HTTP/1.1\r\n')), 'invalid 400');
  });

  it('refuses at the first bad byte, without waiting for the end of the head', () => {
    for (const partial of ['GET /a HTTP/1.1\r\nHost: h\n', 'GET /a HTTP/1.1\r\nHost: h\r\n\n', 'GET /a\x00', 'GET /a HTTP/1.1\r\nX : y', '\x16\x03\x01']) {
      assert.equal(verdictOf(latin1(partial)), 'invalid 400', `${JSON.stringify(partial)}: got ${verdictOf(latin1(partial))}, want invalid 400`);
    }
  });
});

describe('parseRequestHead: incomplete, 414 and 431', () => {
  const full = head('GET /x HTTP/1.1', ['Host: a', 'Accept: */*']);

  it('is incomplete for every proper prefix of a head', () => {
    for (let length = 0; length < full.length; length++) {
      const got = verdictOf(full.subarray(0, length));
      assert.equal(got, 'incomplete', `got ${got} for the first ${length} bytes, want incomplete`);
    }
  });

  it('takes a head of exactly maxHeadBytes and answers 431 to one byte more', () => {
    assert.equal(verdictOf(full, full.length), 'request');
    assert.equal(verdictOf(full, full.length - 1), 'invalid 431');
  });

  it('answers 431, not incomplete, once maxHeadBytes bytes arrived without an end of head', () => {
    const partial = full.subarray(0, full.length - 2);
    assert.equal(verdictOf(partial, partial.length + 1), 'incomplete');
    assert.equal(verdictOf(partial, partial.length), 'invalid 431');
  });

  it('counts maxHeadBytes from the request line: empty lines before it are not counted, but bounded', () => {
    const bytes = Buffer.concat([latin1('\r\n\r\n'), full]);
    assert.equal(verdictOf(bytes, full.length), 'request');
    assert.equal(verdictOf(Buffer.alloc(100, 0x0a), 99), 'invalid 431');
    assert.equal(verdictOf(Buffer.alloc(99, 0x0a), 99), 'incomplete');
  });

  it('counts maxHeadBytes from start, not from the buffer start', () => {
    const bytes = Buffer.concat([Buffer.alloc(100, 0x41), full]);
    assert.equal(parse(bytes, 100, full.length).kind, 'request');
    assert.equal(parse(bytes.subarray(0, bytes.length - 1), 100, full.length).kind, 'incomplete');
  });

  it('answers 414 to a target longer than maxTargetBytes (default 8192), even before the line ends', () => {
    const target = (length: number): string => `/${'a'.repeat(length - 1)}`;
    assert.equal(verdictOf(head(`GET ${target(8192)} HTTP/1.1`, ['Host: a'])), 'request');
    assert.equal(verdictOf(head(`GET ${target(8193)} HTTP/1.1`, ['Host: a'])), 'invalid 414');
    assert.equal(verdictOf(latin1(`GET ${target(8193)}`)), 'invalid 414', 'a line cut short');
    const got = parse(latin1(`GET ${target(11)} HTTP/1.1\r\n\r\n`), 0, MAX, 10);
    assert.equal(got.kind === 'invalid' && got.status, 414, `got ${JSON.stringify(got)} with maxTargetBytes 10, want 414`);
  });

  it('is incomplete for an empty buffer and at start === buffer.length', () => {
    assert.equal(verdictOf(Buffer.alloc(0)), 'incomplete');
    assert.equal(parse(full, full.length).kind, 'incomplete');
  });
});
