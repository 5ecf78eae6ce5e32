/**
 * `node dist/main.js limit-simulate ROUTE --requests "0ms x5, 100ms x3, 1s x10"`: a route's
 * `rate_limit` (SPEC 8) on a simulated clock, request by request, so a learner can watch the token
 * bucket drain and refill. It drives the proxy's own RateLimiter (src/limits/rate-limiter.ts) and
 * token-bucket arithmetic with a clock that jumps to each instant of the schedule; nothing is sent.
 * The bucket is the textbook token bucket (Tanenbaum, "Computer Networks"; RFC 2697 section 3).
 *
 * The schedule: a comma-separated list of `TIME xCOUNT`, where TIME is the offset from the start in
 * whole milliseconds in the units of config durations (`0ms`, `250ms`, `1s`, `1.5s`, `2m`, `1h`,
 * `365d`), at most one year, never smaller than the one before, and COUNT requests (≥ 1) arrive at
 * that instant, one after another, all from one client.
 *
 * `conn_limit` is not simulated: it counts requests in flight, and a schedule of arrivals says
 * nothing about when responses end; the output says so when the route has one.
 */
import type { Config } from '../config/config.js';
import { DURATION_UNIT_MS } from '../config/values.js';
import { UsageError } from '../errors.js';
import { plural } from '../log/plural.js';
import { formatTable } from './simulate.js';
import { RateLimiter } from '../limits/rate-limiter.js';
import { newBucket, refill, tokensOf, type BucketRate, type TokenBucket } from '../limits/token-bucket.js';

/** One `TIME xCOUNT` of the schedule. */
export interface Arrival {
  /** Offset from the start, ms (an integer). */
  readonly atMs: number;
  /** Requests arriving at that instant, ≥ 1. */
  readonly count: number;
}

/** The most requests one schedule may hold (the output has a line per request). */
export const MAX_SCHEDULED_REQUESTS = 100_000;

/** The latest TIME a schedule may name: 365 days, ms (far beyond any bucket's refill, and exact in token arithmetic). */
export const MAX_SCHEDULE_MS = 365 * 86_400_000;

/** The client every simulated request comes from (one bucket). */
const CLIENT_IP = '127.0.0.1';

/**
 * Reads `--requests`: `TIME xCOUNT[, TIME xCOUNT …]`, TIME a number followed by a unit of config
 * durations (`ms`, `s`, `m`, `h`, `d`; values.ts DURATION_UNIT_MS) giving whole milliseconds, not negative, at most MAX_SCHEDULE_MS, non-decreasing; COUNT a whole number
 * ≥ 1; at most MAX_SCHEDULED_REQUESTS in all.
 *
 * @throws UsageError `--requests: 'ITEM' at column C: REASON`, C counted from 1 in the whole text: the
 *   item's first character for a bad time, the first character that could not be read after it
 *   (`'0ms x3 extra'` → the `e`), the `x` of a bad count
 */
export function parseSchedule(text: string): Arrival[] {
  const arrivals: Arrival[] = [];
  let total = 0;
  let column = 1;
  for (const rawItem of text.split(',')) {
    const item = rawItem.trim();
    const itemColumn = column + (rawItem.length - rawItem.trimStart().length);
    column += rawItem.length + 1;
    const fail = (reason: string, offset = 0): never => {
      throw new UsageError(`--requests: '${item}' at column ${itemColumn + offset}: ${reason}`);
    };
    if (item === '') fail('expected TIME xCOUNT, like 100ms x3');
    if (item.startsWith('-')) fail('a time cannot be negative (it is the offset from the start)');
    const match = /^(?:(\d+)(?:\.(\d+))?(ms|s|m|h|d)\b)?(\s*)(?:x(\d+))?(.*)$/.exec(item)!;
    const [, wholeText, fraction = '', unit = '', , countText, rest] = match;
    const whole = wholeText ?? fail('expected a time like 100ms or 1s');
    const atMs = wholeMilliseconds(whole, fraction, DURATION_UNIT_MS[unit]!) ?? fail('the time must be whole milliseconds');
    if (!(atMs <= MAX_SCHEDULE_MS)) fail('the time must be at most 365 days (31536000s) after the start');
    // The first character that could not be read: where xCOUNT is missing, or what follows it (spaces skipped).
    if (countText === undefined || rest !== '') fail(`expected xCOUNT after the time, like x3`, item.length - rest!.trimStart().length);
    const countColumn = item.length - countText!.length - 1;
    const count = Number(countText);
    if (count < 1) fail('the count must be at least 1', countColumn);
    const previous = arrivals.at(-1);
    if (previous !== undefined && atMs < previous.atMs) fail(`the times must not go back (the one before is ${formatMs(previous.atMs)})`);
    total += count;
    if (total > MAX_SCHEDULED_REQUESTS) fail(`more than ${MAX_SCHEDULED_REQUESTS} requests in all`, countColumn);
    arrivals.push({ atMs, count });
  }
  return arrivals;
}

/**
 * `WHOLE.FRACTION` of a unit `unitMs` long, in ms, when that is a whole number, else undefined
 * (`1.5s` → 1500, `0.25m` → 15 000, `2.5ms` and `1.0001s` → undefined). Exact: once its trailing
 * zeros are dropped, a fraction of more than 5 digits never makes whole ms of these units (the day,
 * 2^10·3^3·5^5 ms, is a multiple of 10^5 at most), so the product stays far below 2^53.
 */
function wholeMilliseconds(whole: string, fraction: string, unitMs: number): number | undefined {
  const digits = fraction.replace(/0+$/, '');
  if (digits.length > 5) return undefined;
  const fractionMs = (Number(digits === '' ? '0' : digits) * unitMs) / 10 ** digits.length;
  return Number.isInteger(fractionMs) ? Number(whole) * unitMs + fractionMs : undefined;
}

/**
 * The text `limit-simulate` prints: a header with the route's rate_limit (and whether conn_limit is
 * simulated), a table with a row per request (time, tokens before, decision, tokens after), then the
 * summary: passed, limited, and the bound rate × T + burst over the schedule's span T, from its first
 * request to its last (when every request is at one instant, T = 0 and the bound is the burst,
 * said so). Ends with `\n`.
 *
 * @throws UsageError when `routeName` is not a route of `config` (the message lists the routes), or the
 *   route has no rate_limit (the message lists the routes that have one)
 */
export function runLimitSimulate(config: Config, routeName: string, arrivals: readonly Arrival[]): string {
  const route = config.routes.find((candidate) => candidate.name === routeName);
  if (route === undefined) {
    const names = config.routes.map((candidate) => candidate.name).join(', ');
    throw new UsageError(`unknown route '${routeName}' (routes: ${names === '' ? 'none' : names})`);
  }
  const limit = route.rateLimit;
  if (limit === undefined) {
    const limited = config.routes.filter((candidate) => candidate.rateLimit !== undefined).map((candidate) => candidate.name).join(', ');
    throw new UsageError(`route ${route.name} has no rate_limit: nothing to simulate (routes with a rate_limit: ${limited === '' ? 'none' : limited})`);
  }
  let nowMs = 0;
  const limiter = new RateLimiter(limit, () => nowMs);

  const rows: string[][] = [['time', 'request', 'tokens before', 'decision', 'tokens after']];
  let passed = 0;
  let request = 0;
  for (const arrival of arrivals) {
    nowMs = arrival.atMs;
    for (let i = 0; i < arrival.count; i++) {
      request++;
      const before = levelAt(limiter.bucketOf(CLIENT_IP), limit, nowMs);
      const verdict = limiter.takeToken(CLIENT_IP);
      const after = levelAt(limiter.bucketOf(CLIENT_IP), limit, nowMs);
      if (verdict.isAllowed) passed++;
      rows.push([formatMs(nowMs), String(request), before.toFixed(2), verdict.isAllowed ? '200' : `429 Retry-After: ${verdict.retryAfterSeconds}`, after.toFixed(2)]);
    }
  }

  const spanMs = arrivals.length === 0 ? 0 : arrivals.at(-1)!.atMs - arrivals[0]!.atMs;
  const bound = (limit.requests * spanMs) / limit.periodMs + limit.burst;
  const perSecond = limit.periodMs === 1000 ? `${limit.requests}/s` : `${limit.requests}/m`;
  const lines = [
    `route ${route.name}: rate_limit = ${limit.source}: a token every ${formatMs(limit.periodMs / limit.requests)}, bucket of ${limit.burst}, starts full; one client (${CLIENT_IP})`,
    route.connLimit === undefined
      ? 'conn_limit: off'
      : `conn_limit = ${route.connLimit.maxInFlight}: not simulated (it counts requests in flight; a schedule of arrivals has no response times)`,
    '',
    ...formatTable(rows, [true, true, true, false, true]),
    '',
    `${plural(request, 'request')}: ${passed} passed (200), ${request - passed} limited (429)`,
    spanMs === 0
      ? `bound, all at one instant (${formatMs(arrivals[0]!.atMs)}): no time to refill, so at most burst = ${limit.burst} pass (passed ${passed})`
      : `bound over T = ${formatMs(spanMs)}: rate × T + burst = ${perSecond} × ${formatMs(spanMs)} + ${limit.burst} = ${formatTokens(bound)} (passed ${passed})`,
  ];
  return `${lines.join('\n')}\n`;
}

/** Tokens of `bucket` (undefined: the limiter holds none, i.e. a full one) brought up to `nowMs`, without touching it. */
function levelAt(bucket: TokenBucket | undefined, rate: BucketRate, nowMs: number): number {
  const copy = bucket ?? newBucket(rate, nowMs);
  refill(copy, rate, nowMs);
  return tokensOf(copy, rate);
}

/** `250ms`, `1s`, `1.5s`, `66.667ms` (the time between tokens of 15/s). */
function formatMs(ms: number): string {
  if (ms >= 1000 && Number.isInteger(ms / 10)) return `${ms / 1000}s`;
  return `${Number.isInteger(ms) ? ms : ms.toFixed(3)}ms`;
}

/** 15, 15.5, 10.33 */
function formatTokens(tokens: number): string {
  return Number.isInteger(tokens) ? String(tokens) : tokens.toFixed(2);
}
