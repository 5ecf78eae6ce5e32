/**
 * Counts of the last minute in a ring of 60 one-second slots (the "sliding window of buckets" of
 * rate counters; Brendan Gregg's and Prometheus clients' rolling windows work the same way): slot
 * `second % 60` holds the count of that epoch second, and a slot still holding an older second is
 * reused. Adding is O(1), reading sums at most 60 slots, memory is fixed.
 *
 * The ring is plain JSON so a cluster worker's travels in its report; rings of several workers add
 * up slot by slot, because every process puts a second in the same slot (for one slot, a newer
 * second than another's is at least 60 s newer, so the older count is out of the window anyway).
 */

/** Slots of the ring: one minute of seconds. */
export const LAST_MINUTE_SLOTS = 60;

/** `counts[i]` happened in epoch second `seconds[i]`; i = second % 60. */
export interface LastMinuteCounts {
  readonly seconds: number[];
  readonly counts: number[];
}

export function newLastMinuteCounts(): LastMinuteCounts {
  return { seconds: new Array<number>(LAST_MINUTE_SLOTS).fill(-1), counts: new Array<number>(LAST_MINUTE_SLOTS).fill(0) };
}

/** Counts one event in epoch second `second` (one older than what its slot holds, after the clock stepped back, is dropped). */
export function countAt(ring: LastMinuteCounts, second: number): void {
  const slot = second % LAST_MINUTE_SLOTS;
  if (ring.seconds[slot]! > second) return;
  if (ring.seconds[slot] !== second) {
    ring.seconds[slot] = second;
    ring.counts[slot] = 0;
  }
  ring.counts[slot]!++;
}

/** The events of the 60 seconds up to and including epoch second `nowSecond`. */
export function sumLastMinute(ring: LastMinuteCounts, nowSecond: number): number {
  let sum = 0;
  for (let slot = 0; slot < LAST_MINUTE_SLOTS; slot++) {
    const second = ring.seconds[slot]!;
    if (second <= nowSecond && nowSecond - second < LAST_MINUTE_SLOTS) sum += ring.counts[slot]!;
  }
  return sum;
}

/** `ring` added into `into` (a newer second in a slot replaces an older one; the same second adds up). */
export function addLastMinuteCounts(into: LastMinuteCounts, ring: LastMinuteCounts): void {
  for (let slot = 0; slot < LAST_MINUTE_SLOTS; slot++) {
    const second = ring.seconds[slot]!;
    if (second === into.seconds[slot]) into.counts[slot]! += ring.counts[slot]!;
    else if (second > into.seconds[slot]!) {
      into.seconds[slot] = second;
      into.counts[slot] = ring.counts[slot]!;
    }
  }
}
