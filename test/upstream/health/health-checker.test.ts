/**
 * The health-check scheduler with fake timers and a fake probe: first probe at start, fixed interval,
 * no overlapping probes, unref'd timers, clean stop, transition logs fired once with their exact
 * text, a successful probe restoring effective weight (SPEC 4), and `update()` across a reload
 * keeping streaks, probe times and probes in flight. No test sleeps for a timer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HealthCheckConfig } from '../../../src/config/config.js';
import { HealthChecker, WAITED_LOG_INTERVAL_MS } from '../../../src/upstream/health/health-checker.js';
import type { ProbeResult } from '../../../src/upstream/health/probe.js';
import type { Upstream } from '../../../src/upstream/upstream.js';
import { healthConfig, makeUpstream, routeConfig } from '../upstream-fixtures.js';
import { FakeProbe, FakeTimers, flush, OK, REFUSED } from '../../helpers/health-fakes.js';

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

  it('sends at most maxProbesInFlight probes at once: an upstream whose turn comes at the cap waits, in turn order, and is probed when one ends; the first wait is logged at once, the others at the end of a 60 s window', async () => {
    const timers = new FakeTimers();
    const fake = new FakeProbe(timers.now);
    const lines: string[] = [];
    const upstreams = [9001, 9002, 9003, 9004].map((port) => makeUpstream(port));
    const route = routeConfig({ health: healthConfig({ intervalMs: 1000, timeoutMs: 500, fall: 1 }) });
    const checker = new HealthChecker({ routes: [{ route, upstreams }], probe: fake.probe, timers, now: timers.now, log: (line) => lines.push(line), maxProbesInFlight: 2 });
    const calls = (): number[] => [9001, 9002, 9003, 9004].map((port) => fake.callsFor(port));
    checker.start();
    assert.deepEqual(calls(), [1, 1, 0, 0]);
    const warning = (count: string): string => `warning: 2 health probes in flight, the most this process sends at once with its file descriptors: ${count} waited for one to end (raise ulimit -n)`;
    assert.deepEqual(lines, [warning('1 probe')], 'the first wait is logged at once, the second within the minute is not');
    assert.equal(upstreams[2]!.lastProbe, undefined);

    fake.answer(9002, REFUSED);
    await flush();
    assert.deepEqual(calls(), [1, 1, 1, 0], '9003, whose turn came first, goes out as soon as one ends');
    assert.equal(upstreams[1]!.healthState, 'down', 'the answered probe counts as before');
    fake.answer(9001, OK);
    await flush();
    assert.deepEqual(calls(), [1, 1, 1, 1], 'then 9004');
    timers.advance(1000); // every turn comes at the cap again: 9001 and 9002 wait, in that order
    assert.deepEqual(calls(), [1, 1, 1, 1]);
    fake.answer(9003, OK);
    fake.answer(9004, OK);
    await flush();
    assert.deepEqual(calls(), [2, 2, 1, 1], 'the waiting ones go out before the ones that were just probed');
    const warnings = (): string[] => lines.filter((line) => line.startsWith('warning:'));
    assert.equal(warnings().length, 1, `got ${JSON.stringify(lines)}`);

    timers.advance(WAITED_LOG_INTERVAL_MS); // 9003 and 9004 wait from their next turn on (counted once each)
    // The window's line counts the waits after the first: 9004 at the start, 9001 and 9002 at 1 s, 9003 and 9004 at 2 s.
    assert.deepEqual(warnings(), [warning('1 probe'), warning('5 probes').replace(' (raise', ' in the last 60 s (raise')]);
    fake.answer(9001, OK);
    await flush();
    assert.deepEqual(calls(), [2, 2, 2, 1], '9003 waited longest');
    timers.advance(1000); // 9001's turn finds two in flight: it waits, counted in the new window
    assert.equal(warnings().length, 2);
    checker.stop();
    fake.answer(9002, OK);
    await flush();
    assert.deepEqual(calls(), [2, 2, 2, 1], 'after stop, nothing that waited is sent');
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

  it('a probe that could not be made for want of the proxy\'s own descriptors (isInconclusive) moves no streak: the upstream is never marked DOWN by it, and it is shown as the last probe', async () => {
    const t = setup({ fall: 2, rise: 2 });
    const [a] = t.upstreams as [Upstream];
    const noVerdict: ProbeResult = { ok: false, latencyMs: 0, error: "no verdict: connect EMFILE (this proxy's own shortage)", isInconclusive: true };
    t.checker.start();
    await probeRound(t, a, REFUSED);
    for (let i = 0; i < 5; i++) await probeRound(t, a, noVerdict);
    assert.equal(a.healthState, 'up', 'got DOWN from probes that could not be made');
    assert.deepEqual(t.lines, []);
    assert.equal(a.lastProbe?.error, noVerdict.error);
    await probeRound(t, a, REFUSED); // the second real failure in a row: the streak kept its first
    assert.equal(a.healthState, 'down');
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

/**
 * A reload hands the checker the new routes (`update`) with the same Upstream
 * objects for unchanged upstreams. Each test reloads with fresh config objects, as a parsed file
 * gives them, so nothing passes by object identity of the config.
 */
describe('HealthChecker.update: a reload keeps health state whole', () => {
  /** A checker on upstreams 9001 (and more) of route a, interval 1000 ms, started at 0 ms. */
  function started(health: Partial<HealthCheckConfig> = {}, ports = [9001]) {
    const t = setup(health, ports);
    t.checker.start();
    /** What a reload of route a with `changes` (on top of the setup's settings) gives the checker. */
    const reload = (changes: Partial<HealthCheckConfig> = {}, upstreams: readonly Upstream[] = t.upstreams): void =>
      t.checker.update([{ route: routeConfig({ health: healthConfig({ intervalMs: 1000, timeoutMs: 500, ...health, ...changes }) }), upstreams }]);
    return { ...t, reload };
  }

  it('an unchanged upstream keeps its probe in flight across a reload, and its result counts', async () => {
    const t = started({ fall: 1 });
    const [a] = t.upstreams as [Upstream];
    t.timers.advance(400);
    const signal = t.fake.lastFor(9001).options.signal!;
    t.reload();
    assert.equal(signal.aborted, false, 'got the probe in flight aborted by the reload');
    assert.equal(t.fake.callsFor(9001), 1, `got ${t.fake.callsFor(9001)} probes after the reload, want still the one from 0 ms`);
    t.fake.answer(9001, REFUSED);
    await flush();
    assert.deepEqual(a.lastProbe, { ...REFUSED, atMs: 400 }, `got lastProbe ${JSON.stringify(a.lastProbe)}`);
    assert.equal(a.healthState, 'down', 'got UP: the result of the probe sent before the reload was ignored');
    assert.deepEqual(t.lines, ['upstream http://127.0.0.1:9001 of route a is DOWN after 1 failed check: connect ECONNREFUSED']);
    t.checker.stop();
  });

  it('the failure streak continues: fall=3, two failures, reload, one failure → DOWN', async () => {
    const t = started({ fall: 3 });
    const [a] = t.upstreams as [Upstream];
    await probeRound(t, a, REFUSED);
    await probeRound(t, a, REFUSED);
    t.reload();
    t.fake.answer(9001, REFUSED);
    await flush();
    assert.equal(a.healthState, 'down', 'got UP after 2 failures + reload + 1 failure, want DOWN (streak kept)');
    assert.deepEqual(t.lines, ['upstream http://127.0.0.1:9001 of route a is DOWN after 3 failed checks: connect ECONNREFUSED']);
    t.checker.stop();
  });

  it('the success streak continues: rise=2 from DOWN, one success, reload, one success → UP', async () => {
    const t = started({ fall: 1, rise: 2 });
    const [a] = t.upstreams as [Upstream];
    await probeRound(t, a, REFUSED);
    await probeRound(t, a, OK);
    t.reload();
    t.fake.answer(9001, OK);
    await flush();
    assert.equal(a.healthState, 'up', 'got DOWN after 1 success + reload + 1 success, want UP (streak kept)');
    assert.equal(t.lines.at(-1), 'upstream http://127.0.0.1:9001 of route a is UP after 2 successful checks');
    t.checker.stop();
  });

  it('keeps the schedule: reloads every 300 ms for 5 s send no extra probe (one per interval, at 0, 1000 … 5000 ms)', async () => {
    const t = started({}, [9001, 9002]);
    for (let atMs = 300; atMs <= 5000; atMs += 300) {
      t.timers.advance(atMs - t.timers.nowMs);
      t.reload();
      // Answer whatever is out now, so the next tick may probe again.
      for (const port of [9001, 9002]) if (t.fake.hasUnanswered(port)) t.fake.answer(port, OK);
      await flush();
    }
    t.timers.advance(5000 - t.timers.nowMs);
    for (const port of [9001, 9002]) {
      assert.deepEqual(t.fake.timesFor(port), [0, 1000, 2000, 3000, 4000, 5000], `got probes of ${port} at ${t.fake.timesFor(port).join(', ')} ms`);
    }
    t.checker.stop();
  });

  it('a shorter health_interval: streak and probe in flight kept, next probe one new interval after the last', async () => {
    const t = started({ fall: 3 });
    const [a] = t.upstreams as [Upstream];
    await probeRound(t, a, REFUSED); // probe at 0 failed; the one at 1000 is out
    t.timers.advance(300); // 1300 ms
    const signal = t.fake.lastFor(9001).options.signal!;
    t.reload({ intervalMs: 400 });
    assert.equal(signal.aborted, false, 'got the probe in flight aborted by an interval change');
    t.fake.answer(9001, REFUSED);
    await flush();
    t.timers.advance(100); // 1400 = 1000 + 400
    assert.deepEqual(t.fake.timesFor(9001), [0, 1000, 1400], `got probes at ${t.fake.timesFor(9001).join(', ')} ms`);
    t.fake.answer(9001, REFUSED);
    await flush();
    assert.equal(a.healthState, 'down', 'got UP after 3 failures across an interval change, want DOWN');
    t.timers.advance(400); // 1800
    t.fake.answer(9001, REFUSED);
    await flush();
    t.timers.advance(400); // 2200
    assert.deepEqual(t.fake.timesFor(9001), [0, 1000, 1400, 1800, 2200], `got probes at ${t.fake.timesFor(9001).join(', ')} ms`);
    t.checker.stop();
  });

  it('a shorter health_interval whose next time has passed probes at once; a longer one waits one new interval', async () => {
    const t = started();
    t.fake.answer(9001, OK);
    await flush();
    t.timers.advance(300);
    t.reload({ intervalMs: 250 }); // 0 + 250 has passed at 300
    assert.deepEqual(t.fake.timesFor(9001), [0, 300], `got probes at ${t.fake.timesFor(9001).join(', ')} ms, want one at once`);
    t.fake.answer(9001, OK);
    await flush();
    t.timers.advance(100); // 400
    t.reload({ intervalMs: 3000 }); // last tick at 300 → next at 3300
    t.timers.advance(2899);
    assert.deepEqual(t.fake.timesFor(9001), [0, 300], `got probes at ${t.fake.timesFor(9001).join(', ')} ms before 3300`);
    t.timers.advance(1);
    assert.deepEqual(t.fake.timesFor(9001), [0, 300, 3300], `got probes at ${t.fake.timesFor(9001).join(', ')} ms`);
    t.checker.stop();
  });

  it('a lower health_fall keeps the streak and judges the next result by it, without a probe at reload', async () => {
    const t = started({ fall: 3 });
    const [a] = t.upstreams as [Upstream];
    await probeRound(t, a, REFUSED);
    t.reload({ fall: 2 });
    assert.equal(a.healthState, 'up', 'got the reload itself flipping the state');
    assert.equal(t.fake.callsFor(9001), 2, `got ${t.fake.callsFor(9001)} probes, want 2 (none at reload)`);
    t.fake.answer(9001, REFUSED);
    await flush();
    assert.deepEqual(t.lines, ['upstream http://127.0.0.1:9001 of route a is DOWN after 2 failed checks: connect ECONNREFUSED']);
    t.checker.stop();
  });

  it('a new health_path: state kept, streak restarts, probe in flight aborted and a new one sent at once', async () => {
    const t = started({ fall: 1, rise: 2 });
    const [a] = t.upstreams as [Upstream];
    await probeRound(t, a, REFUSED); // DOWN at 0
    await probeRound(t, a, OK); // one success at 1000; the probe at 2000 is out
    t.timers.advance(300); // 2300
    const old = t.fake.lastFor(9001);
    t.reload({ path: '/healthz' });
    assert.equal(old.options.signal!.aborted, true, 'got the probe of the old path not aborted');
    assert.deepEqual(t.fake.timesFor(9001), [0, 1000, 2000, 2300], `got probes at ${t.fake.timesFor(9001).join(', ')} ms`);
    assert.equal(t.fake.lastFor(9001).check.path, '/healthz');
    assert.equal(a.healthState, 'down', 'got the health state changed by the reload, want DOWN kept');
    t.fake.answer(9001, OK); // the aborted probe's late result: ignored
    t.fake.answer(9001, OK); // the new path's first success: 1 of rise 2
    await flush();
    assert.equal(a.healthState, 'down', 'got UP: successes of the old path counted toward the new one');
    t.timers.advance(999);
    assert.equal(t.fake.callsFor(9001), 4, 'got a probe before 3300 ms: the schedule should count from the new probe');
    t.timers.advance(1); // 3300
    t.fake.answer(9001, OK);
    await flush();
    assert.equal(a.healthState, 'up');
    assert.equal(t.lines.at(-1), 'upstream http://127.0.0.1:9001 of route a is UP after 2 successful checks');
    t.checker.stop();
  });

  it('a reload that adds an upstream probes only it at once; one that removes an upstream aborts its probe for good', async () => {
    const t = started({}, [9001, 9002]);
    const [a, b] = t.upstreams as [Upstream, Upstream];
    const c = makeUpstream(9003);
    t.timers.advance(500);
    const signalB = t.fake.lastFor(9002).options.signal!;
    t.reload({}, [a, c]);
    assert.deepEqual(t.fake.timesFor(9003), [500], `got probes of the added upstream at ${t.fake.timesFor(9003).join(', ')} ms, want 500`);
    assert.deepEqual(t.fake.timesFor(9001), [0], 'got the kept upstream probed again by the reload');
    assert.equal(signalB.aborted, true, 'got the removed upstream probe not aborted');
    t.fake.answer(9002, REFUSED);
    await flush();
    assert.equal(b.lastProbe, undefined, 'got a result applied to a removed upstream');
    t.fake.answer(9001, OK);
    t.fake.answer(9003, OK);
    await flush();
    t.timers.advance(500); // 1000
    t.fake.answer(9001, OK);
    await flush();
    t.timers.advance(1000); // 1500 for 9003, 2000 for 9001
    assert.deepEqual(t.fake.timesFor(9001), [0, 1000, 2000]);
    assert.deepEqual(t.fake.timesFor(9003), [500, 1500]);
    assert.deepEqual(t.fake.timesFor(9002), [0], 'got probes of a removed upstream');
    t.checker.stop();
  });

  it('health_check turned off sets a DOWN upstream UP (logged) and stops its probes; turned on again, probed at once', async () => {
    const t = started({ fall: 1 });
    const [a] = t.upstreams as [Upstream];
    await probeRound(t, a, REFUSED);
    assert.equal(a.healthState, 'down');
    const signal = t.fake.lastFor(9001).options.signal!;
    t.reload({ isEnabled: false });
    assert.equal(signal.aborted, true, 'got the probe in flight not aborted');
    assert.equal(a.healthState, 'up', 'got DOWN with nothing left to probe it, want UP');
    assert.equal(a.lastProbe, undefined, 'got a lastProbe kept with checks off');
    assert.equal(t.lines.at(-1), 'upstream http://127.0.0.1:9001 of route a is UP: health_check is now off');
    t.timers.advance(5000);
    assert.equal(t.fake.callsFor(9001), 2, `got ${t.fake.callsFor(9001)} probes with checks off, want still 2`);
    t.reload({ isEnabled: true });
    assert.deepEqual(t.fake.timesFor(9001), [0, 1000, 6000], 'got no probe at once when checks came back');
    t.checker.stop();
  });

  it('a checker that is not running (a cluster worker\'s) updates its watches without probing or writing state', () => {
    const t = setup({ fall: 1 });
    const [a] = t.upstreams as [Upstream];
    a.healthState = 'down'; // as pushed by the primary
    t.checker.update([{ route: routeConfig({ health: healthConfig({ isEnabled: false }) }), upstreams: [a] }]);
    assert.equal(a.healthState, 'down', 'got the pushed state overwritten by a checker that does not run');
    t.checker.update([{ route: t.route, upstreams: [a, makeUpstream(9002)] }]);
    assert.equal(t.fake.calls.length, 0, `got ${t.fake.calls.length} probes from a stopped checker, want 0`);
    assert.equal(t.timers.pending.size, 0, `got ${t.timers.pending.size} timers, want 0`);
  });
});

