/**
 * The hand-written part of the request differential test's corpus (test/wire/request-generator.ts
 * adds generated messages): request heads, each with a name.
 * - valid heads: every method node knows, every target character class, OWS trimming, obs-text
 *   values, every tchar in a name, duplicate fields, Connection lists, `Content-Length: 0`, names
 *   that merely resemble the special ones, a 101-field head and heads near 16384 bytes;
 * - one or more violations of each rule of src/wire/request-parser.ts (request line, target, field
 *   syntax, body and upgrade headers, Content-Length and Transfer-Encoding forms);
 * - systematic mutations of one head: every byte replaced by each of a set of awkward bytes,
 *   every byte deleted, every byte doubled.
 * Whether a case is valid is left to the oracle (node:http) and the differential rule.
 */

export interface RequestCase {
  readonly name: string;
  readonly bytes: Buffer;
}

/** The head `requestLine CRLF *(line CRLF) CRLF`, latin1. */
export function head(requestLine: string, lines: readonly string[]): Buffer {
  let text = `${requestLine}\r\n`;
  for (const line of lines) text += `${line}\r\n`;
  return Buffer.from(`${text}\r\n`, 'latin1');
}

export const METHODS = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];
/** pchar / `/` / `?` (RFC 3986 §3.3): the target bytes every origin server takes. */
export const TARGET_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/?%";
/** Every tchar (RFC 9110 5.6.2). */
export const TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";

const BASE = ['Host: example.com', 'User-Agent: test/1.0', 'Accept: */*'];

export function requestCorpus(): RequestCase[] {
  const cases: RequestCase[] = [];
  const add = (name: string, bytes: Buffer): void => {
    cases.push({ name, bytes });
  };
  const line = (name: string, requestLine: string, lines: readonly string[]): void => add(name, head(requestLine, lines));
  const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');

  // ---- valid heads ----
  const targets = ['/', '/a/b?x=1&y=2', `/${TARGET_CHARS}`, '//double//slash', '/%zz?%', '/?', '/a?b?c/d', '/@:;=,', "/~user/it's(1)*"];
  for (const method of METHODS) for (const target of targets) line(`${method} ${target}`, `${method} ${target} HTTP/1.1`, BASE);
  line('no OWS', 'GET / HTTP/1.1', ['Host:example.com']);
  line('OWS trimmed both sides', 'GET / HTTP/1.1', ['Host:   example.com  ']);
  line('HTAB OWS trimmed', 'GET / HTTP/1.1', ['Host:\texample.com\t', 'X-A: \t a \t']);
  line('inner whitespace kept', 'GET / HTTP/1.1', ['Host: a', 'X-A: a \t b  c']);
  line('empty value', 'GET / HTTP/1.1', ['Host: a', 'X-Empty:']);
  line('whitespace-only value', 'GET / HTTP/1.1', ['Host: a', 'X-Empty: \t ']);
  line('empty Host value', 'GET / HTTP/1.1', ['Host:']);
  line('obs-text value', 'GET / HTTP/1.1', ['Host: a', 'X-A: caf\xe9 \x80\xff\xa0']);
  let vchars = '';
  for (let b = 0x21; b <= 0x7e; b++) vchars += String.fromCharCode(b);
  line('every VCHAR in a value', 'GET / HTTP/1.1', ['Host: a', `X-A: ${vchars}`]);
  line('value starting with a colon', 'GET / HTTP/1.1', ['Host: a', 'X-A:: b']);
  line('every tchar in a name', 'GET / HTTP/1.1', ['Host: a', `${TOKEN_CHARS}: v`]);
  line('lowercase host', 'GET / HTTP/1.1', ['host: a']);
  line('uppercase HOST', 'GET / HTTP/1.1', ['HOST: a']);
  line('Host not first', 'GET / HTTP/1.1', ['Accept: */*', 'Host: a']);
  line('duplicates kept in order', 'GET / HTTP/1.1', ['Host: a', 'Cookie: a=1', 'X-B: 1', 'Cookie: b=2', 'cookie: c=3']);
  for (const value of ['close', 'keep-alive', 'keep-alive, close', 'Close', 'CLOSE', 'foo,close', 'close ,\tfoo', 'keep-alive,close', 'closex', 'x-close', 'TE', 'upgrades', 'keep-alive , te']) {
    line(`Connection: ${value}`, 'GET / HTTP/1.1', ['Host: a', `Connection: ${value}`]);
  }
  line('two Connection headers', 'GET / HTTP/1.1', ['Host: a', 'Connection: keep-alive', 'connection: close']);
  line('Content-Length: 0', 'POST /form HTTP/1.1', ['Host: a', 'Content-Length: 0']);
  line('content-length:0', 'PUT /x HTTP/1.1', ['Host: a', 'content-length:0']);
  line('Content-Length with OWS', 'DELETE /x HTTP/1.1', ['Host: a', 'Content-Length: \t0 ']);
  line('look-alike names', 'GET / HTTP/1.1', [
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
  line('browser-like head', 'GET /index.html?lang=en HTTP/1.1', [
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
  line('100 fields', 'GET / HTTP/1.1', fields(100));
  line('101 fields', 'GET / HTTP/1.1', fields(101));
  // heads of about 16384 bytes: both parsers' limits are near (the differential skips those they count differently)
  const sized = (total: number): Buffer => {
    const fixed = head('GET / HTTP/1.1', ['Host: a', 'X-Big: ']).length;
    return head('GET / HTTP/1.1', ['Host: a', `X-Big: ${'b'.repeat(total - fixed)}`]);
  };
  add('head of exactly 16384 bytes', sized(16384));
  add('head of 16385 bytes', sized(16385));

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
  for (const requestLine of requestLines) line(`request line ${JSON.stringify(requestLine)}`, requestLine, BASE);
  add('PRI preface', latin1('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
  add('bare LF after request line', latin1('GET / HTTP/1.1\nHost: a\r\n\r\n'));
  add('CR CR LF after request line', latin1('GET / HTTP/1.1\r\r\nHost: a\r\n\r\n'));
  add('empty line before request line', latin1('\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n'));
  add('request line only', latin1('GET / HTTP/1.1\r\n\r\n'));

  // ---- every byte outside the target set, inside a target ----
  for (let b = 0; b < 256; b++) {
    if (TARGET_CHARS.includes(String.fromCharCode(b))) continue;
    add(`target byte 0x${hex(b)}`, head(`GET /a${String.fromCharCode(b)}b?c HTTP/1.1`, BASE));
  }

  // ---- every byte outside tchar and ':', inside a name ----
  for (let b = 0; b < 256; b++) {
    if (TOKEN_CHARS.includes(String.fromCharCode(b)) || b === 0x3a) continue;
    add(`name byte 0x${hex(b)}`, head('GET / HTTP/1.1', ['Host: a', `X-Na${String.fromCharCode(b)}me: v`]));
  }

  // ---- every CTL (but HTAB) and DEL in a value: at its start, middle and end ----
  for (let b = 0; b < 0x80; b++) {
    if ((b >= 0x20 && b !== 0x7f) || b === 0x09) continue;
    const c = String.fromCharCode(b);
    for (const [where, value] of [['start', `${c}v`], ['middle', `v${c}v`], ['end', `v${c}`]] as const) {
      add(`value byte 0x${hex(b)} at ${where}`, head('GET / HTTP/1.1', ['Host: a', `X-A: ${value}`]));
    }
  }

  // ---- field line structure ----
  line('obs-fold with SP', 'GET / HTTP/1.1', ['Host: a', 'X-A: a', ' b']);
  line('obs-fold with HTAB', 'GET / HTTP/1.1', ['Host: a', 'X-A: a', '\tb']);
  line('obs-fold on the first field line', 'GET / HTTP/1.1', [' Host: a']);
  line('obs-fold of Host', 'GET / HTTP/1.1', ['Host:', ' a']);
  add('bare LF after a field line', latin1('GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n'));
  add('bare LF in the end of head', latin1('GET / HTTP/1.1\r\nHost: a\r\n\n\r\n'));
  add('LF LF end of head', latin1('GET / HTTP/1.1\r\nHost: a\n\n'));
  add('bare CR in a value', latin1('GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n'));
  add('bare CR at a value end', latin1('GET / HTTP/1.1\r\nHost: a\r\nX-A: a\r\r\n\r\n'));
  add('CR in a name', latin1('GET / HTTP/1.1\r\nHost: a\r\nX\r-A: b\r\n\r\n'));
  line('space before colon', 'GET / HTTP/1.1', ['Host: a', 'X-A : b']);
  line('HTAB before colon', 'GET / HTTP/1.1', ['Host: a', 'X-A\t: b']);
  line('space before colon in Host', 'GET / HTTP/1.1', ['Host : a']);
  line('empty name', 'GET / HTTP/1.1', ['Host: a', ': b']);
  line('colon only', 'GET / HTTP/1.1', ['Host: a', ':']);
  line('no colon', 'GET / HTTP/1.1', ['Host: a', 'X-A b']);
  line('name only', 'GET / HTTP/1.1', ['Host: a', 'X-A']);
  line('space in name', 'GET / HTTP/1.1', ['Host: a', 'X A: b']);

  // ---- Host ----
  line('no Host', 'GET / HTTP/1.1', ['User-Agent: test/1.0']);
  line('no field lines', 'GET / HTTP/1.1', []);
  line('two Host fields', 'GET / HTTP/1.1', ['Host: a', 'Host: b']);
  line('two Host fields, same value', 'GET / HTTP/1.1', ['Host: a', 'host: a']);

  // ---- body and protocol switch ----
  for (const value of ['chunked', 'identity', 'gzip, chunked', '']) {
    line(`Transfer-Encoding: ${value}`, 'POST / HTTP/1.1', ['Host: a', `Transfer-Encoding: ${value}`]);
  }
  line('transfer-encoding lowercase', 'GET / HTTP/1.1', ['Host: a', 'transfer-encoding: chunked']);
  line('Transfer-Encoding with Content-Length: 0', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0', 'Transfer-Encoding: chunked']);
  for (const value of ['100-continue', 'foo', '']) line(`Expect: ${value}`, 'PUT / HTTP/1.1', ['Host: a', `Expect: ${value}`]);
  line('Upgrade with Connection: Upgrade', 'GET /ws HTTP/1.1', ['Host: a', 'Connection: Upgrade', 'Upgrade: websocket']);
  line('Upgrade alone', 'GET / HTTP/1.1', ['Host: a', 'Upgrade: h2c']);
  line('UPGRADE empty', 'GET / HTTP/1.1', ['Host: a', 'UPGRADE:']);
  for (const value of ['upgrade', 'Upgrade', 'keep-alive, Upgrade', 'UPGRADE,close']) {
    line(`Connection: ${value}`, 'GET / HTTP/1.1', ['Host: a', `Connection: ${value}`]);
  }
  for (const value of ['close x', ',close', 'close,', '"close"', 'close;q=1', '', 'a,,b', 'close\t,']) {
    line(`unclean Connection ${JSON.stringify(value)}`, 'GET / HTTP/1.1', ['Host: a', `Connection: ${value}`]);
  }
  for (const value of ['close', 'keep-alive']) line(`Proxy-Connection: ${value}`, 'GET / HTTP/1.1', ['Host: a', `Proxy-Connection: ${value}`]);

  // ---- Content-Length forms ----
  for (const value of ['1', '5', '00', '+0', '-0', '0x0', '', '0, 0', '0,0', '1e0', '0 0', '\xb0']) {
    line(`Content-Length ${JSON.stringify(value)}`, 'POST / HTTP/1.1', ['Host: a', `Content-Length: ${value}`]);
  }
  add('Content-Length: 5 with its body', latin1('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello'));
  line('two Content-Length: 0', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0', 'Content-Length: 0']);
  line('Content-Length 0 and 1', 'POST / HTTP/1.1', ['Host: a', 'Content-Length: 0', 'content-length: 1']);
  line('space before Content-Length colon', 'POST / HTTP/1.1', ['Host: a', 'Content-Length : 0']);

  // ---- incomplete heads (node gets EOF after them) ----
  add('no empty line', latin1('GET / HTTP/1.1\r\nHost: a\r\n'));
  add('half an empty line', latin1('GET / HTTP/1.1\r\nHost: a\r\n\r'));

  // ---- systematic mutations of one head ----
  const base = head('GET /p?q=1 HTTP/1.1', ['Host: a.example', 'Accept: */*', 'Connection: close']);
  const awkward = [0x00, 0x09, 0x0a, 0x0d, 0x20, 0x2c, 0x3a, 0x23, 0x7f, 0x80, 0xff];
  for (let i = 0; i < base.length; i++) {
    for (const b of awkward) {
      if (base[i] === b) continue;
      const bytes = Buffer.from(base);
      bytes[i] = b;
      add(`byte ${i} replaced by 0x${hex(b)}`, bytes);
    }
    add(`byte ${i} deleted`, Buffer.concat([base.subarray(0, i), base.subarray(i + 1)]));
    add(`byte ${i} doubled`, Buffer.concat([base.subarray(0, i + 1), base.subarray(i)]));
  }
  return cases;
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}
