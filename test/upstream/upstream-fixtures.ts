/**
 * Config fixtures for the upstream and health tests: a valid UpstreamConfig / RouteConfig with the
 * SPEC 1.2 defaults, overridable per test, without going through the INI loader.
 */
import type { HealthCheckConfig, RouteConfig, UpstreamConfig } from '../../src/config/config.js';
import { Upstream } from '../../src/upstream/upstream.js';

const place = { file: 'test.ini', line: 1, column: 1 };

/** An upstream at `http://host:port` (default 127.0.0.1:9001, weight 1). */
export function upstreamConfig(overrides: Partial<UpstreamConfig> = {}): UpstreamConfig {
  const host = overrides.host ?? '127.0.0.1';
  const port = overrides.port ?? 9001;
  const hostHeader = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return {
    url: `http://${hostHeader}`,
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

/** `health_*` with SPEC defaults, checks on. */
export function healthConfig(overrides: Partial<HealthCheckConfig> = {}): HealthCheckConfig {
  return {
    isEnabled: true,
    method: 'HEAD',
    path: '/',
    intervalMs: 3000,
    timeoutMs: 2000,
    fall: 3,
    rise: 2,
    statuses: [{ from: 200, to: 399 }],
    ...overrides,
  };
}

/** A route `a` with SPEC defaults and the given upstreams. */
export function routeConfig(overrides: Partial<RouteConfig> = {}): RouteConfig {
  const upstreams = overrides.upstreams ?? [upstreamConfig()];
  return {
    name: 'a',
    path: { kind: 'prefix', prefix: '/a' },
    host: undefined,
    upstreams,
    passPath: undefined,
    strategy: 'round-robin',
    hash: 'crc32',
    hashKey: { kind: 'client_ip' },
    virtualNodes: 160,
    preserveHost: true,
    connectTimeoutMs: 5000,
    readTimeoutMs: 60000,
    retries: upstreams.length - 1,
    maxFails: 1,
    failTimeoutMs: 10000,
    failFactor: 5,
    health: healthConfig(),
    authBasic: undefined,
    authUsers: [],
    authForward: false,
    trace: false,
    place,
    ...overrides,
  };
}

/** A runtime Upstream of route `a` on 127.0.0.1:`port`. */
export function makeUpstream(port = 9001, overrides: Partial<UpstreamConfig> = {}, routeName = 'a'): Upstream {
  return new Upstream(upstreamConfig({ port, ...overrides }), routeName);
}
