/**
 * The one home of HTTP/1.1's token and field rules (RFC 9110 §5.5 and §5.6.2, RFC 9112 §2.2): as
 * 256-entry lookup tables, so the request and response parsers check each byte with one array read,
 * and as string tests for the writers (the request serializer, the response writer), which check
 * every name and value they put on the wire.
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
