/**
 * `redirect_https = on` (SPEC 1.2): the plain listener answers every request with a permanent
 * redirect to the same resource over HTTPS, nginx's `return 308 https://$host$request_uri`
 * (Caddy's automatic HTTP→HTTPS redirects do the same, with 308 since v2):
 *
 *   GET /a/b?x=1 HTTP/1.1          →   308 Permanent Redirect
 *   Host: Example.COM:8080             Location: https://example.com:8443/a/b?x=1
 *
 * - 308, not 301: a client must repeat the method and body (RFC 9110 §15.4.9), so a POST stays a POST;
 * - the host is the request's (authority.ts: lower-cased, its port and a trailing dot removed);
 *   `:PORT` is the HTTPS listener's port, left out when it is 443;
 * - the path and query are the request target's bytes as they came (no decoding, no normalising);
 * - an HTTP-01 challenge request is not redirected: an ACME server fetches it over plain HTTP (RFC
 *   8555 §8.3), as Caddy exempts them; without `[acme]` it is routed (an ACME client beside the
 *   proxy, such as certbot's webroot behind an upstream, answers it). Only a GET or HEAD of exactly
 *   the prefix and one token, without query, body or upgrade, is one (acme-challenge.ts):
 *   `/.well-known/acme-challenge/../../admin`, a POST, a WebSocket upgrade there is redirected like
 *   anything else, so the exemption cannot carry another request past the redirect;
 * - a request with no host to redirect to (HTTP/1.0 without Host) gets 400.
 */
import type { RequestTarget } from './request-target.js';
import type { ClientRequest } from '../wire/client-side.js';
import { isChallengeRequest } from './acme-challenge.js';

/**
 * The `Location` of the redirect for `clientReq` and its `target`, `'exempt'` for an ACME
 * challenge request, or undefined when the request names no host.
 * @param httpsPort the HTTPS listener's port, 1..65535
 */
export function httpsRedirectLocation(clientReq: Pick<ClientRequest, 'method' | 'body' | 'upgrade'>, target: RequestTarget, httpsPort: number): string | 'exempt' | undefined {
  if (isChallengeRequest(clientReq, target)) return 'exempt';
  if (target.hostName === undefined) return undefined;
  return `https://${target.hostName}${httpsPort === 443 ? '' : `:${httpsPort}`}${target.path.literal}${target.query}`;
}
