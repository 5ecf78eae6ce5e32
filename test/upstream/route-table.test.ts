/**
 * RouteTable: the one keyed store of runtime upstreams that a reload and the admin registry share.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { RouteTable } from '../../src/upstream/route-table.js';
import type { UpstreamConfig } from '../../src/config/config.js';

const deps = { now: () => 0, random: () => 0, log: () => {} };
const ini =
  '[server]\naccess_log = off\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\n' +
  '[proxy.b]\npath = /b\npass = http://127.0.0.1:9002\n';

test('a registry change rebuilds only its route; the other keeps its Route object and balancer', () => {
  const table = new RouteTable(parseConfig(ini, 'env.ini'), deps);
  const [routeA, routeB] = table.routes;
  const extra: UpstreamConfig = { ...routeA!.upstreams[0]!.config, origin: 'http://127.0.0.1:9003', port: 9003, hostHeader: '127.0.0.1:9003' };
  assert.equal(table.setRegistered('a', [extra]), true);
  assert.notEqual(table.routes[0], routeA, 'route a is rebuilt');
  assert.equal(table.routes[1], routeB, `got a new Route for b, want the old one (its balancer state)`);
  assert.deepEqual(table.routes[0]!.upstreams.map((u) => u.origin), ['http://127.0.0.1:9001', 'http://127.0.0.1:9003']);
  assert.equal(table.routes[0]!.upstreams[0], routeA!.upstreams[0], 'the configured upstream keeps its object');
  assert.equal(table.setRegistered('nope', [extra]), false, 'a route not in force: remembered, nothing rebuilt');
});

test('a reload keeps registered upstreams and counts kept / added / removed by route and origin', () => {
  const table = new RouteTable(parseConfig(ini, 'env.ini'), deps);
  const extra: UpstreamConfig = { ...table.routes[0]!.upstreams[0]!.config, origin: 'http://127.0.0.1:9003', port: 9003, hostHeader: '127.0.0.1:9003' };
  table.setRegistered('a', [extra]);
  const registered = table.routes[0]!.upstreams[1];
  // b's upstream moves to route a's address: same origin, other route → a new object.
  const change = table.reload(parseConfig(ini.replace('9002', '9001'), 'env.ini'));
  assert.deepEqual(change, { kept: 2, added: 1, removed: 1 });
  assert.equal(table.routes[0]!.upstreams[1], registered, 'the registered upstream survives the reload with its object');
  assert.notEqual(table.routes[1]!.upstreams[0], table.routes[0]!.upstreams[0], 'route b gets its own object for the same origin');
});
