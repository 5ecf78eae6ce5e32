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
 * across workers. Workers keep released slots briefly (lease-limits.ts), so when a request cannot
 * be granted in full while other workers hold slots of that client, it waits: those workers are
 * asked to give back their idle ones at once (`slot-recall`), and the request is answered when all
 * have answered (or died, or `RECALL_TIMEOUT_MS` passed). So a slot is refused only when the
 * client really has `maxInFlight` requests in flight. A dead worker's slots are freed (its
 * requests died with it).
 *
 * Memory: a bucket that is full with nothing out is the same as a fresh one and is dropped by
 * `sweep`; a slot count is dropped when it reaches 0, so slot counts are bounded by the requests in
 * flight (and slots kept 200 ms). At most `MAX_BANK_BUCKETS` buckets; beyond, the least recently
 * used is dropped (nginx's limit_req zone and HAProxy's stick tables also drop their oldest
 * entries when full); a dropped bucket with leases out can let its client through its outstanding
 * leases once more.
 */
import { unrefTimers, type Timers } from '../../timers.js';
import type { LimitsGrantMessage, LimitsRequestMessage, RateSettings, SlotGrant, SlotRecallMessage, SlotRequest, TokenGrant } from './cluster-messages.js';

/** How long a slot request waits for the workers asked to give back idle slots: 100 ms. */
export const RECALL_TIMEOUT_MS = 100;
/** The most buckets the primary keeps: 100 000 (about 40 MiB of heap at worst, 400 bytes each, measured). */
export const MAX_BANK_BUCKETS = 100_000;

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
  /** Requests waiting for recalled slots, oldest first. */
  parked: ParkedRequest[];
}

interface ParkedRequest {
  readonly workerId: number;
  readonly request: SlotRequest;
  /** Workers asked to give back idle slots that have not answered yet. */
  readonly waitingFor: Set<number>;
  timer: unknown;
}

export interface LimitBankOptions {
  /** Sends to worker `workerId` (a worker that is gone: nothing happens). */
  readonly send: (workerId: number, message: LimitsGrantMessage | SlotRecallMessage) => void;
  /** Monotonic clock in ms. Default `performance.now`. */
  readonly now?: () => number;
  /** For RECALL_TIMEOUT_MS. Default unref'd node timers. */
  readonly timers?: Timers;
}

export class LimitBank {
  /** `limit \n clientIp` → bucket, least recently used first (a touched key moves to the end). */
  private readonly buckets = new Map<string, Bucket>();
  private readonly slots = new Map<string, SlotCount>();

  private readonly send: LimitBankOptions['send'];
  private readonly now: () => number;
  private readonly timers: Timers;

  constructor(options: LimitBankOptions) {
    this.send = options.send;
    this.now = options.now ?? (() => performance.now());
    this.timers = options.timers ?? unrefTimers;
  }

  /** Keys held now (buckets and slot counts), for tests. */
  get size(): number {
    return this.buckets.size + this.slots.size;
  }

  /** Applies one worker's batch and sends it the grants (slots that wait for a recall: later), and the recalls to the others. */
  handle(workerId: number, message: LimitsRequestMessage): void {
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
    const recalls = new Map<number, { limit: string; clientIp: string }[]>();
    for (const request of message.slots) {
      const key = `${request.limit}\n${request.clientIp}`;
      let count = this.slots.get(key);
      if (count === undefined) {
        if (request.want === 0) continue;
        count = { byWorker: new Map(), inFlight: 0, parked: [] };
      } else {
        this.slots.delete(key);
      }
      this.changeHeld(count, workerId, -request.returned);
      if (request.isRecallAnswer) for (const parked of count.parked) parked.waitingFor.delete(workerId);
      if (request.want > 0) {
        const others = [...count.byWorker.keys()].filter((other) => other !== workerId);
        if (request.maxInFlight - count.inFlight >= request.want || others.length === 0) {
          const granted = Math.max(0, Math.min(request.want, request.maxInFlight - count.inFlight));
          this.changeHeld(count, workerId, granted);
          slots.push({ limit: request.limit, clientIp: request.clientIp, granted });
        } else {
          const parked: ParkedRequest = { workerId, request, waitingFor: new Set(others), timer: undefined };
          parked.timer = this.timers.setTimeout(() => this.settle(key, parked), RECALL_TIMEOUT_MS);
          count.parked.push(parked);
          for (const other of others) {
            const list = recalls.get(other) ?? [];
            list.push({ limit: request.limit, clientIp: request.clientIp });
            recalls.set(other, list);
          }
        }
      }
      this.slots.set(key, count);
      for (const parked of count.parked.filter((one) => one.waitingFor.size === 0)) this.settle(key, parked);
      if (count.inFlight === 0 && count.parked.length === 0) this.slots.delete(key);
    }
    if (tokens.length > 0 || slots.length > 0) this.send(workerId, { type: 'limits-grant', tokens, slots });
    for (const [other, list] of recalls) this.send(other, { type: 'slot-recall', slots: list });
  }

  /** Answers a parked slot request with what is free now (all recalled workers answered, died, or the time ran out). */
  private settle(key: string, parked: ParkedRequest): void {
    const count = this.slots.get(key);
    if (count === undefined || !count.parked.includes(parked)) return;
    this.timers.clearTimeout(parked.timer);
    count.parked.splice(count.parked.indexOf(parked), 1);
    const { request } = parked;
    const granted = Math.max(0, Math.min(request.want, request.maxInFlight - count.inFlight));
    this.changeHeld(count, parked.workerId, granted);
    if (count.inFlight === 0 && count.parked.length === 0) this.slots.delete(key);
    this.send(parked.workerId, { type: 'limits-grant', tokens: [], slots: [{ limit: request.limit, clientIp: request.clientIp, granted }] });
  }

  /** Adds `delta` slots to what `workerId` holds (a return of more than it holds gives back what it holds). */
  private changeHeld(count: SlotCount, workerId: number, delta: number): void {
    const before = count.byWorker.get(workerId) ?? 0;
    const after = Math.max(0, before + delta);
    if (after === 0) count.byWorker.delete(workerId);
    else count.byWorker.set(workerId, after);
    count.inFlight += after - before;
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
      this.changeHeld(count, workerId, -(count.byWorker.get(workerId) ?? 0));
      for (const parked of [...count.parked]) {
        if (parked.workerId === workerId) {
          this.timers.clearTimeout(parked.timer);
          count.parked.splice(count.parked.indexOf(parked), 1);
        } else if (parked.waitingFor.delete(workerId) && parked.waitingFor.size === 0) {
          this.settle(key, parked);
        }
      }
      if (count.inFlight === 0 && count.parked.length === 0) this.slots.delete(key);
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

  /** Before a new bucket: drops the least recently used one when MAX_BANK_BUCKETS are held. */
  private makeRoom(): void {
    if (this.buckets.size < MAX_BANK_BUCKETS) return;
    const oldest = this.buckets.keys().next();
    if (oldest.done !== true) this.buckets.delete(oldest.value);
  }
}

/** Adds what `rate` gave since `atMs`, up to `burst` minus the tokens out on workers. */
function refill(bucket: Bucket, nowMs: number): void {
  const cap = bucket.rate.burst - bucket.out;
  if (bucket.level < cap) bucket.level = Math.min(cap, bucket.level + ((nowMs - bucket.atMs) * bucket.rate.requests) / bucket.rate.periodMs);
  bucket.atMs = nowMs;
}
