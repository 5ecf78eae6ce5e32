/**
 * Hop-by-hop headers: the ones that describe a single connection and must not be forwarded by a
 * proxy (RFC 9110 section 7.6.1, "Connection"; RFC 9112 section 7 for Transfer-Encoding and TE).
 * Go's `httputil.ReverseProxy` keeps the same list as `hopHeaders`; nginx drops them implicitly by
 * building the upstream request from scratch.
 *
 * Besides this fixed list, every header *named* in a `Connection` header is hop-by-hop for that
 * message (`Connection: close, X-Custom` makes `X-Custom` hop-by-hop). The proxy removes those before
 * it adds its own headers, so a client cannot make it drop `X-Forwarded-For` that way.
 */

/** Lowercase names of the hop-by-hop headers (SPEC 5). `TE: trailers` and upgrade headers are handled by callers. */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection', // non-standard, still sent by old clients
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'http2-settings', // a connection-specific field of the h2c upgrade, RFC 7540 §3.2.1 (never tunnelled: http1-server.ts `isTunnelledUpgrade`)
]);

/**
 * The lowercase tokens listed in every `Connection` header of a raw header list
 * (`[name, value, name, value, …]` as node:http gives `rawHeaders`).
 * `Connection: close, X-Custom` → {'close', 'x-custom'}.
 */
export function connectionTokens(rawHeaders: readonly string[]): Set<string> {
  const tokens = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === 10 && rawHeaders[i]!.toLowerCase() === 'connection') {
      for (const token of rawHeaders[i + 1]!.split(',')) {
        const name = token.trim().toLowerCase();
        if (name !== '') tokens.add(name);
      }
    }
  }
  return tokens;
}

/**
 * Headers a `Connection` header may not remove: `Content-Length` frames the message the proxy
 * forwards byte for byte, so dropping it because the sender listed it (`Connection: Content-Length`)
 * would turn the body into the start of another request on the upstream connection — request
 * smuggling. `Host` is rebuilt by the proxy anyway.
 */
const FRAMING_HEADERS: ReadonlySet<string> = new Set(['content-length', 'host']);

/** True when `name` (any case) is hop-by-hop for a message whose Connection header listed `named`. */
export function isHopByHop(lowerName: string, named: ReadonlySet<string>): boolean {
  return HOP_BY_HOP_HEADERS.has(lowerName) || (named.has(lowerName) && !FRAMING_HEADERS.has(lowerName));
}
