/**
 * The health-check scheduler with fake timers and a fake probe: first probe at start, fixed interval,
 * no overlapping probes, unref'd timers, clean stop, transition logs fired once with their exact
 * text, and a successful probe restoring effective weight (SPEC 4). No test sleeps for a timer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HealthCheckConfig } from '../../src/config/config.js';
import { HealthChecker } from '../../src/health/health-checker.js';
import type { ProbeResult } from '../../src/health/probe.js';
import type { Upstream } from '../../src/upstream/upstream.js';
import { healthConfig, makeUpstream, routeConfig } from '../upstream/upstream-fixtures.js';
import { FakeProbe, FakeTimers, flush, OK, REFUSED } from '../helpers/health-fakes.js';

function setup(health: Partial<HealthCheckConfig> = {}, ports = [9001]) {
  const timers = new FakeTimers();
  const fake = new FakeProbe(timers.now);
  const lines: string[] = [];
  const upstreams = ports.map((port) => makeUpstream(port, { weight: 5 }));
  const route = routeConfig({ health: healthConfig({ intervalMs: 1000, timeoutMs: 500, ...health }) });
  const checker = new HealthChecker({
    routes: [{ route, upstreams }],
    probe: fake.probe,
    timers,
    now: timers.now,
    log: (line) => lines.push(line),
  });
  return { timers, fake, lines, upstreams, route, checker };
}

/** Answers the in-flight probe of `upstream` with `result`, lets it land, then runs one interval. */
async function probeRound(t: ReturnType<typeof setup>, upstream: Upstream, result: ProbeResult): Promise<void> {
  t.fake.answer(upstream.config.port, result);
  await flush();
  t.timers.advance(1000);
}

describe('HealthChecker', () => {
  it('sends the first probe of every upstream at start, with the route check and timeout', () => {
    const t = setup({}, [9001, 9002]);
    assert.equal(t.fake.calls.length, 0, 'got probes before start, want none');
    t.checker.start();
    assert.equal(t.fake.calls.length, 2, `got ${t.fake.calls.length} probes at start, want 2`);
    const call = t.fake.calls[0]!;
    assert.equal(call.options.timeoutMs, 500, `got timeoutMs ${call.options.timeoutMs}, want 500`);
    assert.equal(call.check.method, 'HEAD');
    t.checker.stop();
  });

  it('skips routes whose health_check is off', () => {
    const timers = new FakeTimers();
    const fake = new FakeProbe();
    const route = routeConfig({ health: healthConfig({ isEnabled: false }) });
    const checker = new HealthChecker({ routes: [{ route, upstreams: [makeUpstream(9001)] }], probe: fake.probe, timers });
    checker.start();
    assert.equal(fake.calls.length, 0, `got ${fake.calls.length} probes, want 0`);
    assert.equal(timers.pending.size, 0, `got ${timers.pending.size} timers, want 0`);
    checker.stop();
  });

  it('probes again every health_interval, and its timers are unref()ed', async () => {
    const t = setup();
    t.checker.start();
    t.fake.answer(9001, OK);
    await flush();
    t.timers.advance(999);
    assert.equal(t.fake.callsFor(9001), 1, `got ${t.fake.callsFor(9001)} probes at 999 ms, want 1`);
    t.timers.advance(1);
    assert.equal(t.fake.callsFor(9001), 2, `got ${t.fake.callsFor(9001)} probes at 1000 ms, want 2`);
    t.fake.answer(9001, OK);
    await flush();
    t.timers.advance(1000);
    assert.equal(t.fake.callsFor(9001), 3, `got ${t.fake.callsFor(9001)} probes at 2000 ms, want 3`);
    assert.ok(t.timers.handles.length >= 3, 'got fewer timers than ticks');
    assert.ok(t.timers.handles.every((h) => h.isUnrefed()), 'got a timer not unref()ed');
    t.checker.stop();
  });

  it('never overlaps probes of one upstream: a tick while one is out is skipped', async () => {
    const t = setup();
    t.checker.start();
    t.timers.advance(3000);
    assert.equal(t.fake.callsFor(9001), 1, `got ${t.fake.callsFor(9001)} probes with one still out, want 1`);
    t.fake.answer(9001, OK);
    await flush();
    assert.equal(t.fake.callsFor(9001), 1, 'got a probe sent on the answer itself, want it on the next tick');
    t.timers.advance(1000);
    assert.equal(t.fake.callsFor(9001), 2, `got ${t.fake.callsFor(9001)} probes after the next tick, want 2`);
    t.checker.stop();
  });

  it('logs DOWN once, on the fall-th failure, with the exact text, and sets healthState', async () => {
    const t = setup({ fall: 3, rise: 2 });
    const [a] = t.upstreams as [Upstream];
    t.checker.start();
    await probeRound(t, a, REFUSED);
    await probeRound(t, a, REFUSED);
    assert.deepEqual(t.lines, [], `got ${JSON.stringify(t.lines)} after 2 failures, want no line`);
    assert.equal(a.healthState, 'up', 'got DOWN after 2 failures, want UP');
    await probeRound(t, a, REFUSED);
    assert.deepEqual(t.lines, ['upstream http://127.0.0.1:9001 of route a is DOWN after 3 failed checks: connect ECONNREFUSED']);
    assert.equal(a.healthState, 'down', 'got UP after 3 failures, want DOWN');
    assert.equal(a.isAvailable(t.timers.nowMs), false, 'got a DOWN upstream available');
    await probeRound(t, a, REFUSED);
    await probeRound(t, a, { ok: false, latencyMs: 500, error: 'timeout after 500ms' });
    assert.equal(t.lines.length, 1, `got ${t.lines.length} lines after more failures, want still 1`);
    t.checker.stop();
  });

  it('logs UP once, on the rise-th success', async () => {
    const t = setup({ fall: 1, rise: 2 });
    const [a] = t.upstreams as [Upstream];
    t.checker.start();
    await probeRound(t, a, { ok: false, status: 500, latencyMs: 2, error: 'status 500' });
    assert.deepEqual(t.lines, ['upstream http://127.0.0.1:9001 of route a is DOWN after 1 failed check: status 500']);
    await probeRound(t, a, OK);
    assert.equal(a.healthState, 'down', 'got UP after 1 success, want DOWN until rise=2');
    await probeRound(t, a, OK);
    await probeRound(t, a, OK);
    assert.deepEqual(t.lines.slice(1), ['upstream http://127.0.0.1:9001 of route a is UP after 2 successful checks']);
    assert.equal(a.healthState, 'up');
    t.checker.stop();
  });

  it('a successful probe restores the full effective weight; a failed one does not', async () => {
    const t = setup();
    const [a] = t.upstreams as [Upstream];
    a.effectiveWeight = 1;
    t.checker.start();
    await probeRound(t, a, REFUSED);
    assert.equal(a.effectiveWeight, 1, `got ${a.effectiveWeight} after a failed probe, want 1`);
    await probeRound(t, a, OK);
    assert.equal(a.effectiveWeight, 5, `got ${a.effectiveWeight} after a successful probe, want 5`);
    t.checker.stop();
  });

  it('stores the last probe on the upstream with the clock time', async () => {
    const t = setup();
    const [a] = t.upstreams as [Upstream];
    t.checker.start();
    t.timers.advance(250);
    t.fake.answer(9001, REFUSED);
    await flush();
    assert.deepEqual(a.lastProbe, { ...REFUSED, atMs: 250 }, `got ${JSON.stringify(a.lastProbe)}`);
    t.checker.stop();
  });

  it('stop() clears its timers, aborts the probe in flight and ignores its late result', async () => {
    const t = setup({ fall: 1 });
    const [a] = t.upstreams as [Upstream];
    t.checker.start();
    const signal = t.fake.calls[0]!.options.signal!;
    t.checker.stop();
    assert.equal(t.timers.pending.size, 0, `got ${t.timers.pending.size} timers after stop, want 0`);
    assert.equal(signal.aborted, true, 'got the in-flight probe not aborted');
    t.fake.answer(9001, REFUSED);
    await flush();
    assert.equal(a.healthState, 'up', 'got a late result applied after stop');
    assert.equal(a.lastProbe, undefined, 'got lastProbe set by a late result');
    assert.deepEqual(t.lines, []);
    t.timers.advance(10_000);
    assert.equal(t.fake.calls.length, 1, `got ${t.fake.calls.length} probes after stop, want 1`);
  });

  it('counts a probe that throws or rejects as a failed check', async () => {
    const timers = new FakeTimers();
    const lines: string[] = [];
    const a = makeUpstream(9001);
    let calls = 0;
    const checker = new HealthChecker({
      routes: [{ route: routeConfig({ health: healthConfig({ fall: 2, intervalMs: 1000 }) }), upstreams: [a] }],
      probe: () => {
        calls++;
        if (calls === 1) throw new Error('boom');
        return Promise.reject(new Error('bang'));
      },
      timers,
      log: (line) => lines.push(line),
    });
    checker.start();
    await flush();
    timers.advance(1000);
    await flush();
    assert.equal(a.healthState, 'down', 'got UP after two broken probes, want DOWN');
    assert.deepEqual(lines, ['upstream http://127.0.0.1:9001 of route a is DOWN after 2 failed checks: probe failed: Error: bang']);
    checker.stop();
  });

  it('update() while running probes an added upstream at once; dropping it stops its timer and probe', async () => {
    const t = setup();
    t.checker.start();
    const b = makeUpstream(9002);
    t.checker.update([{ route: t.route, upstreams: [...t.upstreams, b] }]);
    assert.equal(t.fake.callsFor(9002), 1, `got ${t.fake.callsFor(9002)} probes of the added upstream, want 1`);
    assert.equal(t.fake.callsFor(9001), 1, `got ${t.fake.callsFor(9001)} probes of the one already watched, want still 1`);
    assert.deepEqual(t.checker.upstreams, [...t.upstreams, b]);
    const signal = t.fake.lastFor(9002).options.signal!;
    t.checker.update([{ route: t.route, upstreams: t.upstreams }]);
    assert.equal(signal.aborted, true, 'got the removed upstream probe not aborted');
    t.fake.answer(9002, REFUSED);
    await flush();
    t.timers.advance(5000);
    assert.equal(t.fake.callsFor(9002), 1, `got ${t.fake.callsFor(9002)} probes after removal, want 1`);
    assert.equal(b.lastProbe, undefined, 'got a result applied to a removed upstream');
    assert.deepEqual(t.checker.upstreams, t.upstreams);
    t.checker.stop();
  });

  it('starts the state machine from the upstream\'s current health', async () => {
    const t = setup({ rise: 2 });
    const [a] = t.upstreams as [Upstream];
    a.healthState = 'down';
    const checker = new HealthChecker({ routes: [{ route: t.route, upstreams: [a] }], probe: t.fake.probe, timers: t.timers, log: (l) => t.lines.push(l) });
    checker.start();
    await probeRound(t, a, OK);
    assert.equal(a.healthState, 'down', 'got UP after one success, want DOWN until rise');
    await probeRound(t, a, OK);
    assert.equal(a.healthState, 'up');
    assert.deepEqual(t.lines, ['upstream http://127.0.0.1:9001 of route a is UP after 2 successful checks']);
    checker.stop();
  });
});
