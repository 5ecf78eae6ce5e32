/**
 * The one timer interface every scheduled part of the proxy takes (health checks, the upstream
 * connection pool, the admin registry, the heartbeat client), so tests drive time with a fake clock
 * instead of sleeping (test/helpers/health-fakes.ts `FakeTimers`).
 */

/** `setTimeout` / `clearTimeout` in the shape of node's globals; a handle is whatever `setTimeout` returned. */
export interface Timers {
  /** Calls `callback` once after `ms` milliseconds; returns a handle for `clearTimeout`. */
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** node's own timers. */
export const systemTimers: Timers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * `timers` with every timer `unref()`ed when its handle can be (node's can; a fake clock's handle
 * need not): a pending one never keeps the process alive.
 */
export function unrefed(timers: Timers): Timers {
  return {
    setTimeout: (callback, ms) => {
      const timer = timers.setTimeout(callback, ms);
      (timer as { unref?: () => void } | undefined)?.unref?.();
      return timer;
    },
    clearTimeout: (handle) => timers.clearTimeout(handle),
  };
}

/** node's own timers, `unref()`ed: a pending one never keeps the process alive. */
export const unrefTimers: Timers = unrefed(systemTimers);
