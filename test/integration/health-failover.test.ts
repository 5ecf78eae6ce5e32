/**
 * Active health checks and failover through the real proxy (SPEC 4, issue 4): a stopped backend is
 * DOWN within interval × fall + timeout and gets no request after that, it is UP again after `rise`
 * successful checks once it listens on its port again; `health_status` decides what a healthy answer
 * is; a route with every upstream DOWN answers 503 with Retry-After and recovers by itself; and a
 * backend killed and restarted in the middle of 2,000 requests costs the clients nothing.
 *
 * These tests run on the real clock (the scheduler's own timing is tested exactly, with fake timers,
 * in test/upstream/health). They never sleep for a timer: they wait for a state with a generous limit and then
 * assert the bound the spec promises.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request, startBackend, startTestProxy, waitFor, type Backend } from '../helpers/proxy-harness.js';
import type { Upstream } from '../../src/upstream/upstream.js';
import { restartBackend, runLoad } from './upstream-control.js';

const INTERVAL_MS = 200;
const TIMEOUT_MS = 100;
const FALL = 2;
const RISE = 2;
/** Slack for the event loop and the 10 ms polling of waitFor, on top of the bounds under test. */
const SCHEDULING_SLACK_MS = 150;

const HEALTH =
  `health_check = on\nhealth_interval = ${INTERVAL_MS}ms\nhealth_timeout = ${TIMEOUT_MS}ms\n` +
  `health_fall = ${FALL}\nhealth_rise = ${RISE}\n`;

/** GET requests (not the HEAD probes) a backend received. */
function gets(backend: Backend): number {
  return backend.requests.filter((r) => r.method === 'GET').length;
}

test('a stopped backend is DOWN within interval × fall + timeout, gets nothing after, and is UP again after rise checks on the same port', async (t) => {
  const a = await startBackend();
  const b = await startBackend();
  const lines: string[] = [];
  const proxy = await startTestProxy(`[proxy.r]\npath = /\npass = ${a.url}\npass = ${b.url}\n${HEALTH}`, { deps: { log: (line) => lines.push(line) } });
  t.after(async () => {
    await proxy.close();
    await a.close();
    await b.close();
  });
  const [upstreamA, upstreamB] = proxy.proxy.routes[0]!.upstreams as [Upstream, Upstream];
  await waitFor(() => upstreamA.lastProbe?.ok === true && upstreamB.lastProbe?.ok === true, 3000, 'first probes answered');

  // Stop a.
  await a.close();
  const stoppedAt = performance.now();
  await waitFor(() => upstreamA.healthState === 'down', 3000, 'a DOWN');
  const downAfterMs = performance.now() - stoppedAt;
  const boundMs = INTERVAL_MS * FALL + TIMEOUT_MS;
  assert.ok(downAfterMs <= boundMs + SCHEDULING_SLACK_MS, `a was DOWN ${Math.round(downAfterMs)}ms after it stopped, want within ${boundMs}ms (+${SCHEDULING_SLACK_MS}ms slack)`);
  assert.equal(upstreamA.lastProbe?.error, 'connect ECONNREFUSED');
  assert.equal(upstreamB.healthState, 'up');
  assert.deepEqual(lines, [`upstream ${a.url} of route r is DOWN after ${FALL} failed checks: connect ECONNREFUSED`]);

  // No request goes to a any more: not even a failed attempt that would then be retried on b.
  const requestsToABefore = upstreamA.requestsTotal;
  for (let i = 0; i < 10; i++) {
    const res = await request(proxy.port, { path: `/down-${i}` });
    assert.equal(res.status, 200, `request ${i}: got ${res.status}, want 200`);
  }
  assert.equal(upstreamA.requestsTotal, requestsToABefore, `got ${upstreamA.requestsTotal - requestsToABefore} attempts on a while DOWN, want 0`);
  const attempted = proxy.logs.flatMap((r) => r.attempts.map((x) => x.upstream));
  assert.deepEqual(new Set(attempted), new Set([`127.0.0.1:${b.port}`]), `got attempts on ${[...new Set(attempted)].join(', ')}`);
  assert.equal(gets(b), 10);

  // Restart a on its port: one successful check is not enough (rise = 2), the second brings it back.
  await restartBackend(a);
  await waitFor(() => upstreamA.lastProbe?.ok === true, 3000, 'first successful probe after the restart');
  assert.equal(upstreamA.healthState, 'down', `got ${upstreamA.healthState} after one successful check, want down (rise = ${RISE})`);
  await waitFor(() => upstreamA.healthState === 'up', 3000, 'a UP again');
  assert.deepEqual(lines.slice(1), [`upstream ${a.url} of route r is UP after ${RISE} successful checks`]);

  for (let i = 0; i < 10; i++) assert.equal((await request(proxy.port, { path: `/up-${i}` })).status, 200);
  assert.equal(gets(a), 5, `got ${gets(a)} GETs at a after it came back, want 5 of 10 (round robin)`);
});

test('health_status: a backend answering HEAD with 500 is DOWN by default and under 200-499, UP under 200-599', async (t) => {
  // It answers GET with 200, so "no request is sent to it" is seen at the backend itself.
  const flaky = await startBackend((req, res) => {
    res.statusCode = req.method === 'HEAD' ? 500 : 200;
    res.end('flaky');
  });
  const steady = await startBackend((_req, res) => res.end('steady'));
  // One route per health_status; each probes its own path, so the backend can tell them apart.
  // (Issue 4 says "200-499 makes it UP"; 500 is outside 200-499, so that range keeps it DOWN and
  // 200-599 is the range that accepts it.)
  const route = (name: string, statuses: string) =>
    `[proxy.${name}]\npath = /${name}\npass = ${flaky.url}\npass = ${steady.url}\n${HEALTH}health_path = /health-${name}\n` +
    (statuses === '' ? '' : `health_status = ${statuses}\n`);
  const proxy = await startTestProxy(route('default', '') + route('upto499', '200-499') + route('upto599', '200-599'), { deps: { log: () => {} } });
  t.after(async () => {
    await proxy.close();
    await flaky.close();
    await steady.close();
  });
  const flakyIn = (name: string): Upstream => proxy.proxy.routes.find((r) => r.name === name)!.upstreams[0]!;
  const probesOf = (name: string): number => flaky.requests.filter((r) => r.method === 'HEAD' && r.url === `/health-${name}`).length;

  await waitFor(() => flakyIn('default').healthState === 'down' && flakyIn('upto499').healthState === 'down', 3000, '500 → DOWN');
  await waitFor(() => probesOf('upto599') >= FALL + 1, 3000, `${FALL + 1} probes under 200-599`);
  assert.equal(flakyIn('upto599').healthState, 'up', `got ${flakyIn('upto599').healthState} after ${probesOf('upto599')} answers of 500 under 200-599, want up`);
  const accepted = flakyIn('upto599').lastProbe;
  assert.deepEqual([accepted?.ok, accepted?.status], [true, 500], `got last probe ${JSON.stringify(accepted)}, want ok with status 500`);
  assert.equal(flakyIn('default').lastProbe?.error, 'status 500');

  for (const name of ['default', 'upto499', 'upto599']) {
    for (let i = 0; i < 6; i++) assert.equal((await request(proxy.port, { path: `/${name}/${i}` })).status, 200);
  }
  const flakyGets = (name: string): number => flaky.requests.filter((r) => r.method === 'GET' && r.url.startsWith(`/${name}/`)).length;
  assert.equal(flakyGets('default'), 0, `got ${flakyGets('default')} GETs at the DOWN backend, want 0`);
  assert.equal(flakyGets('upto499'), 0, `got ${flakyGets('upto499')} GETs at the DOWN backend, want 0`);
  assert.equal(flakyGets('upto599'), 3, `got ${flakyGets('upto599')} GETs at the UP backend, want 3 of 6`);
});

test('every upstream DOWN → 503 with Retry-After; the proxy stays up and the route recovers when they return', async (t) => {
  const a = await startBackend();
  const b = await startBackend();
  const other = await startBackend((_req, res) => res.end('other'));
  const proxy = await startTestProxy(
    `[proxy.r]\npath = /r\npass = ${a.url}\npass = ${b.url}\n${HEALTH}\n[proxy.other]\npath = /other\npass = ${other.url}\n`,
    { deps: { log: () => {} } },
  );
  t.after(async () => {
    await proxy.close();
    await a.close();
    await b.close();
    await other.close();
  });
  const upstreams = proxy.proxy.routes.find((r) => r.name === 'r')!.upstreams;
  await waitFor(() => upstreams.every((u) => u.lastProbe?.ok === true), 3000, 'first probes answered');

  await a.close();
  await b.close();
  await waitFor(() => upstreams.every((u) => u.healthState === 'down'), 3000, 'both DOWN');

  for (let i = 0; i < 3; i++) {
    const res = await request(proxy.port, { path: '/r/x' });
    assert.equal(res.status, 503, `got ${res.status}, want 503`);
    // health_interval 200ms → Retry-After rounds up to whole seconds.
    assert.equal(res.headers['retry-after'], '1', `got Retry-After ${res.headers['retry-after']}, want 1`);
  }
  assert.deepEqual(proxy.logs.at(-1)!.attempts, [], 'a 503 for no upstream has no attempt');
  const otherRes = await request(proxy.port, { path: '/other' });
  assert.equal(otherRes.status, 200, `got ${otherRes.status} on another route, want 200: the proxy stays up`);

  await restartBackend(a);
  await restartBackend(b);
  await waitFor(() => upstreams.every((u) => u.healthState === 'up'), 3000, 'both UP again');
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await request(proxy.port, { path: '/r/x' })).status);
  assert.deepEqual(statuses, [200, 200, 200, 200]);
  assert.equal(gets(a) + gets(b), 4);
});

test('failover under load: 2,000 GETs at 32 concurrent connections while one of 3 upstreams is killed and restarted, none fails', async (t) => {
  const backends = [await startBackend(), await startBackend(), await startBackend()];
  const proxy = await startTestProxy(
    `[proxy.r]\npath = /\n${backends.map((b) => `pass = ${b.url}\n`).join('')}max_fails = 1\nfail_timeout = 100ms\n`,
    { deps: { log: () => {} } },
  );
  t.after(async () => {
    await proxy.close();
    for (const backend of backends) if (backend.server.listening) await backend.close();
  });
  const victim = backends[1]!;
  const total = 2000;
  let killed: Promise<void> | undefined;
  let restarted: Promise<void> | undefined;
  let getsBeforeRestart = -1;

  const result = await runLoad(proxy.port, {
    total,
    concurrency: 32,
    path: '/load',
    onCompleted: (completed) => {
      if (completed === 500) killed = victim.close();
      if (completed === 1000) {
        restarted = killed!.then(() => {
          getsBeforeRestart = victim.requests.length;
          return restartBackend(victim);
        });
      }
    },
  });
  await restarted;

  assert.deepEqual(result.errors, [], `got client errors: ${result.errors.slice(0, 5).join('; ')}`);
  const failed = result.statuses.filter((s) => s !== 200).length;
  assert.equal(failed, 0, `got ${failed} requests that were not 200, want 0`);
  const served = backends.reduce((n, b) => n + b.requests.length, 0);
  assert.ok(served >= total, `got ${served} requests served by the backends, want at least ${total}`);
  // The kill was felt (failed attempts retried elsewhere) and the restarted upstream took traffic again.
  const retried = proxy.logs.filter((r) => r.attempts.length > 1);
  assert.ok(retried.length > 0, 'want at least one request retried after the kill');
  assert.ok(retried.every((r) => r.status === 200 && r.attempts.at(-1)!.status === 200));
  assert.ok(victim.requests.length > getsBeforeRestart, `got no request at the restarted upstream (${victim.requests.length} in all), want some`);
  for (const upstream of proxy.proxy.routes[0]!.upstreams) {
    await waitFor(() => upstream.activeRequests === 0, 2000, `active requests of ${upstream.origin} back to 0`);
  }
});
