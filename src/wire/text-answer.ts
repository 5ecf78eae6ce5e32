/**
 * The bytes of every answer the proxy writes itself (SPEC 5: one short plain-text line, never a
 * stack trace): the gateway's error funnel (`sendErrorResponse`, src/gateway/error-response.ts) and
 * the server loop's refusals before a request exists (408, the parser's 400/414/431/501/505,
 * CONNECT's 405) both write through this one function, so no answer is shaped twice. The response
 * writer adds `Date` (RFC 9110 §6.6.1) and the keep-alive or close headers.
 */
import { STATUS_CODES } from 'node:http';
import type { ClientResponse } from './client-side.js';

export interface TextAnswerOptions {
  /** Headers that belong to this answer, flat raw list: `Retry-After`, `WWW-Authenticate`, `Location`. */
  readonly extraHeaders?: readonly string[];
  /** Add `Connection: close`: the connection is closed after the answer. Default false. */
  readonly shouldClose?: boolean;
}

/**
 * Writes `status` with the body `text\n` (`text/plain; charset=utf-8`, with its Content-Length) on
 * `clientRes`, whose head must not have been written yet, and ends it; a HEAD request gets the head
 * only. The reason phrase is node's for the status ("Error" for one it does not know).
 * @returns the body bytes written (for the access log).
 * @throws what `clientRes.writeHead` throws for an invalid extra header (a caller bug).
 */
export function writeTextAnswer(clientRes: ClientResponse, status: number, text: string, options: TextAnswerOptions = {}): number {
  const body = `${text}\n`;
  const bodyBytes = Buffer.byteLength(body);
  const headers = ['Content-Type', 'text/plain; charset=utf-8', 'Content-Length', String(bodyBytes), ...(options.extraHeaders ?? [])];
  if (options.shouldClose === true) headers.push('Connection', 'close');
  clientRes.writeHead(status, STATUS_CODES[status] ?? 'Error', headers);
  const isHead = clientRes.req.method === 'HEAD';
  clientRes.end(isHead ? undefined : body);
  return isHead ? 0 : bodyBytes;
}
