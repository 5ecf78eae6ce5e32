/**
 * When one discovery line is looked up again, and what it stands for meanwhile (SPEC 7): a state
 * machine over the line's lookups, with injected timers and clock so tests drive it exactly.
 *
 * 1. The first lookup runs at `start()`. Until an answer with addresses comes the line is empty.
 * 2. After `ok`: the set becomes the answer's, the next lookup is due when its lowest TTL runs out,
 *    clamped to 1 s .. 1 h (Consul's TTL 0 → 1 s; nginx `resolver valid=` overrides the TTL instead).
 * 3. After a failure (timeout, servfail, refused, error): the set stays the last good one and the
 *    lookup is retried after 1 s, 2 s, 4 s, … at most 30 s (Envoy's failure refresh backoff).
 * 4. After `nxdomain` or `empty`: the set stays the last good one until such answers have lasted
 *    30 s since the first of them (HAProxy `hold nx 30s`; an `ok` between resets it), then the line
 *    is emptied; the retries back off as in 3 but to at most 5 s (the server works, the name may come
 *    back any moment), the one that ends the hold due exactly at 30 s.
 * 5. The backoff counts consecutive lookups without `ok`; an `ok` resets it.
 * 6. Never two lookups at once: the next timer is armed only when a lookup has ended.
 */
import type { Timers } from '../timers.js';
import type { DiscoveredAddress } from './discovered-line.js';
import { isFailure, type LineAnswer } from './line-answer.js';

export const MIN_REFRESH_MS = 1_000;
export const MAX_REFRESH_MS = 3_600_000;
export const FIRST_RETRY_MS = 1_000;
export const MAX_RETRY_MS = 30_000;
/** The longest wait after an NXDOMAIN or empty answer (failures back off to MAX_RETRY_MS). */
export const MAX_ANSWERED_RETRY_MS = 5_000;
/** How long NXDOMAIN / empty answers must last before the line is emptied (HAProxy `hold nx`). */
export const HOLD_NX_MS = 30_000;

/** What one ended lookup did to the line, handed to `onLookupEnd`. */
export interface LookupEnd {
  readonly answer: LineAnswer;
  /** The line's set after this lookup (the last good one unless `ok` or the hold ran out). */
  readonly addresses: readonly DiscoveredAddress[];
  /** When the next lookup is due, ms from now. */
  readonly nextLookupInMs: number;
  /** True for the first non-`ok` lookup after an `ok` (or after start): one log line per episode. */
  readonly isEpisodeStart: boolean;
  /** True when this lookup ended the NX hold and emptied a set that had addresses. */
  readonly isHoldExpired: boolean;
}

export interface LineScheduleOptions {
  /** Runs one lookup; must settle (the DnsLookup bounds it by resolver_timeout). A rejection counts as `error`. */
  readonly lookup: () => Promise<LineAnswer>;
  readonly onLookupEnd: (end: LookupEnd) => void;
  readonly timers: Timers;
  /** Monotonic clock, ms. */
  readonly now: () => number;
}

/** The TTL of an `ok` answer as the delay of the next lookup, ms (step 2); a TTL that is not a number counts as 0. */
export function refreshDelayMs(ttlSeconds: number): number {
  if (!Number.isFinite(ttlSeconds)) return MIN_REFRESH_MS;
  return Math.min(MAX_REFRESH_MS, Math.max(MIN_REFRESH_MS, ttlSeconds * 1000));
}

/** The delay after the `streak`-th consecutive lookup without `ok` (1-based), ms: 1 s, 2 s, 4 s, … 30 s. */
export function retryDelayMs(streak: number): number {
  return Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.min(streak - 1, 15));
}

export class LineSchedule {
  readonly #options: LineScheduleOptions;
  #addresses: readonly DiscoveredAddress[] = [];
  /** Consecutive lookups without `ok`. */
  #streak = 0;
  /** Clock time of the first NXDOMAIN/empty answer of the current run; undefined outside one. */
  #nxSinceMs: number | undefined;
  #timer: unknown;
  #isStarted = false;
  #isStopped = false;
  /** True while a lookup runs. */
  #isInFlight = false;
  /** Set by `lookupNow` during a lookup: the next one runs as soon as it ends. */
  #isRerunDue = false;

  constructor(options: LineScheduleOptions) {
    this.#options = options;
  }

  /** The line's current set (empty before the first `ok`). */
  get addresses(): readonly DiscoveredAddress[] {
    return this.#addresses;
  }

  /** Runs the first lookup now; later calls do nothing. */
  start(): void {
    if (this.#isStarted || this.#isStopped) return;
    this.#isStarted = true;
    this.#run();
  }

  /**
   * Looks up again now instead of at the scheduled time (new `resolver` settings at a reload):
   * the pending timer is dropped; a lookup already running is followed at once by another.
   */
  lookupNow(): void {
    if (!this.#isStarted || this.#isStopped) return;
    if (this.#isInFlight) {
      this.#isRerunDue = true;
      return;
    }
    if (this.#timer !== undefined) this.#options.timers.clearTimeout(this.#timer);
    this.#run();
  }

  /** Clears the timer; a lookup still running is ignored when it ends. */
  stop(): void {
    this.#isStopped = true;
    if (this.#timer !== undefined) this.#options.timers.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #run(): void {
    this.#timer = undefined;
    this.#isInFlight = true;
    let pending: Promise<LineAnswer>;
    try {
      pending = this.#options.lookup();
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (answer) => this.#end(answer),
      (error: unknown) => this.#end({ result: 'error', reason: `lookup failed: ${(error as Error).message}` }),
    );
  }

  #end(answer: LineAnswer): void {
    this.#isInFlight = false;
    if (this.#isStopped) return;
    const nowMs = this.#options.now();
    const isEpisodeStart = answer.result !== 'ok' && this.#streak === 0;
    let isHoldExpired = false;
    let nextLookupInMs: number;
    if (answer.result === 'ok') {
      this.#addresses = answer.addresses;
      this.#streak = 0;
      this.#nxSinceMs = undefined;
      nextLookupInMs = refreshDelayMs(answer.ttlSeconds);
    } else {
      this.#streak += 1;
      nextLookupInMs = retryDelayMs(this.#streak);
      if (!isFailure(answer.result)) {
        // An answer that the name is gone is no broken server to spare: ask again soon, so a service
        // scaled back from zero is seen within seconds (HAProxy asks every `timeout resolve`).
        nextLookupInMs = Math.min(nextLookupInMs, MAX_ANSWERED_RETRY_MS);
        this.#nxSinceMs ??= nowMs;
        const heldMs = nowMs - this.#nxSinceMs;
        if (heldMs >= HOLD_NX_MS) {
          isHoldExpired = this.#addresses.length > 0;
          this.#addresses = [];
        } else {
          nextLookupInMs = Math.min(nextLookupInMs, HOLD_NX_MS - heldMs);
        }
      }
    }
    if (this.#isRerunDue) {
      this.#isRerunDue = false;
      nextLookupInMs = 0;
    }
    this.#timer = this.#options.timers.setTimeout(() => this.#run(), nextLookupInMs);
    this.#options.onLookupEnd({ answer, addresses: this.#addresses, nextLookupInMs, isEpisodeStart, isHoldExpired });
  }
}
