/**
 * The cluster primary's side of exact per-client limits across `workers = N` (SPEC 8: a client
 * gets the configured rate in total, however many connections and workers serve it). The primary
 * owns one token bucket per (limit, client IP) and one in-flight count per (limit, client IP);
 * workers hold small leases of tokens and slots (lease-limits.ts) and come here only to refill,
 * report and give back, in batches. It never serves a request itself.
 *
 * The token bucket is the textbook one (Tanenbaum, Computer Networks, "The Token Bucket
 * Algorithm"; RFC 2697's committed burst): `level` grows by `requests` per `periodMs` up to
 * `burst`. The one twist: tokens leased to a worker and not yet reported spent still count as in
 * the bucket for its cap, `level + out ≤ burst`, where `out` is the sum over workers of what each
 * was granted minus what it reported spent or gave back. So:
 *
 * - Never more: every answer a client gets spends a token that existed at the window's start
 *   (in the bucket or in a lease: at most `burst` together) or was added during it (at most
 *   `rate × T`), so over any window of T seconds a client gets at most `rate × T + burst`,
 *   however late workers report. A worker that dies takes its lease with it: its `out` is
 *   forgotten, never given back to the bucket.
 * - At worst less: tokens counted as out on other workers (a lease not yet spent, or spent and
 *   not yet reported) are not available to this one until they are spent, reported or returned
 *   (lease-limits.ts bounds them).
 *
 * conn_limit: `inFlight` per (limit, client IP) is the sum of the slots each worker holds; a
 * request for slots is granted only up to `maxInFlight`, so the client never has more in flight
 * across workers. A dead worker's slots are freed (its requests died with it).
 *
 * Memory: a bucket that is full with nothing out is the same as a fresh one and is dropped by
 * `sweep`; a slot count is dropped when it reaches 0. At most `MAX_BANK_KEYS` keys in all; beyond,
 * the least recently used key is dropped (nginx's limit_req zone and HAProxy's stick tables also
 * drop their oldest entries when full); a dropped bucket with leases out can let its client
 * through its outstanding leases once more.
 */
import type { LimitsGrantMessage, LimitsRequestMessage, RateSettings, SlotGrant, TokenGrant } from './cluster-messages.js';

/** The most (limit, client IP) keys the primary keeps, buckets and slot counts together: 200 000 (about 60 MiB at worst). */
export const MAX_BANK_KEYS = 200_000;

interface Bucket {
  readonly rate: RateSettings;
  /** Tokens in the bucket (fractional), as of `atMs`. */
  level: number;
  atMs: number;
  /** Worker id → tokens granted to it and not yet reported spent or returned. */
  readonly outByWorker: Map<number, number>;
  /** The sum of `outByWorker`. */
  out: number;
}

interface SlotCount {
  /** Worker id → slots it holds. */
  readonly byWorker: Map<number, number>;
  /** The sum of `byWorker`. */
  inFlight: number;
}

export class LimitBank {
  /** `limit \n clientIp` → bucket, least recently used first (a touched key moves to the end). */
  private readonly buckets = new Map<string, Bucket>();
  private readonly slots = new Map<string, SlotCount>();

  /** @param now monotonic clock in ms (default `performance.now`). */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Keys held now (buckets and slot counts), for tests and `/status`. */
  get size(): number {
    return this.buckets.size + this.slots.size;
  }

  /** Applies one worker's batch; returns the grants to send back, or undefined when nothing asked. */
  handle(workerId: number, message: LimitsRequestMessage): LimitsGrantMessage | undefined {
    const nowMs = this.now();
    const tokens: TokenGrant[] = [];
    for (const request of message.tokens) {
      const key = `${request.limit}\n${request.clientIp}`;
      let bucket = this.buckets.get(key);
      if (bucket === undefined) {
        if (request.want === 0) continue; // a report for a key already dropped: nothing to correct
        bucket = { rate: request.rate, level: request.rate.burst, atMs: nowMs, outByWorker: new Map(), out: 0 };
        this.makeRoom();
      } else {
        this.buckets.delete(key);
      }
      this.buckets.set(key, bucket);
      refill(bucket, nowMs); // before the report: the cap in force since the last update is the old `out`
      const before = bucket.outByWorker.get(workerId) ?? 0;
      const settled = Math.min(before, request.spent + request.returned);
      const returned = Math.min(request.returned, settled);
      bucket.level += returned;
      const granted = Math.min(request.want, Math.floor(bucket.level));
      bucket.level -= granted;
      const after = before - settled + granted;
      if (after === 0) bucket.outByWorker.delete(workerId);
      else bucket.outByWorker.set(workerId, after);
      bucket.out += after - before;
      if (request.want > 0) {
        const nextTokenInMs = bucket.level >= 1 ? 0 : Math.ceil(((1 - bucket.level) * bucket.rate.periodMs) / bucket.rate.requests);
        tokens.push({ limit: request.limit, clientIp: request.clientIp, granted, nextTokenInMs });
      }
    }
    const slots: SlotGrant[] = [];
    for (const request of message.slots) {
      const key = `${request.limit}\n${request.clientIp}`;
      let count = this.slots.get(key);
      if (count === undefined) {
        if (request.want === 0) continue;
        count = { byWorker: new Map(), inFlight: 0 };
        this.makeRoom();
      } else {
        this.slots.delete(key);
      }
      const before = count.byWorker.get(workerId) ?? 0;
      const kept = before - Math.min(before, request.returned);
      const granted = Math.max(0, Math.min(request.want, request.maxInFlight - (count.inFlight - before + kept)));
      const after = kept + granted;
      if (after === 0) count.byWorker.delete(workerId);
      else count.byWorker.set(workerId, after);
      count.inFlight += after - before;
      if (count.inFlight > 0) this.slots.set(key, count);
      if (request.want > 0) slots.push({ limit: request.limit, clientIp: request.clientIp, granted });
    }
    return tokens.length === 0 && slots.length === 0 ? undefined : { type: 'limits-grant', tokens, slots };
  }

  /** A worker died: its leases are gone (never given back to a bucket), its slots are free. */
  workerGone(workerId: number): void {
    for (const bucket of this.buckets.values()) {
      const out = bucket.outByWorker.get(workerId);
      if (out === undefined) continue;
      refill(bucket, this.now());
      bucket.outByWorker.delete(workerId);
      bucket.out -= out;
    }
    for (const [key, count] of this.slots) {
      const held = count.byWorker.get(workerId);
      if (held === undefined) continue;
      count.byWorker.delete(workerId);
      count.inFlight -= held;
      if (count.inFlight === 0) this.slots.delete(key);
    }
  }

  /** Drops the buckets that are full with nothing out (the same as a fresh one). Call every second or so. */
  sweep(): void {
    const nowMs = this.now();
    for (const [key, bucket] of this.buckets) {
      refill(bucket, nowMs);
      if (bucket.out === 0 && bucket.level >= bucket.rate.burst) this.buckets.delete(key);
    }
  }

  /** Before a new key: drops the least recently used one when MAX_BANK_KEYS are held. */
  private makeRoom(): void {
    if (this.size < MAX_BANK_KEYS) return;
    const from = this.buckets.size >= this.slots.size ? this.buckets : this.slots;
    const oldest = from.keys().next();
    if (oldest.done !== true) from.delete(oldest.value);
  }
}

/** Adds what `rate` gave since `atMs`, up to `burst` minus the tokens out on workers. */
function refill(bucket: Bucket, nowMs: number): void {
  const cap = bucket.rate.burst - bucket.out;
  if (bucket.level < cap) bucket.level = Math.min(cap, bucket.level + ((nowMs - bucket.atMs) * bucket.rate.requests) / bucket.rate.periodMs);
  bucket.atMs = nowMs;
}
