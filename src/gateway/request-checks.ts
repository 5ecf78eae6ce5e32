/**
 * What a request must satisfy before it is routed, beyond what the server's parser already
 * enforces (src/wire/request-parser.ts: the version, the framing headers, the transfer coding).
 * The target and the authority are checked next, where they are read for routing
 * (request-target.ts, authority.ts).
 *
 * - exactly one `Host` header in HTTP/1.1 (none or two → 400, as nginx's "client sent duplicate
 *   host header");
 * - at most one `Authorization` header: with two, the proxy's own Basic auth would check one while
 *   the upstream may read the other (nginx: "client sent duplicate header line", 400);
 * - `Expect` may only be `100-continue` (RFC 9110 §10.1.1: anything else → 417).
 */
import type { ClientRequest } from '../wire/client-side.js';
import { equalsIgnoringCase } from '../wire/field-bytes.js';

/** A request the proxy refuses: the status and its one-line reason. */
export interface RequestProblem {
  readonly status: 400 | 417;
  readonly text: string;
}

/** The first problem of `clientReq`, or undefined when it may go on. */
export function findRequestProblem(clientReq: ClientRequest): RequestProblem | undefined {
  let hostCount = 0;
  let authorizationCount = 0;
  let expect: string | undefined; // several Expect fields are one list (RFC 9110 §5.3), as node's `headers` joins them
  const raw = clientReq.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (equalsIgnoringCase(name, 'host')) {
      hostCount++;
    } else if (equalsIgnoringCase(name, 'authorization')) {
      authorizationCount++;
    } else if (equalsIgnoringCase(name, 'expect')) {
      expect = expect === undefined ? raw[i + 1]! : `${expect}, ${raw[i + 1]!}`;
    }
  }
  if (hostCount > 1) return { status: 400, text: 'bad request: more than one Host header' };
  if (authorizationCount > 1) return { status: 400, text: 'bad request: more than one Authorization header' };
  if (hostCount === 0 && clientReq.httpVersion === '1.1') return { status: 400, text: 'bad request: missing Host header' };
  if (expect !== undefined && expect.trim().toLowerCase() !== '100-continue') {
    return { status: 417, text: `expectation failed: only 100-continue is supported, got '${expect}'` };
  }
  return undefined;
}
