/**
 * Test fixtures for the balancer tests: RouteConfig / UpstreamConfig objects built directly (no
 * config loader), a seeded PRNG to inject as `random`, and small helpers to run picks.
 */
import type { HashKey, HashName, RouteConfig, StrategyName, UpstreamConfig } from '../../../src/config/config.js';
import type { Balancer, PickContext } from '../../../src/upstream/balancer/balancer.js';
import { Upstream } from '../../../src/upstream/upstream.js';
import { seededRandom } from '../../helpers/seeded-random.js';
import { ROUTE_DEFAULTS } from '../../../src/config/load-config.js';
import { routeConfig as baseRouteConfig, upstreamConfig as baseUpstreamConfig } from '../upstream-fixtures.js';
export { seededRandom };

export interface UpstreamSpec {
  readonly weight?: number;
  readonly isBackup?: boolean;
  readonly isDown?: boolean;
}

/** An UpstreamConfig for `http://127.0.0.1:PORT`. */
export function upstreamConfig(port: number, spec: UpstreamSpec = {}): UpstreamConfig {
  return baseUpstreamConfig({ port, ...spec });
}

export interface RouteSpec {
  readonly name?: string;
  readonly strategy: StrategyName;
  /** One spec per upstream, ports 9001, 9002, … in order. */
  readonly upstreams: readonly UpstreamSpec[];
  readonly hash?: HashName;
  readonly hashKey?: HashKey;
  readonly virtualNodes?: number;
}

/** A RouteConfig with SPEC 1.2 defaults for everything the balancer does not read. */
export function routeConfig(spec: RouteSpec): RouteConfig {
  const upstreams = spec.upstreams.map((upstream, i) => upstreamConfig(9001 + i, upstream));
  return baseRouteConfig({
    name: spec.name ?? 'r',
    path: { kind: 'prefix', prefix: '/' },
    upstreams,
    strategy: spec.strategy,
    health: { ...ROUTE_DEFAULTS.health },
    ...(spec.hash === undefined ? {} : { hash: spec.hash }),
    ...(spec.hashKey === undefined ? {} : { hashKey: spec.hashKey }),
    ...(spec.virtualNodes === undefined ? {} : { virtualNodes: spec.virtualNodes }),
  });
}

/** Runtime upstreams for a route, in config order. */
export function upstreamsOf(route: RouteConfig): Upstream[] {
  return route.upstreams.map((config) => new Upstream(config, route.name));
}

/** Weights as a list of bare upstream specs: weights(5, 1, 1). */
export function weights(...values: number[]): UpstreamSpec[] {
  return values.map((weight) => ({ weight }));
}


/** A `random` that replays the given values in a loop. */
export function scriptedRandom(values: readonly number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length]!;
}

/** A pick context; a fresh empty `tried` set unless given. */
export function contextFor(overrides: Partial<PickContext> = {}): PickContext {
  const clientIp = overrides.clientIp ?? '127.0.0.1';
  return { clientIp, hashKey: overrides.hashKey ?? clientIp, tried: overrides.tried ?? new Set() };
}

/** Letters for upstreams by index (a, b, c, …), as in the SPEC's sequences. */
export function labelOf(upstreams: readonly Upstream[], upstream: Upstream | undefined): string {
  return upstream === undefined ? '-' : String.fromCharCode(97 + upstreams.indexOf(upstream));
}

/** `count` picks as a space-separated label string: "a a b a c a a". */
export function pickSequence(balancer: Balancer, upstreams: readonly Upstream[], count: number, context = contextFor()): string {
  const labels: string[] = [];
  for (let i = 0; i < count; i++) labels.push(labelOf(upstreams, balancer.pick(context)));
  return labels.join(' ');
}

/** Picks per upstream over `count` picks, in upstream order (undefined picks are not counted). */
export function pickCounts(balancer: Balancer, upstreams: readonly Upstream[], count: number, nextContext: (i: number) => PickContext = () => contextFor()): number[] {
  const counts = upstreams.map(() => 0);
  for (let i = 0; i < count; i++) {
    const picked = balancer.pick(nextContext(i));
    if (picked !== undefined) counts[upstreams.indexOf(picked)]!++;
  }
  return counts;
}
