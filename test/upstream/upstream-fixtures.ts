/**
 * Config fixtures for the upstream and health tests: a valid UpstreamConfig / RouteConfig with the
 * SPEC 1.2 defaults (the loader's ROUTE_DEFAULTS), overridable per test, without parsing INI text.
 */
import type { HealthCheckConfig, RouteConfig, UpstreamConfig } from '../../src/config/config.js';
import { Upstream } from '../../src/upstream/upstream.js';
import { ROUTE_DEFAULTS } from '../../src/config/load-config.js';

const place = { file: 'test.ini', line: 1, column: 1 };

/** An upstream at `http://host:port` (default 127.0.0.1:9001, weight 1). */
export function upstreamConfig(overrides: Partial<UpstreamConfig> = {}): UpstreamConfig {
  const host = overrides.host ?? '127.0.0.1';
  const port = overrides.port ?? 9001;
  const hostHeader = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return {
    url: `http://${hostHeader}`,
    scheme: 'http',
    origin: `http://${hostHeader}`,
    host,
    port,
    hostHeader,
    path: undefined,
    weight: 1,
    isBackup: false,
    isDown: false,
    place,
    ...overrides,
  };
}

/** `health_*` with SPEC defaults (the loader's own), checks on. */
export function healthConfig(overrides: Partial<HealthCheckConfig> = {}): HealthCheckConfig {
  return { ...ROUTE_DEFAULTS.health, isEnabled: true, ...overrides };
}

/** A route `a` with the loader's SPEC defaults and the given upstreams. */
export function routeConfig(overrides: Partial<RouteConfig> = {}): RouteConfig {
  const upstreams = overrides.upstreams ?? [upstreamConfig()];
  return {
    ...ROUTE_DEFAULTS,
    name: 'a',
    path: { kind: 'prefix', prefix: '/a' },
    host: undefined,
    upstreams,
    passPath: undefined,
    retries: upstreams.length - 1,
    isRetriesDefault: overrides.retries === undefined,
    health: healthConfig(),
    place,
    ...overrides,
  };
}

/** A runtime Upstream of route `a` on 127.0.0.1:`port`. */
export function makeUpstream(port = 9001, overrides: Partial<UpstreamConfig> = {}, routeName = 'a'): Upstream {
  return new Upstream(upstreamConfig({ port, ...overrides }), routeName);
}
