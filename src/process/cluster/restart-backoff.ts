/**
 * The restart policy for a cluster worker that cannot start: exponential backoff,
 * as systemd's `RestartSec` with `RestartSteps`/`RestartMaxDelaySec`, or Kubernetes' CrashLoopBackOff.
 * A worker that fails to start (its access log directory is gone, its listen fails, it exits before
 * listening) is tried again after 1 s, then 2 s, 4 s, 8 s, 16 s, and every 30 s after that, so a
 * cause that lasts never turns into a fork loop, and one that is fixed is noticed within 30 s. A
 * worker that starts resets the count; one that dies after it had started is replaced at once, as
 * nginx replaces a worker that died.
 *
 *     failed starts in a row   1     2     3     4     5      6      7 …
 *     next attempt after       1 s   2 s   4 s   8 s   16 s   30 s   30 s
 */

/** First delay: 1 s. */
export const FIRST_RESTART_DELAY_MS = 1_000;
/** Longest delay: 30 s. */
export const MAX_RESTART_DELAY_MS = 30_000;

/**
 * How long to wait before the next start, in ms, after `failedStarts` (≥ 1) failed starts in a row:
 * `min(30 s, 1 s × 2^(failedStarts − 1))`.
 */
export function restartDelayMs(failedStarts: number): number {
  const doublings = Math.max(0, Math.min(failedStarts - 1, 30));
  return Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** doublings);
}
