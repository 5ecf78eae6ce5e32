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

import { equalsIgnoringCase, FieldNameSet, listElements } from '../wire/field-bytes.js';

/** The hop-by-hop headers (SPEC 5), matched in any case. `TE: trailers` and upgrade headers are handled by callers. */
export const HOP_BY_HOP_HEADERS = new FieldNameSet([
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
 * Headers a `Connection` header may not remove: `Content-Length` frames the message the proxy
 * forwards byte for byte, so dropping it because the sender listed it (`Connection: Content-Length`)
 * would turn the body into the start of another request on the upstream connection — request
 * smuggling. `Host` is rebuilt by the proxy anyway.
 */
const FRAMING_HEADERS = new FieldNameSet(['content-length', 'host']);

/**
 * The headers that the `Connection` headers of a raw header list (`[name, value, name, value, …]`)
 * make hop-by-hop beyond the fixed list, framing headers excepted: `Connection: close, X-Custom`
 * → {x-custom}. Undefined when there are none, as with the usual `Connection: keep-alive` or `close`.
 */
export function namedHopByHopHeaders(rawHeaders: readonly string[]): FieldNameSet | undefined {
  let named: string[] | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!equalsIgnoringCase(rawHeaders[i]!, 'connection')) continue;
    const value = rawHeaders[i + 1]!;
    if (equalsIgnoringCase(value, 'keep-alive') || equalsIgnoringCase(value, 'close')) continue; // the usual values (trimmed by the parsers), which name nothing: no split
    for (const token of listElements(value)) {
      if (equalsIgnoringCase(token, 'close') || HOP_BY_HOP_HEADERS.has(token) || FRAMING_HEADERS.has(token)) continue;
      (named ??= []).push(token.toLowerCase());
    }
  }
  return named === undefined ? undefined : new FieldNameSet(named);
}

/** True when `name` (any case) is hop-by-hop for a message whose Connection headers named `named` ({@link namedHopByHopHeaders}). */
export function isHopByHop(name: string, named: FieldNameSet | undefined): boolean {
  return HOP_BY_HOP_HEADERS.has(name) || (named !== undefined && named.has(name));
}
