/**
 * When a cluster worker is gone. A worker's `'exit'` can come before the last messages on its IPC
 * channel were read (its last counters, why it could not start), so the primary waits for
 * `'disconnect'` too, which node emits once the channel is read to its end. On Node 20, under load,
 * that `'disconnect'` sometimes never comes after an `'exit'` (a worker SIGKILLed while it served):
 * waiting for it alone left a dead worker unreplaced, silently. So the wait for it is bounded.
 *
 * node:cluster drops a worker from its round-robin list of the listening socket only on that
 * `'disconnect'` (or on an `'exit'` that comes after it): until then the primary deals new
 * connections to the dead worker too, and each one dealt there hangs unanswered and stays open in
 * the primary for good (a break test saw one per SIGKILL). So at the `'exit'` of a worker node
 * still takes for connected, the primary disconnects it itself (`worker.disconnect()`, the public
 * call, which removes it from those lists at once; it does not close our end of the channel, so
 * its last messages are still read).
 */
import type { EventEmitter } from 'node:events';

/** What `whenWorkerGone` needs of a node:cluster Worker. */
export interface GoneWatchable extends Pick<EventEmitter, 'once'> {
  isConnected(): boolean;
  disconnect(): unknown;
}

/** How long after `'exit'` the primary waits for `'disconnect'`: 1000 ms. */
export const DISCONNECT_GRACE_MS = 1000;

/** How a worker ended: its exit code, or the signal that ended it. */
export interface WorkerExit {
  readonly code: number | null;
  readonly signal: string | null;
}

/**
 * Resolves once `worker` has exited and its IPC channel was read to the end, or `graceMs` after
 * the exit when no `'disconnect'` comes; at the exit, disconnects a worker node still takes for connected.
 * @param setTimer the timer to bound the wait with (default an unref'ed setTimeout, which never
 *   keeps a primary that is done alive; tests pass a fake)
 */
export function whenWorkerGone(
  worker: GoneWatchable,
  graceMs: number = DISCONNECT_GRACE_MS,
  setTimer: (callback: () => void, ms: number) => unknown = (callback, ms) => setTimeout(callback, ms).unref(),
): Promise<WorkerExit> {
  const disconnected = new Promise<void>((resolve) => worker.once('disconnect', () => resolve()));
  return new Promise((resolve) => {
    worker.once('exit', (code: number | null, signal: string | null) => {
      if (worker.isConnected()) worker.disconnect(); // out of node's round robin at once
      const gone = (): void => resolve({ code, signal });
      void disconnected.then(gone);
      setTimer(gone, graceMs);
    });
  });
}
