/**
 * The proxy's own answers (SPEC 5), written by one function, `sendErrorResponse` — the error funnel
 * of Go's `ReverseProxy` (`getErrorHandler`) and Caddy's `statusError`: every answer the proxy
 * gives itself before the commit point (a refused request, no route, its own Basic auth, the body
 * limit, an upstream that failed or was not there, the answers to what node:http could not parse)
 * is a `ProxyAnswer` that knows its status, and goes out here: one short plain-text line, never a
 * stack trace, `Connection: close` when the connection cannot be trusted afterwards (bad framing,
 * an unread body), and a `Date` (the response writer adds it, RFC 9110 §6.6.1). Once the
 * upstream's head went to the client no answer can be written any more: errors close the
 * connection instead (see request-path.ts).
 */
import type { ClientResponse } from '../wire/client-side.js';
import { writeTextAnswer } from '../wire/text-answer.js';
import { STATUS_CODES } from 'node:http';

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

/** The one-line body for `status` (without its newline). */
export function errorText(status: number): string {
  return ERROR_TEXT[status] ?? (STATUS_CODES[status] ?? 'error').toLowerCase();
}

/** An answer the proxy writes itself, before the commit point. */
export interface ProxyAnswer {
  readonly status: number;
  /** The one-line body, without its newline. Default: `errorText(status)`. */
  readonly text?: string;
  /** Headers that belong to this answer as a flat raw list: `Retry-After`, `WWW-Authenticate`, `Location`. */
  readonly extraHeaders?: readonly string[];
  /** Add `Connection: close`: the connection is closed after the answer. Default false. */
  readonly shouldClose?: boolean;
}

/**
 * The error funnel: writes `answer` (`text\n` as `text/plain`, with its Content-Length) and ends
 * the response. A response whose head was already written, or whose connection is gone, is
 * destroyed instead (a client must not take a half-written response for a whole one). A HEAD
 * request gets the head only.
 * @returns the body bytes written (for the access log)
 */
export function sendErrorResponse(clientRes: ClientResponse, answer: ProxyAnswer): number {
  if (clientRes.headersSent || clientRes.destroyed) {
    clientRes.destroy();
    return 0;
  }
  return writeTextAnswer(clientRes, answer.status, answer.text ?? errorText(answer.status), answer);
}
