/**
 * The proxy's own error responses (SPEC 5): one short plain-text line, never a stack trace, with
 * `Connection: close` when the connection cannot be trusted afterwards (bad framing, unread body),
 * and a `Date` (node's ServerResponse and the fast lane add it; `rawErrorResponse` writes it).
 * Used only before the commit point — once the upstream's head went to the client, errors close the
 * connection instead (see request-path.ts).
 */
import type { ClientResponse } from '../http/client-exchange.js';
import { STATUS_CODES } from 'node:http';
import { httpDate } from '../http/http-date.js';

/** One-line bodies, keyed by status. */
const ERROR_TEXT: Readonly<Record<number, string>> = {
  400: 'bad request',
  401: 'authentication required',
  404: 'no route for this request',
  405: 'method not allowed: this proxy does not tunnel CONNECT',
  408: 'request timeout',
  413: 'request body too large',
  417: 'expectation failed',
  431: 'request header fields too large',
  499: 'client closed request',
  500: 'internal proxy error',
  501: 'not implemented',
  502: 'bad gateway: the upstream failed',
  503: 'service unavailable: no upstream available',
  504: 'gateway timeout: the upstream did not answer in time',
};

export function errorText(status: number): string {
  return ERROR_TEXT[status] ?? (STATUS_CODES[status] ?? 'error').toLowerCase();
}

/**
 * Sends `status` with its one-line body (`text\n`). Extra headers as a flat raw list.
 * `shouldClose` adds `Connection: close` so node closes the socket after the response.
 * Returns the body bytes written (for the access log).
 */
export function sendErrorResponse(
  clientRes: ClientResponse,
  status: number,
  options: { extraHeaders?: readonly string[]; shouldClose?: boolean; text?: string } = {},
): number {
  if (clientRes.headersSent || clientRes.destroyed) {
    clientRes.destroy();
    return 0;
  }
  const body = `${options.text ?? errorText(status)}\n`;
  const headers = ['Content-Type', 'text/plain; charset=utf-8', 'Content-Length', String(Buffer.byteLength(body)), ...(options.extraHeaders ?? [])];
  if (options.shouldClose === true) headers.push('Connection', 'close');
  // The reason phrase is given: node's writeHead keeps the phrase of an earlier head it refused.
  clientRes.writeHead(status, STATUS_CODES[status] ?? 'Error', headers);
  const isHead = clientRes.req.method === 'HEAD';
  clientRes.end(isHead ? undefined : body);
  return isHead ? 0 : Buffer.byteLength(body);
}

/**
 * A complete raw HTTP/1.1 error response for a socket node:http could not parse a request from
 * (the server's `clientError` event): 400, 408 or 431, always followed by closing the connection.
 * Dated like every other answer (RFC 9110 §6.6.1).
 */
export function rawErrorResponse(status: number): string {
  const body = `${errorText(status)}\n`;
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n` +
    `Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nDate: ${httpDate()}\r\nConnection: close\r\n\r\n${body}`
  );
}
