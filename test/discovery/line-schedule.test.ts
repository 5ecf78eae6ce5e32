/**
 * The schedule of one discovery line (SPEC 7), on a fake clock: when each lookup runs, and which set
 * the line stands for after each answer. The lookup is a fake whose answers the test hands out.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DiscoveredAddress } from '../../src/discovery/discovered-line.js';
import type { LineAnswer } from '../../src/discovery/line-answer.js';
import { LineSchedule, refreshDelayMs, retryDelayMs, type LookupEnd } from '../../src/discovery/line-schedule.js';
import { advanceSettled, settle } from '../helpers/discovery-fakes.js';
import { FakeTimers } from '../helpers/health-fakes.js';

const ok = (ttlSeconds: number, ...hosts: string[]): LineAnswer => ({
  result: 'ok',
  addresses: hosts.map((address) => ({ address, port: 80 })),
  ttlSeconds,
  notes: [],
});
const fail = (result: 'timeout' | 'servfail' | 'nxdomain' | 'empty'): LineAnswer => ({ result, reason: result });
const hostsOf = (addresses: readonly DiscoveredAddress[]) => addresses.map((a) => a.address);

/** A schedule whose every lookup returns the next scripted answer at once (or stays pending when `hold` is set). */
function harness(answers: LineAnswer[], hold = false) {
  const timers = new FakeTimers();
  const lookupTimes: number[] = [];
  const ends: LookupEnd[] = [];
  const pending: ((answer: LineAnswer) => void)[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const schedule = new LineSchedule({
    timers,
    now: timers.now,
    lookup: () => {
      lookupTimes.push(timers.nowMs);
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return new Promise<LineAnswer>((resolve) => {
        const settle = (answer: LineAnswer) => {
          inFlight -= 1;
          resolve(answer);
        };
        if (hold) pending.push(settle);
        else settle(answers.shift() ?? fail('timeout'));
      });
    },
    onLookupEnd: (end) => ends.push(end),
  });
  const advance = (ms: number) => advanceSettled(timers, ms);
  return { timers, schedule, lookupTimes, ends, pending, advance, maxInFlight: () => maxInFlight };
}

const flush = settle;

describe('LineSchedule', () => {
  it('clamps the TTL to 1 s .. 1 h (TTL 0 → 1 s, as Consul answers)', () => {
    const table: [number, number][] = [
      [0, 1_000],
      [0.5, 1_000],
      [1, 1_000],
      [7, 7_000],
      [3600, 3_600_000],
      [86400, 3_600_000],
      [NaN, 1_000], // never a timer of NaN, which fires at once (a lookup storm)
    ];
    for (const [ttl, want] of table) assert.equal(refreshDelayMs(ttl), want, `TTL ${ttl}: got ${refreshDelayMs(ttl)}, want ${want}`);
  });

  it('backs off 1, 2, 4, 8, 16, 30, 30 s', () => {
    const got = [1, 2, 3, 4, 5, 6, 7, 60].map(retryDelayMs);
    assert.deepEqual(got, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  });

  it('looks up at start, then when the TTL runs out (TTL 0 at 1 s, TTL 5 at 5 s)', async () => {
    const h = harness([ok(0, '10.0.0.1'), ok(5, '10.0.0.1'), ok(5, '10.0.0.1')]);
    h.schedule.start();
    h.schedule.start(); // idempotent
    await flush();
    await h.advance(6_000);
    assert.deepEqual(h.lookupTimes, [0, 1_000, 6_000], `got lookups at ${h.lookupTimes}, want 0, 1000, 6000`);
    assert.deepEqual(hostsOf(h.schedule.addresses), ['10.0.0.1']);
  });

  it('keeps the last good set over failures and retries 1, 2, 4, 8, 16, 30, 30 s after them; an answer resets the backoff', async () => {
    const answers = [ok(3600, '10.0.0.1'), ...Array.from({ length: 7 }, () => fail('timeout')), ok(10, '10.0.0.2'), fail('servfail')];
    const h = harness(answers);
    h.schedule.start();
    await flush();
    await h.advance(3_600_000 + 1_000 + 2_000 + 4_000 + 8_000 + 16_000 + 30_000 + 30_000 + 10_000);
    const base = 3_600_000;
    const want = [0, base, base + 1_000, base + 3_000, base + 7_000, base + 15_000, base + 31_000, base + 61_000, base + 91_000, base + 101_000];
    assert.deepEqual(h.lookupTimes, want, `got ${h.lookupTimes}, want ${want}`);
    assert.deepEqual(hostsOf(h.ends[7]!.addresses), ['10.0.0.1'], 'a failure keeps the last good set');
    assert.deepEqual(hostsOf(h.ends[8]!.addresses), ['10.0.0.2']);
    assert.equal(h.ends[9]!.nextLookupInMs, 1_000, 'after an answer the backoff starts at 1 s again');
    assert.deepEqual(
      h.ends.map((end) => end.isEpisodeStart),
      [false, true, false, false, false, false, false, false, false, true],
      'one episode start per run of failures',
    );
  });

  it('hold-nx: a short NXDOMAIN keeps the set; 30 s of NXDOMAIN/empty empties it, exactly at 30 s', async () => {
    const h = harness([ok(1, '10.0.0.1'), ...Array.from({ length: 11 }, (_, i) => fail(i === 2 ? 'empty' : 'nxdomain'))]);
    h.schedule.start();
    await flush();
    await h.advance(41_000);
    // NX from 1000: retries after 1, 2, 4 s, then every 5 s at most (answers, not failures); the hold ends at 31 000.
    assert.deepEqual(h.lookupTimes, [0, 1_000, 2_000, 4_000, 8_000, 13_000, 18_000, 23_000, 28_000, 31_000, 36_000, 41_000]);
    assert.deepEqual(
      h.ends.map((end) => end.addresses.length),
      [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
      'the set stays until 30 s of NX, then the line is empty',
    );
    assert.deepEqual(
      h.ends.map((end) => end.isHoldExpired),
      [false, false, false, false, false, false, false, false, false, true, false, false],
    );
  });

  it('hold-nx: a good answer between NXDOMAINs resets the 30 s', async () => {
    const h = harness([ok(1, '10.0.0.1'), fail('nxdomain'), fail('nxdomain'), ok(20, '10.0.0.1'), fail('nxdomain'), fail('nxdomain')]);
    h.schedule.start();
    await flush();
    await h.advance(25_000);
    // NX at 1000 and 2000, ok at 4000, NX at 24000 (a new hold starts there), 25000.
    assert.deepEqual(h.lookupTimes, [0, 1_000, 2_000, 4_000, 24_000, 25_000]);
    assert.ok(h.ends.every((end) => end.addresses.length === 1), `got sizes ${h.ends.map((e) => e.addresses.length)}, want 1 each: the hold restarted at 24 s`);
  });

  it('never runs two lookups of one line at once, and ignores a late answer after stop()', async () => {
    const h = harness([], true);
    h.schedule.start();
    await h.advance(120_000);
    assert.equal(h.lookupTimes.length, 1, `got ${h.lookupTimes.length} lookups while one was pending, want 1`);
    h.pending.shift()!(ok(1, '10.0.0.1'));
    await flush();
    await h.advance(1_000);
    assert.deepEqual(h.lookupTimes, [0, 121_000]);
    h.schedule.stop();
    h.pending.shift()!(ok(1, '10.0.0.2'));
    await flush();
    await h.advance(5_000);
    assert.equal(h.ends.length, 1, 'the answer after stop() is ignored');
    assert.equal(h.timers.pending.size, 0, 'no timer left after stop()');
    assert.equal(h.maxInFlight(), 1);
  });

  it('lookupNow: drops the pending timer and looks up at once; during a lookup, the next follows it at once; never two at a time', async () => {
    const h = harness([ok(3600, '10.0.0.1'), ok(3600, '10.0.0.2'), ok(3600, '10.0.0.3')]);
    h.schedule.start();
    await h.advance(10_000);
    h.schedule.lookupNow();
    await flush();
    assert.deepEqual(h.lookupTimes, [0, 10_000], 'got the TTL schedule kept, want a lookup at once');
    assert.deepEqual(hostsOf(h.schedule.addresses), ['10.0.0.2']);
    await h.advance(3_599_999);
    assert.equal(h.lookupTimes.length, 2, 'the pending hour-long timer was replaced, not added to');
    const held = harness([], true);
    held.schedule.start();
    held.schedule.lookupNow();
    assert.equal(held.lookupTimes.length, 1, 'no second lookup while one runs');
    held.pending.shift()!(ok(3600, '10.0.0.1'));
    await flush();
    await held.advance(0);
    assert.deepEqual(held.lookupTimes, [0, 0], 'the lookup asked for during the first one follows it at once');
    assert.equal(held.maxInFlight(), 1);
    held.schedule.stop();
    h.schedule.stop();
  });
});
