/**
 * The request line as the client sent it, read from raw bytes that were never parsed as a request:
 * what the access log shows for an answer the server wrote before any request head existed (a 400
 * for a head the parser refused, a 408 for one that did not finish, the HTTPS listener's 400 to a
 * plain HTTP request). nginx logs `$request` so: from the request's first byte to the first CR or
 * LF of what it read (`ngx_http_variable_request_line`), whether or not it parsed.
 *
 * Only what can be read safely is given: printable ASCII, never more than a bound, so a line of
 * the log stays one line and short, and nothing is made up. nginx escapes every other byte as
 * `\xHH` and logs it; here a line with any such byte (binary garbage, a TLS record sent to the
 * plain port, a control character) is not given at all, and is logged `-`: it cannot be a request
 * line, and escaping kilobytes of it only makes the log longer.
 */
import { CR, LF } from './field-bytes.js';

/** The longest request line given, bytes; a longer one is cut there (nginx's longest is its 8 KiB `large_client_header_buffers`). */
export const MAX_RECEIVED_LINE_BYTES = 8192;

/** The first printable ASCII byte (SP) and the last (`~`); HTAB and DEL are not among them. */
const FIRST_PRINTABLE = 0x20;
const LAST_PRINTABLE = 0x7e;

/**
 * The first line of `pieces` (the bytes read, in order), latin1: after any empty lines (CRLF or
 * LF, which a server ignores before a request line, RFC 9112 §2.2), up to the first CR or LF, or
 * to the end of what came, at most MAX_RECEIVED_LINE_BYTES.
 * @returns the line, or undefined when it is empty or holds a byte that is not printable ASCII.
 */
export function receivedRequestLine(pieces: readonly Buffer[]): string | undefined {
  const bytes = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
  let start = 0;
  while (start < bytes.length && (bytes[start] === CR || bytes[start] === LF)) start++;
  const limit = Math.min(bytes.length, start + MAX_RECEIVED_LINE_BYTES);
  let end = start;
  for (; end < limit; end++) {
    const byte = bytes[end]!;
    if (byte === CR || byte === LF) break;
    if (byte < FIRST_PRINTABLE || byte > LAST_PRINTABLE) return undefined;
  }
  return end === start ? undefined : bytes.toString('latin1', start, end);
}
