/**
 * A route at run time: its config, its upstreams' runtime state, its balancer, its passive-health
 * group, its access list and limits (src/limits), its authenticator and the TLS settings of its `https://` upstreams — the third layer (config → runtime), built from a RouteConfig and
 * pointing at it, never the reverse. The request path talks to a route in nginx's get/free pair:
 * `pick()` an upstream, then `recordFailure()` or `recordSuccess()` for how the attempt went.
 */
import type { RouteConfig } from '../config/config.js';
import type { PickContext } from './balancer/balancer.js';
import type { RouteBalancer } from './balancer/route-balancer.js';
import { createBalancer } from './balancer/strategies.js';
import { BasicAuthenticator } from '../auth/basic-auth.js';
import { Upstream } from './upstream.js';
import { UpstreamGroup } from './upstream-group.js';
import { buildUpstreamTls } from './upstream-tls.js';
import type { TlsClientSettings } from '../wire/tls-client.js';
import { AccessList } from '../limits/access-list.js';
import type { RouteLimits } from '../limits/limits.js';

/** Injected clock and randomness (tests make them exact). */
export interface RuntimeDeps {
  /** Milliseconds on a monotonic clock: ejection windows and durations. Default `performance.now`. */
  readonly now: () => number;
  /** Uniform in [0, 1). Default Math.random. */
  readonly random: () => number;
  /** Where passive-health transitions are logged. Default: stderr. */
  readonly log: (line: string) => void;
}

export class Route {
  readonly config: RouteConfig;
  readonly upstreams: readonly Upstream[];
  readonly balancer: RouteBalancer;
  readonly group: UpstreamGroup;
  /** Set when `auth_basic` is: the proxy demands credentials itself (SPEC 1.2, RFC 7617). */
  readonly authenticator: BasicAuthenticator | undefined;
  /** Set when the route has `access` lines (SPEC 8), compiled once here: the request path asks it for a 403. */
  readonly access: AccessList | undefined;
  /** Its `rate_limit` / `conn_limit` state (src/limits); undefined when both are off. */
  readonly limits: RouteLimits | undefined;
  /** How connections to its `https://` upstreams are made (`tls_*` keys, files read: upstream-tls.ts). */
  readonly upstreamTls: TlsClientSettings;
  readonly #deps: RuntimeDeps;

  /**
   * @param upstreams runtime state to keep (a reload passes the old objects of unchanged addresses)
   * @param upstreamTls the settings built for the whole config (RouteTable); default: built from
   *   `config.tls` now
   * @param predecessor the route this one replaces when only its upstream set changed (discovery,
   *   registry): its balancer's state is taken over for the upstreams that stay (`createBalancer`)
   * @param limits what the LimitsProvider made for this route (RouteTable asks it); default none
   * @throws ConfigValueError when `upstreamTls` is not given and a `tls_*` file does not load
   */
  constructor(config: RouteConfig, deps: RuntimeDeps, upstreams?: readonly Upstream[], upstreamTls?: TlsClientSettings, predecessor?: Route, limits?: RouteLimits) {
    this.config = config;
    this.upstreamTls = upstreamTls ?? buildUpstreamTls(config.tls);
    this.#deps = deps;
    this.upstreams = upstreams ?? config.upstreams.map((u) => new Upstream(u, config.name));
    this.balancer = createBalancer(config, this.upstreams, deps, predecessor?.balancer);
    this.group = new UpstreamGroup(config, this.upstreams);
    this.authenticator = config.authBasic === undefined ? undefined : new BasicAuthenticator(config.authBasic, config.authUsers);
    this.access = config.access.length === 0 ? undefined : new AccessList(config.access);
    this.limits = limits;
  }

  get name(): string {
    return this.config.name;
  }

  /**
   * Picks an upstream for one attempt. When nothing is available only because every upstream was
   * passively ejected, the group forgets those failures (nginx's quick recovery) and picks again.
   */
  pick(context: PickContext): Upstream | undefined {
    const picked = this.balancer.pick(context);
    if (picked !== undefined || !this.group.recoverIfAllFailed(this.#deps.now())) return picked;
    return this.balancer.pick(context);
  }

  /** Seconds for `Retry-After` on a 503: the health interval when checks are on, else `fail_timeout`. */
  get retryAfterSeconds(): number {
    const ms = this.config.health.isEnabled ? this.config.health.intervalMs : this.config.failTimeoutMs;
    return Math.max(1, Math.ceil(ms / 1000));
  }

  /** A failed attempt (connect error, timeout, reset): passive health and weight degradation (SPEC 4). */
  recordFailure(upstream: Upstream): void {
    const { ejected, wasGroupReset } = this.group.recordFailure(upstream, this.#deps.now());
    if (ejected) {
      this.#deps.log(
        `upstream ${upstream.origin} of route ${this.name} is ejected for ${this.config.failTimeoutMs}ms after ${this.config.maxFails} failure(s)` +
          (wasGroupReset ? '; every upstream of the route had failed, so all are back in rotation' : ''),
      );
    }
  }

  /** A successful attempt. */
  recordSuccess(upstream: Upstream): void {
    this.group.recordSuccess(upstream, this.#deps.now());
  }
}
