/**
 * Behaviour of the request body decoders (src/wire/body-decoder.ts) and so of the chunked decoder
 * they share with the response parser (src/wire/chunked-decoder.ts): the body bytes, trailers and
 * end offset do not depend on how the bytes are split into reads (every split point, every pair of
 * split points for a short body), extensions are checked and ignored, bad framing is a
 * RequestFramingError (400), the line limits hold, and bytes after the body are left for the next
 * request.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createBodyDecoder, DEFAULT_MAX_LINE_BYTES } from '../../src/wire/body-decoder.js';
import { SMALL_CHUNK_BYTES } from '../../src/wire/chunked-decoder.js';
import type { BodyDecoder } from '../../src/wire/body-decoder.js';
import type { BodyFraming } from '../../src/wire/request-parser.js';
import { RequestFramingError } from '../../src/errors.js';

const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');
const CHUNKED: BodyFraming = { kind: 'chunked' };

interface Decoded {
  body: string;
  trailers: readonly string[];
  /** Offset in the whole input just after the body; undefined while incomplete. */
  end: number | undefined;
  bytesRead: number;
  error: string | undefined;
}

/**
 * Feeds `input` to a new decoder for `framing` in pieces cut at `cuts` (offsets into `input`),
 * as a connection loop would: each piece is its own Buffer; after completion nothing more is fed.
 */
function decode(framing: BodyFraming, input: Buffer, cuts: readonly number[] = [], maxLineBytes?: number): Decoded {
  const decoder = createBodyDecoder(framing, maxLineBytes === undefined ? undefined : { maxLineBytes }) as BodyDecoder;
  const pieces: string[] = [];
  const bounds = [0, ...[...cuts].sort((a, b) => a - b), input.length];
  let end: number | undefined;
  let error: string | undefined;
  for (let i = 0; i + 1 < bounds.length && end === undefined && error === undefined; i++) {
    const piece = Buffer.from(input.subarray(bounds[i], bounds[i + 1])); // a copy: its own buffer, as a socket read
    try {
      const used = decoder.execute(piece, 0, (chunk) => pieces.push(chunk.toString('latin1')));
      if (decoder.isComplete) end = (bounds[i] as number) + used;
      else assert.equal(used, piece.length, `got ${used} bytes used of an incomplete body's piece of ${piece.length}, want all`);
    } catch (caught) {
      assert.ok(caught instanceof RequestFramingError, `got ${String(caught)}, want a RequestFramingError`);
      assert.equal(caught.status, 400);
      error = caught.message;
    }
  }
  return { body: pieces.join(''), trailers: [...decoder.rawTrailers], end, bytesRead: decoder.bytesRead, error };
}

describe('createBodyDecoder', () => {
  it('gives no decoder for framing none', () => {
    assert.equal(createBodyDecoder({ kind: 'none' }), undefined);
  });

  it('bounds chunk-size lines and trailer sections by 16 KiB unless told', () => {
    assert.equal(DEFAULT_MAX_LINE_BYTES, 16384);
  });
});

describe('Content-Length bodies', () => {
  it('reads exactly length bytes at every split point and leaves the rest for the next request', () => {
    const input = latin1('hello, world!GET /next HTTP/1.1\r\n');
    for (let cut = 0; cut <= input.length; cut++) {
      const got = decode({ kind: 'length', length: 13 }, input, [cut]);
      assert.deepEqual(got, { body: 'hello, world!', trailers: [], end: 13, bytesRead: 13, error: undefined }, `cut at ${cut}`);
    }
  });

  it('is incomplete until the last byte, counting bytesRead', () => {
    const got = decode({ kind: 'length', length: 10 }, latin1('abcd'));
    assert.deepEqual(got, { body: 'abcd', trailers: [], end: undefined, bytesRead: 4, error: undefined });
  });

  it('hands out views of the input, never copies, and reads from start', () => {
    const decoder = createBodyDecoder({ kind: 'length', length: 3 }) as BodyDecoder;
    const input = latin1('xxabcde');
    const chunks: Buffer[] = [];
    assert.equal(decoder.execute(input, 2, (chunk) => chunks.push(chunk)), 5);
    assert.equal(chunks[0]?.buffer, input.buffer, 'got a copied chunk, want a subarray of the input');
    assert.equal(chunks[0]?.toString('latin1'), 'abc');
    assert.equal(decoder.execute(input, 5, () => assert.fail('no data after completion')), 5, 'got bytes used after completion, want none');
  });
});

describe('chunked bodies', () => {
  const body =
    '5;name=value;quoted="a \\"b\\" ;c"\r\nhello\r\n' + // extensions, ignored
    '1\r\n,\r\n' +
    'A;x\r\n world 123\r\n' + // hex, upper case; extension without value
    '0;last=1\r\n' +
    'X-Checksum: abc \r\n' + // trailers, value trimmed
    'x-other:\tspaced out\r\n' +
    '\r\n';
  const next = 'GET /next HTTP/1.1\r\n\r\n';
  const input = latin1(body + next);
  const want: Decoded = { body: 'hello, world 123', trailers: ['X-Checksum', 'abc', 'x-other', 'spaced out'], end: body.length, bytesRead: 16, error: undefined };

  it('decodes data, ignores extensions, keeps trailers and ends where the next request starts', () => {
    assert.deepEqual(decode(CHUNKED, input), want);
  });

  it('reads the same at every split point', () => {
    for (let cut = 0; cut <= input.length; cut++) assert.deepEqual(decode(CHUNKED, input, [cut]), want, `cut at ${cut}`);
  });

  it('reads the same at every pair of split points', () => {
    for (let first = 1; first < input.length; first++) {
      for (let second = first; second < input.length; second++) assert.deepEqual(decode(CHUNKED, input, [first, second]), want, `cuts at ${first}, ${second}`);
    }
  });

  it('reads the same one byte at a time', () => {
    const cuts = Array.from({ length: input.length - 1 }, (_, i) => i + 1);
    assert.deepEqual(decode(CHUNKED, input, cuts), want);
  });

  it('reads an empty body (last-chunk only), with zeros, and leading zeros in sizes', () => {
    assert.deepEqual(decode(CHUNKED, latin1('0\r\n\r\nNEXT')), { body: '', trailers: [], end: 5, bytesRead: 0, error: undefined });
    assert.deepEqual(decode(CHUNKED, latin1('000\r\n\r\n')).end, 7);
    assert.deepEqual(decode(CHUNKED, latin1('0002\r\nhi\r\n0\r\n\r\n')).body, 'hi');
  });

  it('passes any bytes inside chunk data, CRLFs included', () => {
    const data = '\r\n0\r\n\r\n\x00\xff';
    const got = decode(CHUNKED, latin1(`${data.length.toString(16)}\r\n${data}\r\n0\r\n\r\n`));
    assert.equal(got.body, data, `got ${JSON.stringify(got.body)}, want ${JSON.stringify(data)}`);
  });

  it('is incomplete while the body has not ended, with bytesRead so far', () => {
    for (const text of ['', '5', '5\r', '5\r\nhel', '5\r\nhello', '5\r\nhello\r', '5\r\nhello\r\n0\r\n', '5\r\nhello\r\n0\r\nX: 1\r\n', '5\r\nhello\r\n0\r\n\r']) {
      const got = decode(CHUNKED, latin1(text));
      assert.equal(got.end, undefined, `${JSON.stringify(text)}: got complete, want incomplete`);
      assert.equal(got.error, undefined, `${JSON.stringify(text)}: got ${got.error}, want no error`);
      assert.equal(got.bytesRead, got.body.length);
    }
  });

  it('hands out a lone small piece, and every piece of SMALL_CHUNK_BYTES or more, as a view of the input', () => {
    const decoder = createBodyDecoder(CHUNKED) as BodyDecoder;
    const raw = latin1('5\r\nhello\r\n0\r\n\r\n');
    const chunks: Buffer[] = [];
    decoder.execute(raw, 0, (chunk) => chunks.push(chunk));
    assert.equal(chunks[0]?.buffer, raw.buffer, 'got a copied chunk, want a subarray of the input');
  });

  it('merges the small pieces of one read, in order, into fresh buffers of at most SMALL_CHUNK_BYTES; a large piece goes between them as a view (a break test: a million one-byte chunks were written one by one)', () => {
    const tiny = '1\r\nx\r\n'.repeat(10_000);
    const large = 'L'.repeat(SMALL_CHUNK_BYTES);
    const raw = latin1(`${tiny}${SMALL_CHUNK_BYTES.toString(16)}\r\n${large}\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n`);
    const decoder = createBodyDecoder(CHUNKED) as BodyDecoder;
    const chunks: Buffer[] = [];
    assert.equal(decoder.execute(raw, 0, (chunk) => chunks.push(chunk)), raw.length);
    assert.deepEqual(chunks.map((chunk) => [chunk.length, chunk.buffer === raw.buffer]), [[4096, false], [4096, false], [1808, false], [4096, true], [3, false]]);
    assert.equal(Buffer.concat(chunks).toString('latin1'), `${'x'.repeat(10_000)}${large}abc`);
    assert.equal(decoder.bytesRead, 10_000 + SMALL_CHUNK_BYTES + 3);
  });

  it('hands out the data before a framing fault, merged, then throws', () => {
    assert.deepEqual(decode(CHUNKED, latin1('1\r\na\r\n1\r\nb\r\nzz\r\n')), { body: 'ab', trailers: [], end: undefined, bytesRead: 2, error: 'malformed request body: invalid chunk size line "zz"' });
  });

  it('after completion uses no byte', () => {
    const decoder = createBodyDecoder(CHUNKED) as BodyDecoder;
    const raw = latin1('0\r\n\r\nGET');
    assert.equal(decoder.execute(raw, 0, () => {}), 5);
    assert.equal(decoder.execute(raw, 5, () => assert.fail('no data after completion')), 5);
  });
});

describe('chunked framing errors → RequestFramingError (400)', () => {
  // name, bytes, a fragment of the expected message
  const table: [string, string, string][] = [
    ['chunk size not hex', 'g\r\n', 'invalid chunk size'],
    ['chunk size with 0x', '0x2\r\nhi\r\n0\r\n\r\n', 'chunk extension'],
    ['chunk size with a trailing space', '2 \r\nhi\r\n0\r\n\r\n', 'chunk extension'],
    ['chunk size with a leading space', ' 2\r\nhi\r\n0\r\n\r\n', 'invalid chunk size'],
    ['chunk size negative', '-2\r\nhi\r\n0\r\n\r\n', 'invalid chunk size'],
    ['chunk size with a sign', '+2\r\nhi\r\n0\r\n\r\n', 'invalid chunk size'],
    ['chunk size empty', '\r\nhi\r\n0\r\n\r\n', 'invalid chunk size'],
    ['chunk size overflow', '20000000000000\r\n', 'too large'],
    ['chunk size with 17 digits', '00000000000000002\r\nhi\r\n0\r\n\r\n', 'too large'],
    ['chunk extension with spaces', '2 ; a = b\r\nhi\r\n0\r\n\r\n', 'chunk extension'],
    ['chunk extension without name', '2;\r\nhi\r\n0\r\n\r\n', 'chunk extension'],
    ['chunk extension with empty value', '2;a=\r\nhi\r\n0\r\n\r\n', 'chunk extension'],
    ['chunk extension with unterminated quote', '2;a="b\r\nhi\r\n0\r\n\r\n', 'chunk extension'],
    ['chunk extension with a control character', '2;a="\x01"\r\nhi\r\n0\r\n\r\n', 'chunk extension'],
    ['chunk extension with a bare CR', '2;a\rb\r\nhi\r\n0\r\n\r\n', 'chunk extension'],
    ['bare LF after chunk size', '2\nhi\r\n0\r\n\r\n', 'bare LF'],
    ['bare LF after chunk data', '2\r\nhi\n0\r\n\r\n', 'missing CRLF'],
    ['CR without LF after chunk data', '2\r\nhi\rX0\r\n\r\n', 'missing LF'],
    ['chunk longer than its size', '2\r\nhello\r\n0\r\n\r\n', 'missing CRLF'],
    ['chunk shorter than its size (its data runs into the next line)', '5\r\nhi\r\n0\r\n\r\n', 'invalid chunk size'],
    ['bare LF ending the trailers', '0\r\n\n', 'bare LF'],
    ['bare LF after a trailer', '0\r\nX: 1\n\r\n', 'bare LF'],
    ['obs-fold in trailers', '0\r\nX-T: a\r\n b\r\n\r\n', 'obs-fold'],
    ['space before colon in a trailer', '0\r\nX-T : a\r\n\r\n', 'invalid header name'],
    ['no colon in a trailer', '0\r\nX-T\r\n\r\n', 'invalid header name'],
    ['NUL in a trailer value', '0\r\nX-T: a\x00b\r\n\r\n', '0x00'],
    ['bare CR in a trailer value', '0\r\nX-T: a\rb\r\n\r\n', '0x0d'],
  ];
  for (const [name, text, fragment] of table) {
    it(name, () => {
      const whole = decode(CHUNKED, latin1(text));
      const bytewise = decode(CHUNKED, latin1(text), Array.from({ length: text.length - 1 }, (_, i) => i + 1));
      for (const got of [whole, bytewise]) {
        assert.ok(got.error?.startsWith('malformed request body: '), `got ${got.error ?? 'acceptance'}, want a malformed request body`);
        assert.ok(got.error?.includes(fragment), `got message ${JSON.stringify(got.error)}, want it to mention ${JSON.stringify(fragment)}`);
        assert.equal(got.end, undefined, 'got complete, want not');
      }
    });
  }

  it('stays failed: a later call throws the same error', () => {
    const decoder = createBodyDecoder(CHUNKED) as BodyDecoder;
    const bad = latin1('zz\r\n');
    assert.throws(() => decoder.execute(bad, 0, () => {}), RequestFramingError);
    assert.throws(() => decoder.execute(latin1('0\r\n\r\n'), 0, () => {}), /invalid chunk size/);
  });

  it('bounds a chunk-size line by maxLineBytes, CRLF included', () => {
    const line = `1;${'x'.repeat(7)}\r\n`; // 11 bytes
    assert.equal(decode(CHUNKED, latin1(`${line}a\r\n0\r\n\r\n`), [], 11).error, undefined, 'at the limit');
    assert.match(decode(CHUNKED, latin1(`${line}a\r\n0\r\n\r\n`), [], 10).error ?? '', /chunk size line larger than 10 bytes/);
    assert.match(decode(CHUNKED, latin1('1;xxxxxxxxxxxxxxxx'), [4, 8], 10).error ?? '', /larger than 10 bytes/, 'a line cut short');
  });

  it('reads a plain chunk-size line from its bytes with the rules of the others: the budget, 16 digits, 2^53 - 1', () => {
    assert.equal(decode(CHUNKED, latin1('10\r\n0123456789abcdef\r\n0\r\n\r\n'), [], 4).error, undefined, 'a line of 4 bytes within 4');
    assert.match(decode(CHUNKED, latin1('10\r\n0123456789abcdef\r\n0\r\n\r\n'), [], 3).error ?? '', /chunk size line larger than 3 bytes/);
    assert.match(decode(CHUNKED, latin1(`${'0'.repeat(16)}1\r\nx\r\n0\r\n\r\n`)).error ?? '', /chunk size too large/, '17 digits');
    assert.match(decode(CHUNKED, latin1('20000000000000\r\n')).error ?? '', /chunk size too large/, '2^53');
    assert.equal(decode(CHUNKED, latin1(`${'0'.repeat(15)}1\r\nx\r\n0\r\n\r\n`)).body, 'x', '16 digits');
    assert.match(decode(CHUNKED, latin1('1 \r\nx\r\n0\r\n\r\n')).error ?? '', /invalid byte in a chunk size/, 'a space after the size');
  });

  it('bounds the whole trailer section by maxLineBytes', () => {
    const trailers = 'A: 1\r\nB: 2\r\n\r\n'; // 14 bytes
    assert.deepEqual(decode(CHUNKED, latin1(`0\r\n${trailers}`), [], 14).trailers, ['A', '1', 'B', '2']);
    assert.match(decode(CHUNKED, latin1(`0\r\n${trailers}`), [], 13).error ?? '', /trailer section larger than 13 bytes/);
  });
});
