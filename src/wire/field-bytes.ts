/**
 * The one home of HTTP/1.1's token and field rules (RFC 9110 §5.5 and §5.6.2, RFC 9112 §2.2): as
 * 256-entry lookup tables, so the request and response parsers check each byte with one array read,
 * and as string tests for the writers (the request serializer, the response writer), which check
 * every name and value they put on the wire. Also the one reading of a field line (RFC 9112 §5)
 * that response heads and chunked trailers share.
 */

export const CR = 0x0d;
export const LF = 0x0a;
export const SP = 0x20;
export const HTAB = 0x09;
export const COLON = 0x3a;
/** The end of a head. */
export const CRLF_CRLF = Buffer.from('\r\n\r\n', 'latin1');

/** tchar (RFC 9110 §5.6.2): ALPHA / DIGIT / `!#$%&'*+-.^_`|~`. */
export const IS_TOKEN = byteTable((b) => isAlphaNumeric(b) || "!#$%&'*+-.^_`|~".includes(String.fromCharCode(b)));
/** field-vchar / SP / HTAB (RFC 9110 §5.5), obs-text included: everything but CTLs and DEL. */
export const IS_FIELD_CHAR = byteTable((b) => b === HTAB || (b >= 0x20 && b !== 0x7f));

export function isAlphaNumeric(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a);
}

/** A table with 1 for every byte `isMember` accepts, 0 for the others. */
export function byteTable(isMember: (byte: number) => boolean): Uint8Array {
  const table = new Uint8Array(256);
  for (let b = 0; b < 256; b++) table[b] = isMember(b) ? 1 : 0;
  return table;
}

/**
 * Parses one field line `name ":" OWS value OWS` (RFC 9112 §5, CRLF already removed, latin1) and
 * pushes name and value (trimmed of SP / HTAB) onto `into`. Returns the name.
 *
 * @throws the error `fail(reason)` makes, for obs-fold (a line starting with SP / HTAB), an empty
 *   or non-token name, whitespace before the colon, no colon, and a control character other than
 *   HTAB (a bare CR included) or DEL in the value.
 */
export function parseFieldLine(line: string, into: string[], fail: (reason: string) => Error): string {
  let colon = 0;
  while (colon < line.length && IS_TOKEN[line.charCodeAt(colon)] === 1) colon++;
  if (colon === 0) {
    const first = line.charCodeAt(0);
    throw fail(first === SP || first === HTAB ? 'obs-fold (line folding) in header' : `invalid header name in ${quoteLine(line)}`);
  }
  if (colon === line.length || line.charCodeAt(colon) !== COLON) throw fail(`invalid header name in ${quoteLine(line)}`);
  let start = colon + 1;
  let end = line.length;
  while (start < end && (line.charCodeAt(start) === SP || line.charCodeAt(start) === HTAB)) start++;
  while (end > start && (line.charCodeAt(end - 1) === SP || line.charCodeAt(end - 1) === HTAB)) end--;
  for (let i = start; i < end; i++) {
    const code = line.charCodeAt(i);
    if (IS_FIELD_CHAR[code] === 0) throw fail(`invalid character 0x${code.toString(16).padStart(2, '0')} in header value`);
  }
  const name = line.slice(0, colon);
  into.push(name, line.slice(start, end));
  return name;
}

/**
 * True when the field name `name` equals `lowerName` ignoring ASCII case (field names are
 * case-insensitive, RFC 9110 §5.1). `lowerName` must be lower-case. Allocates nothing: the request
 * path compares field names of every message, and each `toLowerCase` makes a new string through
 * a V8 runtime call (about 5% of the instructions of a small proxied request, counted with
 * callgrind: docs/performance.md).
 */
export function equalsIgnoringCase(name: string, lowerName: string): boolean {
  return name.length === lowerName.length && startsWithIgnoringCase(name, lowerName);
}

/** True when `name` starts with `lowerPrefix` ignoring ASCII case; `lowerPrefix` must be lower-case. Allocates nothing. */
export function startsWithIgnoringCase(name: string, lowerPrefix: string): boolean {
  if (name.length < lowerPrefix.length) return false;
  for (let i = 0; i < lowerPrefix.length; i++) {
    const code = name.charCodeAt(i);
    const lower = lowerPrefix.charCodeAt(i);
    if (code !== lower && !(lower >= 0x61 && lower <= 0x7a && code === lower - 0x20)) return false;
  }
  return true;
}

/**
 * True when the bytes at `pos` equal `lower` (lowercase ASCII letters, digits and `-`) ignoring
 * ASCII case. The caller has checked the length, and the bytes are token or field-value bytes;
 * among those, `| 0x20` maps only an uppercase letter onto another byte of `lower`'s kind (the
 * other bytes it would map onto a letter, a digit or `-` are controls), so none matches by accident.
 */
export function isNameAt(buffer: Buffer, pos: number, lower: Buffer): boolean {
  for (let i = 0; i < lower.length; i++) {
    if (((buffer[pos + i] as number) | 0x20) !== lower[i]) return false;
  }
  return true;
}

/**
 * A set of field names, looked up in any case without allocating (`has('Content-Length')`), where
 * a `Set` of lower-cased names would need a `toLowerCase` per lookup. Names are grouped by length,
 * so most lookups end at one array read. A large set (more than `SCAN_MAX_NAMES` distinct names:
 * a `Connection` header that lists thousands, say) is a `Set` of lower-cased names instead, so
 * that a lookup never scans more than a few names: with a scan, a head of N names listed in
 * `Connection` and N fields cost N² comparisons (52 ms of CPU for one 16 KiB head, a break test).
 */
export class FieldNameSet {
  readonly #byLength: (string[] | undefined)[] = [];
  /** 1 for the first byte of a member in either case: most names are answered by one table read. */
  readonly #firstBytes = new Uint8Array(256);
  readonly #large: Set<string> | undefined;

  /** @param lowerNames lower-cased field names; duplicates count once */
  constructor(lowerNames: Iterable<string>) {
    const unique = new Set<string>();
    for (const name of lowerNames) {
      if (name !== name.toLowerCase()) throw new Error(`FieldNameSet: ${JSON.stringify(name)} is not lower-case`);
      unique.add(name);
    }
    if (unique.size > SCAN_MAX_NAMES) {
      this.#large = unique;
      return;
    }
    for (const name of unique) {
      (this.#byLength[name.length] ??= []).push(name);
      const first = name.charCodeAt(0);
      this.#firstBytes[first] = 1;
      if (first >= 0x61 && first <= 0x7a) this.#firstBytes[first - 0x20] = 1;
    }
  }

  has(name: string): boolean {
    if (this.#large !== undefined) return this.#large.has(name.toLowerCase());
    if (this.#firstBytes[name.charCodeAt(0)] !== 1) return false; // past the table (a character beyond latin1) or NaN (''): undefined, no member
    const candidates = this.#byLength[name.length];
    if (candidates === undefined) return false;
    for (let i = 0; i < candidates.length; i++) {
      if (equalsIgnoringCase(name, candidates[i]!)) return true;
    }
    return false;
  }
}

/** The most distinct names a `FieldNameSet` scans; a larger one hashes (the fixed lists hold up to 21). */
const SCAN_MAX_NAMES = 32;

/**
 * The elements of a comma-separated list field (RFC 9110 §5.6.1: `Connection: keep-alive, X-A`),
 * each trimmed, empty ones left out. A value without a comma, as most are, costs no split (a V8
 * runtime call).
 */
export function listElements(value: string): string[] {
  if (!value.includes(',')) {
    const element = value.trim();
    return element === '' ? [] : [element];
  }
  const elements: string[] = [];
  for (const part of value.split(',')) {
    const element = part.trim();
    if (element !== '') elements.push(element);
  }
  return elements;
}

/** A short, printable rendering of a line for error messages (at most 64 characters). */
export function quoteLine(line: string): string {
  return JSON.stringify(line.slice(0, 64));
}

/** A method or field name: one or more tchar (RFC 9110 §5.6.2). */
const TOKEN_STRING = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;
/** Anything outside HTAB / SP / VCHAR / obs-text: CTLs and DEL, and characters above latin1. */
const INVALID_FIELD_STRING_CHAR = /[^\t\x20-\x7e\x80-\xff]/;

/** True when `text` is a token (a method, a field name). */
export function isToken(text: string): boolean {
  return TOKEN_STRING.test(text);
}

/**
 * True when `text` may not be sent as a field value or reason phrase: it holds a CR, LF, NUL or
 * another control character, DEL, or a character that latin1 cannot encode (header splitting,
 * RFC 9112 §11.2). Node's writers refuse the same set.
 */
export function hasInvalidFieldChar(text: string): boolean {
  return INVALID_FIELD_STRING_CHAR.test(text);
}
