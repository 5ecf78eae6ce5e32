/**
 * A seeded generator of raw HTTP/1.x responses for the differential test: valid responses in many
 * shapes (Content-Length, chunked with extensions and trailers, close-delimited, HEAD/204/304, 1xx
 * before the final response, 101 upgrades, latin1 values, optional whitespace), and the same
 * responses with one mutation each, drawn from the ways real upstreams and smuggling attacks break
 * framing (RFC 9112 section 11.2, and the cases llhttp's test suite covers).
 */
import { seededRandom } from './collect-response.js';

export interface CorpusCase {
  readonly id: number;
  /** `valid`, `upgrade`, or the name of the mutation applied. */
  readonly label: string;
  /** True when no mutation was applied: both parsers must accept it, with equal results. */
  readonly isValid: boolean;
  readonly method: 'GET' | 'HEAD';
  /** The request asks for an upgrade (node:http then reports a 101 through its `upgrade` event). */
  readonly isUpgrade: boolean;
  /** The bytes the upstream sends before closing the connection. */
  readonly raw: Buffer;
}

interface Chunk {
  size: string;
  extension: string;
  data: string;
  /** What follows the data; CRLF unless mutated. */
  end: string;
}

/** A response still in parts, so a mutation can change one part; all strings are latin1. */
interface Draft {
  method: 'GET' | 'HEAD';
  prefix: string; // 1xx responses before the final one
  version: '1.0' | '1.1';
  statusLine: string;
  headers: [string, string][];
  /** How a header line is written: `${name}${separator}${value}`. */
  separators: Map<number, string>;
  framing: 'length' | 'chunked' | 'close' | 'none';
  body: string; // the payload; for chunked, the concatenation of the chunks' data
  chunks: Chunk[];
  lastChunk: string; // `0` plus extensions
  trailers: [string, string][];
  suffix: string; // bytes after the message
}

type Random = () => number;

const HEADER_NAMES = ['Server', 'Date', 'Content-Type', 'Set-Cookie', 'Cache-Control', 'ETag', 'Vary', 'X-Request-Id', 'x-lower', 'X-UPPER', 'Link', 'WWW-Authenticate'];
const TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";

const MUTATIONS: Record<string, (draft: Draft, random: Random) => string | undefined> = {
  'content-length repeated, same value': (d) => withFraming(d, 'length', () => d.headers.push(['Content-Length', String(d.body.length)])),
  'content-length repeated, other value': (d) => withFraming(d, 'length', () => d.headers.push(['content-length', String(d.body.length + 1)])),
  'content-length list': (d) => withFraming(d, 'length', () => setHeader(d, 'Content-Length', `${d.body.length}, ${d.body.length}`)),
  'content-length sign': (d, r) => withFraming(d, 'length', () => setHeader(d, 'Content-Length', `${pick(r, ['+', '-'])}${d.body.length}`)),
  'content-length hex': (d) => withFraming(d, 'length', () => setHeader(d, 'Content-Length', `0x${d.body.length.toString(16)}`)),
  'content-length spaces': (d, r) =>
    withFraming(d, 'length', () => setHeader(d, 'Content-Length', pick(r, [` ${d.body.length}`, `${d.body.length} `, `\t${d.body.length}`, `${d.body.length} 0`, `1 ${d.body.length}`]))),
  'content-length empty': (d) => withFraming(d, 'length', () => setHeader(d, 'Content-Length', '')),
  'content-length huge': (d, r) => withFraming(d, 'length', () => setHeader(d, 'Content-Length', pick(r, ['18446744073709551616', '99999999999999999999', '9007199254740992']))),
  'content-length too short': (d) => withFraming(d, 'length', () => setHeader(d, 'Content-Length', String(Math.max(0, d.body.length - 1)))),
  'transfer-encoding variant': (d, r) =>
    withFraming(d, 'chunked', () =>
      setHeader(d, 'Transfer-Encoding', pick(r, ['chunked, gzip', 'gzip', 'identity', 'xchunked', 'chunkedx', 'Chunked', 'CHUNKED', 'gzip, chunked', 'chunked, chunked', 'chunked,', ',chunked', 'chunked;q=1', 'chunked , gzip', '"chunked"', 'deflate, chunked'])),
    ),
  'transfer-encoding twice': (d, r) => withFraming(d, 'chunked', () => d.headers.push(['Transfer-Encoding', pick(r, ['chunked', 'gzip', 'identity'])])),
  'transfer-encoding with content-length': (d, r) => withFraming(d, 'chunked', () => d.headers.splice(Math.floor(r() * (d.headers.length + 1)), 0, ['Content-Length', String(d.body.length)])),
  'transfer-encoding in HTTP/1.0': (d) => withFraming(d, 'chunked', () => setVersion(d, '1.0')),
  'chunk size invalid': (d, r) =>
    withChunk(d, r, (chunk) => (chunk.size = pick(r, ['g', '-1', `0x${chunk.size}`, ` ${chunk.size}`, `${chunk.size} `, `${chunk.size}\t`, `+${chunk.size}`, '', 'fffffffffffffffff', '1000000000000000000']))),
  'chunk size leading zeros': (d, r) => withChunk(d, r, (chunk) => (chunk.size = '0'.repeat(1 + Math.floor(r() * 20)) + chunk.size)),
  'chunk size mismatch': (d, r) => withChunk(d, r, (chunk) => (chunk.size = (parseInt(chunk.size, 16) + pick(r, [1, -1, 2])).toString(16))),
  'chunk extension invalid': (d, r) => withChunk(d, r, (chunk) => (chunk.extension = pick(r, [' ;a=b', ';a = b', ';', ';a=', ';a="b', ';a="\x01"', ';=b', ';a=b c', ';a="b"c', ';a;', ';a=\xe9']))),
  'chunk data terminator': (d, r) => withChunk(d, r, (chunk) => (chunk.end = pick(r, ['', '\n', '\r', 'X\r\n', '\r\r\n', ' \r\n']))),
  'last chunk missing': (d) => withFraming(d, 'chunked', () => (d.lastChunk = '')),
  'trailer invalid': (d, r) => withFraming(d, 'chunked', () => d.trailers.push(pick(r, [['X-T', 'a\x00b'], ['X T', 'v'], ['X-T', 'a\rb'], ['', 'v']] as [string, string][]))),
  'bare LF': (d, r) => replaceLineEnd(serialize(d), r, '\n'),
  'bare CR': (d, r) => replaceLineEnd(serialize(d), r, '\r'),
  'obs-fold': (d, r) => withHeader(d, r, (i) => ((d.headers[i] as [string, string])[1] += pick(r, ['\r\n folded', '\r\n\tfolded', '\r\n ']))),
  'whitespace before colon': (d, r) => withHeader(d, r, (i) => d.separators.set(i, pick(r, [' : ', '\t: ', ' :']))),
  'invalid header name': (d, r) =>
    withHeader(d, r, (i) => {
      const header = d.headers[i] as [string, string];
      const at = Math.floor(r() * (header[0].length + 1));
      header[0] = header[0].slice(0, at) + pick(r, ['(', ')', '@', ' ', '\xe9', '/', '"', '{', ',', '\x00', '\x7f', '\x01', '[', '?', '=']) + header[0].slice(at);
    }),
  'empty header name': (d) => void d.headers.unshift(['', 'value']),
  'header without colon': (d, r) => withHeader(d, r, (i) => d.separators.set(i, ' ')),
  'control character in value': (d, r) =>
    withHeader(d, r, (i) => {
      const header = d.headers[i] as [string, string];
      const at = Math.floor(r() * (header[1].length + 1));
      header[1] = header[1].slice(0, at) + pick(r, ['\x00', '\x01', '\x08', '\x0b', '\x0c', '\x1b', '\x1f', '\x7f']) + header[1].slice(at);
    }),
  'non-ASCII in value': (d, r) => void d.headers.push(['X-Latin', randomString(r, 1 + Math.floor(r() * 10), (x) => String.fromCharCode(0x80 + Math.floor(x() * 128)))]),
  'huge head': (d, r) => {
    const head = serialize({ ...d, headers: [...d.headers, ['X-Big', '']], framing: 'none', body: '', suffix: '' });
    const want = 16384 + Math.floor(r() * 250) - 150; // around node's limit
    d.headers.push(['X-Big', 'b'.repeat(Math.max(1, want - head.length))]);
  },
  'status line variant': (d, r) =>
    void (d.statusLine = pick(r, [
      `HTTP/${d.version} 200`,
      `HTTP/${d.version} 200 `,
      'HTTP/2.0 200 OK',
      'HTTP/1.2 200 OK',
      'HTTP/0.9 200 OK',
      'http/1.1 200 OK',
      'HTTP/1.1 20 OK',
      'HTTP/1.1 2000 OK',
      ' HTTP/1.1 200 OK',
      'HTTP/1.1  200 OK',
      'HTTP/1.1 099 Low',
      'HTTP/1.1 600 High',
      'HTTP/1.1 200 O\x01K',
      'HTTP/1.1 200 OK\x7f',
      'HTTP/1.1 200 \xc9t\xe9',
      'HTTP/1.1\t200 OK',
      'HTTP/1.1 2x0 OK',
      'ICE/1.1 200 OK',
      'RTSP/1.0 200 OK',
      'HTTP/11 200 OK',
    ])),
  'leading empty line': (d) => `\r\n${serialize(d)}`,
  'truncated': (d, r) => {
    const raw = serialize(d);
    return raw.slice(0, Math.floor(r() * raw.length));
  },
  'trailing garbage': (d, r) => void (d.suffix = pick(r, ['GARBAGE', '\r\n', 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', 'x'])),
};

/**
 * Generates `validCount` valid responses, `mutatedCount` mutated ones and `upgradeCount` 101
 * upgrades, from `seed`. The same seed gives the same corpus.
 */
export function generateResponseCorpus(seed: number, validCount: number, mutatedCount: number, upgradeCount: number): CorpusCase[] {
  const random = seededRandom(seed);
  const cases: CorpusCase[] = [];
  const add = (label: string, isValid: boolean, method: 'GET' | 'HEAD', isUpgrade: boolean, text: string): void => {
    cases.push({ id: cases.length, label, isValid, method, isUpgrade, raw: Buffer.from(text, 'latin1') });
  };
  for (let i = 0; i < validCount; i++) {
    const draft = validDraft(random);
    add('valid', true, draft.method, false, serialize(draft));
  }
  const names = Object.keys(MUTATIONS);
  for (let i = 0; i < mutatedCount; i++) {
    const name = names[i % names.length] as string;
    for (;;) {
      const draft = validDraft(random);
      const mutated = (MUTATIONS[name] as (d: Draft, r: Random) => string | undefined)(draft, random);
      if (mutated === NOT_APPLICABLE) continue; // this draft has no part the mutation can change; draw again
      add(name, false, draft.method, false, mutated ?? serialize(draft));
      break;
    }
  }
  for (let i = 0; i < upgradeCount; i++) {
    const rest = randomString(random, Math.floor(random() * 20), (r) => String.fromCharCode(Math.floor(r() * 256)));
    const extra = random() < 0.5 ? `Sec-WebSocket-Accept: ${randomString(random, 8, token)}\r\n` : '';
    add('upgrade', true, 'GET', true, `HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n${extra}\r\n${rest}`);
  }
  return cases;
}

const NOT_APPLICABLE = '\u0000not applicable';

function validDraft(r: Random): Draft {
  const method = r() < 0.1 ? 'HEAD' : 'GET';
  const version = r() < 0.85 ? '1.1' : '1.0';
  const status = pick(r, [200, 200, 200, 201, 206, 299, 301, 302, 400, 401, 404, 418, 500, 503, 599, 204, 304]);
  const reason = pick(r, ['OK', 'Created', 'Whatever You Like', '', 'Not Found', 'caf\xe9', 'tab\there']);
  const draft: Draft = {
    method,
    prefix: '',
    version,
    statusLine: `HTTP/${version} ${status} ${reason}`,
    headers: [],
    separators: new Map(),
    framing: 'close',
    body: randomString(r, Math.floor(r() * 120), (x) => String.fromCharCode(Math.floor(x() * 256))),
    chunks: [],
    lastChunk: '0',
    trailers: [],
    suffix: '',
  };
  if (r() < 0.1) draft.prefix += 'HTTP/1.1 100 Continue\r\n\r\n';
  if (r() < 0.1) draft.prefix += 'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n';
  for (let i = Math.floor(r() * 7); i > 0; i--) draft.headers.push([pick(r, HEADER_NAMES), headerValue(r)]);
  if (r() < 0.3) draft.headers.push(['Connection', pick(r, ['close', 'keep-alive', 'Keep-Alive', 'close, x-foo'])]);

  const isBodiless = method === 'HEAD' || status === 204 || status === 304;
  const framing = pick(r, version === '1.1' ? ['length', 'length', 'chunked', 'chunked', 'close'] : ['length', 'length', 'close']);
  const at = (): number => Math.floor(r() * (draft.headers.length + 1));
  if (framing === 'length') {
    draft.headers.splice(at(), 0, [pick(r, ['Content-Length', 'content-length', 'CONTENT-LENGTH']), String(draft.body.length)]);
    draft.framing = 'length';
  } else if (framing === 'chunked') {
    draft.headers.splice(at(), 0, [pick(r, ['Transfer-Encoding', 'transfer-encoding']), pick(r, ['chunked', 'chunked', 'Chunked'])]);
    draft.framing = 'chunked';
    let rest = draft.body;
    while (rest.length > 0) {
      const size = 1 + Math.floor(r() * Math.min(rest.length, 50));
      const hex = size.toString(16);
      draft.chunks.push({ size: r() < 0.3 ? hex.toUpperCase() : hex, extension: chunkExtension(r), data: rest.slice(0, size), end: '\r\n' });
      rest = rest.slice(size);
    }
    draft.lastChunk = `0${chunkExtension(r)}`;
    for (let i = Math.floor(r() * 3); i > 0; i--) draft.trailers.push([pick(r, ['X-Checksum', 'Server-Timing', 'x-t']), headerValue(r)]);
  }
  if (isBodiless) {
    draft.framing = 'none';
    draft.body = '';
  }
  return draft;
}

/** The draft as the bytes an upstream sends (latin1 string). */
function serialize(d: Draft): string {
  let text = `${d.prefix}${d.statusLine}\r\n`;
  d.headers.forEach(([name, value], i) => (text += `${name}${d.separators.get(i) ?? ': '}${value}\r\n`));
  text += '\r\n';
  if (d.framing === 'length' || d.framing === 'close') text += d.body;
  if (d.framing === 'chunked') {
    for (const chunk of d.chunks) text += `${chunk.size}${chunk.extension}\r\n${chunk.data}${chunk.end}`;
    if (d.lastChunk !== '') {
      text += `${d.lastChunk}\r\n`;
      for (const [name, value] of d.trailers) text += `${name}: ${value}\r\n`;
      text += '\r\n';
    }
  }
  return text + d.suffix;
}

// ---- mutation helpers: each returns NOT_APPLICABLE when the draft lacks what it changes ----------

function withFraming(d: Draft, framing: Draft['framing'], change: () => unknown): string | undefined {
  if (d.framing !== framing) return NOT_APPLICABLE;
  change();
  return undefined;
}

function withChunk(d: Draft, r: Random, change: (chunk: Chunk) => unknown): string | undefined {
  if (d.framing !== 'chunked' || d.chunks.length === 0) return NOT_APPLICABLE;
  change(pick(r, d.chunks));
  return undefined;
}

function withHeader(d: Draft, r: Random, change: (index: number) => unknown): string | undefined {
  if (d.headers.length === 0) return NOT_APPLICABLE;
  change(Math.floor(r() * d.headers.length));
  return undefined;
}

function setHeader(d: Draft, name: string, value: string): void {
  const header = d.headers.find(([n]) => n.toLowerCase() === name.toLowerCase());
  if (header !== undefined) header[1] = value;
}

function setVersion(d: Draft, version: '1.0' | '1.1'): void {
  d.version = version;
  d.statusLine = d.statusLine.replace(/^HTTP\/1\.[01]/, `HTTP/${version}`);
}

/** Replaces one CRLF of the message with `ending` (mostly framing; now and then one inside the body data). */
function replaceLineEnd(raw: string, r: Random, ending: string): string {
  const positions: number[] = [];
  for (let i = raw.indexOf('\r\n'); i !== -1; i = raw.indexOf('\r\n', i + 1)) positions.push(i);
  if (positions.length === 0) return NOT_APPLICABLE;
  const at = pick(r, positions);
  return raw.slice(0, at) + ending + raw.slice(at + 2);
}

// ---- random pieces --------------------------------------------------------------------------------

function pick<T>(r: Random, items: readonly T[]): T {
  return items[Math.floor(r() * items.length)] as T;
}

function token(r: Random): string {
  return TOKEN_CHARS[Math.floor(r() * TOKEN_CHARS.length)] as string;
}

function randomString(r: Random, length: number, char: (r: Random) => string): string {
  let text = '';
  for (let i = 0; i < length; i++) text += char(r);
  return text;
}

/** A valid field value: visible ASCII, spaces and tabs inside, sometimes obs-text, sometimes padded. */
function headerValue(r: Random): string {
  const core = randomString(r, Math.floor(r() * 30), (x) => {
    const roll = x();
    if (roll < 0.05) return '\t';
    if (roll < 0.1) return ' ';
    if (roll < 0.15) return String.fromCharCode(0x80 + Math.floor(x() * 128));
    return String.fromCharCode(0x21 + Math.floor(x() * 94));
  });
  return `${pick(r, ['', '', ' ', '\t'])}${core}${pick(r, ['', '', ' ', ' \t'])}`;
}

/** `;name`, `;name=token` or `;name="quoted \" string"`, or nothing. */
function chunkExtension(r: Random): string {
  let text = '';
  for (let i = Math.floor(r() * 4) - 1; i > 0; i--) {
    text += `;${randomString(r, 1 + Math.floor(r() * 5), token)}`;
    const roll = r();
    if (roll < 0.33) text += `=${randomString(r, 1 + Math.floor(r() * 5), token)}`;
    else if (roll < 0.66) text += '="quoted \\" value; with =, and \xe9"';
  }
  return text;
}
