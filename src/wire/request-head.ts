/**
 * Writes an HTTP/1.1 request head (RFC 9112 3: request line, field lines, empty line) as one
 * string, to be written with the `latin1` encoding, so the proxy sends each request to its upstream
 * with a single socket write (issue 5: node:http's client builds and writes the head in several
 * steps; one write is one syscall). A string, not a Buffer: node writes a latin1 string to the
 * socket without a JavaScript Buffer in between (a small GET: about 1.2% fewer instructions).
 *
 * Every character is latin1 (one byte each): the parsers hand out header values decoded as latin1,
 * so encoding them back as latin1 reproduces the client's bytes exactly, obs-text included.
 * Nothing that could split the head is let through: a CR, LF or NUL in a name or value — or any
 * character node:http itself refuses to send — throws instead of reaching the upstream (request
 * splitting, RFC 9112 11.2).
 *
 * To send a small body with the head, cork the socket: `socket.cork(); socket.write(head,
 * 'latin1'); socket.write(body); socket.uncork()` becomes one writev.
 */
import { BadRequestError } from '../errors.js';
import { hasInvalidFieldChar, isToken } from './field-bytes.js';

/** request-target: visible ASCII and obs-text, no space or control (RFC 9112 3.2). */
const VALID_TARGET = /^[\x21-\x7e\x80-\xff]+$/;

/**
 * Serialises `method SP path SP HTTP/1.1 CRLF *(name: value CRLF) CRLF` into one latin1 string.
 *
 * @param method request method, a token (`GET`, `POST`, …), sent as given.
 * @param path request-target, e.g. `/search?q=1`; no spaces or control characters.
 * @param rawHeaders `[name, value, name, value, …]` as node:http's `rawHeaders`, sent in order,
 *   case kept. The caller has already removed hop-by-hop headers and added its own.
 * @param checkedLength how many entries at the start of `rawHeaders` are known to be valid fields
 *   already, and are not checked again: fields read by this proxy's request parser (which refuses
 *   the same characters, IS_TOKEN and IS_FIELD_CHAR in field-bytes.ts) and those
 *   buildUpstreamRequestHeaders adds (src/gateway/forward-headers.ts). Default 0: all are checked.
 * @returns the head, ending with the empty line; each character is one byte (write it as `latin1`).
 * @throws BadRequestError when the method or a name is not a token, the path has a space or control
 *   character, a value contains CR, LF, NUL or another character outside latin1 text, or
 *   `rawHeaders` has an odd length. (Input from node:http's server parser never does; the check
 *   guards header values the proxy builds from client input.)
 */
export function serializeRequestHead(method: string, path: string, rawHeaders: readonly string[], checkedLength = 0): string {
  if (!isToken(method)) throw new BadRequestError(`invalid request method ${JSON.stringify(method)}`);
  if (!VALID_TARGET.test(path)) throw new BadRequestError(`invalid request target ${JSON.stringify(path)}`);
  if (rawHeaders.length % 2 !== 0) throw new BadRequestError('rawHeaders must hold name, value pairs');
  let head = `${method} ${path} HTTP/1.1\r\n`;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const value = rawHeaders[i + 1] as string;
    if (i >= checkedLength) {
      if (!isToken(name)) throw new BadRequestError(`invalid header name ${JSON.stringify(name)}`);
      if (hasInvalidFieldChar(value)) throw new BadRequestError(`invalid character in header ${name}`);
    }
    head += `${name}: ${value}\r\n`;
  }
  return `${head}\r\n`;
}

const LAST_CHUNK = Buffer.from('0\r\n\r\n');

/**
 * The end of a chunked body (RFC 9112 §7.1): `0` CRLF, the trailer fields, CRLF.
 *
 * @param trailers `[name, value]` pairs, already limited to the fields that may be trailers. A
 *   field that could not be written as it is (a name that is not a token, a value with CR, LF or
 *   another control character) is left out: trailers come from this proxy's own chunked decoder,
 *   which refuses such fields, so none is lost in practice, and none can split the message.
 * @returns `0\r\n\r\n` when no field is left.
 */
export function serializeLastChunk(trailers: readonly (readonly [string, string])[]): Buffer {
  let text = '';
  for (const [name, value] of trailers) {
    if (isToken(name) && !hasInvalidFieldChar(value)) text += `${name}: ${value}\r\n`;
  }
  return text === '' ? LAST_CHUNK : Buffer.from(`0\r\n${text}\r\n`, 'latin1');
}
