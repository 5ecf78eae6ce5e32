/**
 * The live upstream registry: the tutorials' heartbeat idea (a backend announces itself every few
 * seconds and is forgotten when it stops) over plain HTTP instead of a message broker. A backend, or
 * `node dist/main.js heartbeat` beside it, sends `PUT /routes/ROUTE/upstreams` with
 * `{"url": "http://10.0.0.5:9003", "weight": 2, "ttl": "10s"}`; each PUT adds the upstream or
 * refreshes it, and one not refreshed within its ttl is removed, like a service registry's lease
 * (Consul's TTL checks, etcd leases). `DELETE` removes it at once (the heartbeat does on SIGTERM).
 *
 * Values are checked exactly as a `pass` line is (src/config/pass-line.ts), so a registered upstream
 * is the same `UpstreamConfig` a configured one is; the route is then rebuilt by the proxy
 * (`ProxyServer.setRegisteredUpstreams`) so it is balanced and health-checked like the others, and it
 * survives a reload. Time is injected (`now`, `timers`), so tests drive expiry exactly.
 *
 * A registration is the backend's claim "I am alive at this address"; how requests reach it is the
 * route's rule, its `pass` path, which the request path reads from the route for every upstream
 * (router.ts `rewritePath`), registered ones included. So a URL without a path is always accepted
 * and follows the route's path, whatever a reload makes it (nginx Plus's API takes a `server`
 * address only, the path staying in `proxy_pass`; HAProxy's `add server` too). A URL with a path is a claim
 * about the route and is checked against it (`checkPath`): it must be a path the route has, or had
 * since the proxy started, so a reload that changes the route's path never stops a running
 * heartbeat, even one that missed a ttl and registers anew.
 *
 * A registration belongs to its route. After a reload (`reconcile`), the registrations of a route
 * the reload removed are dropped, so a later route of the same name starts with none (HAProxy's
 * `add server` belongs to its backend and goes with it); and a registration whose address a `pass`
 * line now configures is dropped too, the pass line's settings being the ones in force: its next
 * refresh is a 409 naming that line, as a new registration would get.
 */
import type { RouteConfig, UpstreamConfig } from '../config/config.js';
import { AdminRequestError, ConfigValueError } from '../errors.js';
import { systemTimers, unrefed, type Timers } from '../timers.js';
import { parsePassLine } from '../config/pass-line.js';
import { InvalidValueError, parseDuration } from '../config/values.js';
import { suggest } from '../config/did-you-mean.js';

/** ttl when a PUT gives none: 10 s, three heartbeats at the default `--every 3s`. */
export const DEFAULT_REGISTRY_TTL_MS = 10_000;
/** The shortest ttl accepted: 1 s. */
export const MIN_REGISTRY_TTL_MS = 1_000;

/** What the registry changes: the proxy (or the cluster primary's model of it). */
export interface RegistryTarget {
  /** The routes now in force (`ProxyServer.config.routes`). */
  readonly config: { readonly routes: readonly RouteConfig[] };
  setRegisteredUpstreams(routeName: string, configs: readonly UpstreamConfig[]): void;
}

/** One registered upstream. */
export interface RegistryEntry {
  readonly routeName: string;
  readonly config: UpstreamConfig;
  readonly ttlMs: number;
  /** Clock time (ms, the registry's `now`) of the last PUT. */
  readonly refreshedAtMs: number;
  /** `refreshedAtMs + ttlMs`: removed then unless refreshed. */
  readonly expiresAtMs: number;
}

export interface UpstreamRegistryOptions {
  readonly target: RegistryTarget;
  /** Clock, ms. Default `Date.now`. */
  readonly now?: () => number;
  /** Default the global setTimeout/clearTimeout (timers are unref()ed). */
  readonly timers?: Timers;
  /** Registration, deregistration and expiry lines. Default: nowhere. */
  readonly log?: (line: string) => void;
  /** Called after every change (cluster mode pushes the new lists to the workers). */
  readonly onChange?: (routeName: string) => void;
}

interface LiveEntry extends RegistryEntry {
  readonly timer: unknown;
}


export class UpstreamRegistry {
  readonly #target: RegistryTarget;
  readonly #now: () => number;
  readonly #timers: Timers;
  readonly #log: (line: string) => void;
  readonly #onChange: (routeName: string) => void;
  /** route name → origin → entry, in registration order. */
  readonly #routes = new Map<string, Map<string, LiveEntry>>();
  /** route name → every `pass` path it had since the start (`undefined`: none), for `checkPath`. */
  readonly #passPaths = new Map<string, Set<string | undefined>>();
  /** Names of routes a reload removed while they had registrations (their 404 says so). */
  readonly #removedRoutes = new Set<string>();

  constructor(options: UpstreamRegistryOptions) {
    this.#target = options.target;
    this.#now = options.now ?? Date.now;
    this.#timers = unrefed(options.timers ?? systemTimers); // an entry's expiry alone never keeps the process alive
    this.#log = options.log ?? (() => {});
    this.#onChange = options.onChange ?? (() => {});
    this.#notePassPaths();
  }

  /**
   * Brings the registrations in line with the routes now in force; call it after every reload.
   * Drops those of a route that is gone and those whose address a `pass` line of their route now
   * configures (see the file comment), each with a log line, and notes the routes' pass paths.
   */
  reconcile(): void {
    this.#notePassPaths();
    const routes = new Map(this.#target.config.routes.map((route) => [route.name, route]));
    for (const name of this.#removedRoutes) if (routes.has(name)) this.#removedRoutes.delete(name);
    for (const name of this.#passPaths.keys()) if (!routes.has(name)) this.#passPaths.delete(name); // a later route of that name is another route
    for (const [routeName, entries] of this.#routes) {
      const route = routes.get(routeName);
      const dropped = [...entries.values()].filter((entry) => route === undefined || configuringPassLine(route, entry.config.origin) !== undefined);
      if (dropped.length === 0) continue;
      for (const entry of dropped) {
        this.#timers.clearTimeout(entry.timer);
        entries.delete(entry.config.origin);
        const line = route === undefined ? undefined : configuringPassLine(route, entry.config.origin);
        this.#log(
          line === undefined
            ? `registry: dropped ${entry.config.origin} of route ${routeName}: the reload removed the route`
            : `registry: dropped ${entry.config.origin} of route ${routeName}: the pass line at ${line.place.file}:${line.place.line} configures it now`,
        );
      }
      if (route === undefined) this.#removedRoutes.add(routeName);
      this.#apply(routeName);
    }
  }

  /**
   * Adds or refreshes an upstream of `routeName` from a PUT body.
   *
   * @param body `{ url: string, weight?: number (1..1 000 000, default 1), backup?: boolean, ttl?: "10s" | seconds }`
   * @returns the entry and whether it is new (201) or a refresh (200). A refresh may change weight,
   *   backup and ttl; the upstream's runtime state (counters, health) is kept.
   * @throws AdminRequestError 404 for an unknown route (saying so when a reload removed it); 400 for
   *   a bad body, URL, weight or ttl (the message is the config loader's, e.g. `invalid port '99999' in
   *   pass URL (expected 1 to 65535)`), or a path the route does not use (`checkPath`); 409 when a
   *   `pass` line already configures that address.
   */
  register(routeName: string, body: unknown): { entry: RegistryEntry; isNew: boolean } {
    const route = this.#route(routeName);
    const fields = registrationFields(body);
    const config = parseRegisteredUpstream(fields, routeName);
    checkPath(route, config, this.#passPaths.get(routeName));
    const configured = configuringPassLine(route, config.origin);
    if (configured !== undefined) {
      throw new AdminRequestError(409, `${config.origin} is already configured for route '${routeName}' by the pass line at ${configured.place.file}:${configured.place.line}`);
    }
    const ttlMs = parseTtl(fields['ttl']);

    const entries = this.#routes.get(routeName) ?? new Map<string, LiveEntry>();
    this.#routes.set(routeName, entries);
    const previous = entries.get(config.origin);
    if (previous !== undefined) this.#timers.clearTimeout(previous.timer);
    const nowMs = this.#now();
    const timer = this.#timers.setTimeout(() => this.#expire(routeName, config.origin), ttlMs);
    const entry: LiveEntry = { routeName, config, ttlMs, refreshedAtMs: nowMs, expiresAtMs: nowMs + ttlMs, timer };
    entries.set(config.origin, entry);
    const hasChanged = previous === undefined || previous.config.weight !== config.weight || previous.config.isBackup !== config.isBackup;
    if (hasChanged) {
      this.#apply(routeName);
      this.#log(`registry: ${previous === undefined ? 'registered' : 'updated'} ${config.origin} for route ${routeName} (weight ${config.weight}, ttl ${ttlMs}ms)`);
    }
    return { entry: publicEntry(entry), isNew: previous === undefined };
  }

  /**
   * Removes the upstream at `url` (a pass URL; only its address counts) from `routeName`.
   * @returns true when it was registered, false when not.
   * @throws AdminRequestError 404 for an unknown route, 400 for a URL that does not parse.
   */
  deregister(routeName: string, url: unknown): boolean {
    this.#route(routeName);
    const config = parseRegisteredUpstream({ url }, routeName);
    const entries = this.#routes.get(routeName);
    const entry = entries?.get(config.origin);
    if (entries === undefined || entry === undefined) return false;
    this.#timers.clearTimeout(entry.timer);
    entries.delete(config.origin);
    this.#apply(routeName);
    this.#log(`registry: deregistered ${config.origin} from route ${routeName}`);
    return true;
  }

  /** The registered upstreams, of one route or of all, in registration order. */
  entries(routeName?: string): RegistryEntry[] {
    const routes = routeName === undefined ? [...this.#routes.values()] : [this.#routes.get(routeName) ?? new Map<string, LiveEntry>()];
    return routes.flatMap((entries) => [...entries.values()].map(publicEntry));
  }

  /** Clears every expiry timer (shutdown). The entries stay as they are. */
  close(): void {
    for (const entries of this.#routes.values()) for (const entry of entries.values()) this.#timers.clearTimeout(entry.timer);
  }

  #expire(routeName: string, origin: string): void {
    const entries = this.#routes.get(routeName);
    const entry = entries?.get(origin);
    if (entries === undefined || entry === undefined) return;
    entries.delete(origin);
    this.#apply(routeName);
    this.#log(`registry: ${origin} of route ${routeName} expired: no heartbeat within its ttl of ${entry.ttlMs}ms`);
  }

  #apply(routeName: string): void {
    const entries = this.#routes.get(routeName);
    const configs = entries === undefined ? [] : [...entries.values()].map((entry) => entry.config);
    if (configs.length === 0) this.#routes.delete(routeName);
    this.#target.setRegisteredUpstreams(routeName, configs);
    this.#onChange(routeName);
  }

  /** Adds every route's `pass` path now in force to the paths it had. */
  #notePassPaths(): void {
    for (const route of this.#target.config.routes) {
      const paths = this.#passPaths.get(route.name) ?? new Set<string | undefined>();
      paths.add(route.passPath);
      this.#passPaths.set(route.name, paths);
    }
  }

  /**
   * The route in force named `routeName`. The 404 for a route a reload removed while it had
   * registrations says so (the heartbeat prints it as the reason it stops).
   */
  #route(routeName: string): RouteConfig {
    const route = this.#target.config.routes.find((candidate) => candidate.name === routeName);
    if (route !== undefined) return route;
    const reason = this.#removedRoutes.has(routeName) ? ' any more: a reload removed it' : '';
    throw new AdminRequestError(404, `no route named '${routeName}'${reason}`);
  }
}

/** The `pass` line of `route` that configures `origin`, if one does. */
function configuringPassLine(route: RouteConfig, origin: string): UpstreamConfig | undefined {
  return route.upstreams.find((upstream) => upstream.origin === origin);
}

/**
 * Refuses (400) a registered URL whose path the route does not use. Accepted: no path (the address
 * only; requests take the route's `pass` path), the route's own `pass` path, or one of `pastPaths`,
 * the paths the route had since the start (a reload changed the route's path under a running
 * heartbeat; requests take the route's new one, as they do on the route's `pass` lines). Any other
 * path is refused: that backend expects requests at a path the proxy never sent them to.
 */
function checkPath(route: RouteConfig, config: UpstreamConfig, pastPaths: ReadonlySet<string | undefined> | undefined): void {
  if (config.path === undefined || config.path === route.passPath || pastPaths?.has(config.path) === true) return;
  const uses = route.passPath === undefined ? 'none' : `'${route.passPath}'`;
  throw new AdminRequestError(
    400,
    `a registered URL must have the pass path of route '${route.name}' or none: the route uses ${uses}, got '${config.path}' (a URL without a path takes the route's)`,
  );
}

function publicEntry(entry: LiveEntry): RegistryEntry {
  const { timer: _timer, ...rest } = entry;
  return rest;
}

/** The keys a registration body may have. */
const REGISTRATION_KEYS = ['url', 'weight', 'backup', 'ttl'];

/**
 * A registration body as its fields. An unknown key is a 400 naming it (with the key it is likely a
 * typo of), as an unknown key in the config file is an error: `{"wieght": 5}` must not register
 * weight 1 and say nothing.
 */
function registrationFields(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AdminRequestError(400, 'expected a JSON object like {"url": "http://127.0.0.1:9003", "weight": 2, "ttl": "10s"}');
  }
  const unknown = Object.keys(body).find((key) => !REGISTRATION_KEYS.includes(key));
  if (unknown !== undefined) {
    const likely = suggest(unknown, REGISTRATION_KEYS);
    throw new AdminRequestError(400, `unknown key ${JSON.stringify(unknown)}${likely === undefined ? '' : ` (did you mean "${likely}"?)`}: a registration has ${REGISTRATION_KEYS.join(', ')}`);
  }
  return body as Record<string, unknown>;
}

/**
 * `{url, weight?, backup?}` → the UpstreamConfig a `pass = URL weight=N [backup]` line would give,
 * through the config's own pass-line parser. Throws AdminRequestError 400 with the parser's reason.
 */
export function parseRegisteredUpstream(fields: Record<string, unknown>, routeName: string): UpstreamConfig {
  const { url, weight, backup } = fields;
  if (typeof url !== 'string' || url === '' || /\s/.test(url)) {
    throw new AdminRequestError(400, "'url' must be an upstream URL without spaces, e.g. \"http://127.0.0.1:9003\"");
  }
  // A number, or its digits as a string; anything else would be read as more of the pass line.
  if (weight !== undefined && typeof weight !== 'number' && !(typeof weight === 'string' && /^\d+$/.test(weight))) {
    throw new AdminRequestError(400, "'weight' must be a whole number from 1 to 1000000");
  }
  if (backup !== undefined && typeof backup !== 'boolean') throw new AdminRequestError(400, "'backup' must be true or false");
  const text = `${url}${weight === undefined ? '' : ` weight=${String(weight)}`}${backup === true ? ' backup' : ''}`;
  const place = { file: `registry:${routeName}`, line: 1, column: 1 };
  try {
    return parsePassLine({ key: 'pass', value: text, isQuoted: false, place, valuePlace: place });
  } catch (error) {
    if (error instanceof ConfigValueError) throw new AdminRequestError(400, error.reason);
    throw error;
  }
}

/** `"10s"`, `"500ms"`, or a number of seconds → ms, at least MIN_REGISTRY_TTL_MS; undefined → the default. */
function parseTtl(ttl: unknown): number {
  if (ttl === undefined) return DEFAULT_REGISTRY_TTL_MS;
  if (typeof ttl !== 'string' && typeof ttl !== 'number') throw new AdminRequestError(400, "'ttl' must be a duration like \"10s\"");
  try {
    return parseDuration(String(ttl), MIN_REGISTRY_TTL_MS);
  } catch (error) {
    if (error instanceof InvalidValueError) throw new AdminRequestError(400, `${error.message} for 'ttl'`);
    throw error;
  }
}
