import test from 'node:test';
import assert from 'node:assert/strict';
import { RateLimiter } from '../../src/limits/rate-limiter.js';
import { ConnLimiter } from '../../src/limits/conn-limiter.js';
import { LocalLimits } from '../../src/limits/local-limits.js';
import type { RateLimitConfig } from '../../src/config/config.js';

const place = { file: 't.ini', line: 1, column: 1 };
const tenPerSecond: RateLimitConfig = { requests: 10, periodMs: 1000, burst: 5, source: '10/s burst=5', place };

test('one bucket per client: one client spending its burst does not touch another', () => {
  const limiter = new RateLimiter(tenPerSecond, () => 0);
  const a = Array.from({ length: 6 }, () => limiter.takeToken('10.0.0.1').isAllowed);
  assert.deepEqual(a, [true, true, true, true, true, false]);
  assert.equal(limiter.takeToken('10.0.0.2').isAllowed, true);
  assert.deepEqual(limiter.takeToken('10.0.0.1'), { isAllowed: false, retryAfterSeconds: 1 });
});

test('idle buckets are forgotten once full: 1000 clients, then 1 s later the requests of one client sweep them out, two per request', () => {
  let now = 0;
  const limiter = new RateLimiter(tenPerSecond, () => now);
  for (let i = 0; i < 1000; i++) limiter.takeToken(`10.0.${i >> 8}.${i & 255}`);
  assert.equal(limiter.size, 1000);
  now = 50; // half a token back for each: none is full yet
  limiter.takeToken('192.0.2.1');
  assert.equal(limiter.size, 1001, 'got buckets dropped before they were full');
  now = 1000;
  for (let i = 0; i < 600; i++) limiter.takeToken('192.0.2.1');
  assert.equal(limiter.size, 1, `got ${limiter.size} buckets after the sweep, want only the busy client's`);
});

test('the hard cap: the least recently used bucket is evicted, and that client comes back with a full bucket', () => {
  const limiter = new RateLimiter(tenPerSecond, () => 0, 3);
  for (let i = 0; i < 5; i++) limiter.takeToken('10.0.0.1'); // empty now
  limiter.takeToken('10.0.0.2');
  limiter.takeToken('10.0.0.3');
  assert.equal(limiter.takeToken('10.0.0.1').isAllowed, false);
  limiter.takeToken('10.0.0.2'); // 10.0.0.3 is now the least recently used, then 10.0.0.1
  limiter.takeToken('10.0.0.4'); // evicts 10.0.0.3
  assert.equal(limiter.size, 3);
  assert.equal(limiter.bucketOf('10.0.0.3'), undefined, 'got 10.0.0.3 kept, want it evicted (least recently used)');
  assert.notEqual(limiter.bucketOf('10.0.0.1'), undefined);
  limiter.takeToken('10.0.0.5'); // evicts 10.0.0.1 (oldest now)
  assert.equal(limiter.bucketOf('10.0.0.1'), undefined);
  assert.equal(limiter.takeToken('10.0.0.1').isAllowed, true, 'an evicted client starts with a full bucket');
});

test('a flood of distinct clients stays at the cap and costs O(1) per request', () => {
  let now = 0;
  const limiter = new RateLimiter(tenPerSecond, () => now, 10_000);
  const started = performance.now();
  for (let i = 0; i < 200_000; i++) {
    now = i / 100; // 200 000 clients in 2 s
    limiter.takeToken(`2001:db8::${i.toString(16)}`);
  }
  assert.equal(limiter.size, 10_000);
  assert.ok(performance.now() - started < 2000, 'got over 2 s for 200 000 requests');
});

test('conn_limit: slots per client, given back exactly once, entries at 0 dropped', () => {
  const limiter = new ConnLimiter();
  const first = limiter.acquire('10.0.0.1', 2)!;
  const second = limiter.acquire('10.0.0.1', 2)!;
  assert.equal(limiter.acquire('10.0.0.1', 2), undefined, 'a third slot at conn_limit = 2');
  assert.notEqual(limiter.acquire('10.0.0.2', 2), undefined, 'another client has its own slots');
  first();
  first();
  assert.equal(limiter.inFlightOf('10.0.0.1'), 1, 'got a double release counted twice');
  second();
  assert.equal(limiter.inFlightOf('10.0.0.1'), 0);
  assert.equal(limiter.size, 1, 'got an entry at 0 kept');
});

test('LocalLimits: same route and settings keep the buckets, new settings start full, off forgets, in-flight counts always kept', () => {
  const limits = new LocalLimits({ now: () => 0 });
  const first = limits.limitsFor('a', tenPerSecond, { maxInFlight: 1, place })!;
  for (let i = 0; i < 5; i++) first.takeToken('10.0.0.1');
  const slot = first.acquireSlot('10.0.0.1');
  assert.notEqual(slot, undefined);
  const same = limits.limitsFor('a', { ...tenPerSecond, place: { ...place, line: 9 } }, { maxInFlight: 1, place })!;
  assert.equal(same.takeToken('10.0.0.1').isAllowed, false, 'got a fresh bucket after a reload with the same settings');
  assert.equal(same.acquireSlot('10.0.0.1'), undefined, 'got the in-flight count lost across the reload');
  const changed = limits.limitsFor('a', { ...tenPerSecond, burst: 6, source: '10/s burst=6' }, { maxInFlight: 2, place })!;
  assert.equal(changed.takeToken('10.0.0.1').isAllowed, true, 'new settings start with full buckets');
  assert.notEqual(changed.acquireSlot('10.0.0.1'), undefined, 'conn_limit 2 lets the second one in');
  assert.equal(limits.limitsFor('a', undefined, undefined), undefined);
  assert.equal(limits.limitsFor('b', undefined, undefined), undefined);
});
