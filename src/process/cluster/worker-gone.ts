/**
 * When a cluster worker is gone. A worker's `'exit'` can come before the last messages on its IPC
 * channel were read (its last counters, why it could not start), so the primary waits for
 * `'disconnect'` too, which node emits once the channel is read to its end. On Node 20, under load,
 * that `'disconnect'` sometimes never comes after an `'exit'` (a worker SIGKILLed while it served):
 * waiting for it alone left a dead worker unreplaced, silently. So the wait for it is bounded.
 */
import type { EventEmitter } from 'node:events';

/** How long after `'exit'` the primary waits for `'disconnect'`: 1000 ms. */
export const DISCONNECT_GRACE_MS = 1000;

/** How a worker ended: its exit code, or the signal that ended it. */
export interface WorkerExit {
  readonly code: number | null;
  readonly signal: string | null;
}

/**
 * Resolves once `worker` has exited and its IPC channel was read to the end, or `graceMs` after
 * the exit when no `'disconnect'` comes.
 * @param setTimer the timer to bound the wait with (default an unref'ed setTimeout, which never
 *   keeps a primary that is done alive; tests pass a fake)
 */
export function whenWorkerGone(
  worker: Pick<EventEmitter, 'once'>,
  graceMs: number = DISCONNECT_GRACE_MS,
  setTimer: (callback: () => void, ms: number) => unknown = (callback, ms) => setTimeout(callback, ms).unref(),
): Promise<WorkerExit> {
  const disconnected = new Promise<void>((resolve) => worker.once('disconnect', () => resolve()));
  return new Promise((resolve) => {
    worker.once('exit', (code: number | null, signal: string | null) => {
      const gone = (): void => resolve({ code, signal });
      void disconnected.then(gone);
      setTimer(gone, graceMs);
    });
  });
}
