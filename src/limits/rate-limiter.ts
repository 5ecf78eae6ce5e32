/**
 * The buckets of one route's `rate_limit`, one per client IP (SPEC 8), in bounded memory: a hash
 * map for the lookup and a doubly linked list in least-recently-used order, the classic LRU cache
 * (Knuth's doubly linked list; the shape of memcached's and nginx's `limit_req` zone, which also
 * keeps its nodes in a queue by last use and frees the oldest when the zone is full).
 *
 * Every operation is O(1), so neither one client sending a flood nor a flood of distinct addresses
 * slows the others down:
 *   - a request moves its client's bucket to the young end of the list;
 *   - idle buckets are forgotten: a bucket that has refilled to full is the same as a new one
 *     (token-bucket.ts `isFull`), so dropping it changes no answer. The oldest bucket is the one
 *     used longest ago; each request looks at most two buckets at the old end and drops those that
 *     are full (amortised: each bucket is dropped once, and idle ones go at least twice as fast as
 *     new clients come);
 *   - a hard cap: when `maxClients` buckets exist, a new client's bucket replaces the oldest one
 *     even if it is not full yet. The only consequence is in the evicted client's favour: when it
 *     comes back it starts with a full bucket, so it can get one extra burst per eviction. That
 *     needs more than `maxClients` distinct clients on the route within the time a bucket takes to
 *     fill (burst ÷ rate), as nginx's `limit_req` zone frees its oldest nodes when it runs out of memory.
 */
import type { LimitVerdict } from './limits.js';
import { isFull, newBucket, retryAfterSeconds, takeToken, type BucketRate, type TokenBucket } from './token-bucket.js';

/** The default hard cap of buckets per route: 100 000 (about 15 MiB of buckets and keys). */
export const DEFAULT_MAX_CLIENTS = 100_000;

/** How many buckets at the old end each request looks at for being full. */
const SWEEP_STEPS = 2;

/** The answer to a request that may pass (shared: the hot path allocates nothing for it). */
export const ALLOWED: LimitVerdict = Object.freeze({ isAllowed: true });

/** A bucket in the LRU list (a class: one object shape for all of them). */
class Entry implements TokenBucket {
  level: number;
  updatedAtMs: number;
  readonly clientIp: string;
  /** Towards the old end. */
  older: Entry | undefined = undefined;
  /** Towards the young end. */
  younger: Entry | undefined = undefined;

  constructor(clientIp: string, bucket: TokenBucket) {
    this.clientIp = clientIp;
    this.level = bucket.level;
    this.updatedAtMs = bucket.updatedAtMs;
  }
}

export class RateLimiter {
  readonly rate: BucketRate;
  readonly #maxClients: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  /** Least recently used. */
  #oldest: Entry | undefined;
  /** Most recently used. */
  #youngest: Entry | undefined;

  /**
   * @param rate `requests` per `periodMs` with `burst` (a RateLimitConfig)
   * @param now monotonic clock, ms
   * @param maxClients the hard cap of buckets (≥ 1); default DEFAULT_MAX_CLIENTS
   */
  constructor(rate: BucketRate, now: () => number, maxClients = DEFAULT_MAX_CLIENTS) {
    this.rate = rate;
    this.#now = now;
    this.#maxClients = Math.max(1, maxClients);
  }

  /** Buckets held now (clients not full yet, or not swept yet). */
  get size(): number {
    return this.#entries.size;
  }

  /** Takes one token of `clientIp`'s bucket: allowed, or refused with the whole seconds until the next token. */
  takeToken(clientIp: string): LimitVerdict {
    const nowMs = this.#now();
    let entry = this.#entries.get(clientIp);
    if (entry === undefined) {
      if (this.#entries.size >= this.#maxClients) this.#remove(this.#oldest!);
      entry = new Entry(clientIp, newBucket(this.rate, nowMs));
      this.#entries.set(clientIp, entry);
    } else {
      this.#unlink(entry);
    }
    this.#linkYoungest(entry);
    const waitMs = takeToken(entry, this.rate, nowMs);
    // After the take: the requesting client's own bucket, full a moment ago, is not dropped and made anew
    // on each of its requests. Evicting for the cap first changes nothing: a full oldest bucket goes either way.
    this.#sweep(nowMs);
    return waitMs === 0 ? ALLOWED : { isAllowed: false, retryAfterSeconds: retryAfterSeconds(waitMs) };
  }

  /** The bucket of `clientIp` if one is held (for tests and display); undefined = a full one. */
  bucketOf(clientIp: string): TokenBucket | undefined {
    const entry = this.#entries.get(clientIp);
    return entry === undefined ? undefined : { level: entry.level, updatedAtMs: entry.updatedAtMs };
  }

  /** Drops up to SWEEP_STEPS full buckets at the old end. */
  #sweep(nowMs: number): void {
    for (let step = 0; step < SWEEP_STEPS; step++) {
      const oldest = this.#oldest;
      if (oldest === undefined || !isFull(oldest, this.rate, nowMs)) return;
      this.#remove(oldest);
    }
  }

  #remove(entry: Entry): void {
    this.#unlink(entry);
    this.#entries.delete(entry.clientIp);
  }

  #unlink(entry: Entry): void {
    if (entry.older === undefined) this.#oldest = entry.younger;
    else entry.older.younger = entry.younger;
    if (entry.younger === undefined) this.#youngest = entry.older;
    else entry.younger.older = entry.older;
    entry.older = undefined;
    entry.younger = undefined;
  }

  #linkYoungest(entry: Entry): void {
    entry.older = this.#youngest;
    if (this.#youngest === undefined) this.#oldest = entry;
    else this.#youngest.younger = entry;
    this.#youngest = entry;
  }
}
