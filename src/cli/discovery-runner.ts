/**
 * Runs DNS discovery (SPEC 7, src/discovery) beside a proxy for the life of the process: one
 * `Discovery` for the config's `resolve` and `service=` pass lines, made only when the config has
 * such a line (a config without one never asks DNS and never holds a Discovery), reloaded with
 * every config SIGHUP brings in (made then if the reload is the first to bring a line), stopped at
 * shutdown. Its target is the ProxyServer in a single process, the cluster primary's model (which
 * pushes each change to the workers) with `workers = N`: one resolver per proxy, as Envoy's main
 * thread resolves for its worker threads.
 */
import type { Config } from '../config/config.js';
import { Discovery, type DiscoveryOptions } from '../discovery/discovery.js';
import type { DiscoveryLineStatus, LookupCount } from '../discovery/discovered-line.js';
import type { DiscoveryView } from '../admin/status-snapshot.js';

/** True when some route of `config` has a `pass` line with `resolve` or `service=`. */
export function hasDiscoveryLines(config: Config): boolean {
  return config.routes.some((route) => route.upstreams.some((upstream) => upstream.discovery !== undefined));
}

export class DiscoveryRunner implements DiscoveryView {
  readonly #options: DiscoveryOptions;
  #discovery: Discovery | undefined;
  #isStopped = false;

  /** @param options the target and the log; clocks, timers and the lookup for tests */
  constructor(options: DiscoveryOptions) {
    this.#options = options;
  }

  /**
   * Follows `config`: the first config with a discovery line makes the Discovery and starts its
   * first lookups now; later ones reload it (unchanged lines keep their schedules, new ones start,
   * removed ones stop). Call it at start-up, then after every successful reload of the target.
   */
  apply(config: Config): void {
    if (this.#isStopped) return;
    if (this.#discovery !== undefined) return this.#discovery.reload(config);
    if (!hasDiscoveryLines(config)) return;
    this.#discovery = new Discovery(config, this.#options);
    this.#discovery.start();
  }

  /** Stops every lookup and timer (shutdown); `apply` does nothing afterwards. */
  stop(): void {
    this.#isStopped = true;
    this.#discovery?.stop();
  }

  /** Every discovery line of the config in force; empty without discovery. */
  get lines(): readonly DiscoveryLineStatus[] {
    return this.#discovery?.lines ?? [];
  }

  /** Lookups by route, name and result since the start; empty without discovery. */
  get lookupCounts(): readonly LookupCount[] {
    return this.#discovery?.lookupCounts ?? [];
  }
}
