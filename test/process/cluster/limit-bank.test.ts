/**
 * The primary's buckets and slot counts (src/process/cluster/limit-bank.ts), and two workers'
 * leases (lease-limits.ts) wired to one bank through a simulated channel on a fake clock: the
 * error bound of exact limits across workers (never more than rate × T + burst over any window;
 * less by at most the leases out), conn_limit across workers, a dead worker's leases, memory.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LimitBank } from '../../../src/process/cluster/limit-bank.js';
import { IDLE_RETURN_MS, LeaseLimits, SLOT_KEEP_MS, SWEEP_INTERVAL_MS, leaseSize } from '../../../src/process/cluster/lease-limits.js';
import type { LimitsGrantMessage, LimitsRequestMessage, RateSettings, SlotRecallMessage } from '../../../src/process/cluster/cluster-messages.js';
import type { LimitVerdict, RouteLimits } from '../../../src/limits/limits.js';
import type { RateLimitConfig } from '../../../src/config/config.js';

const TEN_PER_SECOND: RateSettings = { requests: 10, periodMs: 1_000, burst: 5 };
/** A bank on a settable clock whose answers to each worker are kept; `handle` returns the grant it sent back. */
function bankOnClock() {
  const clock = { nowMs: 0 };
  let sent: [number, LimitsGrantMessage | SlotRecallMessage][] = [];
  const bank = new LimitBank({ now: () => clock.nowMs, send: (workerId, message) => sent.push([workerId, message]) });
  const handle = (workerId: number, message: LimitsRequestMessage): LimitsGrantMessage | undefined => {
    sent = [];
    bank.handle(workerId, message);
    return sent.find(([to, m]) => to === workerId && m.type === 'limits-grant')?.[1] as LimitsGrantMessage | undefined;
  };
  return { bank, clock, handle, sent: () => sent };
}

const ask = (clientIp: string, want: number, spent = 0, returned = 0): LimitsRequestMessage => ({
  type: 'limits-request',
  tokens: [{ limit: 'api 10/s', rate: TEN_PER_SECOND, clientIp, spent, returned, want }],
  slots: [],
});

test('lease size: about 1/10 s of the rate, at least 1, at most the burst', () => {
  const table: [RateSettings, number][] = [
    [{ requests: 10, periodMs: 1_000, burst: 5 }, 1],
    [{ requests: 1_000, periodMs: 1_000, burst: 1_000 }, 100],
    [{ requests: 1_000, periodMs: 1_000, burst: 20 }, 20],
    [{ requests: 60, periodMs: 60_000, burst: 1 }, 1],
  ];
  for (const [rate, want] of table) assert.equal(leaseSize(rate), want, `got ${leaseSize(rate)} for ${JSON.stringify(rate)}, want ${want}`);
});

test('the bank: tokens out on a worker count against the cap, so a late report never adds a token (10/s burst=5)', () => {
  const { clock, handle } = bankOnClock();
  // Row by row: [time ms, worker, want, spent, returned] → granted, nextTokenInMs.
  const rows: [number, number, number, number, number, number, number][] = [
    [0, 1, 6, 0, 0, 5, 100], // a full bucket: 5 granted, empty
    [0, 2, 2, 0, 0, 0, 100],
    [100, 2, 2, 0, 0, 0, 100], // 5 are out on worker 1: the bucket stays at burst - out = 0
    [100, 1, 0, 5, 0, -1, -1], // worker 1 reports its 5 spent: the cap is 5 from now on
    [300, 2, 3, 0, 0, 2, 100], // 200 ms at 10/s = 2 tokens, then empty
    [300, 2, 0, 0, 2, -1, -1], // worker 2 gives its 2 back unspent
    [300, 1, 3, 0, 0, 2, 100],
  ];
  for (const [atMs, worker, want, spent, returned, granted, nextTokenInMs] of rows) {
    clock.nowMs = atMs;
    const answer = handle(worker, ask('10.0.0.1', want, spent, returned));
    if (granted < 0) {
      assert.equal(answer, undefined, `at ${atMs} ms: got ${JSON.stringify(answer)}, want no answer to a report`);
      continue;
    }
    assert.deepEqual(answer?.tokens, [{ limit: 'api 10/s', clientIp: '10.0.0.1', granted, nextTokenInMs }], `at ${atMs} ms, worker ${worker}`);
  }
});

test('the bank: a dead worker takes its lease with it; idle buckets and freed slots are dropped', () => {
  const { bank, clock, handle, sent } = bankOnClock();
  assert.equal(handle(1, ask('10.0.0.1', 5))?.tokens[0]?.granted, 5);
  bank.workerGone(1);
  clock.nowMs = 100;
  assert.equal(handle(2, ask('10.0.0.1', 5))?.tokens[0]?.granted, 1, 'got the dead lease back, want only what 100 ms added');
  handle(2, ask('10.0.0.1', 0, 1));
  const slot = (worker: number, want: number, returned: number): number | undefined =>
    handle(worker, { type: 'limits-request', tokens: [], slots: [{ limit: 'api conn_limit', maxInFlight: 2, clientIp: '10.0.0.1', returned, want, isRecallAnswer: false }] })?.slots[0]?.granted;
  assert.equal(slot(1, 3, 0), 2);
  assert.equal(slot(1, 1, 0), 0, 'got a third slot, want none while worker 1 holds 2');
  assert.equal(slot(2, 1, 0), undefined, 'got an answer at once, want worker 2 to wait for the recall of worker 1');
  assert.deepEqual(sent().find(([to]) => to === 1)?.[1], { type: 'slot-recall', slots: [{ limit: 'api conn_limit', clientIp: '10.0.0.1' }] });
  bank.workerGone(1); // a dead worker frees its slots: worker 2's request is answered
  assert.deepEqual(sent().at(-1), [2, { type: 'limits-grant', tokens: [], slots: [{ limit: 'api conn_limit', clientIp: '10.0.0.1', granted: 1 }] }]);
  slot(2, 0, 1);
  clock.nowMs = 1_000; // the bucket is full again with nothing out: the same as a fresh one
  bank.sweep();
  assert.equal(bank.size, 0, `got ${bank.size} keys, want 0 after the sweep`);
});

/** One bank, two workers' LeaseLimits, a channel with `latencyMs` each way, all on a fake clock. */
function simulatedCluster(latencyMs = 0.5) {
  let nowMs = 0;
  const events: { atMs: number; seq: number; run: () => void }[] = [];
  let seq = 0;
  const at = (atMs: number, run: () => void): void => {
    events.push({ atMs, seq: seq++, run });
    events.sort((a, b) => a.atMs - b.atMs || a.seq - b.seq);
  };
  const workers: LeaseLimits[] = [];
  const cancelled = new Set<unknown>();
  const bank = new LimitBank({
    now: () => nowMs,
    timers: {
      setTimeout: (callback, ms) => {
        const handle = {};
        at(nowMs + ms, () => cancelled.has(handle) || callback());
        return handle;
      },
      clearTimeout: (handle) => cancelled.add(handle),
    },
    send: (workerId, message) => at(nowMs + latencyMs, () => (message.type === 'limits-grant' ? workers[workerId - 1]!.applyGrant(message) : workers[workerId - 1]!.recall(message))),
  });
  for (const workerId of [1, 2]) {
    workers.push(
      new LeaseLimits({
        now: () => nowMs,
        defer: (callback) => at(nowMs, callback),
        send: (message) => {
          at(nowMs + latencyMs, () => bank.handle(workerId, message));
          return true;
        },
      }),
    );
  }
  let nextSweepMs = SWEEP_INTERVAL_MS;
  /** Runs every event up to `untilMs` (sweeping both workers on their interval), letting promise callbacks run after each. */
  const runUntil = async (untilMs: number): Promise<void> => {
    for (;;) {
      const next = events[0];
      const sweepFirst = next === undefined || nextSweepMs <= next.atMs;
      const atMs = sweepFirst ? nextSweepMs : next.atMs;
      if (atMs > untilMs) break;
      nowMs = atMs;
      if (sweepFirst) {
        for (const worker of workers) worker.sweep();
        nextSweepMs += SWEEP_INTERVAL_MS;
      } else {
        events.shift()!.run();
      }
      for (let i = 0; i < 4; i++) await Promise.resolve();
    }
    nowMs = untilMs;
  };
  return { workers, bank, at, runUntil, now: () => nowMs };
}

const RATE_CONFIG: RateLimitConfig = { requests: 10, periodMs: 1_000, burst: 5, source: '10/s burst=5', place: { file: 'env.ini', line: 1, column: 1 } } as RateLimitConfig;

test('two workers, one client at 30 req/s for 5 s over both: 10 × 5 + 5 answers within 10%, never more than rate × T + burst in any window', async () => {
  const cluster = simulatedCluster();
  const limits = cluster.workers.map((worker) => worker.limitsFor('api', RATE_CONFIG, undefined)!);
  const allowedAtMs: number[] = [];
  let denied = 0;
  for (let i = 0; i < 150; i++) {
    const atMs = i * (1_000 / 30);
    cluster.at(atMs, () => {
      const decidedAt = cluster.now;
      void Promise.resolve(limits[i % 2 === 0 || i % 7 === 0 ? 0 : 1]!.takeToken('10.0.0.1')).then((verdict: LimitVerdict) => {
        if (verdict.isAllowed) allowedAtMs.push(decidedAt());
        else denied++;
      });
    });
  }
  await cluster.runUntil(5_000);
  const allowed = allowedAtMs.length;
  assert.ok(allowed >= 49.5 && allowed <= 55, `got ${allowed} allowed (and ${denied} denied) in 5 s, want 55 within 10% and never more`);
  for (const startMs of allowedAtMs) {
    for (const windowMs of [100, 500, 1_000, 2_000]) {
      const inWindow = allowedAtMs.filter((t) => t >= startMs && t < startMs + windowMs).length;
      const most = (10 * windowMs) / 1_000 + 5;
      assert.ok(inWindow <= most, `got ${inWindow} allowed in the ${windowMs} ms from ${startMs.toFixed(1)} ms, want at most ${most}`);
    }
  }
});

test('a burst of 30 over two workers: 5 allowed, 25 × 429 with Retry-After 1; the lease goes back after IDLE_RETURN_MS', async () => {
  const cluster = simulatedCluster();
  const limits: RouteLimits[] = cluster.workers.map((worker) => worker.limitsFor('api', RATE_CONFIG, undefined)!);
  const verdicts: LimitVerdict[] = [];
  for (let i = 0; i < 30; i++) cluster.at(i * 0.1, () => void Promise.resolve(limits[i % 2]!.takeToken('10.0.0.1')).then((v) => verdicts.push(v)));
  await cluster.runUntil(10);
  assert.equal(verdicts.filter((v) => v.isAllowed).length, 5, `got ${verdicts.filter((v) => v.isAllowed).length} allowed, want 5`);
  assert.deepEqual(new Set(verdicts.filter((v) => !v.isAllowed).map((v) => (v.isAllowed ? 0 : v.retryAfterSeconds))), new Set([1]));
  await cluster.runUntil(10 + IDLE_RETURN_MS + 2 * SWEEP_INTERVAL_MS);
  await cluster.runUntil(2_000);
  cluster.bank.sweep();
  assert.equal(cluster.bank.size, 0, `got ${cluster.bank.size} keys on the primary after the leases went back and the bucket filled, want 0`);
});

test("8 at once with 1/s burst=3 over two workers (cluster-limits.test.ts saw 2 × 200 under load): the third token waits in one worker's lease, so at least burst − L pass at once, and it passes once that lease went back", async () => {
  // The interleaving the integration test (cluster-limits.test.ts) met under load: worker 2's two
  // requests ask first, for 2 + L = 3, and take the whole bucket; worker 1's requests find it empty
  // and answer 429 until the next token; worker 2 gets no more requests, so its lease keeps the
  // third token until IDLE_RETURN_MS. SPEC 8 promises the rate within 10% over 10 s windows, not
  // the whole burst at one instant; README "Limits with workers = N" states this bound.
  const rate: RateLimitConfig = { requests: 1, periodMs: 1_000, burst: 3, source: '1/s burst=3', place: { file: 'env.ini', line: 1, column: 1 } } as RateLimitConfig;
  assert.equal(leaseSize(rate), 1);
  const cluster = simulatedCluster();
  const limits = cluster.workers.map((worker) => worker.limitsFor('api', rate, undefined)!);
  const verdicts: string[] = [];
  const take = (worker: number): void => void Promise.resolve(limits[worker]!.takeToken('10.0.0.1')).then((v) => verdicts.push(v.isAllowed ? '200' : `429 Retry-After ${v.retryAfterSeconds}`));
  cluster.at(0, () => [1, 1].forEach(take)); // one turn on worker 2: one ask, want 2 + L = 3
  cluster.at(0.2, () => [0, 0].forEach(take)); // worker 1 asks after it
  cluster.at(2, () => [0, 0, 0, 0].forEach(take)); // the rest of the burst: all on worker 1
  await cluster.runUntil(10);
  const allowedAtOnce = verdicts.filter((v) => v === '200').length;
  assert.equal(allowedAtOnce, rate.burst - leaseSize(rate), `got ${verdicts.join(', ')}, want burst − L = 2 × 200 (the third in worker 2's lease), the rest 429 Retry-After 1`);
  assert.deepEqual(new Set(verdicts.filter((v) => v !== '200')), new Set(['429 Retry-After 1']));
  // Worker 2's lease goes back at its idle scan (1 000 ms); worker 1's next request after its local 429 ends gets that token.
  cluster.at(1_100, () => take(0));
  await cluster.runUntil(1_110);
  assert.equal(verdicts.at(-1), '200', 'got a 429 for the token worker 2 gave back, want it served');
  assert.equal(verdicts.filter((v) => v === '200').length, rate.burst, `got ${verdicts.filter((v) => v === '200').length} × 200 in 1.11 s, want 3 (at most rate × T + burst = 4.11; the first second's refill is lost while worker 2's 2 spent tokens are out unreported, level + out ≤ burst)`);
});

test('conn_limit = 2 over two workers: 5 at once → 2 slots, 3 refused; a released slot kept by one worker comes back to the bank after SLOT_KEEP_MS', async () => {
  const cluster = simulatedCluster();
  const config = { maxInFlight: 2, place: { file: 'env.ini', line: 1, column: 1 } } as const;
  const limits = cluster.workers.map((worker) => worker.limitsFor('api', undefined, config)!);
  const releases: (() => void)[] = [];
  let refused = 0;
  for (let i = 0; i < 5; i++) {
    cluster.at(i * 0.1, () => void Promise.resolve(limits[i % 2]!.acquireSlot('10.0.0.1')).then((release) => (release === undefined ? refused++ : releases.push(release))));
  }
  await cluster.runUntil(10);
  assert.equal(releases.length, 2, `got ${releases.length} slots, want 2`);
  assert.equal(refused, 3, `got ${refused} refused, want 3`);
  for (const release of releases) {
    release();
    release(); // idempotent
  }
  // Kept: worker 1's next request needs no round trip.
  const again = limits[0]!.acquireSlot('10.0.0.1');
  assert.equal(typeof again, 'function', 'got a round trip for a kept slot, want it at once');
  (again as () => void)();
  await cluster.runUntil(20 + SLOT_KEEP_MS + 2 * SWEEP_INTERVAL_MS);
  assert.equal(cluster.bank.size, 0, `got ${cluster.bank.size} slot counts on the primary, want 0 once the kept slots went back`);
});

test('conn_limit = 1, one request after another on two workers: the slot worker 1 keeps after its request is recalled for worker 2, not refused', async () => {
  const cluster = simulatedCluster();
  const config = { maxInFlight: 1, place: { file: 'env.ini', line: 1, column: 1 } } as const;
  const limits = cluster.workers.map((worker) => worker.limitsFor('api', undefined, config)!);
  const outcomes: string[] = [];
  for (let i = 0; i < 6; i++) {
    // Each request starts 10 ms after the one before, lasts 5 ms, and alternates workers: never two in flight.
    cluster.at(i * 10, () => {
      void Promise.resolve(limits[i % 2]!.acquireSlot('10.0.0.1')).then((release) => {
        outcomes.push(release === undefined ? '429' : 'ok');
        if (release !== undefined) cluster.at(cluster.now() + 5, release);
      });
    });
  }
  await cluster.runUntil(100);
  assert.deepEqual(outcomes, ['ok', 'ok', 'ok', 'ok', 'ok', 'ok'], `got ${outcomes.join(' ')}, want every one through (never 2 in flight)`);
  await cluster.runUntil(100 + SLOT_KEEP_MS + 2 * SWEEP_INTERVAL_MS);
  assert.equal(cluster.bank.size, 0, `got ${cluster.bank.size} slot counts on the primary, want 0`);
});
