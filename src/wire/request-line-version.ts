/**
 * The HTTP version of a request line: which versions the proxy serves, and how it refuses the
 * others. The version says how the rest of the message is to be read (RFC 9112 §2.3), so it is
 * judged first, before the method, the target or the headers mean anything:
 *
 * | version                                   | answer                                   |
 * |-------------------------------------------|------------------------------------------|
 * | `HTTP/1.0`, `HTTP/1.1`                    | served                                   |
 * | `HTTP/1.2` … `HTTP/1.9`                   | served as HTTP/1.1 (RFC 9110 §2.5)       |
 * | `HTTP/0.9`, `HTTP/2.0`, `HTTP/3.0`, `HTTP/2`, `HTTP/3` | 505: another major version (RFC 9110 §15.6.6) |
 * | `http/1.1`, `HTTP/1`, `HTTP/11.1`, `HTTP/1.10`, `HTTP/1.1x`, none | 400: not an HTTP-version   |
 *
 * `HTTP-version = "HTTP/" DIGIT "." DIGIT`, case-sensitive (RFC 9112 §2.3). RFC 9113 and 9114 name
 * their protocols `HTTP/2` and `HTTP/3`, so a single digit other than 1 is another major version
 * too. A request line without a version (`GET /x`, HTTP/0.9's "simple request", which RFC 9112
 * no longer defines) is a 400. An HTTP/2 client with prior knowledge opens with
 * `PRI * HTTP/2.0` (RFC 9113 §3.4): it gets its 505 at once.
 *
 * Why the proxy reads the version itself: node:http's parser (llhttp) serves `HTTP/2.0` and
 * `HTTP/0.9` as if they were HTTP/1, refuses `HTTP/1.2`, and reads a line without a version as
 * HTTP/0.9. The proxy's own request parser (request-parser.ts) judges every request line with
 * {@link judgeHttpVersion} before anything else of the head.
 */
import { CR, IS_TOKEN, LF, SP } from './field-bytes.js';

/** What the proxy does with a request line's version. */
export type VersionVerdict =
  | { readonly kind: 'served'; readonly httpVersion: '1.0' | '1.1' }
  /** `HTTP/1.2` … `HTTP/1.9`: read as HTTP/1.1, the highest minor version the proxy conforms to. */
  | { readonly kind: 'served-as-1.1' }
  /** 505 for another major version, 400 for anything that is not an HTTP-version. */
  | { readonly kind: 'refused'; readonly status: 400 | 505 };

/** What {@link readRequestLineVersion} found at the start of a head. */
export type RequestLineVersion =
  /** Every byte so far fits a request line, but its CRLF has not come yet: read more. */
  | { readonly kind: 'incomplete' }
  /** Not shaped like a request line: the version cannot be told (the head's other rules judge it). */
  | { readonly kind: 'other' }
  /** A whole request line; `versionStart` is the offset of its version (where `HTTP/` starts). */
  | { readonly kind: 'line'; readonly verdict: VersionVerdict; readonly versionStart: number };

const SERVED_1_0: VersionVerdict = Object.freeze({ kind: 'served', httpVersion: '1.0' });
const SERVED_1_1: VersionVerdict = Object.freeze({ kind: 'served', httpVersion: '1.1' });
const SERVED_AS_1_1: VersionVerdict = Object.freeze({ kind: 'served-as-1.1' });
const NOT_SUPPORTED: VersionVerdict = Object.freeze({ kind: 'refused', status: 505 });
const MALFORMED: VersionVerdict = Object.freeze({ kind: 'refused', status: 400 });
const INCOMPLETE: RequestLineVersion = Object.freeze({ kind: 'incomplete' });
const OTHER: RequestLineVersion = Object.freeze({ kind: 'other' });

/** `HTTP/`, the bytes every version starts with. */
const HTTP_SLASH = Buffer.from('HTTP/', 'latin1');
const DEL = 0x7f;
const DOT = 0x2e;
const DIGIT_ZERO = 0x30;
const DIGIT_ONE = 0x31;
const DIGIT_NINE = 0x39;
/** Offset of the minor digit in `HTTP/1.x`. */
const MINOR_DIGIT_OFFSET = 'HTTP/1.'.length;

/**
 * Judges `version`, the request line's last part as sent (`HTTP/1.1`), or undefined for a request
 * line without one. See the table in the file comment.
 */
export function judgeHttpVersion(version: string | undefined): VersionVerdict {
  if (version === undefined) return MALFORMED;
  return judgeHttpVersionBytes(Buffer.from(version, 'latin1'), 0, version.length);
}

/**
 * {@link judgeHttpVersion} of the version in `buffer[start, end)`, read in place (the request
 * parser's way: no string is made). `HTTP/` DIGIT [ `.` DIGIT ], nothing else.
 */
export function judgeHttpVersionBytes(buffer: Buffer, start: number, end: number): VersionVerdict {
  const length = end - start;
  if (length !== 6 && length !== 8) return MALFORMED;
  for (let i = 0; i < HTTP_SLASH.length; i++) {
    if (buffer[start + i] !== HTTP_SLASH[i]) return MALFORMED;
  }
  const major = buffer[start + 5] as number;
  if (major < DIGIT_ZERO || major > DIGIT_NINE) return MALFORMED;
  if (length === 8) {
    const minor = buffer[start + 7] as number;
    if (buffer[start + 6] !== DOT || minor < DIGIT_ZERO || minor > DIGIT_NINE) return MALFORMED;
    if (major !== DIGIT_ONE) return NOT_SUPPORTED;
    if (minor === DIGIT_ZERO) return SERVED_1_0;
    return minor === DIGIT_ONE ? SERVED_1_1 : SERVED_AS_1_1;
  }
  return major === DIGIT_ONE ? MALFORMED : NOT_SUPPORTED; // `HTTP/1` is no version; `HTTP/2`, `HTTP/3` are others
}

/**
 * Reads the request line at `buffer[start…]` far enough to judge its version. The line must have
 * the shape `method SP target [SP version] CRLF`: method a token, target and version visible
 * bytes (obs-text included, no SP or controls); a byte that breaks the shape gives `other`. Pure:
 * nothing is thrown, `buffer` is not changed.
 *
 * @param maxBytes bytes from `start` that may be looked at; a line not ended within them is `other`.
 * @returns `incomplete` while the line fits but has not ended; `other`; or `line` with the verdict
 *   of {@link judgeHttpVersion} and where the version starts (for {@link withHttp11Version}).
 */
export function readRequestLineVersion(buffer: Buffer, start: number, maxBytes: number): RequestLineVersion {
  const limit = Math.min(buffer.length, start + maxBytes);
  const outOfBytes = buffer.length - start < maxBytes ? INCOMPLETE : OTHER;
  let pos = start;
  while (pos < limit && IS_TOKEN[buffer[pos] as number] === 1) pos++;
  if (pos >= limit) return outOfBytes;
  if (pos === start || buffer[pos] !== SP) return OTHER;
  pos++;
  const targetStart = pos;
  while (pos < limit && isVisible(buffer[pos] as number)) pos++;
  if (pos >= limit) return outOfBytes;
  if (pos === targetStart) return OTHER;
  let versionStart = pos;
  if (buffer[pos] === SP) {
    versionStart = ++pos;
    while (pos < limit && isVisible(buffer[pos] as number)) pos++;
    if (pos >= limit) return outOfBytes;
    if (pos === versionStart) return OTHER;
  }
  if (buffer[pos] !== CR) return OTHER;
  if (pos + 1 >= limit) return outOfBytes;
  if (buffer[pos + 1] !== LF) return OTHER;
  const version = versionStart === pos ? undefined : buffer.toString('latin1', versionStart, pos);
  return { kind: 'line', verdict: judgeHttpVersion(version), versionStart };
}

/**
 * A copy of `buffer` whose version `HTTP/1.x` at `versionStart` reads `HTTP/1.1` (one byte
 * changed, same length): how a `served-as-1.1` request line goes on.
 */
export function withHttp11Version(buffer: Buffer, versionStart: number): Buffer {
  const copy = Buffer.from(buffer);
  copy[versionStart + MINOR_DIGIT_OFFSET] = DIGIT_ONE;
  return copy;
}

/** VCHAR or obs-text (RFC 9110 §5.5): every byte but SP, the controls and DEL. */
function isVisible(byte: number): boolean {
  return byte > SP && byte !== DEL;
}
