/**
 * The runtime state of the routes and their upstreams, apart from the listener that serves them:
 * one keyed store of `Upstream` objects (key: route name and origin) that a reload (SIGHUP) and the
 * admin registry both go through, as Caddy keeps one `hosts` map that every config load reuses.
 *
 * An upstream whose route and origin stay keeps its object, so its runtime state survives the
 * change: health, counters, ejection, effective weight, draining, and its place in the health
 * checker. A new key gets a new object; a key no route has any more is dropped from the store
 * (requests in flight finish on the objects they started with).
 */
import type { Config, RouteConfig, UpstreamConfig } from '../config/config.js';
import { Upstream } from './upstream.js';
import { Route, type RuntimeDeps } from './route.js';
import { buildRouteTls } from './upstream-tls.js';
import type { TlsClientSettings } from '../wire/tls-client.js';

/** What a change did to the store, for the reload log line. */
export interface StoreChange {
  /** Upstreams whose route and origin were there before: their runtime state was kept. */
  readonly kept: number;
  readonly added: number;
  readonly removed: number;
}

export class RouteTable {
  #config: Config;
  #routes: readonly Route[];
  /** Upstreams added at run time by the admin registry, per route name; they survive reloads. */
  readonly #registered = new Map<string, readonly UpstreamConfig[]>();
  /** Every runtime upstream now in a route, by `storeKey`. */
  #upstreams = new Map<string, Upstream>();
  /** Each route's TLS client settings, by route name, read from the files of `#config`. */
  #tls: ReadonlyMap<string, TlsClientSettings>;
  readonly #deps: RuntimeDeps;

  /** @throws ConfigValueError when a route's `tls_ca` or `tls_client_cert` file does not load (upstream-tls.ts) */
  constructor(config: Config, deps: RuntimeDeps) {
    this.#config = config;
    this.#tls = buildRouteTls(config.routes);
    this.#deps = deps;
    this.#routes = [];
    this.#rebuild(config, () => true);
  }

  get config(): Config {
    return this.#config;
  }

  /** The routes now in force, in file order. */
  get routes(): readonly Route[] {
    return this.#routes;
  }

  /** The upstreams the admin registry added to `routeName` (see `setRegistered`). */
  registeredUpstreams(routeName: string): readonly UpstreamConfig[] {
    return this.#registered.get(routeName) ?? [];
  }

  /**
   * Replaces the registered upstreams of `routeName`: the route is rebuilt with its configured
   * upstreams followed by `configs` (an origin a `pass` line already has is skipped); other routes
   * keep their objects, balancers included. A name not in the config is remembered and applied if a
   * reload brings the route. Returns false when no route of that name is in force.
   */
  setRegistered(routeName: string, configs: readonly UpstreamConfig[]): boolean {
    if (configs.length === 0) this.#registered.delete(routeName);
    else this.#registered.set(routeName, [...configs]);
    if (!this.#routes.some((route) => route.name === routeName)) return false;
    this.#rebuild(this.#config, (routeConfig) => routeConfig.name === routeName);
    return true;
  }

  /**
   * Swaps in `config`'s routes; every route is rebuilt, upstream objects are kept by key. The TLS
   * files are read first: when one does not load, nothing changes.
   * @throws ConfigValueError when a route's `tls_ca` or `tls_client_cert` file does not load
   */
  reload(config: Config): StoreChange {
    this.#tls = buildRouteTls(config.routes);
    this.#config = config;
    return this.#rebuild(config, () => true);
  }

  /**
   * Builds the routes `isRebuilt` selects from `config` (the others keep their Route objects), takes
   * each upstream from the store or creates it, and drops the keys no route has any more.
   */
  #rebuild(config: Config, isRebuilt: (routeConfig: RouteConfig) => boolean): StoreChange {
    const previous = this.#upstreams;
    const current = new Map<string, Upstream>();
    let kept = 0;
    this.#routes = config.routes.map((routeConfig) => {
      const existing = this.#routes.find((route) => route.name === routeConfig.name);
      if (existing !== undefined && !isRebuilt(routeConfig)) {
        for (const upstream of existing.upstreams) current.set(storeKey(routeConfig.name, upstream.origin), upstream);
        return existing;
      }
      const withRegistered = this.#withRegistered(routeConfig);
      const upstreams = withRegistered.upstreams.map((upstreamConfig) => {
        const key = storeKey(routeConfig.name, upstreamConfig.origin);
        let upstream = previous.get(key);
        if (upstream === undefined) {
          upstream = new Upstream(upstreamConfig, routeConfig.name);
        } else {
          upstream.reconfigure(upstreamConfig);
          kept++;
        }
        current.set(key, upstream);
        return upstream;
      });
      return new Route(withRegistered, this.#deps, upstreams, this.#tls.get(routeConfig.name));
    });
    this.#upstreams = current;
    let removed = 0;
    for (const key of previous.keys()) if (!current.has(key)) removed++;
    const added = current.size - (previous.size - removed);
    return { kept, added, removed };
  }

  /** `routeConfig` with its registered upstreams appended (origins a `pass` line has are skipped). */
  #withRegistered(routeConfig: RouteConfig): RouteConfig {
    const registered = this.registeredUpstreams(routeConfig.name).filter(
      (candidate) => !routeConfig.upstreams.some((configured) => configured.origin === candidate.origin),
    );
    return registered.length === 0 ? routeConfig : { ...routeConfig, upstreams: [...routeConfig.upstreams, ...registered] };
  }
}

/** The store's key: an upstream is the same one when both its route and its origin are. */
function storeKey(routeName: string, origin: string): string {
  return `${routeName} ${origin}`;
}
