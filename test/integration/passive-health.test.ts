/**
 * Passive health and weight degradation (SPEC 4, issue 4): failures counted within `fail_timeout`
 * (not consecutive ones) eject an upstream, failed attempts are retried elsewhere; each failure costs
 * max(1, floor(weight / fail_factor)) effective weight, one unit comes back per pick of the route
 * (nginx), and a successful active probe restores it at once. The weight sequences are nginx's smooth
 * weighted round robin computed by hand, row by row, and asserted exactly: first on the real Route
 * objects with an injected clock, then once through the real proxy.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { HealthChecker } from '../../src/upstream/health/health-checker.js';
import type { Timers } from '../../src/timers.js';
import type { ProbeResult } from '../../src/upstream/health/probe.js';
import { Route, type RuntimeDeps } from '../../src/upstream/route.js';
import type { Upstream } from '../../src/upstream/upstream.js';
import { request, startBackend, startTestProxy } from '../helpers/proxy-harness.js';

test('passive ejection counts failures within fail_timeout, not consecutive ones: a is out after its third failure, every client request succeeds', async (t) => {
  let aReceived = 0;
  const a = await startBackend((req, res) => {
    aReceived++;
    if (aReceived % 3 === 0) req.socket.destroy(); // every third request: closed without an answer
    else res.setHeader('Connection', 'close').end('a'); // no reuse: a reset on a reused connection is the pool's race, not counted (request-path.ts)
  });
  const b = await startBackend((_req, res) => res.end('b'));
  const lines: string[] = [];
  const proxy = await startTestProxy(
    `[proxy.r]\npath = /\npass = ${a.url}\npass = ${b.url}\nstrategy = round-robin\nmax_fails = 3\nfail_timeout = 10s\n`,
    { deps: { log: (line) => lines.push(line) } },
  );
  t.after(async () => {
    await proxy.close();
    await a.close();
    await b.close();
  });

  const statuses: number[] = [];
  for (let i = 0; i < 30; i++) statuses.push((await request(proxy.port, { path: `/${i + 1}` })).status);

  assert.deepEqual(statuses, new Array(30).fill(200), `got statuses ${statuses.join(',')}, want thirty 200s`);
  // Round robin a b a b …: a's requests 3, 6, 9 fail (client requests 5, 10, 15), each retried on b;
  // two successes sit between its failures, and the third failure still ejects it.
  const aPaths = a.requests.map((r) => r.url);
  assert.deepEqual(aPaths, ['/1', '/3', '/5', '/6', '/8', '/10', '/11', '/13', '/15'], `got a's requests ${aPaths.join(' ')}`);
  const upstreamA = proxy.proxy.routes[0]!.upstreams[0]!;
  assert.equal(upstreamA.failuresTotal, 3, `got ${upstreamA.failuresTotal} failures on a, want 3`);
  assert.ok(upstreamA.ejectedUntilMs > performance.now(), 'a must still be ejected at the end of the run');
  const bPaths = b.requests.map((r) => r.url);
  assert.equal(bPaths.length, 24, `got ${bPaths.length} requests at b, want 24 (its 15 turns, a's 3 failed attempts, the 6 after ejection… ${bPaths.join(' ')})`);
  assert.deepEqual(bPaths.slice(-15), Array.from({ length: 15 }, (_, i) => `/${i + 16}`), 'after a is ejected, b takes every request');
  // The access log shows the failed attempts and where they went next.
  const retried = proxy.logs.filter((r) => r.attempts.length === 2).map((r) => r.target);
  assert.deepEqual(retried, ['/5', '/10', '/15'], `got retried requests ${retried.join(' ')}`);
  for (const record of proxy.logs.filter((r) => r.attempts.length === 2)) {
    assert.deepEqual(record.attempts.map((x) => [x.upstream, x.error ?? x.status]), [
      [`127.0.0.1:${a.port}`, 'PRX_UPSTREAM_RESET: closed the connection before sending a response'],
      [`127.0.0.1:${b.port}`, 200],
    ]);
  }
  assert.deepEqual(lines, [`upstream ${a.url} of route r is ejected for 10000ms after 3 failure(s)`]);
});

/** A route from INI text, built the way the proxy builds it, with a clock the test moves. */
function routeFrom(ini: string, deps: Partial<RuntimeDeps> = {}): { route: Route; a: Upstream; b: Upstream } {
  const config = parseConfig(ini, 'test.ini');
  const route = new Route(config.routes[0]!, { now: () => 1000, random: () => 0, log: () => {}, ...deps });
  return { route, a: route.upstreams[0]!, b: route.upstreams[1]! };
}

const SWRR_5_1 =
  '[proxy.r]\npath = /\npass = http://127.0.0.1:9001 weight=5\npass = http://127.0.0.1:9002 weight=1\n' +
  'strategy = smooth-weighted-round-robin\nfail_factor = 5\nmax_fails = 100\n';

/** One pick of `route` for a fresh request: the upstream's port, and the state after it (cw a, cw b, ew a). */
function pickRow(route: Route): [string, number, number, number] {
  const picked = route.pick({ clientIp: '127.0.0.1', hashKey: '127.0.0.1', tried: new Set() });
  const [stateA, stateB] = route.balancer.describeState();
  return [picked === route.upstreams[0] ? 'a' : picked === route.upstreams[1] ? 'b' : '-', Number(stateA!.cw), Number(stateB!.cw), route.upstreams[0]!.effectiveWeight];
}

test('weight degradation: after one failure a {5,1} smooth weighted round robin follows nginx exactly and climbs back to the 5:1 cycle', () => {
  const { route, a, b } = routeFrom(SWRR_5_1);
  // Undisturbed, the cycle is a a a b a a (cw before → +ew → pick → −6).
  assert.deepEqual([pickRow(route), pickRow(route)], [
    ['a', -1, 1, 5], //  0,0 + 5,1 =  5,1 → a
    ['a', -2, 2, 5], // -1,1 + 5,1 =  4,2 → a
  ]);

  route.recordFailure(a); // weight 5, fail_factor 5: loses max(1, floor(5/5)) = 1
  assert.equal(a.effectiveWeight, 4, `got effective weight ${a.effectiveWeight}, want 4`);
  assert.equal(b.effectiveWeight, 1);

  // | pick | cw before | ew a,b | cw + ew | total | pick | cw after | ew a after the pick (+1) |
  // |  3   | -2, 2     | 4, 1   |  2, 3   |   5   |  b   |  2, -2   | 5  ← undisturbed: 3,3 → a |
  // |  4   |  2,-2     | 5, 1   |  7,-1   |   6   |  a   |  1, -1   | 5 |
  // |  5   |  1,-1     | 5, 1   |  6, 0   |   6   |  a   |  0,  0   | 5 |
  // |  6   |  0, 0     | 5, 1   |  5, 1   |   6   |  a   | -1,  1   | 5 |
  // |  7   | -1, 1     | 5, 1   |  4, 2   |   6   |  a   | -2,  2   | 5 |
  // |  8   | -2, 2     | 5, 1   |  3, 3   |   6   |  a   | -3,  3   | 5  (tie → the earlier, a) |
  // |  9   | -3, 3     | 5, 1   |  2, 4   |   6   |  b   |  2, -2   | 5 |
  // | 10   |  2,-2     | 5, 1   |  7,-1   |   6   |  a   |  1, -1   | 5 |
  // | 11   |  1,-1     | 5, 1   |  6, 0   |   6   |  a   |  0,  0   | 5 |
  // then from 0,0 the undisturbed cycle a a a b a a again.
  const afterFailure = Array.from({ length: 9 }, () => pickRow(route));
  assert.deepEqual(afterFailure, [
    ['b', 2, -2, 5],
    ['a', 1, -1, 5],
    ['a', 0, 0, 5],
    ['a', -1, 1, 5],
    ['a', -2, 2, 5],
    ['a', -3, 3, 5],
    ['b', 2, -2, 5],
    ['a', 1, -1, 5],
    ['a', 0, 0, 5],
  ]);
  const cycles = Array.from({ length: 12 }, () => pickRow(route)[0]).join(' ');
  assert.equal(cycles, 'a a a b a a a a a b a a', `got ${cycles}, want the 5:1 cycle twice`);
});

test('weight degradation: effective weight climbs back one per pick, and one successful probe restores it at once', async () => {
  const { route, a } = routeFrom(SWRR_5_1 + 'health_check = on\n');
  for (let i = 0; i < 3; i++) route.recordFailure(a);
  assert.equal(a.effectiveWeight, 2, `got ${a.effectiveWeight} after 3 failures, want 5 − 3 = 2`);
  route.pick({ clientIp: '127.0.0.1', hashKey: '127.0.0.1', tried: new Set() });
  assert.equal(a.effectiveWeight, 3, `got ${a.effectiveWeight} after one pick, want 3`);

  // The real scheduler with a probe that answers 200 at once and timers that never fire.
  const probed: number[] = [];
  const probe = async (upstream: { port: number }): Promise<ProbeResult> => {
    probed.push(upstream.port);
    return { ok: true, status: 200, latencyMs: 1 };
  };
  const timers: Timers = { setTimeout: () => ({}), clearTimeout: () => {} };
  const checker = new HealthChecker({ routes: [{ route: route.config, upstreams: route.upstreams }], probe, timers });
  checker.start();
  await new Promise((resolve) => setImmediate(resolve));
  checker.stop();

  assert.deepEqual(probed, [9001, 9002]);
  assert.equal(a.effectiveWeight, 5, `got ${a.effectiveWeight} after a successful probe, want 5 at once`);
});

test('weight degradation through the proxy: a {5,1} route where a fails its third request serves b one turn early, then the 5:1 cycle', async (t) => {
  let aReceived = 0;
  const a = await startBackend((req, res) => {
    if (++aReceived === 3) req.socket.destroy();
    else res.setHeader('Connection', 'close').end('a'); // no reuse: a reset on a reused connection is the pool's race, not counted (request-path.ts)
  });
  const b = await startBackend((_req, res) => res.end('b'));
  // retries = 0: the failed request is not retried, so no second pick gives the weight back before
  // the test can look at it.
  const proxy = await startTestProxy(
    `[proxy.r]\npath = /\npass = ${a.url} weight=5\npass = ${b.url} weight=1\n` +
      'strategy = smooth-weighted-round-robin\nfail_factor = 5\nmax_fails = 100\nretries = 0\n',
    { deps: { log: () => {} } },
  );
  t.after(async () => {
    await proxy.close();
    await a.close();
    await b.close();
  });
  const upstreamA = proxy.proxy.routes[0]!.upstreams[0]!;

  const served: string[] = [];
  for (let i = 1; i <= 11; i++) {
    const res = await request(proxy.port, { path: `/${i}` });
    served.push(res.status === 200 ? res.body.toString() : String(res.status));
    if (i === 3) assert.equal(upstreamA.effectiveWeight, 4, `got effective weight ${upstreamA.effectiveWeight} after a's failure, want 4`);
  }

  // Requests 1–3 as the undisturbed cycle (cw a,b after: -1,1 / -2,2 / -3,3; the 3rd is a's failure
  // → 502, ew a = 4). Request 4: -3+4, 3+1 = 1,4 → b (total 5) → 1,-1, ew a back to 5. Then 6,0 → a;
  // 5,1 → a; 4,2 → a; 3,3 → a; 2,4 → b (request 9, undisturbed it would be request 10); 7,-1 → a; 6,0 → a.
  assert.deepEqual(served, ['a', 'a', '502', 'b', 'a', 'a', 'a', 'a', 'b', 'a', 'a'], `got ${served.join(' ')}`);
  assert.equal(upstreamA.effectiveWeight, 5);
});

test('weight degradation survives the retry: with default retries the failed request is served by b and a keeps effective weight 4', async (t) => {
  let aReceived = 0;
  const a = await startBackend((req, res) => {
    if (++aReceived === 3) req.socket.destroy();
    else res.setHeader('Connection', 'close').end('a'); // no reuse: a reset on a reused connection is the pool's race, not counted (request-path.ts)
  });
  const b = await startBackend((_req, res) => res.end('b'));
  const proxy = await startTestProxy(
    `[proxy.r]\npath = /\npass = ${a.url} weight=5\npass = ${b.url} weight=1\n` + 'strategy = smooth-weighted-round-robin\nfail_factor = 5\nmax_fails = 100\n',
    { deps: { log: () => {} } },
  );
  t.after(async () => {
    await proxy.close();
    await a.close();
    await b.close();
  });
  const upstreamA = proxy.proxy.routes[0]!.upstreams[0]!;
  const served: string[] = [];
  for (let i = 1; i <= 11; i++) {
    const res = await request(proxy.port, { path: `/${i}` });
    served.push(res.status === 200 ? res.body.toString() : String(res.status));
    if (i === 3) assert.equal(upstreamA.effectiveWeight, 4, `got effective weight ${upstreamA.effectiveWeight} after a's failure and the retry on b, want 4`);
  }
  // As the test above, plus the retry of request 3: only b is a candidate (a was tried), so only b's
  // current weight moves (3+1 → picked → 3) and a regains nothing. Request 4: a -3+4 = 1, b 3+1 = 4
  // → b → -1, a back to 5; then 6,0 → a; 5,1 → a; 4,2 → a; 3,3 → a; 2,4 → b; 7,-1 → a; 6,0 → a.
  assert.deepEqual(served, ['a', 'a', 'b', 'b', 'a', 'a', 'a', 'a', 'b', 'a', 'a'], `got ${served.join(' ')}`);
  assert.equal(upstreamA.effectiveWeight, 5);
});
