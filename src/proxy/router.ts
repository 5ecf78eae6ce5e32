/**
 * Routing (SPEC 1.2 "Routing order"; the tutorial's `[proxy.a] path=/a` step): which route serves a
 * request, and which target the upstream is sent.
 *
 * Order, as nginx picks a `server` by name and then a `location`: routes whose `host` matches the
 * request's host name (authority.ts: lower-cased, no port, no trailing dot) are considered first,
 * host-less routes only when none of those match. Within each group: regex routes in file order,
 * then the longest prefix that ends on a path-segment boundary (`/a` matches `/a`, `/a/`, `/a/x`,
 * not `/ab`). Prefixes and regexes are case-sensitive unless the regex is `~*`, as nginx's.
 *
 * Every path is routed once per reading (request-target.ts): the literal one against the prefixes
 * as written, each normalised one against the prefixes normalised the same way, and each regex
 * against all of them. The request goes on only when they all select the same route; otherwise it is
 * ambiguous (→ 400, nothing forwarded), because a backend that decodes paths and one that reads
 * them literally would serve different routes. That is what keeps `/%61dmin`, `//admin`,
 * `/public/../admin` or `/admin/..%2F..%2Fpublic` from being judged by one route's rules and served
 * by another. When both agree, the upstream gets the client's own bytes: the literal path (its
 * matched prefix replaced when `pass` has a path) and the query, unchanged.
 */
import type { RouteConfig } from '../config/config.js';
import { routesInMatchingOrder } from '../config/describe-config.js';
import { NORMALISATIONS, readPath, type RequestTarget } from './request-target.js';

/** What the router decided for one request. */
export type RouteDecision<R> =
  /** Both readings select `route`; `upstreamTarget` is the path + query to send upstream. */
  | { readonly kind: 'route'; readonly route: R; readonly upstreamTarget: string }
  /** Neither reading selects a route (→ 404). */
  | { readonly kind: 'none' }
  /** The readings select different routes, or not all select one (→ 400). */
  | { readonly kind: 'ambiguous' };

/** Anything that carries a RouteConfig (the runtime route objects do). */
export interface Routable {
  readonly config: RouteConfig;
}

/** A route with its prefix in every reading. */
interface Entry<R> {
  readonly route: R;
  /** The prefix as written, for the literal reading; undefined for a regex route. */
  readonly prefix: string | undefined;
  /** The prefix in each normalised reading (`/caf%C3%A9` → `/café` where escapes are decoded), in NORMALISATIONS order. */
  readonly normalizedPrefixes: readonly string[] | undefined;
}

const NONE = Object.freeze({ kind: 'none' as const });
const AMBIGUOUS = Object.freeze({ kind: 'ambiguous' as const });

export class Router<R extends Routable> {
  /** Routes with a host, then host-less ones; each group regex-first (routesInMatchingOrder). */
  readonly #entries: readonly Entry<R>[];
  /** Every prefix is the same string in every normalised reading: a path whose readings are all its literal string needs one lookup. */
  readonly #arePrefixesNormal: boolean;

  constructor(routes: readonly R[]) {
    const byConfig = new Map(routes.map((route) => [route.config, route]));
    this.#entries = routesInMatchingOrder(routes.map((route) => route.config)).map((config) => {
      const prefix = config.path.kind === 'prefix' ? config.path.prefix : undefined;
      return { route: byConfig.get(config)!, prefix, normalizedPrefixes: prefix === undefined ? undefined : normalizePrefix(prefix) };
    });
    this.#arePrefixesNormal = this.#entries.every((entry) => entry.normalizedPrefixes?.every((normalized) => normalized === entry.prefix) ?? true);
  }

  /**
   * The route for a request whose target passed request-target.ts.
   * @param target its host name (undefined: HTTP/1.0 without Host), every reading of its path, its query
   * @returns the route and the upstream target; `none` (→ 404); or `ambiguous` (→ 400)
   */
  match(target: Pick<RequestTarget, 'hostName' | 'path' | 'query'>): RouteDecision<R> {
    const { literal, normalized } = target.path;
    const route = findRoute(this.#entries, literal, target.hostName, undefined);
    for (let reading = 0; reading < normalized.length; reading++) {
      const path = normalized[reading]!;
      if (path === literal && this.#arePrefixesNormal) continue; // the same string against the same prefixes
      if (findRoute(this.#entries, path, target.hostName, reading) !== route) return AMBIGUOUS;
    }
    if (route === undefined) return NONE;
    return { kind: 'route', route, upstreamTarget: rewritePath(route.config, literal) + target.query };
  }
}

/** The first route matching `path` in reading `reading` (an index into NORMALISATIONS; undefined: the literal reading). */
function findRoute<R extends Routable>(entries: readonly Entry<R>[], path: string, hostName: string | undefined, reading: number | undefined): R | undefined {
  for (const entry of entries) {
    const { host, path: matcher } = entry.route.config;
    if (host !== undefined) {
      if (hostName === undefined) continue;
      if (host.kind === 'exact' ? hostName !== host.host : !hostName.endsWith(host.suffix)) continue;
    }
    const prefix = reading === undefined ? entry.prefix : entry.normalizedPrefixes?.[reading];
    if (prefix === undefined ? matcher.kind === 'regex' && matcher.regex.test(path) : isPrefixMatch(path, prefix)) return entry.route;
  }
  return undefined;
}

/**
 * A prefix in each normalised reading. A prefix that is not a valid path (a bad escape such as
 * `/a%zz`) stays as written: only paths with that same bad escape could match it literally, and
 * request-target.ts refuses those before routing.
 */
function normalizePrefix(prefix: string): readonly string[] {
  const readings = readPath(prefix);
  return 'status' in readings ? NORMALISATIONS.map(() => prefix) : readings.normalized;
}

/** `/a` matches `/a`, `/a/`, `/a/x`, not `/ab`; `/a/` matches `/a/x` (and `/` matches everything). */
export function isPrefixMatch(path: string, prefix: string): boolean {
  if (!path.startsWith(prefix)) return false;
  return path.length === prefix.length || prefix.endsWith('/') || path.charCodeAt(prefix.length) === 0x2f /* / */;
}

/**
 * nginx `proxy_pass` semantics on the client's own bytes: without a path in `pass` the literal path
 * goes unchanged; with one (even `/`) the matched prefix is replaced by it, and the rest keeps its
 * bytes (`//`, `%2F`, `%7E` survive). One deviation, written down in the README: `pass=http://h/`
 * on route `/a` sends `/a/x` as `/x`, not nginx's `//x`.
 *
 * @param route the route both readings selected; for a prefix route, `literalPath` starts with its prefix
 * @param literalPath the path as received, without the query
 */
export function rewritePath(route: RouteConfig, literalPath: string): string {
  const passPath = route.passPath;
  if (passPath === undefined || route.path.kind !== 'prefix') return literalPath;
  const rest = literalPath.slice(route.path.prefix.length);
  if (rest === '') return passPath;
  if (passPath.endsWith('/') && rest.startsWith('/')) return passPath + rest.slice(1);
  return passPath + rest;
}
