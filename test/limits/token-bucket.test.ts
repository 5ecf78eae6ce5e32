import test from 'node:test';
import assert from 'node:assert/strict';
import { isFull, newBucket, retryAfterSeconds, takeToken, tokensOf, type BucketRate } from '../../src/limits/token-bucket.js';

/** Sends `count` requests at `nowMs`: how many passed, and the Retry-After of each refused one. */
function burstAt(bucket: ReturnType<typeof newBucket>, rate: BucketRate, nowMs: number, count: number): { through: number; retryAfters: number[] } {
  let through = 0;
  const retryAfters: number[] = [];
  for (let i = 0; i < count; i++) {
    const waitMs = takeToken(bucket, rate, nowMs);
    if (waitMs === 0) through++;
    else retryAfters.push(retryAfterSeconds(waitMs));
  }
  return { through, retryAfters };
}

test('the worked example of token-bucket.ts: 10/s burst=5, row by row', () => {
  const rate = { requests: 10, periodMs: 1000, burst: 5 };
  const bucket = newBucket(rate, 0);
  const rows = [
    { t: 0, count: 30, through: 5, after: 0, refused: 25 },
    { t: 250, count: 3, through: 2, after: 0.5, refused: 1 },
    { t: 1250, count: 6, through: 5, after: 0, refused: 1 },
    { t: 1900, count: 1, through: 1, after: 4, refused: 0 },
  ];
  for (const row of rows) {
    const { through, retryAfters } = burstAt(bucket, rate, row.t, row.count);
    assert.equal(through, row.through, `t=${row.t}: got ${through} through, want ${row.through}`);
    assert.deepEqual(retryAfters, new Array(row.refused).fill(1), `t=${row.t}: Retry-After of the refused`);
    assert.equal(tokensOf(bucket, rate), row.after, `t=${row.t}: got ${tokensOf(bucket, rate)} tokens after, want ${row.after}`);
  }
});

test('the worked example of token-bucket.ts: 1/m, Retry-After 60, 30 and 1 (0.5 s rounded up), then a token at 60 s', () => {
  const rate = { requests: 1, periodMs: 60_000, burst: 1 };
  const bucket = newBucket(rate, 0);
  assert.equal(takeToken(bucket, rate, 0), 0);
  const got = [0, 30_000, 59_500].map((t) => retryAfterSeconds(takeToken(bucket, rate, t)));
  assert.deepEqual(got, [60, 30, 1]);
  assert.equal(takeToken(bucket, rate, 60_000), 0, 'got refused at 60 s, want a token');
});

test('refill is capped at burst however long the bucket was idle, and a clock going back adds nothing', () => {
  const rate = { requests: 100, periodMs: 1000, burst: 3 };
  const bucket = newBucket(rate, 0);
  assert.equal(burstAt(bucket, rate, 0, 3).through, 3);
  assert.equal(burstAt(bucket, rate, 86_400_000, 10).through, 3, 'a day later: got more than burst');
  assert.equal(takeToken(bucket, rate, 1000) > 0, true, 'an earlier time must not refill');
});

test('retryAfterSeconds: whole seconds rounded up, at least 1', () => {
  const cases: [number, number][] = [[0.001, 1], [100, 1], [1000, 1], [1000.5, 2], [59_999, 60], [60_000, 60]];
  for (const [waitMs, want] of cases) assert.equal(retryAfterSeconds(waitMs), want, `${waitMs} ms: got ${retryAfterSeconds(waitMs)}, want ${want}`);
});

test('isFull: a bucket that has refilled to burst is the same as a new one', () => {
  const rate = { requests: 10, periodMs: 1000, burst: 5 };
  const bucket = newBucket(rate, 0);
  assert.equal(isFull(bucket, rate, 0), true);
  takeToken(bucket, rate, 0);
  takeToken(bucket, rate, 0);
  assert.equal(isFull(bucket, rate, 199), false, 'two tokens short at 199 ms');
  assert.equal(isFull(bucket, rate, 200), true, 'two tokens back at 200 ms');
});

test('over a window of T seconds a client gets at most rate × T + burst (30 req/s for 5 s against 10/s burst=5)', () => {
  const rate = { requests: 10, periodMs: 1000, burst: 5 };
  const bucket = newBucket(rate, 0);
  let through = 0;
  for (let t = 0; t < 5000; t += 1000 / 30) if (takeToken(bucket, rate, t) === 0) through++;
  assert.ok(through <= 10 * 5 + 5 && through >= 10 * 5, `got ${through} through, want at most 55 and at least 50`);
});
