/**
 * The request head parser of the proxy's HTTP/1.1 server: bytes from a client connection go in;
 * out comes a request head with how its body is framed, "incomplete" (read more), or "invalid"
 * with the status the proxy answers before closing the connection. The body itself is read by
 * body-decoder.ts.
 *
 * It follows RFC 9112 (HTTP/1.1 message syntax): §2.2 (message parsing: empty lines before the
 * request line are skipped, no bare CR or LF, no whitespace before the first field), §3 (request
 * line, its four target forms), §5 (field lines, no obs-fold, no whitespace before the colon),
 * §6.1 and §6.3 (how the body length is decided), §9.3 (persistence); RFC 9110 §5.5 (field values),
 * §5.6.2 (tokens), §9.1 (methods are tokens, case-sensitive), §10.1.1 (Expect), §7.8 (Upgrade); and
 * the version rules of request-line-version.ts.
 *
 * Why strict: a proxy that frames a request differently from the server behind it is where request
 * smuggling lives. So anything ambiguous is refused, never guessed: test/wire/request-differential.test.ts
 * checks that whatever node's own parser (llhttp) rejects, this parser rejects too, and that where
 * both accept they read the same request. What it refuses:
 *
 * | input                                                                     | answer |
 * |---------------------------------------------------------------------------|--------|
 * | no CRLF CRLF within `maxHeadBytes`                                        | 431    |
 * | request-target longer than `maxTargetBytes`                               | 414    |
 * | version `HTTP/2.0`, `HTTP/0.9`, `HTTP/3` … (another major)                 | 505    |
 * | Transfer-Encoding with a coding before the final `chunked` (`gzip, chunked`) | 501  |
 * | a request line other than `token SP 1*VCHAR SP HTTP-version CRLF`         | 400    |
 * | a target of none of the forms: `/…`, `scheme://…`, `*`; for CONNECT only and always `host:port` | 400 |
 * | a byte ≥ 0x80 in the target (clients percent-encode)                       | 400    |
 * | bare CR, bare LF, obs-fold, whitespace before the colon or the first field | 400   |
 * | a field name that is not a token, a field value byte that is a control (NUL, ESC, DEL) | 400 |
 * | a Content-Length that is not 1*DIGIT, above 2^53 - 1, or repeated (even equal) | 400 |
 * | Content-Length with Transfer-Encoding; Transfer-Encoding in HTTP/1.0      | 400    |
 * | a Transfer-Encoding whose final coding is not `chunked`, or with `chunked` twice | 400 |
 *
 * The version is judged as soon as the request line has ended, before the fields mean anything
 * (they are read by that version's rules); the limits are checked as soon as they are passed, so
 * a client that will never end its head (a TLS handshake, an endless line) is answered at once.
 *
 * Speed: this runs once per request, so it is one JS pass over the bytes and a single native call,
 * the final decode (a `Buffer.indexOf` or `compare` call costs more than the whole loop over a
 * typical head: about 0.7 µs for a 75-byte curl head). Every byte is checked once against a
 * 256-entry lookup table; the lines' own CRLFs lead to the empty line that ends the head (in a
 * valid head, no CRLF CRLF can come earlier); the few header names that matter are matched by
 * length first, then byte by byte ignoring case (no lowercased copies); field offsets go to a
 * reused scratch array, and at the end the head is decoded once (latin1: bytes pass unchanged) and
 * the method, target, names and values are sliced from that string.
 */
import { byteTable, COLON, CR, CRLF_CRLF, HTAB, IS_FIELD_CHAR, IS_TOKEN, isNameAt, LF, SP } from './field-bytes.js';
import { judgeHttpVersionBytes } from './request-line-version.js';

/** How the request body is delimited (RFC 9112 §6.3). */
export type BodyFraming =
  | { readonly kind: 'none' }
  /** Content-Length > 0 (a Content-Length of 0 is `none`). */
  | { readonly kind: 'length'; readonly length: number }
  | { readonly kind: 'chunked' };

/** A request head. Strings are latin1-decoded (bytes pass unchanged). */
export interface RequestHead {
  /** A token (RFC 9110 §9.1), as sent, case kept. */
  readonly method: string;
  /** The request-target as sent (latin1; any of the four forms of RFC 9112 §3.2). */
  readonly target: string;
  /** '1.1' or '1.0'; HTTP/1.2 … HTTP/1.9 are read as '1.1' (request-line-version.ts). */
  readonly httpVersion: '1.1' | '1.0';
  /** `[name, value, …]`: names as sent, values without leading/trailing SP/HTAB, wire order (node's rawHeaders). */
  readonly rawHeaders: string[];
  readonly body: BodyFraming;
  /** RFC 9112 §9.3: HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`. */
  readonly isKeepAlive: boolean;
  /**
   * `Connection` lists `upgrade` and an `Upgrade` header is present (HTTP/1.1 only; ignored in
   * 1.0, as nginx): its value (several Upgrade fields joined with `, `).
   */
  readonly upgrade: string | undefined;
  /**
   * `Expect: 100-continue` (case-insensitive) in HTTP/1.1 (RFC 9110 §10.1.1: ignored in HTTP/1.0).
   * Other Expect values are left to the request path (417).
   */
  readonly isExpectingContinue: boolean;
}

/** The limits of {@link parseRequestHead}, bytes. */
export interface RequestLimits {
  /** Longest head, bytes, from the request line's first byte through the final CRLF CRLF (`max_header_size`) → 431. */
  readonly maxHeadBytes: number;
  /** Longest request-target, bytes → 414 (nginx's large_client_header_buffers reports 414 for a long line). Default 8192. */
  readonly maxTargetBytes?: number;
}

/** What {@link parseRequestHead} made of the bytes. */
export type RequestHeadParse =
  /** No CRLF CRLF yet and fewer than maxHeadBytes bytes: read more. */
  | { readonly kind: 'incomplete' }
  /** The proxy answers `status` with `reason` as the one-line body and closes the connection. */
  | { readonly kind: 'invalid'; readonly status: 400 | 414 | 431 | 501 | 505; readonly reason: string }
  /** `end`: offset just after the head's CRLF CRLF (where the body or the next request starts). */
  | { readonly kind: 'request'; readonly head: RequestHead; readonly end: number };

/** The default of {@link RequestLimits.maxTargetBytes}. */
export const DEFAULT_MAX_TARGET_BYTES = 8192;

const INCOMPLETE: RequestHeadParse = Object.freeze({ kind: 'incomplete' });
const HEAD_TOO_LARGE: RequestHeadParse = Object.freeze({ kind: 'invalid', status: 431, reason: 'request head too large' });
const NO_BODY: BodyFraming = Object.freeze({ kind: 'none' });
const CHUNKED: BodyFraming = Object.freeze({ kind: 'chunked' });

const SPACES_IN_LINE = 'bad request: request line parts not separated by exactly one space';
const COMMA = 0x2c;
const ZERO = 0x30;
const SLASH = 0x2f;
const ASTERISK = 0x2a;
const CONNECT = Buffer.from('CONNECT', 'latin1');
const HTTP_1_1 = Buffer.from('HTTP/1.1', 'latin1');
const SCHEME_END = Buffer.from('://', 'latin1');
/** ALPHA / DIGIT / `+` / `-` / `.`: the bytes of a URI scheme after its first letter (RFC 3986 §3.1). */
const IS_SCHEME_CHAR = byteTable((b) => (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x2b || b === 0x2d || b === 0x2e);
/** What an authority-form may hold besides its port: reg-name, IP literal and IPv4 bytes (RFC 3986 §3.2.2). */
const IS_AUTHORITY_CHAR = byteTable((b) => IS_SCHEME_CHAR[b] === 1 || "_~!$&'()*,;=%[]:".includes(String.fromCharCode(b)));

/** A request-target byte: 1 for VCHAR, 2 for obs-text (refused after the version is judged), 0 for SP, controls and DEL. */
const TARGET_BYTE = byteTable((b) => b > SP && b !== 0x7f);
for (let b = 0x80; b < 0x100; b++) TARGET_BYTE[b] = 2;

// The header names and tokens that matter, lowercase ASCII bytes; matched case-insensitively.
const EXPECT = Buffer.from('expect', 'latin1');
const UPGRADE = Buffer.from('upgrade', 'latin1');
const CONNECTION = Buffer.from('connection', 'latin1');
const CONTENT_LENGTH = Buffer.from('content-length', 'latin1');
const TRANSFER_ENCODING = Buffer.from('transfer-encoding', 'latin1');
const CLOSE = Buffer.from('close', 'latin1');
const KEEP_ALIVE = Buffer.from('keep-alive', 'latin1');
const CHUNKED_CODING = Buffer.from('chunked', 'latin1');
const CONTINUE_100 = Buffer.from('100-continue', 'latin1');

/**
 * Scratch space for one pass: per field, the offsets (from the request line's start) of name
 * start, name end, value start, value end. Reused by every call (safe: a call runs to completion
 * synchronously); grown when a head has more fields.
 */
let fieldOffsets: Int32Array = new Int32Array(4 * 128);

// Connection options, as bits.
const CONNECTION_CLOSE = 1;
const CONNECTION_KEEP_ALIVE = 2;
const CONNECTION_UPGRADE = 4;

// Transfer-Encoding, as bits: present; the last coding is chunked; chunked came twice or before another coding; another coding.
const TE_PRESENT = 1;
const TE_CHUNKED_LAST = 2;
const TE_CHUNKED_MISPLACED = 4;
const TE_OTHER_CODING = 8;
const TE_MALFORMED = 16;

/**
 * Parses the request head at `buffer[start…]`. Never throws; `buffer` is not changed. Empty lines
 * (CRLF or bare LF) before the request line are skipped (RFC 9112 §2.2), at most `maxHeadBytes` of
 * them. See the file comment for what is refused, with which status.
 *
 * @param buffer bytes read from the client connection; bytes after the head's end are left alone.
 * @param start offset where the head (or the empty lines before it) starts, 0 ≤ start ≤ buffer.length.
 * @param limits `maxHeadBytes` (→ 431), `maxTargetBytes` (→ 414, default 8192), bytes.
 * @returns `incomplete` while every byte so far fits and the head has not ended within
 *   `maxHeadBytes`; `invalid` with the status and a one-line reason; or `request` with the head
 *   and `end`, the offset just after its CRLF CRLF.
 */
export function parseRequestHead(buffer: Buffer, start: number, limits: RequestLimits): RequestHeadParse {
  const maxHeadBytes = limits.maxHeadBytes;
  let lineStart = start;
  for (;;) {
    if (lineStart >= buffer.length) return INCOMPLETE;
    const byte = buffer[lineStart];
    if (byte === LF) lineStart++;
    else if (byte !== CR) break;
    else if (lineStart + 1 >= buffer.length) return INCOMPLETE;
    else if (buffer[lineStart + 1] === LF) lineStart += 2;
    else return invalid(400, 'bad request: bare CR before the request line');
    if (lineStart - start > maxHeadBytes) return HEAD_TOO_LARGE;
  }
  const limit = Math.min(buffer.length, lineStart + maxHeadBytes);
  // When the pass needs a byte at `limit`: the head may still end in time, or it is too long.
  const isOutOfSpace = buffer.length - lineStart >= maxHeadBytes;
  return readHead(buffer, lineStart, limit, isOutOfSpace, limits.maxTargetBytes ?? DEFAULT_MAX_TARGET_BYTES);
}

/** The pass over one head from `start` (its request line), using no byte at or after `limit`. */
function readHead(buffer: Buffer, start: number, limit: number, isOutOfSpace: boolean, maxTargetBytes: number): RequestHeadParse {
  const outOfBytes = isOutOfSpace ? HEAD_TOO_LARGE : INCOMPLETE;

  // ---- request line: method SP request-target SP HTTP-version CRLF (RFC 9112 §3) ----
  let pos = start;
  while (pos < limit && IS_TOKEN[buffer[pos] as number] === 1) pos++;
  if (pos >= limit) return outOfBytes;
  if (pos === start || buffer[pos] !== SP) return invalid(400, 'bad request: invalid request method');
  const methodEnd = pos++;
  const targetStart = pos;
  let targetBytes = 0;
  for (let kind: number; pos < limit && (kind = TARGET_BYTE[buffer[pos] as number] as number) !== 0; pos++) targetBytes |= kind;
  const targetEnd = pos;
  if (targetEnd - targetStart > maxTargetBytes) return invalid(414, 'request-target too long');
  if (pos >= limit) return outOfBytes;
  if (targetEnd === targetStart) return invalid(400, buffer[pos] === SP ? SPACES_IN_LINE : 'bad request: empty request-target');
  if (buffer[pos] !== SP) {
    return invalid(400, buffer[pos] === CR || buffer[pos] === LF ? 'bad request: no HTTP version' : 'bad request: invalid byte in the request-target');
  }
  const versionStart = ++pos;
  while (pos < limit && TARGET_BYTE[buffer[pos] as number] !== 0) pos++;
  if (pos >= limit) return outOfBytes;
  const versionEnd = pos;
  if (buffer[pos] !== CR) {
    if (buffer[pos] === SP) return invalid(400, SPACES_IN_LINE);
    return invalid(400, buffer[pos] === LF ? 'bad request: bare LF in the request line' : 'bad request: invalid request line');
  }
  if (pos + 1 >= limit) return outOfBytes;
  if (buffer[pos + 1] !== LF) return invalid(400, 'bad request: bare CR in the request line');
  pos += 2;
  let httpVersion: '1.0' | '1.1' = '1.1';
  if (versionEnd - versionStart !== HTTP_1_1.length || !isBytesAt(buffer, versionStart, HTTP_1_1)) {
    // not the common `HTTP/1.1`: the full rule of request-line-version.ts
    const verdict = judgeHttpVersionBytes(buffer, versionStart, versionEnd);
    if (verdict.kind === 'refused') {
      return verdict.status === 505 ? invalid(505, 'HTTP version not supported') : invalid(400, 'bad request: invalid HTTP version');
    }
    httpVersion = verdict.kind === 'served' ? verdict.httpVersion : '1.1';
  }
  if (targetBytes > 1) return invalid(400, 'bad request: non-ASCII byte in the request-target');
  const isConnect = methodEnd - start === CONNECT.length && isBytesAt(buffer, start, CONNECT);
  if (isConnect) {
    if (!isAuthorityForm(buffer, targetStart, targetEnd)) return invalid(400, 'bad request: CONNECT needs an authority-form target (host:port)');
  } else if (buffer[targetStart] !== SLASH && !isAsteriskOrAbsoluteForm(buffer, targetStart, targetEnd)) {
    return invalid(400, 'bad request: invalid request-target');
  }

  // ---- field lines: name ":" OWS value OWS CRLF (RFC 9112 §5), then the empty line ----
  let contentLength = -1;
  /** Bits of {@link TE_PRESENT} etc. over all Transfer-Encoding fields; 0 when none. */
  let transferEncoding = 0;
  /** Bits of {@link CONNECTION_CLOSE} etc. over all Connection fields. */
  let connection = 0;
  let isExpectingContinue = false;
  /** Field indexes of the Upgrade fields, or undefined when none. */
  let upgradeFields: number[] | undefined;
  let offsets = fieldOffsets;
  let fieldCount = 0;
  for (;;) {
    if (pos >= limit) return outOfBytes;
    if (buffer[pos] === CR) {
      if (pos + 1 >= limit) return outOfBytes;
      if (buffer[pos + 1] !== LF) return invalid(400, 'bad request: bare CR in the header section');
      pos += 2;
      break; // the empty line: end of head
    }
    const nameStart = pos;
    while (pos < limit && IS_TOKEN[buffer[pos] as number] === 1) pos++;
    const nameEnd = pos;
    if (pos >= limit) return outOfBytes;
    if (nameEnd === nameStart || buffer[pos] !== COLON) return invalid(400, fieldNameFault(buffer, nameStart, pos));
    pos++;
    while (pos < limit && (buffer[pos] === SP || buffer[pos] === HTAB)) pos++;
    const valueStart = pos;
    while (pos < limit && IS_FIELD_CHAR[buffer[pos] as number] === 1) pos++;
    // the value ends only at CRLF: a bare CR, a bare LF, NUL, DEL or another CTL stop it elsewhere
    if (pos >= limit) return outOfBytes;
    if (buffer[pos] !== CR) {
      return invalid(400, buffer[pos] === LF ? 'bad request: bare LF in the header section' : `bad request: invalid byte 0x${hex(buffer[pos] as number)} in a header value`);
    }
    if (pos + 1 >= limit) return outOfBytes;
    if (buffer[pos + 1] !== LF) return invalid(400, 'bad request: bare CR in the header section');
    let valueEnd = pos;
    while (valueEnd > valueStart && (buffer[valueEnd - 1] === SP || buffer[valueEnd - 1] === HTAB)) valueEnd--;
    pos += 2;

    // Only a few names matter; their lengths differ, so most lines are decided by one compare.
    switch (nameEnd - nameStart) {
      case 6:
        if (isNameAt(buffer, nameStart, EXPECT) && valueEnd - valueStart === CONTINUE_100.length && isNameAt(buffer, valueStart, CONTINUE_100)) {
          isExpectingContinue = true;
        }
        break;
      case 7:
        if (isNameAt(buffer, nameStart, UPGRADE)) (upgradeFields ??= []).push(fieldCount);
        break;
      case 10:
        if (isNameAt(buffer, nameStart, CONNECTION)) connection |= readConnectionOptions(buffer, valueStart, valueEnd);
        break;
      case 14:
        if (isNameAt(buffer, nameStart, CONTENT_LENGTH)) {
          // one value, 1*DIGIT (RFC 9110 §8.6); a second one, even equal, is refused (as nginx)
          if (contentLength !== -1) return invalid(400, 'bad request: more than one Content-Length');
          contentLength = readContentLength(buffer, valueStart, valueEnd);
          if (contentLength === -1) return invalid(400, 'bad request: invalid Content-Length');
        }
        break;
      case 17:
        if (isNameAt(buffer, nameStart, TRANSFER_ENCODING)) transferEncoding = readTransferCodings(buffer, valueStart, valueEnd, transferEncoding);
        break;
    }
    const slot = 4 * fieldCount++;
    if (slot === offsets.length) offsets = growFieldOffsets();
    offsets[slot] = nameStart - start;
    offsets[slot + 1] = nameEnd - start;
    offsets[slot + 2] = valueStart - start;
    offsets[slot + 3] = valueEnd - start;
  }

  // ---- the body's framing (RFC 9112 §6.3, in its order) ----
  let body = NO_BODY;
  if (transferEncoding !== 0) {
    // 6.1: Transfer-Encoding in HTTP/1.0 is faulty framing; with Content-Length, a smuggling attempt (6.3 rule 3)
    if (httpVersion === '1.0') return invalid(400, 'bad request: Transfer-Encoding in an HTTP/1.0 request');
    if (contentLength !== -1) return invalid(400, 'bad request: both Content-Length and Transfer-Encoding');
    // 6.3 rule 4: the final coding must be chunked, and chunked comes once (7: MUST NOT apply it twice)
    if ((transferEncoding & (TE_MALFORMED | TE_CHUNKED_MISPLACED)) !== 0 || (transferEncoding & TE_CHUNKED_LAST) === 0) {
      return invalid(400, 'bad request: invalid Transfer-Encoding');
    }
    // 6.1: a server SHOULD answer 501 to a transfer coding it does not understand; only chunked is decoded
    if ((transferEncoding & TE_OTHER_CODING) !== 0) return invalid(501, 'transfer coding not implemented');
    body = CHUNKED;
  } else if (contentLength > 0) {
    body = { kind: 'length', length: contentLength };
  }

  // One decode for the whole head (without the CRLF CRLF); the strings are slices of it.
  const text = buffer.toString('latin1', start, pos - CRLF_CRLF.length);
  const rawHeaders = new Array<string>(2 * fieldCount);
  for (let field = 0; field < fieldCount; field++) {
    const slot = 4 * field;
    rawHeaders[2 * field] = text.slice(offsets[slot], offsets[slot + 1]);
    rawHeaders[2 * field + 1] = text.slice(offsets[slot + 2], offsets[slot + 3]);
  }
  const is11 = httpVersion === '1.1';
  let upgrade: string | undefined;
  if (is11 && (connection & CONNECTION_UPGRADE) !== 0 && upgradeFields !== undefined) upgrade = joinValues(rawHeaders, upgradeFields);
  const head: RequestHead = {
    method: text.slice(0, methodEnd - start),
    target: text.slice(targetStart - start, targetEnd - start),
    httpVersion,
    rawHeaders,
    body,
    isKeepAlive: (connection & CONNECTION_CLOSE) === 0 && (is11 || (connection & CONNECTION_KEEP_ALIVE) !== 0),
    upgrade,
    isExpectingContinue: is11 && isExpectingContinue,
  };
  return { kind: 'request', head, end: pos };
}

/** `host ":" port` (RFC 9112 §3.2.3), the one form of a CONNECT target: reg-name or IP literal bytes, a colon, 1*DIGIT. */
function isAuthorityForm(buffer: Buffer, start: number, end: number): boolean {
  const colon = buffer.lastIndexOf(COLON, end - 1);
  if (colon <= start || colon === end - 1) return false;
  for (let pos = start; pos < colon; pos++) {
    if (IS_AUTHORITY_CHAR[buffer[pos] as number] === 0) return false;
  }
  for (let pos = colon + 1; pos < end; pos++) {
    const digit = (buffer[pos] as number) - ZERO;
    if (digit < 0 || digit > 9) return false;
  }
  return true;
}

/** `*` (asterisk-form, RFC 9112 §3.2.4) or `scheme "://" …` (absolute-form, §3.2.2). */
function isAsteriskOrAbsoluteForm(buffer: Buffer, start: number, end: number): boolean {
  if (end - start === 1 && buffer[start] === ASTERISK) return true;
  const first = buffer[start] as number;
  if (!((first >= 0x41 && first <= 0x5a) || (first >= 0x61 && first <= 0x7a))) return false;
  let pos = start + 1;
  while (pos < end && IS_SCHEME_CHAR[buffer[pos] as number] === 1) pos++;
  return end - pos > SCHEME_END.length && isBytesAt(buffer, pos, SCHEME_END);
}

/** Whether `buffer[pos…]` starts with exactly `bytes` (a JS loop: shorter than a native call). */
function isBytesAt(buffer: Buffer, pos: number, bytes: Buffer): boolean {
  for (let i = 0; i < bytes.length; i++) {
    if (buffer[pos + i] !== bytes[i]) return false;
  }
  return true;
}

function invalid(status: 400 | 414 | 431 | 501 | 505, reason: string): RequestHeadParse {
  return { kind: 'invalid', status, reason };
}

/** Why a field line whose name starts at `nameStart` does not reach its colon at `pos`. */
function fieldNameFault(buffer: Buffer, nameStart: number, pos: number): string {
  const byte = buffer[pos];
  if (pos === nameStart && (byte === SP || byte === HTAB)) return 'bad request: obs-fold or whitespace before a header name';
  if (byte === SP || byte === HTAB) return 'bad request: whitespace before the colon of a header';
  if (byte === LF) return 'bad request: bare LF in the header section';
  return 'bad request: invalid header name';
}

/**
 * The Connection options in `buffer[start, end)` (RFC 9110 §7.6.1: a comma-separated list of
 * tokens, compared ignoring case) that matter, as bits: `close`, `keep-alive`, `upgrade`.
 */
function readConnectionOptions(buffer: Buffer, start: number, end: number): number {
  let options = 0;
  let pos = start;
  while (pos < end) {
    while (pos < end && (buffer[pos] === SP || buffer[pos] === HTAB || buffer[pos] === COMMA)) pos++;
    const optionStart = pos;
    while (pos < end && buffer[pos] !== COMMA) pos++;
    let optionEnd = pos;
    while (optionEnd > optionStart && (buffer[optionEnd - 1] === SP || buffer[optionEnd - 1] === HTAB)) optionEnd--;
    const length = optionEnd - optionStart;
    if (length === 5 && isNameAt(buffer, optionStart, CLOSE)) options |= CONNECTION_CLOSE;
    else if (length === 10 && isNameAt(buffer, optionStart, KEEP_ALIVE)) options |= CONNECTION_KEEP_ALIVE;
    else if (length === 7 && isNameAt(buffer, optionStart, UPGRADE)) options |= CONNECTION_UPGRADE;
  }
  return options;
}

/** `1*DIGIT` in `buffer[start, end)` as a number ≤ 2^53 - 1, or -1 (empty, a sign, a list, a space, too large). */
function readContentLength(buffer: Buffer, start: number, end: number): number {
  if (start === end) return -1;
  let length = 0;
  for (let pos = start; pos < end; pos++) {
    const digit = (buffer[pos] as number) - ZERO;
    if (digit < 0 || digit > 9) return -1;
    length = length * 10 + digit;
    if (length > Number.MAX_SAFE_INTEGER) return -1;
  }
  return length;
}

/**
 * Adds the codings of one Transfer-Encoding value, `token *( OWS "," OWS token )` in
 * `buffer[start, end)`, to the bits `seen` of the fields before it (several fields are one list,
 * RFC 9110 §5.3). Coding names compare ignoring case; parameters, empty elements or a non-token
 * are `TE_MALFORMED`.
 */
function readTransferCodings(buffer: Buffer, start: number, end: number, seen: number): number {
  let bits = seen | TE_PRESENT;
  let pos = start;
  for (;;) {
    const codingStart = pos;
    while (pos < end && IS_TOKEN[buffer[pos] as number] === 1) pos++;
    if (pos === codingStart) return bits | TE_MALFORMED;
    if (pos - codingStart === CHUNKED_CODING.length && isNameAt(buffer, codingStart, CHUNKED_CODING)) {
      if ((bits & TE_CHUNKED_LAST) !== 0) bits |= TE_CHUNKED_MISPLACED; // chunked twice
      bits |= TE_CHUNKED_LAST;
    } else {
      if ((bits & TE_CHUNKED_LAST) !== 0) bits |= TE_CHUNKED_MISPLACED; // chunked before another coding
      bits = (bits & ~TE_CHUNKED_LAST) | TE_OTHER_CODING;
    }
    while (pos < end && (buffer[pos] === SP || buffer[pos] === HTAB)) pos++;
    if (pos === end) return bits;
    if (buffer[pos] !== COMMA) return bits | TE_MALFORMED;
    pos++;
    while (pos < end && (buffer[pos] === SP || buffer[pos] === HTAB)) pos++;
  }
}

/** The values of the fields numbered `fields`, joined with `, ` (RFC 9110 §5.3). */
function joinValues(rawHeaders: readonly string[], fields: readonly number[]): string {
  let joined = rawHeaders[2 * (fields[0] as number) + 1] as string;
  for (let i = 1; i < fields.length; i++) joined += `, ${rawHeaders[2 * (fields[i] as number) + 1]}`;
  return joined;
}

/** Doubles the scratch space, keeping its contents; returns the new one. */
function growFieldOffsets(): Int32Array {
  const grown = new Int32Array(2 * fieldOffsets.length);
  grown.set(fieldOffsets);
  fieldOffsets = grown;
  return grown;
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}
