/**
 * Routing (SPEC 1.2; the tutorial's `[proxy.a] path=/a` step): which route serves a request, and
 * which path the upstream sees.
 *
 * Order, as nginx picks a `server` by name and then a `location`: routes whose `host` matches the
 * request's Host are considered first, host-less routes only when none of those match. Within each
 * group: regex routes in file order, then the longest prefix that ends on a path-segment boundary
 * (`/a` matches `/a`, `/a/`, `/a/x`, not `/ab`).
 *
 * Matching uses the path with dot segments resolved (RFC 3986 §5.2.4, `%2e` counted as `.`), so
 * `/public/../admin` is routed as `/admin` — the route a backend that resolves dot segments would
 * serve. The bytes forwarded are the client's own unless the route rewrites the prefix.
 */
import type { RouteConfig } from '../config/config.js';
import { routesInMatchingOrder } from '../config/describe-config.js';

export interface RouteMatch<R> {
  readonly route: R;
  /** Path + query to send upstream. */
  readonly upstreamTarget: string;
}

/** Anything that carries a RouteConfig (the runtime route objects do). */
export interface Routable {
  readonly config: RouteConfig;
}

export class Router<R extends Routable> {
  /** Routes with a host, then host-less ones; each group regex-first (routesInMatchingOrder). */
  readonly #routes: readonly R[];

  constructor(routes: readonly R[]) {
    const byConfig = new Map(routes.map((route) => [route.config, route]));
    this.#routes = routesInMatchingOrder(routes.map((route) => route.config)).map((config) => byConfig.get(config)!);
  }

  /**
   * The route for a request, or undefined (→ 404).
   * @param host the request's Host header (port and case ignored), undefined for HTTP/1.0 without Host
   * @param target the request target as received (`/path?query`)
   */
  match(host: string | undefined, target: string): RouteMatch<R> | undefined {
    const queryAt = target.indexOf('?');
    const rawPath = queryAt < 0 ? target : target.slice(0, queryAt);
    const query = queryAt < 0 ? '' : target.slice(queryAt);
    const path = removeDotSegments(rawPath);
    const hostName = host === undefined ? undefined : stripPort(host).toLowerCase();
    const route = findRoute(this.#routes, path, hostName);
    if (route === undefined) return undefined;
    return { route, upstreamTarget: rewritePath(route.config, rawPath, path) + query };
  }
}

function findRoute<R extends Routable>(routes: readonly R[], path: string, hostName: string | undefined): R | undefined {
  for (const route of routes) {
    const { host, path: matcher } = route.config;
    if (host !== undefined) {
      if (hostName === undefined) continue;
      if (host.kind === 'exact' ? hostName !== host.host : !hostName.endsWith(host.suffix)) continue;
    }
    if (matcher.kind === 'regex' ? matcher.regex.test(path) : isPrefixMatch(path, matcher.prefix)) return route;
  }
  return undefined;
}

/** `/a` matches `/a`, `/a/`, `/a/x`, not `/ab`; `/a/` matches `/a/x` (and `/` matches everything). */
export function isPrefixMatch(path: string, prefix: string): boolean {
  if (!path.startsWith(prefix)) return false;
  return path.length === prefix.length || prefix.endsWith('/') || path.charCodeAt(prefix.length) === 0x2f /* / */;
}

/**
 * nginx `proxy_pass` semantics: without a path in `pass` the request path goes unchanged; with one
 * (even `/`) the matched prefix is replaced by it. One deviation, written down in the README:
 * `pass=http://h/` on route `/a` sends `/a/x` as `/x`, not nginx's `//x`.
 */
export function rewritePath(route: RouteConfig, rawPath: string, normalizedPath: string): string {
  const passPath = route.passPath;
  if (passPath === undefined || route.path.kind !== 'prefix') return rawPath;
  const rest = normalizedPath.slice(route.path.prefix.length);
  if (rest === '') return passPath;
  if (passPath.endsWith('/') && rest.startsWith('/')) return passPath + rest.slice(1);
  return passPath + rest;
}

/** Host header without `:port` (IPv6 literals keep their brackets). */
function stripPort(host: string): string {
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end < 0 ? host : host.slice(0, end + 1);
  }
  const colon = host.indexOf(':');
  return colon < 0 ? host : host.slice(0, colon);
}

/**
 * RFC 3986 §5.2.4 remove_dot_segments, treating `%2e`/`%2E` as `.` so an encoded `..` cannot slip
 * past a prefix match. `/a/./b/../c` → `/a/c`; `/../x` → `/x`.
 */
export function removeDotSegments(path: string): string {
  if (!path.includes('.') && !path.includes('%')) return path; // fast path: nothing to resolve
  const decoded = path.replace(/%2e/gi, '.');
  if (!/(^|\/)\.\.?(\/|$)/.test(decoded)) return path;
  const output: string[] = [];
  const segments = decoded.split('/');
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    const isLast = i === segments.length - 1;
    if (segment === '.') {
      if (isLast) output.push('');
    } else if (segment === '..') {
      output.pop();
      if (isLast) output.push('');
    } else {
      output.push(segment);
    }
  }
  return '/' + output.join('/');
}
