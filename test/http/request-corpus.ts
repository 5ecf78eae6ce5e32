/**
 * The corpus of the request differential test: request heads, each with a name and, for the
 * hand-written ones, whether the fast lane's parser must take it (`isSimple`). Three parts:
 * - simple heads: every method, every target character class, OWS trimming, obs-text values, every
 *   tchar in a name, duplicate fields, Connection lists, `Content-Length: 0`, names that merely
 *   resemble the special ones, a 100-field head and a head of exactly 16384 bytes;
 * - one or more violations of each rule of src/http/request-parser.ts (request line, target, field
 *   syntax, Host, body and upgrade headers, Content-Length forms, size and count limits);
 * - systematic mutations of one simple head: every byte replaced by each of a set of awkward bytes,
 *   every byte deleted, every byte doubled; whether those are simple is left to the oracle.
 */

export interface RequestCase {
  readonly name: string;
  readonly bytes: Buffer;
  /** true / false: the parser must / must not take it; undefined: only the differential rule applies. */
  readonly isSimple: boolean | undefined;
}

/** The head `requestLine CRLF *(line CRLF) CRLF`, latin1. */
export function head(requestLine: string, lines: readonly string[]): Buffer {
  let text = `${requestLine}\r\n`;
  for (const line of lines) text += `${line}\r\n`;
  return Buffer.from(`${text}\r\n`, 'latin1');
}

export const METHODS = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];
/** Every byte the parser allows in a target after the leading `/`. */
export const TARGET_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/?%";
/** Every tchar (RFC 9110 5.6.2). */
export const TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";

const BASE = ['Host: example.com', 'User-Agent: test/1.0', 'Accept: */*'];

export function requestCorpus(): RequestCase[] {
  const cases: RequestCase[] = [];
  const add = (name: string, bytes: Buffer, isSimple: boolean | undefined): void => {
    cases.push({ name, bytes, isSimple });
  };
  const simple = (name: string, requestLine: string, lines: readonly string[]): void => add(name, head(requestLine, lines), true);
  const other = (name: string, requestLine: string, lines: readonly string[]): void => add(name, head(requestLine, lines), false);
  const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');

  // ---- simple heads ----
  const targets = ['/', '/a/b?x=1&y=2', `/${TARGET_CHARS}`, '//double//slash', '/%zz?%', '/?', '/a?b?c/d', '/@:;=,', "/~user/it's(1)*"];
  for (const method of METHODS) for (const target of targets) simple(`${method} ${target}`, `${method} ${target} HTTP/1.1`, BASE);
  simple('no OWS', 'GET / HTTP/1.1', ['Host:example.com']);
  simple('OWS trimmed both sides', 'GET / HTTP/1.1', ['Host:   example.com  ']);
  simple('HTAB OWS trimmed', 'GET / HTTP/1.1', ['Host:\texample.com\t', 'X-A: \t a \t']);
  simple('inner whitespace kept', 'GET / HTTP/1.1', ['Host: a', 'X-A: a \t b  c']);
  simple('empty value', 'GET / HTTP/1.1', ['Host: a', 'X-Empty:']);
  simple('whitespace-only value', 'GET / HTTP/1.1', ['Host: a', 'X-Empty: \t ']);
  simple('empty Host value', 'GET / HTTP/1.1', ['Host:']);
  simple('obs-text value', 'GET / HTTP/1.1', ['Host: a', 'X-A: caf\xe9 \x80\xff\xa0']);
  let vchars = '';
  for (let b = 0x21; b <= 0x7e; b++) vchars += String.fromCharCode(b);
  simple('every VCHAR in a value', 'GET / HTTP/1.1', ['Host: a', `X-A: ${vchars}`]);
  simple('value starting with a colon', 'GET / HTTP/1.1', ['Host: a', 'X-A:: b']);
  simple('every tchar in a name', 'GET / HTTP/1.1', ['Host: a', `${TOKEN_CHARS}: v`]);
  simple('lowercase host', 'GET / HTTP/1.1', ['host: a']);
  simple('uppercase HOST', 'GET / HTTP/1.1', ['HOST: a']);
  simple('Host not first', 'GET / HTTP/1.1', ['Accept: */*', 'Host: a']);
  simple('duplicates kept in order', 'GET / HTTP/1.1', ['Host: a', 'Cookie: a=1', 'X-B: 1', 'Cookie: b=2', 'cookie: c=3']);
  for (const value of ['close', 'keep-alive', 'keep-alive, close', 'Close', 'CLOSE', 'foo,close', 'close ,\tfoo', 'keep-alive,close', 'closex', 'x-close', 'TE', 'upgrades', 'keep-alive , te']) {
    simple(`Connection: ${value}`, 'GET / HTTP/1.1', ['Host: a', `Connection: ${value}`]);
  }
  simple('two Connection headers', 'GET / HTTP/1.1', ['Host: a', 'Connection: keep-alive', 'connection: close']);
  simple('Content-Length: 0', 'POST /form HTTP/1.1', ['Host: a', 'Content-Length: 0']);
  simple('content-length:0', 'PUT /x HTTP/1.1', ['Host: a', 'content-length:0']);
  simple('Content-Length with OWS', 'DELETE /x HTTP/1.1', ['Host: a', 'Content-Length: \t0 ']);
  simple('look-alike names', 'GET / HTTP/1.1', [
    'Host: a',
    'Upgrade-Insecure-Requests: 1',
    'Hosts: b',
    'X-Upgrade: websocket',
    'Expects: x',
    'Connections: upgrade',
    'Transfer-Encodings: chunked',
    'Content-Lengths: 5',
    'Content-Lengtx: 5',
    'Keep-Alive: timeout=5',
    'TE: trailers',
    'Upgradf: x',
    'Expecu: x',
  ]);
  simple('browser-like head', 'GET /index.html?lang=en HTTP/1.1', [
    'Host: www.example.com:8080',
    'Connection: keep-alive',
    'Cache-Control: max-age=0',
    'sec-ch-ua: "Chromium";v="124", "Not-A.Brand";v="99"',
    'sec-ch-ua-mobile: ?0',
    'Upgrade-Insecure-Requests: 1',
    'User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36',
    'Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
    'Accept-Encoding: gzip, deflate, br',
    'Accept-Language: en-US,en;q=0.9',
    'Cookie: session=abc123; theme=dark',
  ]);
  const fields = (count: number): string[] => ['Host: a', ...Array.from({ length: count - 1 }, (_, i) => `X-Field-${i}: value ${i}`)];
  simple('100 fields', 'GET / HTTP/1.1', fields(100));
  other('101 fields', 'GET / HTTP/1.1', fields(101));
  // a head of exactly 16384 bytes (taken at maxHeadBytes 16384) and one byte more (not)
  const sized = (total: number): Buffer => {
    const fixed = head('GET / HTTP/1.1', ['Host: a', 'X-Big: ']).length;
    return head('GET / HTTP/1.1', ['Host: a', `X-Big: ${'b'.repeat(total - fixed)}`]);
  };
  add('head of exactly 16384 bytes', sized(16384), true);
  add('head of 16385 bytes', sized(16385), false);

  // ---- request line violations ----
  const requestLines = [
    'get / HTTP/1.1',
    'Get / HTTP/1.1',
    'FOO / HTTP/1.1',
    'GETS / HTTP/1.1',
    'GE / HTTP/1.1',
    'POSTX / HTTP/1.1',
    'TRACE / HTTP/1.1',
    'PROPFIND / HTTP/1.1',
    'M-SEARCH * HTTP/1.1',
    'CONNECT example.com:443 HTTP/1.1',
    'GET  / HTTP/1.1',
    'GET /  HTTP/1.1',
    'GET\t/ HTTP/1.1',
    'GET /\tHTTP/1.1',
    'GET / HTTP/1.1 ',
    'GET / HTTP/1.1\t',
    ' GET / HTTP/1.1',
    'GET / HTTP/1.0',
    'GET / HTTP/1.2',
    'GET / HTTP/2.0',
    'GET / HTTP/0.9',
    'GET / http/1.1',
    'GET / HTTP/1.10',
    'GET / HTTP/11',
    'GET / HTTP/1.1x',
    'GET /',
    'GET / ',
    'GET',
    '/ HTTP/1.1',
    ' / HTTP/1.1',
    'GET http://example.com/a HTTP/1.1',
    'GET example.com:80 HTTP/1.1',
    'OPTIONS * HTTP/1.1',
    'GET a/b HTTP/1.1',
    'GET ?x HTTP/1.1',
    'GET /a#frag HTTP/1.1',
    'GET /a b HTTP/1.1',
    'GET /a\\b HTTP/1.1',
    'GET /caf\xe9 HTTP/1.1',
  ];
  for (const requestLine of requestLines) other(`request line ${JSON.stringify(requestLine)}`, requestLine, BASE);
  add('PRI preface', latin1('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), false);
  add('bare LF after request line', latin1('GET / HTTP/1.1\nHost: a\r\n\r\n'), false);
  add('CR CR LF after request line', latin1('GET / HTTP/1.1\r\r\nHost: a\r\n\r\n'), false);
  add('empty line before request line', latin1('\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n'), false);
  add('request line only', latin1('GET / HTTP/1.1\r\n\r\n'), false);

  // ---- every byte outside the target set, inside a target ----
  for (let b = 0; b < 256; b++) {
    if (TARGET_CHARS.includes(String.fromCharCode(b))) continue;
    add(`target byte 0x${hex(b)}`, head(`GET /a${String.fromCharCode(b)}b?c HTTP/1.1`, BASE), false);
  }

  // ---- every byte outside tchar and ':', inside a name ----
  for (let b = 0; b < 256; b++) {
    if (TOKEN_CHARS.includes(String.fromCharCode(b)) || b === 0x3a) continue;
    add(`name byte 0x${hex(b)}`, head('GET / HTTP/1.1', ['Host: a', `X-Na${String.fromCharCode(b)}me: v`]), false);
  }

  // ---- every CTL (but HTAB) and DEL in a value: at its start, middle and end ----
  for (let b = 0; b < 0x80; b++) {
    if ((b >= 0x20 && b !== 0x7f) || b === 0x09) continue;
    const c = String.fromCharCode(b);
    for (const [where, value] of [['start', `${c}v`], ['middle', `v${c}v`], ['end', `v${c}`]] as const) {
      add(`value byte 0x${hex(b)} at ${where}`, head('GET / HTTP/1.1', ['Host: a', `X-A: ${value}`]), false);
    }
  }

  // ---- field line structure ----
  other('obs-fold with SP', 'GET / HTTP/1.1', ['Host: a', 'X-A: a', ' b']);
  other('obs-fold with HTAB', 'GET / HTTP/1.1', ['Host: a', 'X-A: a', '\tb']);
  other('obs-fold on the first field line', 'GET / HTTP/1.1', [' Host: a']);
  other('obs-fold of Host', 'GET / HTTP/1.1', ['Host:', ' a']);
  add('bare LF after a field line', latin1('GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n'), false);
  add('bare LF in the end of head', latin1('GET / HTTP/1.1\r\nHost: a\r\n\n\r\n'), false);
  add('LF LF end of head', latin1('GET / HTTP/1.1\r\nHost: a\n\n'), undefined);
  add('bare CR in a value', latin1('GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n'), false);
  add('bare CR at a value end', latin1('GET / HTTP/1.1\r\nHost: a\r\nX-A: a\r\r\n\r\n'), false);
  add('CR in a name', latin1('GET / HTTP/1.1\r\nHost: a\r\nX\r-A: b\r\n\r\n'), false);
  other('space before colon', 'GET / HTTP/1.1', ['Host: a', 'X-A : b']);
  other('HTAB before colon', 'GET / HTTP/1.1', ['Host: a', 'X-A\t: b']);
  other('space before colon in Host', 'GET / HTTP/1.1', ['Host : a']);
  other('empty name', 'GET / HTTP/1.1', ['Host: a', ': b']);
  other('colon only', 'GET / HTTP/1.1', ['Host: a', ':']);
  other('no colon', 'GET / HTTP/1.1', ['Host: a', 'X-A b']);
  other('name only', 'GET / HTTP/1.1', ['Host: a', 'X-A']);
  other('space in name', 'GET / HTTP/1.1', ['Host: a', 'X A: b']);

  // ---- Host ----
  other('no Host', 'GET / HTTP/1.1', ['User-Agent: test/1.0']);
  other('no field lines', 'GET / HTTP/1.1', []);
  other('two Host fields', 'GET / HTTP/1.1', ['Host: a', 'Host: b']);
  other('two Host fields, same value', 'GET / HTTP/1.1', ['Host: a', 'host: a']);

  // ---- body and protocol switch ----
  for (const value of ['chunked', 'identity', 'gzip, chunked', '']) {
    other(`Transfer-Encoding: ${value}`, 'POST / HTTP/1.1', ['Host: a', `Transfer-Encoding: ${value}`]);
  }
  other('transfer-encoding lowercase', 'GET / HTTP/1.1', ['Host: a', 'transfer-encoding: chunked']);
  other('Transfer-Encoding with Content-Length: 0', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0', 'Transfer-Encoding: chunked']);
  for (const value of ['100-continue', 'foo', '']) other(`Expect: ${value}`, 'PUT / HTTP/1.1', ['Host: a', `Expect: ${value}`]);
  other('Upgrade with Connection: Upgrade', 'GET /ws HTTP/1.1', ['Host: a', 'Connection: Upgrade', 'Upgrade: websocket']);
  other('Upgrade alone', 'GET / HTTP/1.1', ['Host: a', 'Upgrade: h2c']);
  other('UPGRADE empty', 'GET / HTTP/1.1', ['Host: a', 'UPGRADE:']);
  for (const value of ['upgrade', 'Upgrade', 'keep-alive, Upgrade', 'UPGRADE,close']) {
    other(`Connection: ${value}`, 'GET / HTTP/1.1', ['Host: a', `Connection: ${value}`]);
  }
  for (const value of ['close x', ',close', 'close,', '"close"', 'close;q=1', '', 'a,,b', 'close\t,']) {
    other(`unclean Connection ${JSON.stringify(value)}`, 'GET / HTTP/1.1', ['Host: a', `Connection: ${value}`]);
  }
  for (const value of ['close', 'keep-alive']) other(`Proxy-Connection: ${value}`, 'GET / HTTP/1.1', ['Host: a', `Proxy-Connection: ${value}`]);

  // ---- Content-Length forms ----
  for (const value of ['1', '5', '00', '+0', '-0', '0x0', '', '0, 0', '0,0', '1e0', '0 0', '\xb0']) {
    other(`Content-Length ${JSON.stringify(value)}`, 'POST / HTTP/1.1', ['Host: a', `Content-Length: ${value}`]);
  }
  add('Content-Length: 5 with its body', latin1('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello'), false);
  other('two Content-Length: 0', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0', 'Content-Length: 0']);
  other('Content-Length 0 and 1', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0', 'content-length: 1']);
  other('space before Content-Length colon', 'POST / HTTP/1.1', ['Host: a', 'Content-Length : 0']);

  // ---- incomplete heads (node gets EOF after them) ----
  add('no empty line', latin1('GET / HTTP/1.1\r\nHost: a\r\n'), false);
  add('half an empty line', latin1('GET / HTTP/1.1\r\nHost: a\r\n\r'), false);

  // ---- systematic mutations of one simple head ----
  const base = head('GET /p?q=1 HTTP/1.1', ['Host: a.example', 'Accept: */*', 'Connection: close']);
  const awkward = [0x00, 0x09, 0x0a, 0x0d, 0x20, 0x2c, 0x3a, 0x23, 0x7f, 0x80, 0xff];
  for (let i = 0; i < base.length; i++) {
    for (const b of awkward) {
      if (base[i] === b) continue;
      const bytes = Buffer.from(base);
      bytes[i] = b;
      add(`byte ${i} replaced by 0x${hex(b)}`, bytes, undefined);
    }
    add(`byte ${i} deleted`, Buffer.concat([base.subarray(0, i), base.subarray(i + 1)]), undefined);
    add(`byte ${i} doubled`, Buffer.concat([base.subarray(0, i + 1), base.subarray(i)]), undefined);
  }
  return cases;
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}
