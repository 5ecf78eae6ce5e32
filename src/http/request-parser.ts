/**
 * A recogniser for *simple* HTTP/1.1 request heads: the gate of the proxy's fast lane. Bytes from a
 * client socket go in; out comes either a request head the fast lane can serve without node:http,
 * "incomplete" (read more), or "other" (hand the untouched bytes to node:http, which then gives its
 * own 400 / 431 / 408 answers and handles bodies, `Expect`, upgrades and everything else).
 *
 * It follows RFC 9112 (HTTP/1.1 message syntax) section 3 (request line, origin-form target) and 5
 * (field lines), RFC 9110 5.6.2 (tokens) and 5.5 (field values), and RFC 3986 3.3 (pchar) for the
 * target — but only as a strict subset: it never produces an error, because anything it is not
 * sure about is node's job. The one rule it must never break: a head it accepts is one that node's
 * own parser (llhttp, strict mode, Node 20) accepts too and reads the same way — same method, URL
 * and `rawHeaders`, same keep-alive decision. test/http/request-differential.test.ts checks exactly
 * that against a real node:http server.
 *
 * What makes a head simple (all must hold, else "other"):
 * - request line exactly `METHOD SP target SP HTTP/1.1 CRLF`, METHOD one of {@link SIMPLE_METHODS};
 * - target in origin-form: `/` then only pchar, `/` and `?` bytes (RFC 3986; no `#`, no space,
 *   nothing outside ASCII);
 * - field lines `token ":" OWS value OWS CRLF`, no obs-fold, no bare CR or LF, value bytes HTAB /
 *   SP / VCHAR / obs-text, at most 100 of them;
 * - exactly one `Host`;
 * - no body and no protocol switch: no `Transfer-Encoding`, `Expect`, `Upgrade` or
 *   `Proxy-Connection` (llhttp treats it like `Connection`), a `Connection` value that is a clean
 *   token list without `upgrade`, and at most one `Content-Length`, whose value is exactly `0`.
 *
 * Speed: this runs once per request, so it is one JS pass over the bytes and a single native call,
 * the final decode (a `Buffer.indexOf` or `compare` call costs more than the whole loop over a
 * typical head: about 0.7 µs for a 75-byte curl head, 1.7 µs for a 380-byte browser head). Every
 * byte is checked once against a 256-entry lookup table; the lines' own CRLFs lead to the empty
 * line that ends the head (in a valid head, no CRLF CRLF can come earlier); special header names
 * are matched by length first, then byte by byte ignoring case (no lowercased copies); field
 * offsets go to a reused scratch array, and at the end the head is decoded once (latin1: bytes pass
 * unchanged) and names, values and the target are sliced from that string. The pass stops at the
 * first byte that does not fit ("other" at once, so a client that will never end its head the
 * simple way — a TLS handshake, a head ending in bare LFs — goes to node:http without waiting) or
 * where the bytes run out ("incomplete").
 */
import { byteTable, COLON, CR, CRLF_CRLF, HTAB, isAlphaNumeric, IS_FIELD_CHAR, IS_TOKEN, LF, SP } from './field-bytes.js';

/** A request head the fast lane takes. Strings are latin1-decoded (bytes pass unchanged). */
export interface SimpleRequestHead {
  /** One of {@link SIMPLE_METHODS}, as sent (always uppercase). */
  readonly method: string;
  /** The origin-form request target as sent, e.g. `/a/b?x=1`. */
  readonly target: string;
  /**
   * `[name, value, name, value, …]`: names as sent, values with leading and trailing SP / HTAB
   * removed, wire order — exactly node's `IncomingMessage.rawHeaders`.
   */
  readonly rawHeaders: string[];
  /** A `Connection` header lists the token `close` (case-insensitive, RFC 9112 9.6). */
  readonly isCloseRequested: boolean;
}

/** What {@link parseSimpleRequestHead} made of the bytes. */
export type RequestHeadParse =
  /** No end of head (CRLF CRLF) yet, and fewer than `maxHeadBytes` bytes from `start`: read more. */
  | { readonly kind: 'incomplete' }
  /** Not a head the fast lane takes: hand the bytes, unchanged, to node:http. */
  | { readonly kind: 'other' }
  /** A simple request; `end` is the offset just after its CRLF CRLF (where a pipelined next head starts). */
  | { readonly kind: 'request'; readonly head: SimpleRequestHead; readonly end: number };

/** The methods the fast lane takes (RFC 9110 9.3), compared exactly: methods are case-sensitive. */
export const SIMPLE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH']);

/**
 * More field lines than this is "other". Real clients send a few dozen; node:http keeps only the
 * first 2000 lines by default (`server.maxHeadersCount`), and past that its `rawHeaders` would
 * differ. The test (request-parser.test.ts) repeats the number.
 */
const MAX_SIMPLE_HEADER_FIELDS = 100;

const INCOMPLETE: RequestHeadParse = Object.freeze({ kind: 'incomplete' });
/** The bytes so far agree with what is expected, but end too soon. */
const MORE = Symbol('more');
const OTHER: RequestHeadParse = Object.freeze({ kind: 'other' });

const HTTP_1_1_CRLF = Buffer.from(' HTTP/1.1\r\n', 'latin1');
const COMMA = 0x2c;
const SLASH = 0x2f;
const ZERO = 0x30;

/** pchar / `/` / `?` (RFC 3986 3.3, 3.4): unreserved, sub-delims, `:`, `@`, `%`. */
const IS_TARGET_CHAR = byteTable((b) => isAlphaNumeric(b) || "-._~!$&'()*+,;=:@/?%".includes(String.fromCharCode(b)));

/** The methods by their first byte, each with its bytes plus the SP after it, so a method is matched without decoding it. */
const METHODS_BY_FIRST_BYTE: readonly (readonly (readonly [string, Buffer])[] | undefined)[] = (() => {
  const byFirstByte: [string, Buffer][][] = [];
  for (const method of SIMPLE_METHODS) (byFirstByte[method.charCodeAt(0)] ??= []).push([method, Buffer.from(`${method} `, 'latin1')]);
  return byFirstByte;
})();

// The header names that decide framing, lowercase ASCII bytes; matched case-insensitively.
const HOST = Buffer.from('host', 'latin1');
const EXPECT = Buffer.from('expect', 'latin1');
const UPGRADE = Buffer.from('upgrade', 'latin1');
const CONNECTION = Buffer.from('connection', 'latin1');
const CONTENT_LENGTH = Buffer.from('content-length', 'latin1');
const PROXY_CONNECTION = Buffer.from('proxy-connection', 'latin1');
const TRANSFER_ENCODING = Buffer.from('transfer-encoding', 'latin1');
const CLOSE = Buffer.from('close', 'latin1');

/**
 * Scratch space for one pass: per field, the offsets (from `start`) of name start, name end, value
 * start, value end. Reused by every call; safe because a call runs to completion synchronously.
 */
const fieldOffsets = new Int32Array(4 * MAX_SIMPLE_HEADER_FIELDS);

/**
 * Recognises a simple HTTP/1.1 request head at `buffer[start…]` (see the file comment for the
 * rules). Pure and allocation-light: nothing is thrown, `buffer` is not changed.
 *
 * @param buffer bytes read from the client connection; the head starts at `start`, bytes up to
 *   `buffer.length` are looked at (bytes after the head's end are left alone).
 * @param start offset of the head's first byte (the request line), 0 ≤ start ≤ buffer.length.
 * @param maxHeadBytes largest head taken, in bytes, counting every byte from `start` through the
 *   final CRLF CRLF. Keep it ≤ the server's `maxHeaderSize` (node counts only the target, names and
 *   values against that limit, so at the same number this limit is stricter and node never answers
 *   431 to a head accepted here).
 * @returns `incomplete` when every byte so far fits a simple head, the head has not ended, and
 *   fewer than `maxHeadBytes` bytes are available; `other` at the first byte that does not fit, or
 *   for a longer head; otherwise `request` with the head and `end`, the offset just after its
 *   CRLF CRLF.
 */
export function parseSimpleRequestHead(buffer: Buffer, start: number, maxHeadBytes: number): RequestHeadParse {
  const limit = Math.min(buffer.length, start + maxHeadBytes);
  // When the pass needs a byte at `limit`: the head may still end in time, or it is too long.
  const outOfBytes = buffer.length - start < maxHeadBytes ? INCOMPLETE : OTHER;
  return readSimpleHead(buffer, start, limit, outOfBytes);
}

/**
 * The pass: reads a simple head from `start`, using no byte at or after `limit`. Returns `other`
 * as soon as a byte says "not simple" (so a client that never ends its head, say a TLS handshake
 * or a head ending in bare LFs, goes to node:http at once), and `outOfBytes` when a byte at
 * `limit` would be needed.
 */
function readSimpleHead(buffer: Buffer, start: number, limit: number, outOfBytes: RequestHeadParse): RequestHeadParse {
  // ---- request line: METHOD SP target SP HTTP/1.1 CRLF (RFC 9112 3) ----
  const method = matchMethod(buffer, start, limit);
  if (method === MORE) return outOfBytes;
  if (method === undefined) return OTHER;
  let pos = start + method.length + 1;
  const targetStart = pos;
  if (pos >= limit) return outOfBytes;
  if (buffer[pos] !== SLASH) return OTHER; // origin-form only: no `*`, no absolute-form
  pos++;
  while (pos < limit && IS_TARGET_CHAR[buffer[pos] as number] === 1) pos++;
  const targetEnd = pos;
  const version = matchBytes(buffer, pos, limit, HTTP_1_1_CRLF);
  if (version !== true) return version === MORE ? outOfBytes : OTHER;
  pos += HTTP_1_1_CRLF.length;

  // ---- field lines: name ":" OWS value OWS CRLF (RFC 9112 5), then the empty line ----
  let fieldCount = 0;
  let hostCount = 0;
  let hasContentLength = false;
  let isCloseRequested = false;
  for (;;) {
    if (pos >= limit) return outOfBytes;
    if (buffer[pos] === CR) {
      if (pos + 1 >= limit) return outOfBytes;
      if (buffer[pos + 1] !== LF) return OTHER;
      pos += 2;
      break; // the empty line: end of head
    }
    if (fieldCount === MAX_SIMPLE_HEADER_FIELDS) return OTHER;
    const nameStart = pos;
    while (pos < limit && IS_TOKEN[buffer[pos] as number] === 1) pos++;
    const nameEnd = pos;
    if (pos >= limit) return outOfBytes;
    // an empty name is also where obs-fold (a line starting with SP / HTAB) ends up
    if (nameEnd === nameStart || buffer[pos] !== COLON) return OTHER;
    pos++;
    while (pos < limit && (buffer[pos] === SP || buffer[pos] === HTAB)) pos++;
    const valueStart = pos;
    while (pos < limit && IS_FIELD_CHAR[buffer[pos] as number] === 1) pos++;
    // the value ends only at CRLF: a bare CR, a bare LF, NUL, DEL or another CTL stop it elsewhere
    if (pos >= limit) return outOfBytes;
    if (buffer[pos] !== CR) return OTHER;
    if (pos + 1 >= limit) return outOfBytes;
    if (buffer[pos + 1] !== LF) return OTHER;
    let valueEnd = pos;
    while (valueEnd > valueStart && (buffer[valueEnd - 1] === SP || buffer[valueEnd - 1] === HTAB)) valueEnd--;
    pos += 2;

    // Only a few names matter; their lengths differ, so most lines are decided by one compare.
    switch (nameEnd - nameStart) {
      case 4:
        if (isNameAt(buffer, nameStart, HOST)) hostCount++;
        break;
      case 6:
        if (isNameAt(buffer, nameStart, EXPECT)) return OTHER;
        break;
      case 7:
        if (isNameAt(buffer, nameStart, UPGRADE)) return OTHER;
        break;
      case 10:
        if (isNameAt(buffer, nameStart, CONNECTION)) {
          const connection = readConnectionTokens(buffer, valueStart, valueEnd);
          if (connection === 'other') return OTHER;
          if (connection === 'close') isCloseRequested = true;
        }
        break;
      case 14:
        if (isNameAt(buffer, nameStart, CONTENT_LENGTH)) {
          // exactly one, exactly `0`: no body (RFC 9112 6.3); anything else is node's to judge
          if (hasContentLength || valueEnd - valueStart !== 1 || buffer[valueStart] !== ZERO) return OTHER;
          hasContentLength = true;
        }
        break;
      case 16:
        if (isNameAt(buffer, nameStart, PROXY_CONNECTION)) return OTHER;
        break;
      case 17:
        if (isNameAt(buffer, nameStart, TRANSFER_ENCODING)) return OTHER;
        break;
    }
    const slot = 4 * fieldCount++;
    fieldOffsets[slot] = nameStart - start;
    fieldOffsets[slot + 1] = nameEnd - start;
    fieldOffsets[slot + 2] = valueStart - start;
    fieldOffsets[slot + 3] = valueEnd - start;
  }
  // RFC 9112 3.2: exactly one Host; a missing or repeated one is answered on node's path.
  if (hostCount !== 1) return OTHER;

  // One decode for the whole head (without the CRLF CRLF); the target, names and values are slices of it.
  const text = buffer.toString('latin1', start, pos - CRLF_CRLF.length);
  const target = text.slice(targetStart - start, targetEnd - start);
  const rawHeaders = new Array<string>(2 * fieldCount);
  for (let field = 0; field < fieldCount; field++) {
    const slot = 4 * field;
    rawHeaders[2 * field] = text.slice(fieldOffsets[slot], fieldOffsets[slot + 1]);
    rawHeaders[2 * field + 1] = text.slice(fieldOffsets[slot + 2], fieldOffsets[slot + 3]);
  }
  return { kind: 'request', head: { method, target, rawHeaders, isCloseRequested }, end: pos };
}

/**
 * The method whose bytes and following SP start at `pos` (case-sensitive, RFC 9110 9.1); `MORE`
 * when the bytes before `limit` are the start of one; undefined when they are none.
 */
function matchMethod(buffer: Buffer, pos: number, limit: number): string | typeof MORE | undefined {
  if (pos >= limit) return MORE;
  const candidates = METHODS_BY_FIRST_BYTE[buffer[pos] as number];
  if (candidates === undefined) return undefined;
  for (const [method, bytesWithSpace] of candidates) {
    const match = matchBytes(buffer, pos, limit, bytesWithSpace);
    if (match !== false) return match === true ? method : MORE;
  }
  return undefined;
}

/**
 * Whether `buffer[pos…]` starts with `bytes`: true, false, or `MORE` when the bytes before `limit`
 * agree but end too soon (a JS loop: shorter than a native call).
 */
function matchBytes(buffer: Buffer, pos: number, limit: number, bytes: Buffer): boolean | typeof MORE {
  const available = Math.min(bytes.length, limit - pos);
  for (let i = 0; i < available; i++) {
    if (buffer[pos + i] !== bytes[i]) return false;
  }
  return available === bytes.length ? true : MORE;
}

/**
 * True when the name at `pos` equals `lowerName` (lowercase ASCII) ignoring ASCII case. The caller
 * has checked the length and that the bytes are token characters; among those, `| 0x20` maps only
 * an uppercase letter onto a lowercase one, so no other byte can match by accident.
 */
function isNameAt(buffer: Buffer, pos: number, lowerName: Buffer): boolean {
  for (let i = 0; i < lowerName.length; i++) {
    if (((buffer[pos + i] as number) | 0x20) !== lowerName[i]) return false;
  }
  return true;
}

/**
 * Reads a Connection value `token *( OWS "," OWS token )` (RFC 9110 7.6.1) in `buffer[start, end)`
 * (already trimmed of OWS). `other` for anything that is not such a clean list (empty elements,
 * quotes, spaces inside an element: llhttp's token matching might read those differently) or that
 * names `upgrade`; `close` when it names `close`; `keep` otherwise.
 */
function readConnectionTokens(buffer: Buffer, start: number, end: number): 'close' | 'keep' | 'other' {
  let isClose = false;
  let pos = start;
  for (;;) {
    const tokenStart = pos;
    while (pos < end && IS_TOKEN[buffer[pos] as number] === 1) pos++;
    const length = pos - tokenStart;
    if (length === 0) return 'other';
    if (length === 5 && isNameAt(buffer, tokenStart, CLOSE)) isClose = true;
    else if (length === 7 && isNameAt(buffer, tokenStart, UPGRADE)) return 'other';
    while (pos < end && (buffer[pos] === SP || buffer[pos] === HTAB)) pos++;
    if (pos === end) return isClose ? 'close' : 'keep';
    if (buffer[pos] !== COMMA) return 'other';
    pos++;
    while (pos < end && (buffer[pos] === SP || buffer[pos] === HTAB)) pos++;
  }
}
