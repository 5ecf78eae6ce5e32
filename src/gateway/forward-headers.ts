/**
 * Header cloning for both directions (SPEC 5; the tutorial's "clone the headers, add
 * X-Forwarded-For" step). Headers travel as node:http's `rawHeaders` — a flat `[name, value, …]`
 * list — so every value, its case and its order survive (two `Set-Cookie` stay two) and the bytes
 * pass unchanged (node decodes header bytes as latin1 and encodes them back as latin1).
 *
 * Request direction, in this order (Go's `ReverseProxy.ServeHTTP` does the same steps):
 *   1. drop hop-by-hop headers and every header the client's `Connection` names (RFC 9110 §7.6.1),
 *      keeping `TE: trailers`; and a framing or hop-by-hop name spelt with `_` for `-`
 *      (`Transfer_Encoding`, `Content_Length`, `Keep_Alive`): CGI-style backends read it as the
 *      real one, which the proxy has judged and re-framed (nginx drops every name with `_`);
 *   2. drop client-sent forwarding headers unless the peer is a trusted proxy: every `X-Forwarded-*`
 *      (`-For`, `-Host`, `-Proto`, but also `-Port`, `-Prefix`, … that frameworks build URLs from),
 *      `Forwarded`, `X-Real-IP` and the other client-address, host and client-certificate headers of `VOUCHED_HEADERS`
 *      (the rewritten-URL headers of `REWRITTEN_TARGET_HEADERS` are dropped from every peer);
 *      spelt with `_` for `-` (`X_Forwarded_For`) they are dropped from every peer, a trusted one too: CGI-style backends map both spellings onto one
 *      variable, and a trusted load balancer appends to `X-Forwarded-For` but passes the client's
 *      `X_Forwarded_For` on untouched, which would bring the spoof back (nginx drops every name with
 *      `_` by default, `underscores_in_headers off`);
 *   3. set `Host` (`preserve_host`);
 *   4. add X-Forwarded-For (appended to a trusted peer's list), X-Forwarded-Host, X-Forwarded-Proto
 *      (`https` on the TLS listener; a trusted peer's own X-Forwarded-Host and -Proto are kept instead).
 * Step 1 happens before step 4, so `Connection: X-Forwarded-For` cannot remove the proxy's own header.
 */
import { byteTable, equalsIgnoringCase, FieldNameSet, listElements, startsWithIgnoringCase } from '../wire/field-bytes.js';
import { HOP_BY_HOP_HEADERS, isHopByHop, namedHopByHopHeaders } from './hop-by-hop.js';
import type { FieldLines } from '../wire/response-parser.js';

/** Inputs of {@link buildUpstreamRequestHeaders}. */
export interface ForwardingFacts {
  /**
   * The TCP peer's IP without port (`::ffff:` removed): what X-Forwarded-For appends, the hop this
   * proxy saw (not the client IP read from a trusted peer's list, SPEC 8).
   */
  readonly peerIp: string;
  /** Whether the TCP peer is in `trusted_proxies`. */
  readonly isTrustedPeer: boolean;
  /** How the request reached the proxy: `https` on the TLS listener. Sent as X-Forwarded-Proto unless a trusted peer sent its own. */
  readonly proto: 'http' | 'https';
  /** `preserve_host`: forward the client's Host (true) or send `upstreamHost` (false). */
  readonly preserveHost: boolean;
  /** The upstream's `host:port` (IPv6 in brackets). */
  readonly upstreamHost: string;
  /** Keep `Connection: upgrade` + `Upgrade` (only for upgrade requests). */
  readonly isUpgrade: boolean;
  /** Drop the client's `Authorization` (the proxy checked it itself and `auth_forward = off`). */
  readonly dropAuthorization: boolean;
  /**
   * The request's host when it came in the request target (absolute form, `GET http://h/p`): it
   * replaces any Host header (RFC 9112 §3.2.2). Undefined: the Host header is the host.
   */
  readonly targetHost?: string | undefined;
}

/**
 * The headers besides `X-Forwarded-*` in which a client could forge the address a front proxy
 * vouches for (step 2 of the file comment), lower-cased: `Forwarded`, `X-Real-IP`, and the names
 * CDNs, load balancers and frameworks read a client's address from.
 */
const CLIENT_ADDRESS_NAMES = [
  'forwarded',
  'x-real-ip',
  'true-client-ip',
  'x-client-ip',
  'client-ip',
  'x-cluster-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
  'x-originating-ip',
  'x-remote-ip',
  'x-remote-addr',
  'proxy-client-ip',
  'wl-proxy-client-ip',
  'x-envoy-external-address',
  'x-original-forwarded-for',
  'x-real-client-ip',
  'x-azure-clientip',
  'x-azure-socketip',
  'fly-client-ip',
  'x-appengine-user-ip',
];

/**
 * The other headers a front proxy vouches for, lower-cased: the host the client asked for
 * (`X-Original-Host`, `X-Host`, read by frameworks as `X-Forwarded-Host` is), the client
 * certificate it verified (`Client-Cert` and `Client-Cert-Chain` of RFC 9440, `X-SSL-Client-Cert`
 * and its kin, which mutual-TLS setups pass to the backend) and the scheme (`Front-End-Https`,
 * `X-Url-Scheme`, read as `X-Forwarded-Proto` is). A client's own would make a backend build URLs for another host or trust a
 * certificate nobody checked.
 */
const FRONT_PROXY_NAMES = [
  'x-original-host',
  'x-host',
  'x-ssl-client-cert',
  'ssl-client-cert',
  'x-client-cert',
  'x-ssl-client-verify',
  'x-ssl-client-dn',
  'x-ssl-client-s-dn',
  'x-client-verify',
  'x-client-dn',
  'ssl-client-verify',
  'client-cert',
  'client-cert-chain',
  'x-arr-clientcert',
  'x-amzn-mtls-clientcert',
  'front-end-https',
  'x-url-scheme',
];
/** Every name besides `X-Forwarded-*` that is kept from a trusted peer only. */
const VOUCHED_HEADERS = new FieldNameSet([...CLIENT_ADDRESS_NAMES, ...FRONT_PROXY_NAMES]);

/**
 * The headers in which a front proxy says which URL it rewrote, read by some backends in place of
 * the request target: `X-Original-URL` and `X-Rewrite-URL` (IIS, Symfony), `X-Original-URI`
 * (nginx `auth_request` setups hand it to their auth service), `X-Envoy-Original-Path`. A backend
 * that read a client's own would serve another path than the one this proxy routed and checked
 * `access` for (a break test). They are dropped from every peer, a trusted one too: load balancers
 * pass the client's copy on (a review), and this proxy never rewrites a URL that way.
 */
const REWRITTEN_TARGET_NAMES = ['x-original-url', 'x-rewrite-url', 'x-original-uri', 'x-envoy-original-path'];
const REWRITTEN_TARGET_HEADERS = new FieldNameSet(REWRITTEN_TARGET_NAMES);

/** 1 for the first letter, in either case, of every name `forwardingHeaderKind` knows (`x-forwarded…` and the three lists): any other name is answered at once. */
const FORWARDING_FIRST_LETTERS = byteTable((b) =>
  ['x-forwarded', ...CLIENT_ADDRESS_NAMES, ...FRONT_PROXY_NAMES, ...REWRITTEN_TARGET_NAMES].some((name) => name.charCodeAt(0) === b || name.charCodeAt(0) === b + 0x20),
);

/**
 * What a header name (any case, `_` read as `-`) carries that a client could forge (step 2 of the
 * file comment): `vouched`, the client's address or the request's host or scheme (`X-Forwarded-*`
 * and `VOUCHED_HEADERS`: kept from a trusted peer), `rewritten-target`
 * (`REWRITTEN_TARGET_HEADERS`: dropped from every peer), or undefined. Allocates nothing unless
 * the name holds a `_`.
 */
function forwardingHeaderKind(name: string, hasUnderscore: boolean): 'vouched' | 'rewritten-target' | undefined {
  if (FORWARDING_FIRST_LETTERS[name.charCodeAt(0)] !== 1) return undefined;
  const dashed = hasUnderscore ? name.replaceAll('_', '-') : name;
  if (REWRITTEN_TARGET_HEADERS.has(dashed)) return 'rewritten-target';
  const isVouched = startsWithIgnoringCase(dashed, 'x-forwarded-') || equalsIgnoringCase(dashed, 'x-forwarded') || VOUCHED_HEADERS.has(dashed);
  return isVouched ? 'vouched' : undefined;
}

/** Whether a lower-cased name with `_` is, read with `-`, a framing or hop-by-hop one (step 1 of the file comment). */
function isUnderscoreFramingHeader(lowerName: string): boolean {
  const name = lowerName.replaceAll('_', '-');
  return name === 'content-length' || HOP_BY_HOP_HEADERS.has(name);
}

/**
 * The header list to send upstream, as a flat raw list with `Host` first. Never mutates
 * `clientRawHeaders`. Body framing (`Transfer-Encoding`) is the caller's: it is hop-by-hop and the
 * body is re-framed on the upstream connection.
 *
 * Every field of the list is valid to write as it is (a token name, a value of field characters;
 * serializeRequestHead's `checkedLength`) when `clientRawHeaders` came from the request parser,
 * which refuses everything else: the names and values it adds are the client's own, constants, the
 * peer's address, a request target's host (visible ASCII, request-parser.ts) and a pass line's
 * host (a host name or IP address, pass-line.ts).
 */
export function buildUpstreamRequestHeaders(clientRawHeaders: readonly string[], facts: ForwardingFacts): string[] {
  const named = namedHopByHopHeaders(clientRawHeaders);
  const out: string[] = [];
  let host: string | undefined;
  let priorForwardedFor: string | undefined;
  let hasForwardedHost = false;
  let hasForwardedProto = false;

  // Names are compared without lower-casing each one (`equalsIgnoringCase`, src/wire/field-bytes.ts).
  for (let i = 0; i < clientRawHeaders.length; i += 2) {
    const name = clientRawHeaders[i]!;
    const value = clientRawHeaders[i + 1]!;

    if (equalsIgnoringCase(name, 'host')) {
      host ??= value;
      continue; // re-added first, below
    }
    if (facts.isUpgrade && (equalsIgnoringCase(name, 'upgrade') || equalsIgnoringCase(name, 'connection'))) continue; // re-added below
    if (isHopByHop(name, named)) {
      if (equalsIgnoringCase(name, 'te') && hasTrailersToken(value)) out.push(name, 'trailers');
      continue;
    }
    const hasUnderscore = name.includes('_');
    if (hasUnderscore && isUnderscoreFramingHeader(name.toLowerCase())) continue;
    if (facts.dropAuthorization && equalsIgnoringCase(name, 'authorization')) continue;
    const forwarding = forwardingHeaderKind(name, hasUnderscore);
    if (forwarding !== undefined) {
      if (forwarding === 'rewritten-target' || !facts.isTrustedPeer || hasUnderscore) continue;
      if (equalsIgnoringCase(name, 'x-forwarded-for')) {
        priorForwardedFor = priorForwardedFor === undefined ? value : `${priorForwardedFor}, ${value}`;
        continue; // re-added once, with the client appended
      }
      if (equalsIgnoringCase(name, 'x-forwarded-host')) hasForwardedHost = true;
      if (equalsIgnoringCase(name, 'x-forwarded-proto')) hasForwardedProto = true;
    }
    if (equalsIgnoringCase(name, 'expect')) continue; // the proxy answered `100-continue` itself (see request-path.ts)
    out.push(name, value);
  }

  if (facts.targetHost !== undefined) host = facts.targetHost;
  const hostHeader = facts.preserveHost && host !== undefined ? host : facts.upstreamHost;
  out.unshift('Host', hostHeader);
  if (facts.isUpgrade) {
    const upgrade = headerValue(clientRawHeaders, 'upgrade');
    if (upgrade !== undefined) out.push('Connection', 'upgrade', 'Upgrade', upgrade);
  }
  out.push('X-Forwarded-For', priorForwardedFor === undefined ? facts.peerIp : `${priorForwardedFor}, ${facts.peerIp}`);
  if (!hasForwardedHost && host !== undefined) out.push('X-Forwarded-Host', host);
  if (!hasForwardedProto) out.push('X-Forwarded-Proto', facts.proto);
  return out;
}

/**
 * The header list to send to the client from the upstream's raw response headers: hop-by-hop ones
 * and those named by the upstream's `Connection` removed, everything else kept in order. The
 * exceptions: a 426 keeps `Upgrade` (it must say which protocol to upgrade to, RFC 9110
 * §15.5.22), and a 101 keeps `Upgrade` and gets `Connection: upgrade` (RFC 9110 §7.8: the two
 * headers that make the switch; nginx writes its 101 the same way), so `Connection: upgrade,
 * X-Internal` does not let `X-Internal` through; the `Content-Length` of a 101 or a 204 is dropped
 * (RFC 9110 §8.6: a server must not send one with a 1xx or 204; a client that believed it would
 * read the next response's bytes as this one's body; nginx and Go drop it too).
 * Every field of the list is valid to write as it is (the writer's `checkedLength`) when
 * `upstreamRawHeaders` came from the response parser, which refuses everything else.
 */
export function buildClientResponseHeaders(upstreamRawHeaders: readonly string[], statusCode = 200): string[] {
  return buildClientResponseFields({ rawHeaders: upstreamRawHeaders, statusCode, fieldLines: undefined }).headers;
}

/** The client's response fields: buildClientResponseHeaders' list, and the same fields as lines when they can be copied. */
export interface ClientResponseFields {
  readonly headers: string[];
  /**
   * Every field of `headers` as its line on the wire (`name ": " value CRLF`), in order: the
   * upstream's own lines, copied in runs (`ResponseHead.fieldLines`), for the writer to send
   * instead of joining each name and value again. Undefined when the upstream's lines are not
   * known or not in that form, and for a 101 (whose `Connection` is the proxy's).
   */
  readonly fieldBlock: string | undefined;
}

/**
 * buildClientResponseHeaders on a parsed head, with the kept fields also as one block of lines
 * (`ClientResponseFields.fieldBlock`): a head whose only dropped field is `Connection` is two
 * copies of the upstream's text.
 */
export function buildClientResponseFields(upstreamHead: { readonly rawHeaders: readonly string[]; readonly statusCode: number; readonly fieldLines: FieldLines | undefined }): ClientResponseFields {
  const { rawHeaders, statusCode } = upstreamHead;
  const lines = statusCode === 101 ? undefined : upstreamHead.fieldLines;
  const named = namedHopByHopHeaders(rawHeaders);
  const isUpgradeKept = statusCode === 426 || statusCode === 101;
  const headers: string[] = [];
  let fieldBlock = '';
  let runStart = -1; // the kept lines not yet in fieldBlock: text[runStart, runEnd)
  let runEnd = -1;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const isDropped =
      (isHopByHop(name, named) && !(isUpgradeKept && equalsIgnoringCase(name, 'upgrade'))) ||
      ((statusCode === 101 || statusCode === 204) && equalsIgnoringCase(name, 'content-length'));
    if (lines === undefined) {
      if (!isDropped) headers.push(name, rawHeaders[i + 1]!);
      continue;
    }
    if (isDropped) {
      if (runStart !== -1) fieldBlock += lines.text.slice(runStart, runEnd);
      runStart = -1;
      continue;
    }
    headers.push(name, rawHeaders[i + 1]!);
    if (runStart === -1) runStart = lines.lineStarts[i / 2]!;
    runEnd = lines.lineStarts[i / 2 + 1]!;
  }
  if (statusCode === 101) headers.push('Connection', 'upgrade');
  if (lines === undefined) return { headers, fieldBlock: undefined };
  if (runStart !== -1) fieldBlock += lines.text.slice(runStart, runEnd);
  return { headers, fieldBlock };
}

/**
 * The client's trailers that go on to the upstream, as `[name, value]` pairs: `forwardableTrailers`
 * (with `named`, the request head's `namedHopByHopHeaders`) without the forwarding headers a
 * client could forge (`X-Forwarded-*`, `VOUCHED_HEADERS` and `REWRITTEN_TARGET_HEADERS`, also spelt
 * with `_`), whoever the peer is: the proxy judged those in the head, and a backend that merges
 * trailers into its headers must not find a spoof there.
 */
export function forwardableRequestTrailers(rawTrailers: readonly string[], named: FieldNameSet | undefined): [string, string][] {
  return forwardableTrailers(rawTrailers, named).filter(([name]) => forwardingHeaderKind(name, name.includes('_')) === undefined);
}

/**
 * The `Trailer` announcement for the client (RFC 9110 §6.6.2): the names every upstream `Trailer`
 * header lists, without those `forwardableTrailers` drops from the trailers themselves (with the
 * head's own `Connection` names), so they are not announced either (Go's client refuses a response
 * that announces `Content-Length`). Undefined when none is left.
 */
export function announcedTrailers(upstreamRawHeaders: readonly string[]): string | undefined {
  let names: string[] | undefined;
  let named: FieldNameSet | undefined;
  let isNamedRead = false;
  for (let i = 0; i < upstreamRawHeaders.length; i += 2) {
    if (!equalsIgnoringCase(upstreamRawHeaders[i]!, 'trailer')) continue;
    if (!isNamedRead) {
      named = namedHopByHopHeaders(upstreamRawHeaders);
      isNamedRead = true;
    }
    for (const name of listElements(upstreamRawHeaders[i + 1]!)) {
      if (mayBeTrailer(name, named)) (names ??= []).push(name);
    }
  }
  return names?.join(', ');
}

/** A raw list without the fields named `lowerName` (in any case); a new list. */
export function withoutHeader(rawHeaders: readonly string[], lowerName: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!equalsIgnoringCase(rawHeaders[i]!, lowerName)) out.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return out;
}

/** The first value of header `lowerName` in a raw list, or undefined. */
export function headerValue(rawHeaders: readonly string[], lowerName: string): string | undefined {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (equalsIgnoringCase(rawHeaders[i]!, lowerName)) return rawHeaders[i + 1];
  }
  return undefined;
}

function hasTrailersToken(value: string): boolean {
  return listElements(value).some((token) => equalsIgnoringCase(token, 'trailers'));
}

/**
 * Fields that may not come as trailers (RFC 9110 §6.5.1: framing, routing, request modifiers,
 * authentication, response control and how to process the content), lower-cased: Go's
 * `badTrailer` list, and `cookie` and `set-cookie` (§6.5.1 names `Set-Cookie` among the
 * authentication fields) and the method overrides `x-http-method-override`, `x-http-method` and `x-method-override`
 * (request modifiers: frameworks read them in place of the method the proxy judged). A trailer `Content-Length: 99` must not reach a client
 * that may read it, nor a trailer `Cookie` a backend that merges trailers into its headers.
 */
const FORBIDDEN_TRAILERS = new FieldNameSet([
  'authorization', 'cache-control', 'connection', 'content-encoding', 'content-length', 'content-range',
  'content-type', 'cookie', 'expect', 'host', 'keep-alive', 'max-forwards', 'pragma', 'proxy-authenticate',
  'proxy-authorization', 'proxy-connection', 'range', 'realm', 'set-cookie', 'te', 'trailer', 'transfer-encoding',
  'www-authenticate', 'x-http-method', 'x-http-method-override', 'x-method-override',
]);

/**
 * The trailers that may go on, as `[name, value]` pairs, in order: every field but those of
 * `FORBIDDEN_TRAILERS` (dropped, as Go's server refuses to write them) and the hop-by-hop ones,
 * those the message's head named in `Connection` included (a break test: `Connection: X-Secret`
 * removed the header and the same field came on as a trailer), each also spelt with `_` for `-`
 * (`Set_Cookie`, `Content_Length`: CGI-style readers take both spellings as one). For the
 * upstream's trailers to the client, and the client's to the upstream (Go forwards both).
 * @param rawTrailers `[name, value, …]` as the response parser or the chunked decoder read them
 * @param named the `namedHopByHopHeaders` of the head the trailers end
 */
export function forwardableTrailers(rawTrailers: readonly string[], named: FieldNameSet | undefined): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < rawTrailers.length; i += 2) {
    const name = rawTrailers[i]!;
    if (mayBeTrailer(name, named)) out.push([name, rawTrailers[i + 1]!]);
  }
  return out;
}

/** Whether a field may be forwarded as a trailer (`forwardableTrailers`). */
function mayBeTrailer(name: string, named: FieldNameSet | undefined): boolean {
  const dashed = name.includes('_') ? name.replaceAll('_', '-') : name;
  return !FORBIDDEN_TRAILERS.has(dashed) && !isHopByHop(dashed, named) && !isHopByHop(name, named);
}
