/** X-Proxy-Trace: one ASCII line with route, strategy, attempt, candidates and their state, pick. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createBalancer } from '../../../src/upstream/balancer/strategies.js';
import { formatTrace, MAX_TRACE_CANDIDATES } from '../../../src/upstream/balancer/trace.js';
import type { StrategyName } from '../../../src/config/config.js';
import { contextFor, routeConfig, upstreamsOf, weights } from './helpers.js';
import type { UpstreamSpec } from './helpers.js';

function routeOf(strategy: StrategyName, specs: readonly UpstreamSpec[], name = 'a') {
  const config = routeConfig({ name, strategy, upstreams: specs });
  const upstreams = upstreamsOf(config);
  return { config, upstreams, balancer: createBalancer(config, upstreams, { now: () => 1000 }) };
}

test('smooth weighted round robin: current and effective weights, active requests, the pick', () => {
  const route = routeOf('smooth-weighted-round-robin', weights(5, 1));
  const picked = route.balancer.pick(contextFor());
  const got = formatTrace(route, picked, 1);
  const want =
    'route=a; strategy=smooth-weighted-round-robin; attempt=1; ' +
    'candidates=http://127.0.0.1:9001{cw=-1,ew=5,active=0},http://127.0.0.1:9002{cw=1,ew=1,active=0}; ' +
    'pick=http://127.0.0.1:9001';
  assert.equal(got, want);
});

test('skipped candidates say why; backups are marked; a retry shows its attempt number', () => {
  const route = routeOf('round-robin', [{}, { isDown: true }, {}, {}, {}, { isBackup: true }]);
  const [a, , c, d, e] = route.upstreams;
  c!.ejectedUntilMs = 5000;
  d!.isDraining = true;
  e!.healthState = 'down';
  const tried = new Set([a!]);
  const picked = route.balancer.pick(contextFor({ tried }));
  const got = formatTrace(route, picked, 2, { nowMs: 1000, tried });
  const want =
    'route=a; strategy=round-robin; attempt=2; candidates=' +
    'http://127.0.0.1:9001{next=yes,active=0,skip=tried},' +
    'http://127.0.0.1:9002{next=no,active=0,skip=down},' +
    'http://127.0.0.1:9003{next=no,active=0,skip=ejected},' +
    'http://127.0.0.1:9004{next=no,active=0,skip=draining},' +
    'http://127.0.0.1:9005{next=no,active=0,skip=unhealthy},' +
    'http://127.0.0.1:9006{next=yes,active=0,backup=yes}; pick=http://127.0.0.1:9006'; // the backups' own cursor
  assert.equal(got, want);
});

test('nothing available → pick=none', () => {
  const route = routeOf('least-connections', [{ isDown: true }]);
  const got = formatTrace(route, route.balancer.pick(contextFor()), 1);
  assert.equal(got, 'route=a; strategy=least-connections; attempt=1; candidates=http://127.0.0.1:9001{active=0,ew=1,next=yes,skip=down}; pick=none');
});

test('large pools list the first candidates, the pick, and +N more; the line stays ASCII', () => {
  const route = routeOf('round-robin', weights(...Array.from({ length: 40 }, () => 1)));
  for (const upstream of route.upstreams.slice(0, 30)) upstream.healthState = 'down';
  const picked = route.balancer.pick(contextFor());
  const got = formatTrace(route, picked, 1);
  assert.equal(picked, route.upstreams[30]);
  const more = 40 - MAX_TRACE_CANDIDATES - 1; // the first 16, then the pick, then the rest
  assert.ok(got.endsWith(`http://127.0.0.1:9031{next=no,active=0},+${more} more; pick=http://127.0.0.1:9031`), `got ${got}`);
  assert.equal(got.split('http://').length - 1, MAX_TRACE_CANDIDATES + 2, 'origins listed: want 16 candidates, the pick, and pick=');
  assert.match(got, /^[\x20-\x7e]*$/);
  assert.ok(got.length < 2000, `length: got ${got.length}, want < 2000`);
});

test('non-ASCII is replaced so the header value is always legal', () => {
  const route = routeOf('random', weights(1), 'caf\u00e9');
  const got = formatTrace(route, undefined, 1);
  assert.match(got, /^route=caf\?; /);
});
