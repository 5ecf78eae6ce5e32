/**
 * A cluster worker copying the primary's upstream state (cluster-worker.ts `applyUpstreamState`):
 * the discovered addresses of each route (SPEC 7: the primary resolves, workers never ask DNS) are
 * applied only when they changed, before the health state, so a newly discovered address gets the
 * primary's health state in the same message.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../../src/config/load-config.js';
import { ProxyServer } from '../../../src/gateway/proxy-server.js';
import { applyUpstreamState } from '../../../src/process/cluster/cluster-worker.js';
import type { UpstreamStateMessage } from '../../../src/process/cluster/cluster-messages.js';
import { discoveredUpstreamConfig, type DiscoveredLine } from '../../../src/discovery/discovered-line.js';

const CONFIG = parseConfig(
  ['[server]', 'listen = 127.0.0.1:0', 'access_log = off', '[proxy.api]', 'path = /api', 'pass = http://api.test:8080 resolve'].join('\n'),
  'test.ini',
);

function discoveredOf(...addresses: string[]): DiscoveredLine[] {
  const line = CONFIG.routes[0]!.upstreams[0]!;
  return [{ lineOrigin: line.origin, upstreams: addresses.map((address) => discoveredUpstreamConfig(line, { address, port: 8080 })) }];
}

/** Through JSON, as the lists compare (undefined fields dropped). */
const viaJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

function stateMessage(discovered: readonly DiscoveredLine[], upstreams: UpstreamStateMessage['routes'][number]['upstreams'] = []): UpstreamStateMessage {
  // A copy, as one that arrived over IPC (no object is shared with the worker's own lists).
  return JSON.parse(JSON.stringify({ type: 'upstream-state', routes: [{ name: 'api', registered: [], discovered, upstreams }] })) as UpstreamStateMessage;
}

/** A worker's proxy whose setDiscoveredUpstreams calls are recorded. */
function workerProxy(): { proxy: ProxyServer; calls: (readonly DiscoveredLine[])[] } {
  const proxy = new ProxyServer(CONFIG, { isHealthCheckDisabled: true });
  const calls: (readonly DiscoveredLine[])[] = [];
  const setDiscovered = proxy.setDiscoveredUpstreams.bind(proxy);
  proxy.setDiscoveredUpstreams = (routeName, lines) => {
    calls.push(lines);
    setDiscovered(routeName, lines);
  };
  return { proxy, calls };
}

test('discovered lines are applied when they changed, and not again when the same sets come back', async () => {
  const { proxy, calls } = workerProxy();
  try {
    applyUpstreamState(proxy, stateMessage(discoveredOf('127.0.0.2', '127.0.0.3')));
    assert.equal(calls.length, 1, `got ${calls.length} setDiscoveredUpstreams calls, want 1`);
    assert.deepEqual(viaJson(proxy.discoveredLines('api')), viaJson(discoveredOf('127.0.0.2', '127.0.0.3')));

    applyUpstreamState(proxy, stateMessage(discoveredOf('127.0.0.2', '127.0.0.3')));
    assert.equal(calls.length, 1, `unchanged sets: got ${calls.length} calls, want still 1 (the route is not rebuilt)`);

    applyUpstreamState(proxy, stateMessage(discoveredOf('127.0.0.3', '127.0.0.4')));
    assert.equal(calls.length, 2, `a changed set: got ${calls.length} calls, want 2`);
    assert.deepEqual(viaJson(proxy.discoveredLines('api')), viaJson(discoveredOf('127.0.0.3', '127.0.0.4')));
  } finally {
    await proxy.close(0);
  }
});

test('a newly discovered address gets the health state that came with it in the same message', async () => {
  const { proxy } = workerProxy();
  try {
    const down = { origin: 'http://127.0.0.3:8080', healthState: 'down' as const, isDraining: false, lastProbe: undefined };
    applyUpstreamState(proxy, stateMessage(discoveredOf('127.0.0.2', '127.0.0.3'), [down]));
    const states = proxy.routes[0]!.upstreams.map((upstream) => `${upstream.origin} ${upstream.healthState}`);
    assert.deepEqual(states, ['http://127.0.0.2:8080 up', 'http://127.0.0.3:8080 down']);
  } finally {
    await proxy.close(0);
  }
});
