/**
 * Driving discovery on a fake clock (src/discovery): lookups answer through promises, so after each
 * timer the test lets the answer land (a macrotask turn) before the clock moves to the next timer.
 */
import type { FakeTimers } from './health-fakes.js';

/** Lets pending promise callbacks run. */
export const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Moves `timers` forward by `ms`, timer by timer, letting each lookup's answer land before the next. */
export async function advanceSettled(timers: FakeTimers, ms: number): Promise<void> {
  const endMs = timers.nowMs + ms;
  await settle();
  for (;;) {
    const dueMs = Math.min(...[...timers.pending.values()].map((timer) => timer.atMs));
    if (!(dueMs <= endMs)) break;
    timers.advance(dueMs - timers.nowMs);
    await settle();
  }
  timers.advance(endMs - timers.nowMs);
}
