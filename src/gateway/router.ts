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
 *
 * Two more rules, as nginx has them:
 * - When `pass` has a path, the upstream must not be able to climb out of it: a rewritten path whose
 *   readings leave the pass path once their dot segments are resolved (`/../internal` on a route
 *   `/` with `pass = http://h/public/`, sent as `/public/../internal`) → 400. nginx replaces the
 *   prefix in its normalised `$uri`, so its upstream never sees the `..`.
 * - The slash redirect: a request for exactly a prefix route's prefix without its trailing slash
 *   (`/admin` when the route is `path = /admin/`) is answered `301` with `Location: /admin/` and the
 *   query, instead of falling through to a shorter route (nginx's `location /admin/ { proxy_pass … }`
 *   does the same), unless a route of the same group has the prefix `/admin` itself. Without it,
 *   `/admin` would reach the `/` route's backend, which may serve its own `/admin` unprotected.
 */
import type { RouteConfig } from '../config/config.js';
import { routesInMatchingOrder } from '../config/describe-config.js';
import { NORMALISATIONS, readPath, type RequestTarget } from './request-target.js';
import { formatPlace } from '../errors.js';

/** What the router decided for one request. */
export type RouteDecision<R> =
  /** Both readings select `route`; `upstreamTarget` is the path + query to send upstream. */
  | { readonly kind: 'route'; readonly route: R; readonly upstreamTarget: string }
  /** Neither reading selects a route (→ 404). */
  | { readonly kind: 'none' }
  /** The readings select different routes, or not all select one (→ 400). */
  | { readonly kind: 'ambiguous' }
  /** The rewritten path, once its dot segments are resolved, leaves the route's pass path (→ 400). */
  | { readonly kind: 'outside-pass-path' }
  /** nginx's slash redirect (→ 301): `location` is the path with `/` appended, and the query. */
  | { readonly kind: 'redirect'; readonly route: R; readonly location: string }
  /** Matching the path against the route regexes took longer than {@link REGEX_BUDGET_MS} (→ 414). */
  | { readonly kind: 'over-regex-budget' };

/**
 * How long matching one request's path against the route regexes may take, ms. A route regex runs
 * in linear time (src/config/route-regex.ts), but V8's linear-time engine spends about 2 µs a byte,
 * and every reading of the path meets every regex route: with dozens of them a crafted 8 KB path
 * could take seconds. Past this budget the request is a 414 and no further regex is tried, so
 * one request costs at most the budget and one more match (nginx bounds PCRE with match limits the
 * same way: the request fails, the server goes on). The budget is CPU time: the wall clock is read
 * after each regex test (cheap), and only when it says the budget is spent is the process's CPU
 * time asked, so a process that was descheduled or paused by the collector on a busy machine does
 * not answer an ordinary request with a 414.
 */
export const REGEX_BUDGET_MS = 10;

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
  /** The pass path in each normalised reading, for a route that rewrites (`pass` with a path); else undefined. */
  readonly normalizedPassPaths: readonly string[] | undefined;
}

/** What one reading of a path selects: a route, or the slash redirect to one. */
interface Selection<R> {
  readonly route: R;
  readonly isSlashRedirect: boolean;
}

const NONE = Object.freeze({ kind: 'none' as const });
const AMBIGUOUS = Object.freeze({ kind: 'ambiguous' as const });
const OUTSIDE_PASS_PATH = Object.freeze({ kind: 'outside-pass-path' as const });
const OVER_REGEX_BUDGET = Object.freeze({ kind: 'over-regex-budget' as const });
/** What findRoute returns when the regex budget ran out. */
const OUT_OF_BUDGET: unique symbol = Symbol('out of regex budget');

/** The regex budget of one `match` (see REGEX_BUDGET_MS). */
class RegexBudget {
  readonly #startMs: number;
  /** The process's CPU time at the start, µs; taken the first time the wall clock says 1 ms passed. */
  #cpuStartMicros: number | undefined;
  #cpuStartWallMs = 0;

  constructor(
    readonly now: () => number,
    readonly cpuMicros: () => number,
  ) {
    this.#startMs = now();
  }

  /** True once the regex tests so far took more than REGEX_BUDGET_MS of CPU time. Call after each test. */
  isSpent(): boolean {
    const wallMs = this.now() - this.#startMs;
    if (wallMs < 1) return false;
    if (this.#cpuStartMicros === undefined) {
      // The tests up to here ran before any CPU sample: their wall time counts as CPU time.
      if (wallMs > REGEX_BUDGET_MS) return true;
      this.#cpuStartMicros = this.cpuMicros();
      this.#cpuStartWallMs = wallMs;
      return false;
    }
    if (wallMs <= REGEX_BUDGET_MS) return false;
    return this.#cpuStartWallMs + (this.cpuMicros() - this.#cpuStartMicros) / 1000 > REGEX_BUDGET_MS;
  }
}

/** The process's user and system CPU time, µs. */
function processCpuMicros(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

export class Router<R extends Routable> {
  /** Routes with a host, then host-less ones; each group regex-first (routesInMatchingOrder). */
  readonly #entries: readonly Entry<R>[];
  /** Every prefix is the same string in every normalised reading: a path whose readings are all its literal string needs one lookup. */
  readonly #arePrefixesNormal: boolean;
  /**
   * The prefix routes ending in `/` (not `/` itself), by their prefix without that slash, in
   * matching order: index 0 for the literal reading, then one map per normalised reading.
   */
  readonly #slashRedirects: readonly ReadonlyMap<string, readonly Entry<R>[]>[];
  /** There are regex routes, so a match has a regex budget. */
  readonly #hasRegexRoutes: boolean;
  /** Clocks of the regex budget: wall time (ms) and the process's CPU time (µs). */
  readonly #now: () => number;
  readonly #cpuMicros: () => number;

  /**
   * @param options.now the wall clock of the regex budget, ms (default `performance.now`), and
   *   `cpuMicros` the process's CPU time, µs (default from `process.cpuUsage`); tests inject both
   */
  constructor(routes: readonly R[], options: { readonly now?: () => number; readonly cpuMicros?: () => number } = {}) {
    this.#now = options.now ?? (() => performance.now());
    this.#cpuMicros = options.cpuMicros ?? processCpuMicros;
    this.#hasRegexRoutes = routes.some((route) => route.config.path.kind === 'regex');
    const byConfig = new Map(routes.map((route) => [route.config, route]));
    this.#entries = routesInMatchingOrder(routes.map((route) => route.config)).map((config) => {
      const prefix = config.path.kind === 'prefix' ? config.path.prefix : undefined;
      const rewrites = prefix !== undefined && config.passPath !== undefined;
      return {
        route: byConfig.get(config)!,
        prefix,
        normalizedPrefixes: prefix === undefined ? undefined : normalizePrefix(prefix),
        normalizedPassPaths: rewrites ? normalizePrefix(config.passPath!) : undefined,
      };
    });
    this.#arePrefixesNormal = this.#entries.every((entry) => entry.normalizedPrefixes?.every((normalized) => normalized === entry.prefix) ?? true);
    this.#slashRedirects = [undefined, ...NORMALISATIONS.keys()].map((reading) => {
      const byPath = new Map<string, Entry<R>[]>();
      for (const entry of this.#entries) {
        const prefix = prefixIn(entry, reading);
        if (prefix === undefined || prefix.length < 2 || !prefix.endsWith('/')) continue;
        const path = prefix.slice(0, -1);
        byPath.set(path, [...(byPath.get(path) ?? []), entry]);
      }
      return byPath;
    });
  }

  /**
   * The route for a request whose target passed request-target.ts.
   * @param target its host name (undefined: HTTP/1.0 without Host), every reading of its path, its query
   * @returns the route and the upstream target; `none` (→ 404); or `ambiguous` (→ 400)
   */
  match(target: Pick<RequestTarget, 'hostName' | 'path' | 'query'>): RouteDecision<R> {
    const { literal, normalized } = target.path;
    const budget = this.#hasRegexRoutes ? new RegexBudget(this.#now, this.#cpuMicros) : undefined;
    const selected = this.#select(literal, target.hostName, undefined, budget);
    if (selected === OUT_OF_BUDGET) return OVER_REGEX_BUDGET;
    let isNormal = true;
    for (let reading = 0; reading < normalized.length; reading++) {
      const path = normalized[reading]!;
      if (path === literal && this.#arePrefixesNormal) continue; // the same string against the same prefixes
      isNormal = false;
      const other = this.#select(path, target.hostName, reading, budget);
      if (other === OUT_OF_BUDGET) return OVER_REGEX_BUDGET;
      if (other?.route !== selected?.route || other?.isSlashRedirect !== selected?.isSlashRedirect) return AMBIGUOUS;
    }
    if (selected === undefined) return NONE;
    const { route } = selected;
    if (selected.isSlashRedirect) return { kind: 'redirect', route, location: `${literal}/${target.query}` };
    const upstreamPath = rewritePath(route.config, literal);
    if (!isNormal && !this.#staysInPassPath(route, upstreamPath)) return OUTSIDE_PASS_PATH;
    return { kind: 'route', route, upstreamTarget: upstreamPath + target.query };
  }

  /** What `path` selects in `reading` (undefined: the literal one): the slash redirect first, as nginx's, then the first matching route. */
  #select(path: string, hostName: string | undefined, reading: number | undefined, budget?: RegexBudget): Selection<R> | typeof OUT_OF_BUDGET | undefined {
    const route = findRoute(this.#entries, path, hostName, reading, budget);
    if (route === OUT_OF_BUDGET) return route;
    const candidates = this.#slashRedirects[reading === undefined ? 0 : reading + 1]!.get(path);
    if (candidates !== undefined) {
      for (const candidate of candidates) {
        if (!isHostEligible(candidate, hostName)) continue;
        const hasHost = candidate.route.config.host !== undefined;
        if (!hasHost && route?.config.host !== undefined) break; // a route for this host serves it
        const hasOwnPrefix = this.#entries.some(
          (entry) => (entry.route.config.host !== undefined) === hasHost && isHostEligible(entry, hostName) && prefixIn(entry, reading) === path,
        );
        if (hasOwnPrefix) break;
        return { route: candidate.route, isSlashRedirect: true };
      }
    }
    return route === undefined ? undefined : { route, isSlashRedirect: false };
  }

  /** Whether every normalised reading of a rewritten path is still under the route's pass path (no `..` climbs out of it). */
  #staysInPassPath(route: R, upstreamPath: string): boolean {
    const passPaths = this.#entries.find((entry) => entry.route === route)?.normalizedPassPaths;
    if (passPaths === undefined) return true;
    const readings = readPath(upstreamPath);
    if ('status' in readings) return false;
    return readings.normalized.every((reading, i) => isPrefixMatch(reading, passPaths[i]!) || `${reading}/` === passPaths[i]);
  }
}

/**
 * The first route matching `path` in reading `reading` (an index into NORMALISATIONS; undefined: the
 * literal reading); OUT_OF_BUDGET once a regex test ends with the budget spent.
 */
function findRoute<R extends Routable>(entries: readonly Entry<R>[], path: string, hostName: string | undefined, reading: number | undefined, budget: RegexBudget | undefined): R | typeof OUT_OF_BUDGET | undefined {
  for (const entry of entries) {
    if (!isHostEligible(entry, hostName)) continue;
    const matcher = entry.route.config.path;
    const prefix = prefixIn(entry, reading);
    if (prefix !== undefined) {
      if (isPrefixMatch(path, prefix)) return entry.route;
    } else if (matcher.kind === 'regex') {
      const isMatch = matcher.regex.test(path);
      if (budget?.isSpent() === true) return OUT_OF_BUDGET;
      if (isMatch) return entry.route;
    }
  }
  return undefined;
}

/** Whether a route may serve a request for `hostName`: host-less routes always, others when the host matches (exact or `*.suffix`). */
function isHostEligible(entry: Entry<Routable>, hostName: string | undefined): boolean {
  const { host } = entry.route.config;
  if (host === undefined) return true;
  if (hostName === undefined) return false;
  return host.kind === 'exact' ? hostName === host.host : hostName.endsWith(host.suffix);
}

/** A prefix route's prefix in `reading` (undefined: the literal reading); undefined for a regex route. */
function prefixIn(entry: Entry<Routable>, reading: number | undefined): string | undefined {
  return reading === undefined ? entry.prefix : entry.normalizedPrefixes?.[reading];
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

/**
 * The warnings of `--check`, start-up and a reload for a prefix that reads differently normalised
 * (`/a%2fb` is `/a/b` decoded, `/a//b` is `/a/b` with slashes merged): a request then matches it
 * only when spelt the same way, because every reading of the request must select the route. So
 * `/a%2fb/x` is served, while `/a/b/x`, `/a%2Fb/x` and `/a//b/x` read differently by some
 * backend and are refused with 400, not sent to another route. Not an error: the spelling may be
 * the one the clients use. One line per route: `env.ini:3:8: [proxy.x] path '/a%2fb' reads '/a/b'
 * normalised: …`.
 */
export function pathWarnings(routes: readonly RouteConfig[]): string[] {
  const warnings: string[] = [];
  for (const route of routes) {
    if (route.path.kind !== 'prefix' || route.pathPlace === undefined) continue;
    const { prefix } = route.path;
    const readings = normalizePrefix(prefix);
    const other = readings.findIndex((reading) => reading !== prefix);
    if (other === -1) continue;
    const normalized = readings[other]!;
    const plain = /^[\x21-\x7e]*$/.test(normalized) ? `; path = ${normalized} matches that spelling instead` : '';
    warnings.push(
      `${formatPlace(route.pathPlace)}: [proxy.${route.name}] path '${prefix}' reads '${normalized}' normalised: only requests spelt '${prefix}…' match it, ` +
        `and other spellings of that path (such as '${normalized}…') get 400${plain}`,
    );
  }
  return warnings;
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
 * on route `/a` sends `/a/x` as `/x`, not nginx's `//x` — the slash that ends the pass path and
 * the one after the prefix are the same separator. A prefix that ends in `/` (`/a/`) took that
 * separator with it, so a slash after it is the client's own and is kept: `/a//x` → `//x` (a break
 * test found it dropped).
 *
 * @param route the route both readings selected; for a prefix route, `literalPath` starts with its prefix
 * @param literalPath the path as received, without the query
 */
export function rewritePath(route: RouteConfig, literalPath: string): string {
  const passPath = route.passPath;
  if (passPath === undefined || route.path.kind !== 'prefix') return literalPath;
  const rest = literalPath.slice(route.path.prefix.length);
  if (rest === '') return passPath;
  if (passPath.endsWith('/') && rest.startsWith('/') && !route.path.prefix.endsWith('/')) return passPath + rest.slice(1);
  return passPath + rest;
}
