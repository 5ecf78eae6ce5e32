/**
 * Behaviour of the strict HTTP/1.1 response parser (RFC 9112 sections 4-7): framing by
 * Content-Length, chunked (extensions, trailers) and close; 1xx and 101; HEAD/204/304; keep-alive
 * rules; bytes after the end; and a table of malformed inputs that must be rejected.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { ResponseParser } from '../../src/wire/response-parser.js';
import { UpstreamProtocolError, UpstreamResetError } from '../../src/errors.js';
import { bytewise, collectResponse, latin1, seededRandom, splitAt } from './collect-response.js';
import { generateResponseCorpus } from './response-corpus.js';

const PROTOCOL = 'PRX_UPSTREAM_PROTOCOL';
const RESET = 'PRX_UPSTREAM_RESET';

describe('ResponseParser framing', () => {
  it('reads a Content-Length body and stops at its end', () => {
    const raw = latin1('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello');
    const got = collectResponse([raw], { isEof: false });
    assert.equal(got.error, undefined, `got error ${got.error}, want none`);
    assert.deepEqual(got.head, {
      statusCode: 200,
      statusMessage: 'OK',
      httpVersion: '1.1',
      rawHeaders: ['Content-Type', 'text/plain', 'Content-Length', '5'],
      isKeepAlive: true,
      bodyKind: 'length',
      contentLength: 5,
    });
    assert.equal(got.body, 'hello', `got body ${got.body}, want hello`);
    assert.deepEqual(got.events, ['head', 'body', 'complete']);
    assert.equal(got.consumed, raw.length, `got consumed ${got.consumed}, want ${raw.length}`);
  });

  it('completes a Content-Length: 0 response right after the head', () => {
    const got = collectResponse([latin1('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')], { isEof: false });
    assert.deepEqual(got.events, ['head', 'complete']);
  });

  it('decodes chunked bodies, ignoring chunk extensions, and reports trailers', () => {
    const raw = latin1(
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n' +
        '5;name=value\r\nhello\r\n' +
        '1;a;b="quoted; \\"string\\""\r\n,\r\n' +
        'A\r\n world!!!!\r\n' +
        '0;last\r\nX-Checksum: abc\r\nX-Other:  spaced \r\n\r\n',
    );
    const got = collectResponse([raw], { isEof: false });
    assert.equal(got.error, undefined, `got error ${got.error}, want none`);
    assert.equal(got.head?.bodyKind, 'chunked');
    assert.equal(got.body, 'hello, world!!!!', `got body ${JSON.stringify(got.body)}`);
    assert.deepEqual(got.trailers, ['X-Checksum', 'abc', 'X-Other', 'spaced']);
    assert.deepEqual(got.events, ['head', 'body', 'trailers', 'complete']);
    assert.equal(got.consumed, raw.length);
  });

  it('does not call onTrailers when the trailer section is empty', () => {
    const got = collectResponse([latin1('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n')]);
    assert.deepEqual(got.events, ['head', 'body', 'complete']);
    assert.equal(got.trailers, undefined);
  });

  it('reads a close-delimited body until finish() and marks it not keep-alive', () => {
    const got = collectResponse([latin1('HTTP/1.1 200 OK\r\nServer: x\r\n\r\nhel'), latin1('lo')]);
    assert.equal(got.error, undefined, `got error ${got.error}, want none`);
    assert.equal(got.head?.bodyKind, 'close');
    assert.equal(got.head?.isKeepAlive, false, 'got keep-alive, want not for a close-delimited body');
    assert.equal(got.body, 'hello');
    assert.deepEqual(got.events, ['head', 'body', 'complete']);
  });

  it('hands out body chunks as zero-copy views of the input', () => {
    const raw = latin1('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello');
    const chunks: Buffer[] = [];
    const parser = new ResponseParser({ method: 'GET', onHead() {}, onBody: (chunk) => chunks.push(chunk), onComplete() {} });
    parser.execute(raw);
    assert.equal(chunks.length, 1);
    assert.equal(chunks[0]?.buffer, raw.buffer, 'got a copied chunk, want a subarray of the input');
  });

  it('reports 100 Continue and 103 Early Hints, then the final response', () => {
    const raw = latin1(
      'HTTP/1.1 100 Continue\r\n\r\n' +
        'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n' +
        'HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok',
    );
    const got = collectResponse(bytewise(raw), { isEof: false });
    assert.equal(got.error, undefined, `got error ${got.error}, want none`);
    assert.deepEqual(got.events, ['info', 'info', 'head', 'body', 'complete']);
    assert.deepEqual(
      got.informational.map((head) => [head.statusCode, head.rawHeaders]),
      [
        [100, []],
        [103, ['Link', '</style.css>; rel=preload']],
      ],
    );
    assert.equal(got.head?.statusCode, 201);
    assert.deepEqual(got.head?.rawHeaders, ['Content-Length', '2'], 'got headers of a 1xx leaking into the final head');
    assert.equal(got.body, 'ok');
  });

  it('allows five 1xx responses before the final one, not six (as Go)', () => {
    const five = 'HTTP/1.1 100 Continue\r\n\r\n'.repeat(5) + 'HTTP/1.1 204 No Content\r\n\r\n';
    assert.equal(collectResponse([latin1(five)], { isEof: false }).isComplete, true, 'got five 1xx rejected');
    const six = 'HTTP/1.1 103 Early Hints\r\n\r\n'.repeat(6);
    const got = collectResponse([latin1(six)], { isEof: false });
    assert.ok(got.error?.includes('too many 1xx'), `got ${got.error}, want too many 1xx responses`);
  });

  it('stops after 101 Switching Protocols and leaves the tunnel bytes unconsumed', () => {
    const head = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n';
    const raw = latin1(`${head}\x81\x05hello`);
    let upgradeHead: unknown;
    const parser = new ResponseParser({
      method: 'GET',
      onHead: (h) => (upgradeHead = h),
      onBody: () => assert.fail('got a body, want none for 101'),
      onComplete() {},
    });
    const consumed = parser.execute(raw);
    assert.equal(consumed, head.length, `got consumed ${consumed}, want ${head.length}`);
    assert.equal(raw.subarray(consumed).toString('latin1'), '\x81\x05hello');
    assert.equal(parser.isUpgrade, true);
    assert.equal(parser.isComplete, true);
    assert.deepEqual(upgradeHead, {
      statusCode: 101,
      statusMessage: 'Switching Protocols',
      httpVersion: '1.1',
      rawHeaders: ['Upgrade', 'websocket', 'Connection', 'Upgrade'],
      isKeepAlive: false,
      bodyKind: 'none',
      fieldLines: { text: head.slice(0, -2), lineStarts: [34, 54, 75] },
    });
    assert.equal(parser.execute(latin1('more')), 0, 'got bytes consumed after the upgrade, want 0');
  });

  it('treats a 2xx to CONNECT as a tunnel', () => {
    const parser = new ResponseParser({ method: 'CONNECT', onHead() {}, onBody() {}, onComplete() {} });
    const head = 'HTTP/1.1 200 Connection Established\r\n\r\n';
    assert.equal(parser.execute(latin1(`${head}tunnel`)), head.length);
    assert.equal(parser.isUpgrade, true);
  });

  const noBodyCases = [
    { name: 'HEAD with Content-Length', method: 'HEAD', head: 'HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n', contentLength: 1234 },
    { name: 'HEAD with Content-Length 0', method: 'HEAD', head: 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', contentLength: 0 },
    { name: 'HEAD with chunked', method: 'HEAD', head: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', contentLength: undefined },
    { name: '204 with Content-Length', method: 'GET', head: 'HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n', contentLength: 10 },
    { name: '304 with Content-Length', method: 'GET', head: 'HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n', contentLength: 10 },
    { name: '304 without framing', method: 'GET', head: 'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n', contentLength: undefined },
    { name: 'HEAD without framing', method: 'HEAD', head: 'HTTP/1.1 200 OK\r\nETag: "x"\r\n\r\n', contentLength: undefined },
  ];
  for (const { name, method, head, contentLength } of noBodyCases) {
    it(`expects no body: ${name}`, () => {
      const raw = latin1(`${head}HTTP/1.1 200 OK\r\n`); // the next response's bytes must stay unconsumed
      const got = collectResponse([raw], { method, isEof: false });
      assert.equal(got.error, undefined, `got error ${got.error}, want none`);
      assert.deepEqual(got.events, ['head', 'complete']);
      assert.equal(got.head?.bodyKind, 'none');
      assert.equal(got.head?.contentLength, contentLength, `got contentLength ${got.head?.contentLength}, want ${contentLength}`);
      // a head that announces the body it may not carry ends its connection's reuse (see ResponseHead.isKeepAlive)
      // (for HEAD, no framing at all announces one too: the same GET's body would run to the close)
      const announcesBody = /Content-Length: [1-9]|Transfer-Encoding/.test(head) || (method === 'HEAD' && !/Content-Length/.test(head));
      assert.equal(got.head?.isKeepAlive, !announcesBody, announcesBody ? 'announces a body: not reused' : 'no body announced: reused');
      assert.equal(got.consumed, head.length, `got consumed ${got.consumed}, want ${head.length}`);
    });
  }

  it('leaves a pipelined second response unconsumed, and a fresh parser reads it', () => {
    const first = 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none';
    const second = 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo';
    const raw = latin1(first + second);
    const got = collectResponse([raw], { isEof: false });
    assert.equal(got.consumed, first.length, `got consumed ${got.consumed}, want ${first.length}`);
    assert.equal(got.body, 'one');
    const next = collectResponse([raw.subarray(got.consumed)], { isEof: false });
    assert.equal(next.body, 'two');
  });

  it('keeps consuming nothing once complete, and finish() is then a no-op', () => {
    const parser = new ResponseParser({ method: 'GET', onHead() {}, onBody() {}, onComplete() {} });
    parser.execute(latin1('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
    assert.equal(parser.execute(latin1('junk')), 0);
    parser.finish();
  });
});

describe('ResponseParser keep-alive', () => {
  // version, Connection header (or none), framing, expected isKeepAlive (RFC 9112 9.3)
  const table: [string, string | undefined, string, boolean][] = [
    ['1.1', undefined, 'Content-Length: 0', true],
    ['1.1', 'close', 'Content-Length: 0', false],
    ['1.1', 'Close', 'Content-Length: 0', false],
    ['1.1', 'keep-alive', 'Content-Length: 0', true],
    ['1.1', 'upgrade, close', 'Content-Length: 0', false],
    ['1.0', undefined, 'Content-Length: 0', false],
    ['1.0', 'keep-alive', 'Content-Length: 0', true],
    ['1.0', 'Keep-Alive', 'Content-Length: 0', true],
    ['1.0', 'keep-alive, close', 'Content-Length: 0', false],
    ['1.1', undefined, 'Transfer-Encoding: chunked', true],
    ['1.1', 'keep-alive', 'X-No-Framing: 1', false],
    ['1.0', 'keep-alive', 'X-No-Framing: 1', false],
  ];
  for (const [version, connection, framing, want] of table) {
    it(`HTTP/${version}, Connection: ${connection ?? '(none)'}, ${framing} → ${want}`, () => {
      const connectionLine = connection === undefined ? '' : `Connection: ${connection}\r\n`;
      const got = collectResponse([latin1(`HTTP/${version} 200 OK\r\n${connectionLine}${framing}\r\n\r\n0\r\n\r\n`)], { isEof: false });
      assert.equal(got.head?.httpVersion, version);
      assert.equal(got.head?.isKeepAlive, want, `got isKeepAlive ${got.head?.isKeepAlive}, want ${want}`);
    });
  }
});

describe('ResponseParser splitting', () => {
  const samples: [string, string][] = [
    ['content-length', 'HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-A: b\r\n\r\nhello world'],
    ['chunked', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x="a\\"b"\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n'],
    ['close', 'HTTP/1.0 200 OK\r\nX-A: \xe9\r\n\r\nuntil the end'],
    ['1xx', 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'],
    ['101', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nrest'],
    ['bare LF in chunked', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n'],
    ['bare LF split between lines', 'HTTP/1.1 200 OK\r\nX-A: 1\n\r\n'],
    ['duplicate content-length', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx'],
    ['truncated', 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf'],
  ];
  for (const [name, text] of samples) {
    it(`gives the same result at every split: ${name}`, () => {
      const raw = latin1(text);
      const want = collectResponse([raw]);
      for (let cut = 0; cut <= raw.length; cut++) {
        assert.deepEqual(collectResponse(splitAt(raw, [cut])), want, `split at ${cut} of ${JSON.stringify(text)}`);
      }
      assert.deepEqual(collectResponse(bytewise(raw)), want, 'one byte at a time');
      const random = seededRandom(raw.length);
      for (let round = 0; round < 50; round++) {
        const cuts = Array.from({ length: 1 + Math.floor(random() * 6) }, () => Math.floor(random() * (raw.length + 1)));
        assert.deepEqual(collectResponse(splitAt(raw, cuts)), want, `cuts ${cuts.join(',')}`);
      }
    });
  }

  it('reads a large final head after a 1xx whose last LF comes in the next read (no bytes dropped)', () => {
    // the 1xx's budget once cut the text of the head after it, and the bytes after the cut were lost
    const informational = `HTTP/1.1 103 Early Hints\r\nLink: ${'l'.repeat(8000)}\r\n\r\n`;
    const final = `HTTP/1.1 200 OK\r\nX-Big: ${'b'.repeat(9000)}\r\nContent-Length: 5\r\nX-Last: z\r\n\r\nhello`;
    const raw = latin1(informational + final);
    const got = collectResponse(splitAt(raw, [informational.length - 1]));
    assert.equal(got.error, undefined, `got error ${got.error}, want none`);
    assert.deepEqual(got.head?.rawHeaders, ['X-Big', 'b'.repeat(9000), 'Content-Length', '5', 'X-Last', 'z']);
    assert.equal(got.body, 'hello', `got body ${JSON.stringify(got.body)}, want hello`);
  });

  it('accepts a CRLF split across reads (CR at the end of one chunk, LF at the start of the next)', () => {
    const got = collectResponse([latin1('HTTP/1.1 200 OK\r'), latin1('\nContent-Length: 0\r'), latin1('\n\r'), latin1('\n')], { isEof: false });
    assert.equal(got.error, undefined, `got error ${got.error}, want none`);
    assert.equal(got.isComplete, true);
  });
});

describe('ResponseParser reads a head the same in one pass and line by line', () => {
  // A head that arrives whole in one read is read in one pass over its bytes (readWholeHead) when
  // it is the common case; a head cut by a read boundary, and any unusual head, is read line by
  // line. Feeding a response whole and then cut at every offset shows the two agree: the same
  // heads, events, body, trailers, bytes consumed and error message.

  // Every offset; in a response over 4 KiB (the heads near maxHeaderSize) every offset of its
  // first and last 512 bytes, where its short heads, its end and the limit lie, and every 97th between.
  const cutsOf = (length: number): number[] => {
    const cuts: number[] = [];
    for (let cut = 0; cut <= length; cut += length <= 4096 || cut < 512 || cut >= length - 512 ? 1 : 97) cuts.push(cut);
    return cuts;
  };
  const assertSameAtEachCut = (raw: Buffer, method: string, label: string): void => {
    const whole = collectResponse([raw], { method });
    for (const cut of cutsOf(raw.length)) {
      const split = collectResponse(splitAt(raw, [cut]), { method });
      if (!isDeepStrictEqual(split, whole)) { // assert.deepEqual only for the diff: a call per cut is slow
        assert.deepEqual(split, whole, `${label}: got a different result cut at ${cut} of ${JSON.stringify(raw.toString('latin1').slice(0, 200))}`);
      }
    }
  };

  const corpus = generateResponseCorpus(20261201, 110, 220, 8);
  it(`gives the same result whole and cut at each offset: ${corpus.length} corpus responses`, () => {
    for (const testCase of corpus) assertSameAtEachCut(testCase.raw, testCase.method, `case ${testCase.id} (${testCase.label})`);
  });

  const fields = (count: number): string => Array.from({ length: count }, (_, i) => `X-F${i}: ${i}\r\n`).join('');
  const atLimit = (size: number): string => {
    const prefix = 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Big: ';
    return `${prefix}${'a'.repeat(size - prefix.length - 4)}\r\n\r\n`;
  };
  // name, response; the unusual heads the corpus seldom draws
  const table: [string, string][] = [
    ['128 fields (the most read in one pass)', `HTTP/1.1 200 OK\r\n${fields(127)}Content-Length: 2\r\n\r\nok`],
    ['129 fields (read line by line)', `HTTP/1.1 200 OK\r\n${fields(128)}Content-Length: 2\r\n\r\nok`],
    ['a head of exactly maxHeaderSize bytes', atLimit(16384)],
    ['a head one byte over maxHeaderSize', atLimit(16385)],
    ['no reason phrase', 'HTTP/1.1 204\r\n\r\n'],
    ['an empty reason phrase', 'HTTP/1.0 200 \r\nContent-Length: 1\r\n\r\nx'],
    ['a reason with tab, obs-text and trailing space', 'HTTP/1.1 599 \tcaf\xe9 \r\nContent-Length: 0\r\n\r\n'],
    ['status 999', 'HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n'],
    ['status 100 then the final head in the same read', 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx'],
    ['empty and whitespace-only values', 'HTTP/1.1 200 OK\r\nX-A:\r\nX-B: \t \r\nX-C:\tc\t\r\nContent-Length: 0\r\n\r\n'],
    ['a tab after the colon', 'HTTP/1.1 200 OK\r\nX-T:\tt\r\nContent-Length: 0\r\n\r\n'],
    ['a bad Content-Length after a good field', 'HTTP/1.1 200 OK\r\nX-A: a\r\nContent-Length: 1x\r\n\r\nx'],
    ['a bad Content-Length before a bad line', 'HTTP/1.1 200 OK\r\nContent-Length: 1x\r\nX A: a\r\n\r\nx'],
    ['Connection: close in HTTP/1.1', 'HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n'],
    ['Transfer-Encoding in two fields', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n'],
    ['status code 099', 'HTTP/1.1 099 Low\r\n\r\n'],
    ['the shortest head', 'HTTP/1.1 200\r\n\r\n'],
    ['framing names in odd case', 'HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh: 2\r\nCONNECTION: CLOSE\r\n\r\nok'],
    ['Transfer-Encoding in capitals', 'HTTP/1.1 200 OK\r\nTRANSFER-ENCODING: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n'],
    ['names as long as the framing names, not them', 'HTTP/1.1 200 OK\r\nContent-Lengtx: 5\r\nTransfer-Encodinx: chunked\r\nConnectiox: close\r\n\r\nok'],
  ];
  for (const [name, text] of table) {
    it(`gives the same result whole and cut at each offset: ${name}`, () => assertSameAtEachCut(latin1(text), 'GET', name));
  }

  it('gives the field lines as received only for a head in one read whose every line is `name ": " value CRLF`', () => {
    const linesOf = (chunks: readonly Buffer[]) => {
      let lines: unknown = 'no head';
      const parser = new ResponseParser({ method: 'GET', onHead: (head) => (lines = head.fieldLines), onBody() {}, onComplete() {} });
      for (const chunk of chunks) parser.execute(chunk);
      return lines;
    };
    const head = 'HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 0\r\nX-Empty: \r\n\r\n';
    assert.deepEqual(linesOf([latin1(head)]), { text: head.slice(0, -2), lineStarts: [17, 28, 47, 58] });
    assert.deepEqual(linesOf([latin1('HTTP/1.1 204 No Content\r\n\r\n')]), { text: 'HTTP/1.1 204 No Content\r\n', lineStarts: [25] }, 'no fields');
    assert.equal(linesOf(splitAt(latin1(head), [20])), undefined, 'a head split across reads is read line by line');
    for (const odd of ['X-A:a', 'X-A:  a', 'X-A: a ', 'X-A:\ta', 'X-A: a\t', 'X-A:']) {
      assert.equal(linesOf([latin1(`HTTP/1.1 200 OK\r\n${odd}\r\nContent-Length: 0\r\n\r\n`)]), undefined, `${JSON.stringify(odd)} is not written back as it came`);
    }
  });

  it('reads the framing fields by name in any case in one pass, and no other name as one', () => {
    const odd = collectResponse([latin1('HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh: 2\r\nCONNECTION: CLOSE\r\n\r\nok')], { isEof: false });
    assert.equal(odd.head?.bodyKind, 'length');
    assert.equal(odd.head?.contentLength, 2);
    assert.equal(odd.head?.isKeepAlive, false, 'CONNECTION: CLOSE was not read');
    assert.equal(odd.body, 'ok');
    const chunked = collectResponse([latin1('HTTP/1.1 200 OK\r\nTRANSFER-ENCODING: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n')], { isEof: false });
    assert.equal(chunked.head?.bodyKind, 'chunked');
    assert.equal(chunked.body, 'ok');
    const lookAlike = collectResponse([latin1('HTTP/1.1 200 OK\r\nContent-Lengtx: 5\r\nTransfer-Encodinx: chunked\r\nConnectiox: close\r\n\r\nok')], { isEof: true });
    assert.equal(lookAlike.head?.bodyKind, 'close', 'a name of the same length was read as a framing field');
    assert.equal(lookAlike.body, 'ok');
  });
});

describe('ResponseParser rejects malformed responses', () => {
  const ok = 'HTTP/1.1 200 OK\r\n';
  const chunked = `${ok}Transfer-Encoding: chunked\r\n\r\n`;
  // name, bytes, a fragment of the expected message
  const table: [string, string, string][] = [
    ['repeated Content-Length, same value (llhttp too)', `${ok}Content-Length: 1\r\nContent-Length: 1\r\n\r\nx`, 'repeated Content-Length'],
    ['repeated Content-Length, different value', `${ok}Content-Length: 1\r\nContent-Length: 2\r\n\r\nxy`, 'repeated Content-Length'],
    ['Content-Length list', `${ok}Content-Length: 1, 1\r\n\r\nx`, 'invalid Content-Length'],
    ['Content-Length with sign', `${ok}Content-Length: +1\r\n\r\nx`, 'invalid Content-Length'],
    ['Content-Length in hex', `${ok}Content-Length: 0x1\r\n\r\nx`, 'invalid Content-Length'],
    ['Content-Length with inner space', `${ok}Content-Length: 1 0\r\n\r\nx`, 'invalid Content-Length'],
    ['empty Content-Length', `${ok}Content-Length:\r\n\r\n`, 'empty Content-Length'],
    ['Content-Length above 2^53', `${ok}Content-Length: 9007199254740992\r\n\r\n`, 'too large'],
    ['Transfer-Encoding and Content-Length', `${ok}Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nhi\r\n0\r\n\r\n`, 'both'],
    ['Transfer-Encoding: gzip', `${ok}Transfer-Encoding: gzip\r\n\r\nxx`, 'unsupported Transfer-Encoding'],
    ['Transfer-Encoding: chunked, gzip', `${ok}Transfer-Encoding: chunked, gzip\r\n\r\nxx`, 'unsupported Transfer-Encoding'],
    ['Transfer-Encoding: gzip, chunked', `${ok}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`, 'unsupported Transfer-Encoding'],
    ['Transfer-Encoding: chunked twice', `${ok}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, 'unsupported'],
    ['Transfer-Encoding: identity', `${ok}Transfer-Encoding: identity\r\n\r\nxx`, 'unsupported Transfer-Encoding'],
    ['Transfer-Encoding: xchunked', `${ok}Transfer-Encoding: xchunked\r\n\r\nxx`, 'unsupported Transfer-Encoding'],
    ['Transfer-Encoding in HTTP/1.0', `HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, 'HTTP/1.0'],
    ['chunk size not hex', `${chunked}g\r\n`, 'invalid chunk size'],
    ['chunk size with 0x', `${chunked}0x2\r\nhi\r\n0\r\n\r\n`, 'chunk extension'],
    ['chunk size with space', `${chunked}2 \r\nhi\r\n0\r\n\r\n`, 'chunk extension'],
    ['chunk size negative', `${chunked}-2\r\nhi\r\n0\r\n\r\n`, 'invalid chunk size'],
    ['chunk size empty', `${chunked}\r\nhi\r\n0\r\n\r\n`, 'invalid chunk size'],
    ['chunk size overflow', `${chunked}20000000000000\r\n`, 'too large'],
    ['chunk size with 17 digits', `${chunked}00000000000000002\r\nhi\r\n0\r\n\r\n`, 'too large'],
    ['chunk extension with spaces', `${chunked}2 ; a = b\r\nhi\r\n0\r\n\r\n`, 'chunk extension'],
    ['chunk extension without name', `${chunked}2;\r\nhi\r\n0\r\n\r\n`, 'chunk extension'],
    ['chunk extension with empty value', `${chunked}2;a=\r\nhi\r\n0\r\n\r\n`, 'chunk extension'],
    ['chunk extension with unterminated quote', `${chunked}2;a="b\r\nhi\r\n0\r\n\r\n`, 'chunk extension'],
    ['chunk extension with a control character', `${chunked}2;a="\x01"\r\nhi\r\n0\r\n\r\n`, 'chunk extension'],
    ['bare LF after chunk size', `${chunked}2\nhi\r\n0\r\n\r\n`, 'bare LF'],
    ['bare LF after chunk data', `${chunked}2\r\nhi\n0\r\n\r\n`, 'missing CRLF'],
    ['CR without LF after chunk data', `${chunked}2\r\nhi\rX0\r\n\r\n`, 'missing LF'],
    ['missing CRLF after chunk data', `${chunked}2\r\nhiX\r\n0\r\n\r\n`, 'missing CRLF'],
    ['chunk longer than its size', `${chunked}2\r\nhello\r\n0\r\n\r\n`, 'missing CRLF'],
    ['bare LF ending the trailers', `${chunked}0\r\n\n`, 'bare LF'],
    ['obs-fold in trailers', `${chunked}0\r\nX-T: a\r\n b\r\n\r\n`, 'obs-fold'],
    ['bare LF after status line', 'HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n', 'bare LF'],
    ['bare LF after header', `${ok}Content-Length: 0\n\r\n`, 'bare LF'],
    ['bare LF ending the head', `${ok}Content-Length: 0\r\n\n`, 'bare LF'],
    ['bare CR in value', `${ok}X-A: a\rb\r\nContent-Length: 0\r\n\r\n`, '0x0d'],
    ['bare CR in name', `${ok}X\r-A: a\r\nContent-Length: 0\r\n\r\n`, 'invalid header name'],
    ['bare CR in reason', 'HTTP/1.1 200 O\rK\r\nContent-Length: 0\r\n\r\n', 'reason phrase'],
    ['obs-fold', `${ok}X-A: a\r\n b\r\nContent-Length: 0\r\n\r\n`, 'obs-fold'],
    ['obs-fold with tab', `${ok}X-A: a\r\n\tb\r\nContent-Length: 0\r\n\r\n`, 'obs-fold'],
    ['space before colon', `${ok}X-A : a\r\nContent-Length: 0\r\n\r\n`, 'invalid header name'],
    ['tab before colon', `${ok}X-A\t: a\r\nContent-Length: 0\r\n\r\n`, 'invalid header name'],
    ['empty header name', `${ok}: a\r\nContent-Length: 0\r\n\r\n`, 'invalid header name'],
    ['no colon', `${ok}X-A\r\nContent-Length: 0\r\n\r\n`, 'invalid header name'],
    ['non-token in name', `${ok}X(A): a\r\nContent-Length: 0\r\n\r\n`, 'invalid header name'],
    ['non-ASCII in name', `${ok}X-\xe9: a\r\nContent-Length: 0\r\n\r\n`, 'invalid header name'],
    ['NUL in value', `${ok}X-A: a\x00b\r\nContent-Length: 0\r\n\r\n`, '0x00'],
    ['DEL in value', `${ok}X-A: a\x7fb\r\nContent-Length: 0\r\n\r\n`, '0x7f'],
    ['ESC in value', `${ok}X-A: \x1b[0m\r\nContent-Length: 0\r\n\r\n`, '0x1b'],
    ['HTTP/2.0 status line', 'HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n', 'invalid status line'],
    ['HTTP/0.9 status line', 'HTTP/0.9 200 OK\r\nContent-Length: 0\r\n\r\n', 'invalid status line'],
    ['lower-case http', 'http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', 'invalid status line'],
    ['two spaces after version', 'HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n', 'invalid status code'],
    ['two-digit status', 'HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n', 'invalid status'],
    ['four-digit status', 'HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n', 'invalid status line'],
    ['status below 100', 'HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n', 'invalid status code'],
    ['leading empty line', '\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', 'invalid status line'],
    ['control character in reason', 'HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n', 'reason phrase'],
    ['not HTTP at all', 'SSH-2.0-OpenSSH_9.6\r\n', 'invalid status line'],
  ];
  for (const [name, text, fragment] of table) {
    it(name, () => {
      for (const chunks of [[latin1(text)], bytewise(latin1(text))]) {
        const got = collectResponse(chunks);
        assert.ok(got.error?.startsWith(`${PROTOCOL}: `), `got ${got.error ?? 'acceptance'}, want ${PROTOCOL}`);
        assert.ok(got.error?.includes(fragment), `got message ${JSON.stringify(got.error)}, want it to mention ${JSON.stringify(fragment)}`);
        assert.equal(got.isComplete, false, 'got complete, want not');
      }
    });
  }

  it('rejects without waiting for more bytes when a bare LF ends a line', () => {
    const got = collectResponse([latin1('HTTP/1.1 200 OK\n')], { isEof: false });
    assert.ok(got.error?.startsWith(PROTOCOL), `got ${got.error}, want ${PROTOCOL} before the head ends`);
  });

  it('accepts a head of exactly maxHeaderSize bytes and rejects one byte more', () => {
    const prefix = `${ok}Content-Length: 0\r\nX-Big: `;
    const fill = (size: number): Buffer => latin1(`${prefix}${'a'.repeat(size - prefix.length - 4)}\r\n\r\n`);
    const atLimit = collectResponse([fill(1000)], { maxHeaderSize: 1000, isEof: false });
    assert.equal(atLimit.error, undefined, `got ${atLimit.error} at the limit, want acceptance`);
    const overLimit = collectResponse([fill(1001)], { maxHeaderSize: 1000, isEof: false });
    assert.ok(overLimit.error?.includes('larger than 1000 bytes'), `got ${overLimit.error}, want head too large`);
    const overLimitBytewise = collectResponse(bytewise(fill(1001)), { maxHeaderSize: 1000, isEof: false });
    assert.equal(overLimitBytewise.error, overLimit.error);
  });

  it('rejects an endless head without buffering more than maxHeaderSize', () => {
    const parser = new ResponseParser({ method: 'GET', maxHeaderSize: 16384, onHead() {}, onBody() {}, onComplete() {} });
    parser.execute(latin1('HTTP/1.1 200 OK\r\nX-A: '));
    assert.throws(
      () => {
        for (let i = 0; i < 100; i++) parser.execute(Buffer.alloc(1024, 0x61));
      },
      (error: unknown) => error instanceof UpstreamProtocolError && /larger than 16384 bytes/.test(error.message),
    );
  });

  it('limits the trailer section to maxHeaderSize', () => {
    const trailers = `X-T: ${'t'.repeat(2000)}\r\n`;
    const got = collectResponse([latin1(`${chunked}0\r\n${trailers}\r\n`)], { maxHeaderSize: 1000 });
    assert.ok(got.error?.includes('trailer section larger than 1000 bytes'), `got ${got.error}, want trailer section too large`);
  });

  it('keeps failing once failed', () => {
    const parser = new ResponseParser({ method: 'GET', onHead() {}, onBody() {}, onComplete() {} });
    assert.throws(() => parser.execute(latin1('HTTP/1.1 200 OK\n')), UpstreamProtocolError);
    assert.throws(() => parser.execute(latin1('Content-Length: 0\r\n\r\n')), UpstreamProtocolError);
    parser.finish(); // no second, different error
  });
});

describe('ResponseParser finish()', () => {
  it('reports a connection closed before any byte as a reset before the response', () => {
    const parser = new ResponseParser({ method: 'GET', onHead() {}, onBody() {}, onComplete() {} });
    assert.equal(parser.hasReceivedBytes, false);
    assert.throws(
      () => parser.finish(),
      (error: unknown) => error instanceof UpstreamResetError && error.message.includes('before sending a response'),
    );
  });

  // How far the response got, in the reason: a close (FIN) is told apart from a reset, and from
  // the other closes (nginx: "upstream prematurely closed connection while reading upstream").
  const HEAD_CUT = 'upstream closed the connection before the response head was complete';
  const truncated: [string, string, string][] = [
    ['in the status line', 'HTTP/1.1 20', HEAD_CUT],
    ['in the head', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n', HEAD_CUT],
    ['in a Content-Length body', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel', 'upstream closed the connection before the response was complete (3 of 5 body bytes)'],
    ['in a chunk', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel', 'upstream closed the connection before the response was complete (3 body bytes of a chunked body)'],
    ['before the last chunk', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n', 'upstream closed the connection before the response was complete (5 body bytes of a chunked body)'],
    ['in the trailers', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n', 'upstream closed the connection before the response was complete (0 body bytes of a chunked body)'],
    ['after an informational response', 'HTTP/1.1 100 Continue\r\n\r\n', HEAD_CUT],
  ];
  for (const [name, text, want] of truncated) {
    it(`reports a close ${name} as a close and how far the response got`, () => {
      const got = collectResponse([latin1(text)]);
      assert.equal(got.error, `${RESET}: ${want}`, `got ${got.error}, want ${RESET}: ${want}`);
      assert.equal(got.isComplete, false);
    });
  }
});
