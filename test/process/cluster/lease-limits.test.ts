/**
 * A cluster worker's leases (src/process/cluster/lease-limits.ts) on their own: what goes to the
 * primary and when (one message per event-loop turn, a refill at ⌊L/2⌋, a local 429 until the next
 * token, the lease back after IDLE_RETURN_MS), a reload with the same settings keeping the lease,
 * and requests let through when the primary is gone or silent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ASK_TIMEOUT_MS, IDLE_RETURN_MS, IDLE_SCAN_EVERY, LeaseLimits } from '../../../src/process/cluster/lease-limits.js';
import type { LimitsRequestMessage } from '../../../src/process/cluster/cluster-messages.js';
import type { ConnLimitConfig, RateLimitConfig } from '../../../src/config/config.js';
import type { LimitVerdict } from '../../../src/limits/limits.js';

const PLACE = { file: 'env.ini', line: 1, column: 1 };
const rateOf = (requests: number, burst: number): RateLimitConfig => ({ requests, periodMs: 1_000, burst, source: `${requests}/s burst=${burst}`, place: PLACE }) as unknown as RateLimitConfig;

/** A worker's LeaseLimits on a fake clock whose deferred flushes run when `flush()` is called. */
function worker(isConnected = true) {
  const clock = { nowMs: 0 };
  const sent: LimitsRequestMessage[] = [];
  let deferred: (() => void)[] = [];
  const limits = new LeaseLimits({
    now: () => clock.nowMs,
    defer: (callback) => deferred.push(callback),
    send: (message) => {
      sent.push(message);
      return isConnected;
    },
  });
  const flush = (): void => {
    const callbacks = deferred;
    deferred = [];
    for (const callback of callbacks) callback();
  };
  return { limits, clock, sent, flush };
}

test('one message per turn; the lease is spent locally, refilled at ⌊L/2⌋, 429 locally until the next token, given back when idle', async () => {
  const { limits, clock, sent, flush } = worker();
  const route = limits.limitsFor('api', rateOf(40, 8), undefined)!; // L = ⌈40/10⌉ = 4, refill at 2
  const first = [route.takeToken('10.0.0.1'), route.takeToken('10.0.0.1')];
  assert.ok(first.every((v) => v instanceof Promise), 'got an answer without the primary, want the first requests to wait');
  flush();
  assert.deepEqual(sent, [{ type: 'limits-request', tokens: [{ limit: 'api 40/1000ms burst=8', rate: { requests: 40, periodMs: 1_000, burst: 8 }, clientIp: '10.0.0.1', spent: 0, returned: 0, want: 6 }], slots: [] }]);
  limits.applyGrant({ type: 'limits-grant', tokens: [{ limit: 'api 40/1000ms burst=8', clientIp: '10.0.0.1', granted: 6, nextTokenInMs: 25 }], slots: [] });
  assert.deepEqual(await Promise.all(first), [{ isAllowed: true }, { isAllowed: true }]);
  // 4 left. A reload with the same settings keeps the lease: served at once.
  const reloaded = limits.limitsFor('api', rateOf(40, 8), undefined)!;
  assert.deepEqual(reloaded.takeToken('10.0.0.1'), { isAllowed: true }, 'got a wait after a reload with the same settings, want the same lease');
  // 3 left: the next reaches ⌊4/2⌋ = 2 and asks for a refill in the background.
  assert.deepEqual(route.takeToken('10.0.0.1'), { isAllowed: true });
  flush();
  assert.deepEqual(sent[1]?.tokens.map((t) => [t.spent, t.want]), [[4, 2]], 'got this refill, want the 4 spent reported and 2 asked');
  limits.applyGrant({ type: 'limits-grant', tokens: [{ limit: 'api 40/1000ms burst=8', clientIp: '10.0.0.1', granted: 0, nextTokenInMs: 25 }], slots: [] });
  assert.deepEqual([route.takeToken('10.0.0.1'), route.takeToken('10.0.0.1')], [{ isAllowed: true }, { isAllowed: true }]);
  flush();
  assert.equal(sent.length, 3); // the lease is empty: a refill again
  limits.applyGrant({ type: 'limits-grant', tokens: [{ limit: 'api 40/1000ms burst=8', clientIp: '10.0.0.1', granted: 0, nextTokenInMs: 25 }], slots: [] });
  assert.deepEqual(route.takeToken('10.0.0.1'), { isAllowed: false, retryAfterSeconds: 1 }, 'got this with an empty lease and bucket, want a local 429');
  assert.equal(sent.length, 3, 'got a message for a local 429, want none');
  clock.nowMs = 30; // the next token is due: ask again
  const again = route.takeToken('10.0.0.1');
  flush();
  assert.deepEqual(sent[3]?.tokens.map((t) => [t.spent, t.want]), [[0, 5]]);
  limits.applyGrant({ type: 'limits-grant', tokens: [{ limit: 'api 40/1000ms burst=8', clientIp: '10.0.0.1', granted: 3, nextTokenInMs: 0 }], slots: [] });
  assert.deepEqual(await again, { isAllowed: true });
  // Idle: the 2 unspent tokens and the 1 spent go back.
  clock.nowMs = 30 + IDLE_RETURN_MS;
  for (let i = 1; i < IDLE_SCAN_EVERY; i++) limits.sweep();
  assert.equal(sent.length, 4, 'got the lease back before the idle scan, want it at the scan (every IDLE_SCAN_EVERY sweeps)');
  limits.sweep();
  assert.deepEqual(sent[4]?.tokens.map((t) => [t.spent, t.returned, t.want]), [[1, 2, 0]]);
  // New settings for the route: a new limit, its own lease.
  assert.ok(limits.limitsFor('api', rateOf(40, 9), undefined)!.takeToken('10.0.0.1') instanceof Promise, 'got an answer at once under new settings, want a new lease');
});

test('the primary gone (send fails) or silent for ASK_TIMEOUT_MS: the waiting requests are let through', async () => {
  const gone = worker(false);
  const rate = gone.limits.limitsFor('api', rateOf(10, 5), { maxInFlight: 1, place: PLACE } as ConnLimitConfig)!;
  const waiting = [rate.takeToken('10.0.0.1'), rate.acquireSlot('10.0.0.1')];
  gone.flush();
  const [verdict, release] = await Promise.all(waiting);
  assert.deepEqual(verdict, { isAllowed: true });
  assert.equal(typeof release, 'function');

  const silent = worker();
  const limits = silent.limits.limitsFor('api', rateOf(10, 5), undefined)!;
  const answer = limits.takeToken('10.0.0.1') as Promise<LimitVerdict>;
  silent.flush();
  silent.clock.nowMs = ASK_TIMEOUT_MS - 1;
  silent.limits.sweep();
  let isSettled = false;
  void answer.then(() => (isSettled = true));
  await Promise.resolve();
  assert.equal(isSettled, false, 'got an answer before ASK_TIMEOUT_MS, want the request still waiting');
  silent.clock.nowMs = ASK_TIMEOUT_MS;
  silent.limits.sweep();
  assert.deepEqual(await answer, { isAllowed: true });
});

test('a reload that changes conn_limit keeps the slots in use (requests still running) and asks with the new value', async () => {
  const { limits, sent, flush } = worker();
  const before = limits.limitsFor('api', undefined, { maxInFlight: 3, place: PLACE } as ConnLimitConfig)!;
  const held = before.acquireSlot('10.0.0.1');
  flush();
  limits.applyGrant({ type: 'limits-grant', tokens: [], slots: [{ limit: 'api conn_limit', clientIp: '10.0.0.1', granted: 1 }] });
  const release = (await held)!;
  const after = limits.limitsFor('api', undefined, { maxInFlight: 1, place: PLACE } as ConnLimitConfig)!;
  void after.acquireSlot('10.0.0.1'); // the one slot is in use: ask the primary, with the new value
  flush();
  assert.deepEqual(sent[1]?.slots, [{ limit: 'api conn_limit', maxInFlight: 1, clientIp: '10.0.0.1', returned: 0, want: 1, isRecallAnswer: false }]);
  release();
  assert.equal(typeof after.acquireSlot('10.0.0.1'), 'function', 'got a wait for the slot released under the old settings, want it reused at once');
});
