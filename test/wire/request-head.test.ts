/**
 * serializeRequestHead: one latin1 string, headers in order and case, and no way to smuggle a CR,
 * LF or NUL into the head (request splitting, RFC 9112 11.2). The round trip through node:http's
 * own server parser shows the bytes a client sent arrive unchanged.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { serializeLastChunk, serializeRequestHead } from '../../src/wire/request-head.js';
import { BadRequestError } from '../../src/errors.js';

describe('serializeRequestHead', () => {
  it('writes request line, headers in order and case, and the empty line', () => {
    const head = serializeRequestHead('GET', '/a?b=c', ['Host', 'example.test', 'x-lower', 'v', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']);
    assert.equal(
      head,
      'GET /a?b=c HTTP/1.1\r\nHost: example.test\r\nx-lower: v\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n',
    );
  });

  it('encodes values latin1, so bytes node:http decoded as latin1 go out unchanged', () => {
    const head = Buffer.from(serializeRequestHead('GET', '/', ['X-Name', 'caf\u00e9 \u00ff', 'X-Tab', 'a\tb']), 'latin1'); // as the socket writes it
    assert.deepEqual([...head.subarray(head.indexOf('caf') + 3, head.indexOf('caf') + 6)], [0xe9, 0x20, 0xff]);
    assert.ok(head.includes('X-Tab: a\tb\r\n'), 'got the tab changed, want it kept');
  });

  const rejected: [string, () => string][] = [
    ['CRLF in a value', () => serializeRequestHead('GET', '/', ['X-A', 'a\r\nInjected: 1'])],
    ['LF in a value', () => serializeRequestHead('GET', '/', ['X-A', 'a\nb'])],
    ['CR in a value', () => serializeRequestHead('GET', '/', ['X-A', 'a\rb'])],
    ['NUL in a value', () => serializeRequestHead('GET', '/', ['X-A', 'a\u0000b'])],
    ['DEL in a value', () => serializeRequestHead('GET', '/', ['X-A', 'a\u007fb'])],
    ['a character beyond latin1 in a value', () => serializeRequestHead('GET', '/', ['X-A', 'snow \u2603'])],
    ['CRLF in a name', () => serializeRequestHead('GET', '/', ['X-A\r\nInjected', 'v'])],
    ['a colon in a name', () => serializeRequestHead('GET', '/', ['X-A:', 'v'])],
    ['an empty name', () => serializeRequestHead('GET', '/', ['', 'v'])],
    ['a space in the method', () => serializeRequestHead('GET /x', '/', [])],
    ['a space in the path', () => serializeRequestHead('GET', '/a b', [])],
    ['CRLF in the path', () => serializeRequestHead('GET', '/\r\nX: 1', [])],
    ['an empty path', () => serializeRequestHead('GET', '', [])],
    ['an odd rawHeaders list', () => serializeRequestHead('GET', '/', ['X-A'])],
  ];
  for (const [name, write] of rejected) {
    it(`throws BadRequestError for ${name}`, () => {
      assert.throws(write, BadRequestError);
    });
  }

  it('checks only the fields from checkedLength on: the first checkedLength entries are the caller\'s, known valid', () => {
    assert.throws(() => serializeRequestHead('GET', '/', ['X-A', 'ok', 'X-B', 'a\r\nInjected: 1'], 2), BadRequestError);
    assert.throws(() => serializeRequestHead('GET', '/', ['X-A', 'ok', 'X\r\nB', 'v'], 2), BadRequestError);
    assert.equal(serializeRequestHead('GET', '/', ['Host', 'h', 'X-A', 'ok'], 2), 'GET / HTTP/1.1\r\nHost: h\r\nX-A: ok\r\n\r\n');
    assert.throws(() => serializeRequestHead('GET /', '/', ['Host', 'h'], 2), BadRequestError, 'the method is still checked');
    assert.throws(() => serializeRequestHead('GET', '/ x', ['Host', 'h'], 2), BadRequestError, 'the target is still checked');
  });

  it('round-trips through node:http: method, url and raw headers arrive as written', async () => {
    const server = http.createServer((req, res) => {
      res.end(JSON.stringify({ method: req.method, url: req.url, rawHeaders: req.rawHeaders }));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const rawHeaders = ['Host', 'up.test', 'X-Latin', 'caf\u00e9', 'x-MiXeD', '1', 'Connection', 'close'];
      const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
      socket.write(serializeRequestHead('PATCH', '/p?q=%20', rawHeaders), 'latin1');
      const chunks: Buffer[] = [];
      socket.on('data', (data: Buffer) => chunks.push(data));
      await once(socket, 'end');
      const response = Buffer.concat(chunks).toString('latin1');
      const body = JSON.parse(Buffer.from(response.slice(response.indexOf('\r\n\r\n') + 4), 'latin1').toString('utf8'));
      assert.deepEqual(body, { method: 'PATCH', url: '/p?q=%20', rawHeaders });
    } finally {
      server.close();
    }
  });
});

describe('serializeLastChunk', () => {
  it('writes the last chunk with the trailer fields in order, latin1, and 0 CRLF CRLF without any', () => {
    assert.equal(serializeLastChunk([]).toString('latin1'), '0\r\n\r\n');
    assert.equal(
      serializeLastChunk([
        ['X-Checksum', 'abc'],
        ['X-Note', 'caf\xe9'],
      ]).toString('latin1'),
      '0\r\nX-Checksum: abc\r\nX-Note: caf\xe9\r\n\r\n',
    );
  });

  it('leaves out a field that could split the message (a name that is not a token, a CR or LF in a value)', () => {
    const got = serializeLastChunk([
      ['X-Ok', '1'],
      ['Bad Name', '2'],
      ['X-Split', 'a\r\nInjected: yes'],
      ['X-Lf', 'b\nc'],
    ]).toString('latin1');
    assert.equal(got, '0\r\nX-Ok: 1\r\n\r\n');
    assert.equal(serializeLastChunk([['X-Split', 'a\r\nB: c']]).toString('latin1'), '0\r\n\r\n');
  });
});
