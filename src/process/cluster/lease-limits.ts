/**
 * A cluster worker's side of exact per-client limits across `workers = N` (SPEC 8): the
 * LimitsProvider a worker's ProxyServer gets. The primary owns the buckets and the in-flight counts
 * (limit-bank.ts); this worker holds small leases of them per (limit, client IP), spends them
 * locally on the hot path (a Map lookup and a decrement, no message), and talks to the primary only
 * to refill, report and give back, all requests of one event-loop turn in one message.
 *
 * rate_limit. The lease size is `L = clamp(⌈rate per second / 10⌉, 1, burst)`, about a tenth of a
 * second's worth. The first request of a key in this worker waits one round trip; later ones spend
 * the lease, and when it falls to ⌊L/2⌋ a refill is asked in the background, reporting what was
 * spent. An empty lease with no token left in the primary's bucket answers 429 locally until the
 * primary said the next token is due, then asks again. A lease unused for `IDLE_RETURN_MS` goes back
 * (at the next idle scan, every IDLE_SCAN_EVERY sweeps).
 * Error bound: never more than `rate × T + burst` over any window (limit-bank.ts); at worst less by
 * what the primary counts as out on workers: per worker that served the key in the last
 * `IDLE_RETURN_MS`, its lease (≤ L) and what it spent since its last message (≤ L, plus the
 * requests that were waiting for an answer). With `10/s burst=5` (L = 1) and 2 workers that is at
 * most 4 tokens, for at most 1.5 s after the client's last request on a worker.
 *
 * conn_limit. A slot is taken from the primary and, once released, kept for `SLOT_KEEP_MS` so a
 * keep-alive client's next request needs no round trip; then it goes back, or at once when the
 * primary recalls it because another worker needs a slot of the same client (`recall`). Never more
 * than `maxInFlight` in flight across workers, and a slot is refused only when the client has that
 * many in flight (or a recalled worker does not answer within the primary's RECALL_TIMEOUT_MS).
 *
 * When the primary does not answer within `ASK_TIMEOUT_MS` (it is gone or stuck), the waiting
 * requests are let through, as Envoy's rate limit filter does by default (`failure_mode_deny:
 * false`): a limit must not take the proxy down with the process that counts.
 */
import type { ConnLimitConfig, RateLimitConfig } from '../../config/config.js';
import type { LimitVerdict, LimitsProvider, RouteLimits } from '../../limits/limits.js';
import { ALLOWED, DEFAULT_MAX_CLIENTS } from '../../limits/rate-limiter.js';
import type { LimitsGrantMessage, LimitsRequestMessage, RateSettings, SlotRecallMessage, SlotRequest, TokenRequest } from './cluster-messages.js';

/** A token lease unused this long goes back to the primary: 1 s. */
export const IDLE_RETURN_MS = 1_000;
/** A released slot stays with this worker this long for the client's next request: 200 ms. */
export const SLOT_KEEP_MS = 200;
/** Requests waiting for the primary longer than this are let through: 1 s. */
export const ASK_TIMEOUT_MS = 1_000;
/** How often kept slots are given back and late answers given up on: 100 ms. */
export const SWEEP_INTERVAL_MS = 100;
/** Token leases are looked at for being idle every this many sweeps (500 ms): a scan of every key, so not every 100 ms. */
export const IDLE_SCAN_EVERY = 5;
/** The release of a slot that was never counted (no conn_limit on the route, or let through without the primary). */
const RELEASED = (): void => {};

/** The lease size for a rate: about 1/10 s worth, at least 1, at most the burst. */
export function leaseSize(rate: RateSettings): number {
  return Math.min(rate.burst, Math.max(1, Math.ceil((rate.requests * 1_000) / rate.periodMs / 10)));
}

interface TokenLease {
  tokens: number;
  /** Spent since the last request to the primary. */
  spent: number;
  waiters: ((verdict: LimitVerdict) => void)[];
  /** A request is on its way (askedAtMs = when), or queued for this turn's message. */
  isAsking: boolean;
  askedAtMs: number;
  /** The primary said the bucket is empty until then: 429 locally. */
  deniedUntilMs: number;
  lastUsedMs: number;
}

interface SlotLease {
  owned: number;
  inUse: number;
  waiters: ((release: (() => void) | undefined) => void)[];
  /** Slots the request on its way asked for. */
  askedFor: number;
  isAsking: boolean;
  askedAtMs: number;
  lastUsedMs: number;
}

/** The state of one `rate_limit` (route + settings) in this worker. */
class TokenLeases {
  readonly leases = new Map<string, TokenLease>();
  readonly size: number;
  readonly lowWater: number;
  constructor(
    readonly limit: string,
    readonly rate: RateSettings,
  ) {
    this.size = leaseSize(rate);
    this.lowWater = Math.floor(this.size / 2);
  }
}

/** The state of one route's `conn_limit` in this worker; a reload with a new value keeps the counts (they are requests still running) and applies the value at once. */
class SlotLeases {
  readonly leases = new Map<string, SlotLease>();
  constructor(
    readonly limit: string,
    public maxInFlight: number,
  ) {}
}

export interface LeaseLimitsOptions {
  /** Sends to the primary; false when the channel is closed. */
  readonly send: (message: LimitsRequestMessage) => boolean;
  /** Monotonic clock in ms. Default `performance.now`. */
  readonly now?: () => number;
  /** Runs `callback` once after this turn's work (batching). Default `setImmediate`. */
  readonly defer?: (callback: () => void) => void;
}

/** The LimitsProvider of a cluster worker; call `sweep` every SWEEP_INTERVAL_MS and `applyGrant` with each `limits-grant`. */
export class LeaseLimits implements LimitsProvider {
  private readonly send: (message: LimitsRequestMessage) => boolean;
  private readonly now: () => number;
  private readonly defer: (callback: () => void) => void;
  private readonly rates = new Map<string, TokenLeases>();
  private readonly conns = new Map<string, SlotLeases>();
  private queuedTokens: [TokenLeases, string, TokenLease][] = [];
  private queuedSlots: [SlotLeases, string, SlotLease][] = [];
  private isFlushQueued = false;
  /** Token leases whose request to the primary is queued or on its way (for ASK_TIMEOUT_MS). */
  private readonly askingTokens = new Set<TokenLease>();
  private sweeps = 0;

  constructor(options: LeaseLimitsOptions) {
    this.send = options.send;
    this.now = options.now ?? (() => performance.now());
    this.defer = options.defer ?? ((callback) => void setImmediate(callback));
  }

  limitsFor(routeName: string, rateLimit: RateLimitConfig | undefined, connLimit: ConnLimitConfig | undefined): RouteLimits | undefined {
    if (rateLimit === undefined && connLimit === undefined) return undefined;
    let rate: TokenLeases | undefined;
    if (rateLimit !== undefined) {
      const limit = `${routeName} ${rateLimit.requests}/${rateLimit.periodMs}ms burst=${rateLimit.burst}`;
      rate = this.rates.get(limit) ?? new TokenLeases(limit, { requests: rateLimit.requests, periodMs: rateLimit.periodMs, burst: rateLimit.burst });
      this.rates.set(limit, rate);
    }
    let conn: SlotLeases | undefined;
    if (connLimit !== undefined) {
      const limit = `${routeName} conn_limit`;
      conn = this.conns.get(limit) ?? new SlotLeases(limit, connLimit.maxInFlight);
      conn.maxInFlight = connLimit.maxInFlight;
      this.conns.set(limit, conn);
    }
    return {
      takeToken: rate === undefined ? () => ALLOWED : (clientIp) => this.takeToken(rate, clientIp),
      acquireSlot: conn === undefined ? () => RELEASED : (clientIp) => this.acquireSlot(conn, clientIp),
    };
  }

  private takeToken(rate: TokenLeases, clientIp: string): LimitVerdict | Promise<LimitVerdict> {
    const nowMs = this.now();
    let lease = rate.leases.get(clientIp);
    if (lease === undefined) {
      if (rate.leases.size >= DEFAULT_MAX_CLIENTS) this.giveBackOldestToken(rate);
      lease = { tokens: 0, spent: 0, waiters: [], isAsking: false, askedAtMs: 0, deniedUntilMs: 0, lastUsedMs: nowMs };
      rate.leases.set(clientIp, lease);
    }
    lease.lastUsedMs = nowMs;
    if (lease.tokens > 0) {
      lease.tokens--;
      lease.spent++;
      if (lease.tokens <= rate.lowWater && !lease.isAsking) this.queueToken(rate, clientIp, lease, nowMs);
      return ALLOWED;
    }
    if (nowMs < lease.deniedUntilMs && lease.waiters.length === 0) return denied(lease.deniedUntilMs - nowMs);
    if (!lease.isAsking) this.queueToken(rate, clientIp, lease, nowMs);
    const waiters = lease.waiters;
    return new Promise((resolve) => waiters.push(resolve));
  }

  private acquireSlot(conn: SlotLeases, clientIp: string): (() => void) | undefined | Promise<(() => void) | undefined> {
    const nowMs = this.now();
    let lease = conn.leases.get(clientIp);
    if (lease === undefined) {
      lease = { owned: 0, inUse: 0, waiters: [], askedFor: 0, isAsking: false, askedAtMs: 0, lastUsedMs: nowMs };
      conn.leases.set(clientIp, lease);
    }
    lease.lastUsedMs = nowMs;
    if (lease.inUse < lease.owned) return this.useSlot(lease);
    if (!lease.isAsking) this.queueSlot(conn, clientIp, lease, nowMs);
    const waiters = lease.waiters;
    return new Promise((resolve) => waiters.push(resolve));
  }

  /** Takes one of the lease's owned slots; returns its idempotent release. */
  private useSlot(lease: SlotLease): () => void {
    lease.inUse++;
    let isReleased = false;
    return () => {
      if (isReleased) return;
      isReleased = true;
      lease.inUse--;
      lease.lastUsedMs = this.now();
    };
  }

  /** Applies the primary's answer: tokens and slots to the leases, then to the requests waiting. */
  applyGrant(message: LimitsGrantMessage): void {
    const nowMs = this.now();
    const unwanted: LimitsRequestMessage = { type: 'limits-request', tokens: [], slots: [] };
    for (const grant of message.tokens) {
      const rate = this.rates.get(grant.limit);
      if (rate === undefined) continue;
      const lease = rate.leases.get(grant.clientIp);
      if (lease === undefined) {
        // Its requests were let through after ASK_TIMEOUT_MS and it went idle: the tokens go back.
        if (grant.granted > 0) (unwanted.tokens as TokenRequest[]).push({ limit: rate.limit, rate: rate.rate, clientIp: grant.clientIp, spent: 0, returned: grant.granted, want: 0 });
        continue;
      }
      lease.isAsking = false;
      this.askingTokens.delete(lease);
      lease.tokens += grant.granted;
      const waiters = lease.waiters;
      let served = 0;
      while (served < waiters.length && lease.tokens > 0) {
        lease.tokens--;
        lease.spent++;
        waiters[served++]!(ALLOWED);
      }
      waiters.splice(0, served);
      // Empty here and in the bucket: 429 locally until the next token is due (also for a background refill).
      if (lease.tokens === 0 && grant.nextTokenInMs > 0) lease.deniedUntilMs = nowMs + grant.nextTokenInMs;
      if (waiters.length > 0 && grant.nextTokenInMs === 0) {
        this.queueToken(rate, grant.clientIp, lease, nowMs); // the bucket has more than this answer gave
      } else if (waiters.length > 0) {
        const verdict = denied(grant.nextTokenInMs);
        for (const waiter of waiters.splice(0)) waiter(verdict);
      }
    }
    for (const grant of message.slots) {
      const conn = this.conns.get(grant.limit);
      if (conn === undefined) continue;
      const lease = conn.leases.get(grant.clientIp);
      if (lease === undefined) {
        if (grant.granted > 0) (unwanted.slots as SlotRequest[]).push({ limit: conn.limit, maxInFlight: conn.maxInFlight, clientIp: grant.clientIp, returned: grant.granted, want: 0, isRecallAnswer: false });
        continue;
      }
      lease.isAsking = false;
      lease.owned += grant.granted;
      const waiters = lease.waiters;
      let served = 0;
      while (served < waiters.length && lease.inUse < lease.owned) waiters[served++]!(this.useSlot(lease));
      waiters.splice(0, served);
      // All it asked for came: the requests that came while it was asked get their own request; else the client is full.
      if (waiters.length > 0 && grant.granted === lease.askedFor) this.queueSlot(conn, grant.clientIp, lease, nowMs);
      else for (const waiter of waiters.splice(0)) waiter(undefined);
    }
    if (unwanted.tokens.length > 0 || unwanted.slots.length > 0) this.send(unwanted);
  }

  /** Answers the primary's `slot-recall`: every idle slot of these keys goes back at once (another worker needs one). */
  recall(message: SlotRecallMessage): void {
    const slots: SlotRequest[] = message.slots.map(({ limit, clientIp }) => {
      const conn = this.conns.get(limit);
      const lease = conn?.leases.get(clientIp);
      const idle = lease === undefined ? 0 : lease.owned - lease.inUse;
      if (lease !== undefined) {
        lease.owned = lease.inUse;
        if (lease.owned === 0 && !lease.isAsking) conn!.leases.delete(clientIp);
      }
      return { limit, maxInFlight: conn?.maxInFlight ?? 0, clientIp, returned: idle, want: 0, isRecallAnswer: true };
    });
    this.send({ type: 'limits-request', tokens: [], slots });
  }

  /**
   * Gives back kept slots unused for SLOT_KEEP_MS and (every IDLE_SCAN_EVERY calls) token leases
   * unused for IDLE_RETURN_MS, and lets through requests the primary did not answer in ASK_TIMEOUT_MS.
   */
  sweep(): void {
    const nowMs = this.now();
    const tokens: TokenRequest[] = [];
    const slots: SlotRequest[] = [];
    for (const lease of this.askingTokens) {
      if (nowMs - lease.askedAtMs < ASK_TIMEOUT_MS) continue;
      lease.isAsking = false;
      this.askingTokens.delete(lease);
      for (const waiter of lease.waiters.splice(0)) waiter(ALLOWED);
    }
    if (++this.sweeps % IDLE_SCAN_EVERY === 0) {
      for (const rate of this.rates.values()) {
        for (const [clientIp, lease] of rate.leases) {
          if (lease.isAsking || nowMs - lease.lastUsedMs < IDLE_RETURN_MS) continue;
          if (lease.tokens > 0 || lease.spent > 0) tokens.push(tokenRequest(rate, clientIp, lease, 0, lease.tokens));
          rate.leases.delete(clientIp);
        }
      }
    }
    for (const conn of this.conns.values()) {
      for (const [clientIp, lease] of conn.leases) {
        if (lease.isAsking && nowMs - lease.askedAtMs >= ASK_TIMEOUT_MS) {
          lease.isAsking = false;
          for (const waiter of lease.waiters.splice(0)) waiter(RELEASED);
        }
        const idle = lease.owned - lease.inUse;
        if (lease.isAsking || nowMs - lease.lastUsedMs < SLOT_KEEP_MS) continue;
        if (idle === 0) {
          if (lease.owned === 0) conn.leases.delete(clientIp);
          continue;
        }
        slots.push({ limit: conn.limit, maxInFlight: conn.maxInFlight, clientIp, returned: idle, want: 0, isRecallAnswer: false });
        lease.owned = lease.inUse;
        if (lease.owned === 0) conn.leases.delete(clientIp);
      }
    }
    if (tokens.length > 0 || slots.length > 0) this.send({ type: 'limits-request', tokens, slots });
  }

  /** The map is full: the first idle lease (oldest inserted) goes back. */
  private giveBackOldestToken(rate: TokenLeases): void {
    for (const [clientIp, lease] of rate.leases) {
      if (lease.isAsking) continue;
      rate.leases.delete(clientIp);
      if (lease.tokens > 0 || lease.spent > 0) {
        this.send({ type: 'limits-request', tokens: [tokenRequest(rate, clientIp, lease, 0, lease.tokens)], slots: [] });
      }
      return;
    }
  }

  private queueToken(rate: TokenLeases, clientIp: string, lease: TokenLease, nowMs: number): void {
    lease.isAsking = true;
    lease.askedAtMs = nowMs;
    this.askingTokens.add(lease);
    this.queuedTokens.push([rate, clientIp, lease]);
    this.queueFlush();
  }

  private queueSlot(conn: SlotLeases, clientIp: string, lease: SlotLease, nowMs: number): void {
    lease.isAsking = true;
    lease.askedAtMs = nowMs;
    this.queuedSlots.push([conn, clientIp, lease]);
    this.queueFlush();
  }

  private queueFlush(): void {
    if (this.isFlushQueued) return;
    this.isFlushQueued = true;
    this.defer(() => this.flush());
  }

  /** Sends this turn's requests in one message; the asks are sized now, with every waiter of the turn counted. */
  private flush(): void {
    this.isFlushQueued = false;
    const tokens = this.queuedTokens.map(([rate, clientIp, lease]) => tokenRequest(rate, clientIp, lease, Math.max(0, lease.waiters.length + rate.size - lease.tokens), 0));
    const slots = this.queuedSlots.map(([conn, clientIp, lease]): SlotRequest => {
      lease.askedFor = lease.waiters.length;
      return { limit: conn.limit, maxInFlight: conn.maxInFlight, clientIp, returned: 0, want: lease.askedFor, isRecallAnswer: false };
    });
    const [queuedTokens, queuedSlots] = [this.queuedTokens, this.queuedSlots];
    this.queuedTokens = [];
    this.queuedSlots = [];
    if (this.send({ type: 'limits-request', tokens, slots })) return;
    // No primary to ask (it went away; this worker is draining): let the waiting requests through.
    for (const [, , lease] of queuedTokens) {
      lease.isAsking = false;
      this.askingTokens.delete(lease);
      for (const waiter of lease.waiters.splice(0)) waiter(ALLOWED);
    }
    for (const [, , lease] of queuedSlots) {
      lease.isAsking = false;
      for (const waiter of lease.waiters.splice(0)) waiter(RELEASED);
    }
  }
}

/** A TokenRequest for `lease` that reports (and resets) its spent tokens. */
function tokenRequest(rate: TokenLeases, clientIp: string, lease: TokenLease, want: number, returned: number): TokenRequest {
  const request: TokenRequest = { limit: rate.limit, rate: rate.rate, clientIp, spent: lease.spent, returned, want };
  lease.spent = 0;
  lease.tokens -= returned;
  return request;
}

function denied(inMs: number): LimitVerdict {
  return { isAllowed: false, retryAfterSeconds: Math.max(1, Math.ceil(inMs / 1_000)) };
}
