/**
 * The generated part of the request differential test's corpus: whole request messages (head and
 * body) from a seeded random generator, so every run sends the same thousands of cases. Each
 * message is assembled from parts, most of them valid and each with a small chance of a fault:
 *
 * - request line: methods node knows and others, every target form, versions from `HTTP/1.0` to
 *   `HTTP/2.0` and malformed ones, doubled or tabbed separators, bare LF / bare CR line ends;
 * - fields: Host, ordinary fields with OWS, obs-text, empty values; Connection (close,
 *   keep-alive, upgrade), Upgrade, Expect; faults: whitespace before the colon, obs-fold, controls
 *   in names and values;
 * - framing: none, Content-Length (valid, signed, listed, repeated equal or different),
 *   Transfer-Encoding (chunked in any case, with other codings, repeated, in HTTP/1.0, with
 *   Content-Length);
 * - bodies: Content-Length bodies of any bytes, shorter or longer than announced; chunked bodies of
 *   0–3 chunks with hex sizes in any case and leading zeros, valid and invalid extensions, bad sizes,
 *   a bare LF or a missing CRLF after the data, trailers valid and not;
 * - then: sometimes a second message pipelined after the first, sometimes the bytes cut short, and
 *   sometimes one byte replaced by an awkward one.
 *
 * Each case also gets the offsets where our side splits the bytes into reads (node gets them at
 * once: its parser is incremental too, and TCP would merge the writes anyway).
 */
import { seededRandom } from '../helpers/seeded-random.js';

export interface GeneratedCase {
  readonly name: string;
  readonly bytes: Buffer;
  /** Offsets into `bytes` where the test cuts them into separate reads for our parser. */
  readonly cuts: readonly number[];
}


type Random = () => number;

const pick = <T>(r: Random, items: readonly T[]): T => items[Math.floor(r() * items.length)] as T;
const chance = (r: Random, p: number): boolean => r() < p;

const METHODS = ['GET', 'GET', 'GET', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'];
const ODD_METHODS = ['TRACE', 'PROPFIND', 'M-SEARCH', 'MKCOL', 'PURGE', 'get', 'Get', 'FOO', 'G(T', 'GET\x00', 'CONNECT'];
const TARGETS = ['/', '/a/b?x=1&y=2', '/index.html', "/~u/it's(1)*;p=1", '/%41%2F', '/a/../b', '/?', '//x'];
const ODD_TARGETS = ['*', 'http://example.com/a?b', 'example.com:443', '/a#frag', '/caf\xe9', '/a\x01b', '/a\x7f', '/"q"', '/|^{}`', '/a\\b', 'a/b', '/a b'];
const VERSIONS = ['HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0'];
const ODD_VERSIONS = ['HTTP/1.2', 'HTTP/1.9', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/2', 'http/1.1', 'HTTP/1', 'HTTP/1.10', 'HTTP/1.1x', 'HTTPS/1.1'];
const VALUES = ['v', 'a b  c', '', ' \t', 'caf\xe9 \x80\xff', '"quoted, with comma"', 'x=1; y=2', ':colon', '\ta\t'];
const ODD_VALUES = ['a\x00b', 'a\x7f', '\x1b[0m', 'a\rb', 'a\x01'];
const NAMES = ['Accept', 'User-Agent', 'X-Request-Id', 'Cookie', 'cookie', 'Cache-Control', 'x-a', "!#$%&'*+-.^_`|~"];
const ODD_NAMES = ['X A', 'X(A)', 'X-\xe9', 'X\x00', ''];
const CONNECTIONS = ['close', 'keep-alive', 'Keep-Alive', 'CLOSE', 'keep-alive, close', 'foo, close', 'te', 'Upgrade', 'keep-alive, upgrade', 'closex', ',close,'];
const TE_VALUES = ['chunked', 'chunked', 'chunked', 'Chunked', 'CHUNKED', ' chunked ', 'gzip, chunked', 'chunked, gzip', 'identity', 'gzip', 'chunked, chunked', 'chunked;q=1', '', ', chunked', 'xchunked'];
const CL_FAULTS = ['+5', '-1', '0x5', '5, 5', '5,5', '1e1', 'abc', '', ' ', '9007199254740992', '5 5'];
const EXTENSIONS = [';a', ';a=b', ';a="q \\"x\\" ;c"', ';a=b;c', ';name=value;x="y"'];
const ODD_EXTENSIONS = [' ;a', '; a', ';a =b', ';a=', ';=b', ';', ';a="unterminated', ';a="\x01"', ';a\rb'];
const TRAILERS = ['X-Checksum: abc', 'x-t:\tspaced ', 'Server-Timing: db;dur=1'];
const ODD_TRAILERS = ['X-T : a', ' folded', 'X-T: a\x00', 'X-T', 'X T: a'];
const AWKWARD_BYTES = [0x00, 0x09, 0x0a, 0x0d, 0x20, 0x2c, 0x3a, 0x3b, 0x30, 0x46, 0x7f, 0x80, 0xff];

/** `count` bytes of body: letters mostly, sometimes CR, LF, NUL or high bytes. */
function bodyBytes(r: Random, count: number): string {
  let text = '';
  for (let i = 0; i < count; i++) text += chance(r, 0.1) ? pick(r, ['\r', '\n', '\r\n', '\x00', '\xff', '0']) : String.fromCharCode(0x61 + Math.floor(r() * 26));
  return text.slice(0, count);
}

/** One message: head and body, latin1 text. `fault` is the chance of each part being wrong. */
function message(r: Random, fault: number): string {
  const eol = (): string => (chance(r, fault / 6) ? pick(r, ['\n', '\r', '\r\r\n']) : '\r\n');
  const version = chance(r, fault) ? pick(r, ODD_VERSIONS) : pick(r, VERSIONS);
  const method = chance(r, fault) ? pick(r, ODD_METHODS) : pick(r, METHODS);
  const target = chance(r, fault) ? pick(r, ODD_TARGETS) : pick(r, TARGETS);
  const sp = (): string => (chance(r, fault / 6) ? pick(r, ['  ', '\t', '']) : ' ');
  let text = chance(r, 0.03) ? pick(r, ['\r\n', '\n', '\r\n\r\n']) : ''; // empty lines before the request line
  text += chance(r, fault / 10) ? `${method}${sp()}${target}${eol()}` : `${method}${sp()}${target}${sp()}${version}${eol()}`;

  const lines: string[] = [];
  if (chance(r, 0.9)) lines.push(`${pick(r, ['Host', 'host', 'HOST'])}: ${pick(r, ['example.com', 'a:8080', ''])}`);
  const ordinary = Math.floor(r() * 4);
  for (let i = 0; i < ordinary; i++) {
    const name = chance(r, fault / 3) ? pick(r, ODD_NAMES) : pick(r, NAMES);
    const value = chance(r, fault / 3) ? pick(r, ODD_VALUES) : pick(r, VALUES);
    const colon = chance(r, fault / 6) ? pick(r, [' :', '\t:', '']) : ':';
    lines.push(`${name}${colon}${pick(r, [' ', '', '  ', '\t'])}${value}`);
    if (chance(r, fault / 6)) lines.push(pick(r, [' folded', '\tfolded']));
  }
  if (chance(r, 0.25)) lines.push(`${pick(r, ['Connection', 'connection'])}: ${pick(r, CONNECTIONS)}`);
  if (chance(r, 0.06)) lines.push(`Upgrade: ${pick(r, ['websocket', 'h2c'])}`);
  if (chance(r, 0.06)) lines.push(`Expect: ${pick(r, ['100-continue', '100-Continue', 'foo'])}`);
  if (chance(r, 0.03)) lines.push(`Proxy-Connection: ${pick(r, ['close', 'keep-alive'])}`);

  // framing and body
  let body = '';
  const framing = r();
  if (framing < 0.35) {
    const length = Math.floor(r() * 20);
    const value = chance(r, fault) ? pick(r, CL_FAULTS) : `${pick(r, ['', ' ', '\t'])}${chance(r, 0.1) ? '0' : ''}${length}${pick(r, ['', ' '])}`;
    lines.push(`${pick(r, ['Content-Length', 'content-length'])}: ${value}`);
    if (chance(r, fault / 2)) lines.push(`Content-Length: ${chance(r, 0.5) ? value.trim() : length + 1}`);
    if (chance(r, fault / 3)) lines.push('Transfer-Encoding: chunked');
    const sent = chance(r, fault / 2) ? Math.max(0, length + pick(r, [-2, -1, 1, 3])) : length;
    body = bodyBytes(r, sent);
  } else if (framing < 0.7) {
    lines.push(`${pick(r, ['Transfer-Encoding', 'transfer-encoding'])}: ${chance(r, fault) ? pick(r, TE_VALUES) : 'chunked'}`);
    if (chance(r, fault / 3)) lines.push(`Transfer-Encoding: ${pick(r, ['chunked', 'gzip'])}`);
    if (chance(r, fault / 3)) lines.push(`Content-Length: ${Math.floor(r() * 10)}`);
    body = chunkedBody(r, fault);
  }
  // shuffle the fields a little: framing fields are not always last
  if (lines.length > 1 && chance(r, 0.5)) {
    const i = Math.floor(r() * lines.length);
    const j = Math.floor(r() * lines.length);
    [lines[i], lines[j]] = [lines[j] as string, lines[i] as string];
  }
  for (const line of lines) text += `${line}${eol()}`;
  return `${text}${eol()}${body}`;
}

/** A chunked body: 0–3 chunks, the last chunk, trailers, each part possibly wrong. */
function chunkedBody(r: Random, fault: number): string {
  let text = '';
  const chunks = Math.floor(r() * 4);
  const eol = (): string => (chance(r, fault / 4) ? pick(r, ['\n', '', '\r', 'x\r\n']) : '\r\n');
  const size = (n: number): string => {
    if (chance(r, fault / 3)) return pick(r, ['g', '-1', '', '0x5', '00000000000000001', ' 5', '5 ', '+5', 'ffffffffffffffff']);
    const hex = n.toString(16);
    return `${chance(r, 0.1) ? '00' : ''}${chance(r, 0.5) ? hex.toUpperCase() : hex}`;
  };
  const extension = (): string => (chance(r, 0.2) ? (chance(r, fault) ? pick(r, ODD_EXTENSIONS) : pick(r, EXTENSIONS)) : '');
  for (let i = 0; i < chunks; i++) {
    const n = 1 + Math.floor(r() * 20);
    const sent = chance(r, fault / 4) ? Math.max(0, n + pick(r, [-1, 1])) : n;
    text += `${size(n)}${extension()}${eol()}${bodyBytes(r, sent)}${eol()}`;
  }
  text += `${chance(r, 0.1) ? '000' : '0'}${extension()}${eol()}`;
  if (chance(r, 0.2)) {
    const count = 1 + Math.floor(r() * 2);
    for (let i = 0; i < count; i++) text += `${chance(r, fault) ? pick(r, ODD_TRAILERS) : pick(r, TRAILERS)}${eol()}`;
  }
  return `${text}${eol()}`;
}

/**
 * `count` generated cases from `seed`. A quarter are pipelined pairs; about one in ten is cut short
 * and one in ten has a byte replaced.
 */
export function generateRequests(seed: number, count: number): GeneratedCase[] {
  const r = seededRandom(seed);
  const cases: GeneratedCase[] = [];
  for (let index = 0; index < count; index++) {
    const fault = pick(r, [0, 0.02, 0.05, 0.15]);
    let text = message(r, fault);
    let name = `#${index}`;
    if (chance(r, 0.25)) {
      text += message(r, fault);
      name += ' pipelined pair';
    }
    if (chance(r, 0.1)) {
      text = text.slice(0, Math.floor(r() * text.length));
      name += ' cut short';
    }
    const bytes = Buffer.from(text, 'latin1');
    if (bytes.length > 0 && chance(r, 0.1)) {
      const at = Math.floor(r() * bytes.length);
      bytes[at] = pick(r, AWKWARD_BYTES);
      name += ` byte ${at} replaced`;
    }
    const cuts = Array.from({ length: Math.floor(r() * 5) }, () => Math.floor(r() * (bytes.length + 1))).sort((a, b) => a - b);
    cases.push({ name, bytes, cuts });
  }
  return cases;
}
