/**
 * What a request must satisfy before it is routed, beyond what node's parser already enforces
 * (RFC 9112 §3.2). The target and the authority are checked next, where they are read for routing
 * (request-target.ts, authority.ts).
 *
 * - first the version: HTTP/1.0 or HTTP/1.1 (another major version → 505, RFC 9110 §15.6.6). The
 *   fast lane judges every request line before node:http sees it (request-line-version.ts); this
 *   check covers what node:http parses on a connection it already holds, where llhttp serves
 *   `HTTP/2.0` and `HTTP/0.9` (and a line without a version, as 0.9);
 * - exactly one `Host` header in HTTP/1.1 (none or two → 400, as nginx's "client sent duplicate
 *   host header");
 * - at most one `Authorization` header: with two, the proxy's own Basic auth would check one while
 *   the upstream may read the other (nginx: "client sent duplicate header line", 400);
 * - `Expect` may only be `100-continue` (RFC 9110 §10.1.1: anything else → 417);
 * - `Transfer-Encoding` must be exactly `chunked`: the body is re-framed for the upstream, and a
 *   coding the proxy does not understand (`gzip, chunked`) cannot be passed on (501, as nginx).
 */
import type { ClientRequest } from '../http/client-exchange.js';
import { judgeHttpVersion } from '../http/request-line-version.js';
import { errorText } from './error-response.js';

/** A request the proxy refuses: the status and its one-line reason. */
export interface RequestProblem {
  readonly status: 400 | 417 | 501 | 505;
  readonly text: string;
}

/** The first problem of `clientReq`, or undefined when it may go on. */
export function findRequestProblem(clientReq: ClientRequest): RequestProblem | undefined {
  const version = clientReq.httpVersion;
  if (version !== '1.1' && version !== '1.0') {
    const verdict = judgeHttpVersion(`HTTP/${version}`);
    if (verdict.kind === 'refused') return { status: verdict.status, text: errorText(verdict.status) };
  }
  let hostCount = 0;
  let authorizationCount = 0;
  let transferEncoding: string | undefined;
  const raw = clientReq.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') {
      hostCount++;
    } else if (name.length === 13 && name.toLowerCase() === 'authorization') {
      authorizationCount++;
    } else if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') {
      transferEncoding = transferEncoding === undefined ? raw[i + 1]! : `${transferEncoding}, ${raw[i + 1]!}`;
    }
  }
  if (hostCount > 1) return { status: 400, text: 'bad request: more than one Host header' };
  if (authorizationCount > 1) return { status: 400, text: 'bad request: more than one Authorization header' };
  if (hostCount === 0 && clientReq.httpVersion === '1.1') return { status: 400, text: 'bad request: missing Host header' };
  const expect = clientReq.headers.expect;
  if (expect !== undefined && expect.trim().toLowerCase() !== '100-continue') {
    return { status: 417, text: `expectation failed: only 100-continue is supported, got '${expect}'` };
  }
  if (transferEncoding !== undefined && transferEncoding.trim().toLowerCase() !== 'chunked') {
    return { status: 501, text: `not implemented: transfer coding '${transferEncoding}'` };
  }
  return undefined;
}
