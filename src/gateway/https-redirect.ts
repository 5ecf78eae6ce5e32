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
 * - paths under ACME_CHALLENGE_PREFIX are not redirected: an ACME server fetches the HTTP-01
 *   challenge over plain HTTP (RFC 8555 §8.3), as Caddy exempts them;
 * - a request with no host to redirect to (HTTP/1.0 without Host) gets 400.
 */
import type { RequestTarget } from './request-target.js';

/** Where HTTP-01 challenge answers live (RFC 8555 §8.3): never redirected. */
export const ACME_CHALLENGE_PREFIX = '/.well-known/acme-challenge/';

/**
 * The `Location` of the redirect for `target`, `'exempt'` for an ACME challenge path, or
 * undefined when the request names no host.
 * @param httpsPort the HTTPS listener's port, 1..65535
 */
export function httpsRedirectLocation(target: RequestTarget, httpsPort: number): string | 'exempt' | undefined {
  if (target.path.literal.startsWith(ACME_CHALLENGE_PREFIX)) return 'exempt';
  if (target.hostName === undefined) return undefined;
  return `https://${target.hostName}${httpsPort === 443 ? '' : `:${httpsPort}`}${target.path.literal}${target.query}`;
}
