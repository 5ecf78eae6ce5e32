/**
 * The request target, read two ways, so that a request is judged as the upstream will read it.
 *
 * Backends read a path differently: Go, Flask, Django, Rails and Express decode every escape
 * before routing, most resolve dot segments, Tomcat and Spring cut `;` parameters, IIS and the
 * WHATWG URL parser read `\` as `/`, others take the bytes as they are. If the proxy judged a
 * request by one reading while the upstream used another, `/%61dmin/secret` could pass an open `/`
 * route and be served as `/admin/secret`. So every path is read two ways, and the router
 * (router.ts) accepts it only when every reading selects the same route:
 *
 * - **literally**: the bytes as they came, nothing decoded (`/%61dmin/./x` stays that);
 * - **normalised**: RFC 3986 §6.2.2 syntax-based normalisation taken as far as decoding backends
 *   take it, in this order:
 *   1. every percent-escape decoded, as UTF-8 (§6.2.2.2 decodes only unreserved characters;
 *      decoding backends decode all of them, `%2F` and `%5C` included);
 *   2. `\` read as `/`;
 *   3. repeated slashes merged (`//` as `/`: nginx's `merge_slashes`);
 *   4. dot segments removed with RFC 3986 §5.2.4 `remove_dot_segments` (§6.2.2.3): `/a/./b/../c`
 *      → `/a/c`, `/../x` → `/x`, `/a/..` → `/`; `%2e` counts as `.` since it was decoded in step 1.
 *
 * Backends stop at different steps, and the steps do not commute (`/x//../admin` is `/admin`
 * after merging, `/x/admin` without), so the normalised reading is taken in each of the ways
 * common backends take it ({@link NORMALISATIONS}: the full one above; decoding without `\` or
 * merging, as RFC 3986 resolution; Go's `path.Clean`; Tomcat's, which first cuts `;` parameters
 * so that `/admin;x/secret` is `/admin/secret` and `..;` is `..`; the WHATWG URL parser's, which
 * decodes nothing but `%2e` in dot segments and reads a target that starts with `//` (or `/\`) as
 * a network-path reference, `//evil/admin` being host `evil` and path `/admin`, when a backend
 * resolves the target against a base URL; and that of a backend that decodes the whole target before
 * it parses it as a URL, for which a decoded `?` or `#` ends the path and a trailing space is
 * trimmed). They are all "the normalised reading": the
 * router requires each of them to select the route the literal reading selects. nginx keeps `;`
 * parameters as part of a segment; here they only add a reading, so `/admin;x/secret` next to an
 * `/admin` route is a 400 rather than a way around it.
 *
 * Refused before any reading (→ 400), because no reading of them is safe:
 * - a raw `#` anywhere in the target (a fragment is never sent, RFC 9112 §3.2; a backend that
 *   parses URLs would cut `/admin#/../x` at the `#`);
 * - in the path, a byte outside visible ASCII (controls, space, DEL, raw non-ASCII: node's parser
 *   refuses most of these first);
 * - in the path, a bad escape: `%zz`, `%0`, a `%` at the end;
 * - in the path, an escape of a control byte (`%00`…`%1F`, `%7F`): C-based backends stop at `%00`;
 * - in the path, escapes that do not decode as UTF-8 (overlong `%C0%AE`, which some old decoders
 *   read as `.`, or a lone `%E9`): backends disagree on what they mean.
 * The query is not decoded or judged (beyond `#` and non-visible bytes): it goes upstream byte for
 * byte.
 */
import type { ClientRequest } from '../wire/client-side.js';
import { parseHostName } from './authority.js';
import { headerValue } from './forward-headers.js';
import type { RequestProblem } from './request-checks.js';

/** One path, read two ways. When nothing in it needs normalising, every reading is the same string. */
export interface PathReadings {
  /** The path as received, e.g. `/a/%2e%2e/b;x/..;/c`. */
  readonly literal: string;
  /**
   * The normalised reading, once per entry of {@link NORMALISATIONS} and in that order: for the
   * example, `/b;x/..;/c` (full), …, `/c` (Tomcat's). The first is the full normalisation.
   */
  readonly normalized: readonly string[];
}

/** How far one kind of backend normalises a path (the steps of the file comment). */
export interface Normalisation {
  /** Who reads paths this way. */
  readonly readers: string;
  /** Step 1: `all` escapes, or only `%2e` in a dot segment (`%2e`, `.%2e`, `%2e%2e`, any case). */
  readonly decodes: 'all' | 'dot-segments';
  /** Step 2. */
  readonly isBackslashSlash: boolean;
  /** Step 3. */
  readonly mergesSlashes: boolean;
  /** Before step 1: `;` to the end of its segment removed. */
  readonly cutsParameters: boolean;
  /**
   * After step 2: a path that starts with `//` names a host (a network-path reference, RFC 3986
   * §4.2, resolved against a base URL; for http(s) the WHATWG parser skips any number of slashes
   * before it): the path is what follows the host, `/` when nothing does.
   */
  readonly readsNetworkPath: boolean;
  /** After step 1: a decoded `?` or `#` ends the path and trailing spaces are trimmed (the target was decoded before it was parsed). */
  readonly parsesAfterDecoding: boolean;
}

/** The normalisations every path is read with (step 4, dot segments, is in all of them). */
export const NORMALISATIONS: readonly Normalisation[] = [
  { readers: "the full normalisation (nginx's $uri, and IIS, which also reads \\ as /)", decodes: 'all', isBackslashSlash: true, mergesSlashes: true, cutsParameters: false, readsNetworkPath: false, parsesAfterDecoding: false },
  { readers: 'RFC 3986 resolution of a decoded path (Express, Flask, Django, Rails)', decodes: 'all', isBackslashSlash: false, mergesSlashes: false, cutsParameters: false, readsNetworkPath: false, parsesAfterDecoding: false },
  { readers: "Go's path.Clean (net/http ServeMux)", decodes: 'all', isBackslashSlash: false, mergesSlashes: true, cutsParameters: false, readsNetworkPath: false, parsesAfterDecoding: false },
  { readers: 'Tomcat, Jetty, Spring', decodes: 'all', isBackslashSlash: true, mergesSlashes: true, cutsParameters: true, readsNetworkPath: false, parsesAfterDecoding: false },
  { readers: "the WHATWG URL parser (Node's new URL(req.url, base), undici, browsers)", decodes: 'dot-segments', isBackslashSlash: true, mergesSlashes: false, cutsParameters: false, readsNetworkPath: true, parsesAfterDecoding: false },
  { readers: 'a URL parser given the decoded target (new URL(decodeURIComponent(req.url), base))', decodes: 'all', isBackslashSlash: true, mergesSlashes: false, cutsParameters: false, readsNetworkPath: true, parsesAfterDecoding: true },
];

/** Where a request is going, once its target and authority passed the checks. */
export interface RequestTarget {
  /**
   * The host name routes are matched against (authority.ts: lower-cased, no port, no trailing dot):
   * from an absolute-form target's authority, else from the Host header; undefined without either
   * (HTTP/1.0).
   */
  readonly hostName: string | undefined;
  /** The authority of an absolute-form target as sent, which replaces the Host header upstream (RFC 9112 §3.2.2). */
  readonly targetHost: string | undefined;
  /** The path (origin form, without the query), in every reading. */
  readonly path: PathReadings;
  /** `?` and the query, byte for byte, or `''`. */
  readonly query: string;
}

const SLASH = 0x2f;
const DOT = 0x2e;

// What each ASCII byte means to readPath's scan (one table lookup per byte: this runs for every request).
const BYTE_PLAIN = 0;
const BYTE_PERCENT = 1;
const BYTE_HASH = 2;
const BYTE_NOT_VISIBLE = 3;
/** `\` or `;`: the readings differ. */
const BYTE_SPECIAL = 4;
/** `/`: the readings differ when `/` or `.` follows. */
const BYTE_SLASH = 5;
const PATH_BYTE_KINDS = (() => {
  const kinds = new Uint8Array(0x80);
  for (let c = 0; c < 0x80; c++) {
    kinds[c] = c < 0x21 || c > 0x7e ? BYTE_NOT_VISIBLE : c === 0x25 ? BYTE_PERCENT : c === 0x23 ? BYTE_HASH : c === 0x5c || c === 0x3b ? BYTE_SPECIAL : c === SLASH ? BYTE_SLASH : BYTE_PLAIN;
  }
  return kinds;
})();

/** `http://` or `https://`, the authority, then the rest (RFC 9112 §3.2.2 absolute-form). */
const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)(.*)$/is;
/** What a query may not hold: a raw `#`, or a byte outside visible ASCII. */
const BAD_QUERY_BYTE = /[^\x21-\x7e]|#/;

const BAD_FORM: RequestProblem = { status: 400, text: 'bad request: the request target must be a path (/…) or an http(s) URL' };
const BAD_HOST: RequestProblem = { status: 400, text: 'bad request: invalid Host header' };
const BAD_AUTHORITY: RequestProblem = { status: 400, text: 'bad request: invalid authority in the request target' };
const BAD_QUERY: RequestProblem = { status: 400, text: "bad request: a '#' or a byte outside visible ASCII in the query" };

/**
 * Reads the target and authority of `clientReq`: origin form (`/a?q`, host from the Host header) or
 * absolute form (`http://h:1/a?q`, host from the target; the Host header must still be valid).
 * Anything else (`*`, `ftp://…`, `a/b`) is refused, as nginx refuses it.
 *
 * @returns the target, or the 400 problem: a bad target form, Host header, authority, path
 *   ({@link readPath}) or query
 */
export function readRequestTarget(clientReq: ClientRequest): RequestTarget | RequestProblem {
  const url = clientReq.url ?? '/';
  const hostHeader = headerValue(clientReq.rawHeaders, 'host'); // the only one: findRequestProblem refuses two
  const headerHostName = hostHeader === undefined ? undefined : parseHostName(hostHeader);
  if (hostHeader !== undefined && headerHostName === undefined) return BAD_HOST;
  let hostName = headerHostName;
  let targetHost: string | undefined;
  let originForm = url;
  if (url.charCodeAt(0) !== SLASH) {
    const absolute = ABSOLUTE_FORM.exec(url);
    if (absolute === null) return BAD_FORM;
    targetHost = absolute[1]!;
    hostName = parseHostName(targetHost);
    if (hostName === undefined) return BAD_AUTHORITY;
    const rest = absolute[2]!;
    originForm = rest === '' || rest.charCodeAt(0) === 0x3f /* ? */ ? `/${rest}` : rest;
  }
  const queryAt = originForm.indexOf('?');
  const query = queryAt < 0 ? '' : originForm.slice(queryAt);
  if (BAD_QUERY_BYTE.test(query)) return BAD_QUERY;
  const path = readPath(queryAt < 0 ? originForm : originForm.slice(0, queryAt));
  if ('status' in path) return path;
  return { hostName, targetHost, path, query };
}

/**
 * The readings of one path (see the file comment for the steps and the refusals). Linear in the
 * path's length: one scan, one decode, then one pass per normalisation.
 *
 * @param literal the path of an origin-form target, without the query: starts with `/`
 * @returns the literal reading and the normalised ones, or the 400 problem that names what is wrong
 */
export function readPath(literal: string): PathReadings | RequestProblem {
  if (literal.charCodeAt(0) !== SLASH) return BAD_FORM;
  let needsNormalising = false;
  for (let i = 0; i < literal.length; i++) {
    const c = literal.charCodeAt(i);
    const kind = c < 0x80 ? PATH_BYTE_KINDS[c]! : BYTE_NOT_VISIBLE;
    if (kind === BYTE_PLAIN) continue;
    if (kind === BYTE_PERCENT) {
      const byte = (hexDigit(literal.charCodeAt(i + 1)) << 4) | hexDigit(literal.charCodeAt(i + 2));
      if (byte < 0) return problem(`bad percent-escape '${literal.slice(i, i + 3)}' in the path`);
      if (byte < 0x20 || byte === 0x7f) return problem(`an escaped control byte '${literal.slice(i, i + 3)}' in the path`);
      needsNormalising = true;
      i += 2;
    } else if (kind === BYTE_HASH) {
      return problem("a '#' in the request target");
    } else if (kind === BYTE_NOT_VISIBLE) {
      return problem('a byte outside visible ASCII in the path');
    } else if (kind === BYTE_SPECIAL || literal.charCodeAt(i + 1) === SLASH || literal.charCodeAt(i + 1) === DOT) {
      needsNormalising = true; // `\`, `;`, or a `/` before `/` or `.`
    }
  }
  if (!needsNormalising) return { literal, normalized: new Array<string>(NORMALISATIONS.length).fill(literal) };
  let decoded: string;
  try {
    decoded = decodeURIComponent(literal);
  } catch {
    return problem('percent-escapes that are not UTF-8 in the path');
  }
  return { literal, normalized: NORMALISATIONS.map((normalisation) => normalize(literal, decoded, normalisation)) };
}

/**
 * The path after the steps `normalisation` takes.
 * @param literal the path, its escapes well-formed UTF-8
 * @param decoded `literal` with every escape decoded
 */
function normalize(literal: string, decoded: string, normalisation: Normalisation): string {
  let path: string;
  if (normalisation.decodes === 'dot-segments') path = literal;
  else if (normalisation.cutsParameters && literal.includes(';')) {
    // Cutting `;…` up to the next raw `/` removes whole escapes (`;` is not a hex digit), never part
    // of a UTF-8 sequence that decoded in `literal`: this decode cannot fail.
    path = decodeURIComponent(literal.replace(/;[^/]*/g, ''));
  } else path = decoded;
  if (normalisation.parsesAfterDecoding) {
    const end = path.search(/[?#]/);
    path = trimSpaceEnd(end < 0 ? path : path.slice(0, end));
  }
  if (normalisation.isBackslashSlash) path = path.replaceAll('\\', '/');
  if (normalisation.readsNetworkPath && path.startsWith('//')) {
    // An http(s) URL's authority follows any number of slashes (WHATWG "special authority ignore slashes state").
    let hostAt = 2;
    while (path.charCodeAt(hostAt) === SLASH) hostAt++;
    const pathAt = path.indexOf('/', hostAt);
    path = pathAt < 0 ? '/' : path.slice(pathAt);
  }
  return removeDotSegments(path, normalisation);
}

/** A character some backend trims from the end of a decoded path: JS's white space and line ends (`trimEnd`), and U+0085 (NEL), which Go's `unicode.IsSpace` and Python's `str.strip` trim too and JS does not (a break test). */
const TRIMMED_SPACE = /[\s\u0085]/;

/** `text` without trailing `TRIMMED_SPACE`, one character tested at a time (a `…+$` pattern would rescan every run of spaces). */
function trimSpaceEnd(text: string): string {
  let end = text.length;
  while (end > 0 && TRIMMED_SPACE.test(text.charAt(end - 1))) end--;
  return end === text.length ? text : text.slice(0, end);
}

/**
 * Steps 3 and 4 on a path that starts with `/`: empty segments dropped when `mergesSlashes`, then
 * RFC 3986 §5.2.4 remove_dot_segments — one pass over the segments, which gives the same result as
 * merging first. A trailing `/`, `/.` or `/..` leaves a trailing slash, as §5.2.4 does:
 * `/a/b/..` → `/a/`. With `decodes: 'dot-segments'`, `%2e` in a segment counts as `.` (WHATWG URL
 * Standard, "single-dot" and "double-dot URL path segment").
 */
function removeDotSegments(path: string, normalisation: Normalisation): string {
  const isDecodingDots = normalisation.decodes === 'dot-segments';
  const hasWork = path.includes('/.') || (normalisation.mergesSlashes && path.includes('//')) || (isDecodingDots && /\/%2e/i.test(path));
  if (!hasWork) return path;
  const segments = path.split('/');
  const output: string[] = [];
  for (let i = 1; i < segments.length; i++) {
    const raw = segments[i]!;
    const segment = isDecodingDots && raw.length <= 6 ? raw.replace(/%2e/gi, '.') : raw;
    const isLast = i === segments.length - 1;
    if (segment === '..') {
      output.pop();
      if (isLast) output.push('');
    } else if (segment === '.' || (segment === '' && normalisation.mergesSlashes)) {
      if (isLast) output.push('');
    } else {
      output.push(raw);
    }
  }
  return `/${output.join('/')}`;
}

/** 0..15 for an ASCII hex digit, else a large negative number (so that `hi << 4 | lo` stays negative). */
function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -0x1000;
}

function problem(reason: string): RequestProblem {
  return { status: 400, text: `bad request: ${reason}` };
}
