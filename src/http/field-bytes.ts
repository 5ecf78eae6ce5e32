/**
 * The byte classes of HTTP/1.1 message syntax (RFC 9110 §5.5 and §5.6.2, RFC 9112 §2.2), as
 * 256-entry lookup tables: the request and response parsers check each byte with one array read.
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
