/**
 * The token bucket, the textbook meter behind `rate_limit = N/s|N/m [burst=B]` (SPEC 8): pure
 * arithmetic on one client's bucket, with the clock passed in, so it is exact in tests and the
 * same whoever holds the bucket (one process, or a cluster's primary).
 *
 * The algorithm (Tanenbaum, "Computer Networks", the token bucket of traffic shaping; RFC 2697
 * section 3 and RFC 2698 section 3, whose meters are token buckets with a rate and a burst size;
 * RFC 2475's "token bucket" profile):
 *   - a bucket holds at most `burst` tokens and starts full;
 *   - tokens drip in at the rate, `requests` per `periodMs` (10/s: one every 100 ms), and what would
 *     overflow the bucket is lost;
 *   - each request takes one token; a request that finds less than one token is refused, and
 *     `Retry-After` says the whole seconds until the next token is in, at least 1.
 * So over any T seconds a client gets at most rate × T + burst requests through: the burst once,
 * then the rate.
 *
 * Lazy refill: nothing runs between requests (no timer per bucket). A bucket stores its level and
 * when it was last brought up to date; the next request first adds what dripped in since. Levels
 * are kept in integer units, `periodMs` units to a token, gaining `requests` units per ms, so with
 * an integer clock the arithmetic is exact (10/s: a token is 1 000 units, 250 ms add 2 500).
 *
 * Worked example, `rate_limit = 10/s burst=5` (the test asserts this table):
 *
 *     t (ms)  tokens before  requests  through  tokens after  refused get Retry-After
 *        0        5             30        5         0          25 × 1  (next token at 100 ms)
 *      250        2.5            3        2         0.5         1 × 1  (next token at 300 ms)
 *     1250        5 (capped)     6        5         0           1 × 1
 *     1900        5 (capped)     1        1         4           —
 *
 * and `rate_limit = 1/m` (burst 1): a request at 0 goes through; at 0, 30 s and 59.5 s the next
 * ones get Retry-After 60, 30 and 1 (0.5 s rounded up); at 60 s one goes through again.
 *
 * Why not the naive ways: a fixed window (count per calendar second) lets 2 × N through around a
 * window's edge; a log of timestamps costs memory per request. nginx's `limit_req` is the leaky
 * bucket seen from the other side (its `burst` is the queue, `nodelay` answers at once); with
 * `nodelay` it lets through what this bucket does. A full bucket is the same as a new one, which is
 * what lets the limiter forget idle clients (`isFull`).
 */

/** The settings of a bucket: `requests` per `periodMs` (1 000 or 60 000), holding at most `burst` tokens. */
export interface BucketRate {
  readonly requests: number;
  readonly periodMs: number;
  readonly burst: number;
}

/** One client's bucket: its level in units (`periodMs` units = one token) as of `updatedAtMs`. */
export interface TokenBucket {
  level: number;
  updatedAtMs: number;
}

/** A full bucket at `nowMs` (what a client never seen before, or forgotten, gets). */
export function newBucket(rate: BucketRate, nowMs: number): TokenBucket {
  return { level: rate.burst * rate.periodMs, updatedAtMs: nowMs };
}

/** Adds what dripped in since the bucket was last brought up to date, up to `burst`; a clock that went back adds nothing. */
export function refill(bucket: TokenBucket, rate: BucketRate, nowMs: number): void {
  const elapsedMs = nowMs - bucket.updatedAtMs;
  if (elapsedMs > 0) bucket.level = Math.min(rate.burst * rate.periodMs, bucket.level + elapsedMs * rate.requests);
  bucket.updatedAtMs = Math.max(bucket.updatedAtMs, nowMs);
}

/**
 * One request: refills, then takes a token if one is there.
 * @returns 0 when the request may pass; else the ms until the next whole token is in (> 0)
 */
export function takeToken(bucket: TokenBucket, rate: BucketRate, nowMs: number): number {
  refill(bucket, rate, nowMs);
  if (bucket.level >= rate.periodMs) {
    bucket.level -= rate.periodMs;
    return 0;
  }
  return (rate.periodMs - bucket.level) / rate.requests;
}

/** `Retry-After` for a wait of `waitMs`: whole seconds, rounded up, at least 1 (SPEC 8). */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/** Tokens in the bucket as of its last update (for display: 2.5). */
export function tokensOf(bucket: TokenBucket, rate: BucketRate): number {
  return bucket.level / rate.periodMs;
}

/** True when the bucket has refilled to `burst` by `nowMs`: it is then the same as a new one and can be forgotten. */
export function isFull(bucket: TokenBucket, rate: BucketRate, nowMs: number): boolean {
  return bucket.level + Math.max(0, nowMs - bucket.updatedAtMs) * rate.requests >= rate.burst * rate.periodMs;
}
