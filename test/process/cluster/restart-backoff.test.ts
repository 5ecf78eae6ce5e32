/**
 * The restart policy of a cluster worker that cannot start (src/process/cluster/restart-backoff.ts): 1 s
 * doubling to 30 s, as the table in the doc comment.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { MAX_RESTART_DELAY_MS, restartDelayMs } from '../../../src/process/cluster/restart-backoff.js';

it('the schedule: 1 s, 2 s, 4 s, 8 s, 16 s, then 30 s for ever', () => {
  const schedule = Array.from({ length: 9 }, (_, index) => restartDelayMs(index + 1));
  assert.deepEqual(schedule, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000]);
});

it('stays at 30 s however many starts failed (no overflow to Infinity)', () => {
  for (const failedStarts of [50, 1_000, 1e9]) {
    assert.equal(restartDelayMs(failedStarts), MAX_RESTART_DELAY_MS, `got ${restartDelayMs(failedStarts)} ms after ${failedStarts} failed starts, want 30000`);
  }
});

it('the sum of the first ten delays: about 3.5 minutes of attempts before they settle every 30 s', () => {
  const total = Array.from({ length: 10 }, (_, index) => restartDelayMs(index + 1)).reduce((sum, ms) => sum + ms, 0);
  assert.equal(total, 1_000 + 2_000 + 4_000 + 8_000 + 16_000 + 5 * 30_000);
});
