/**
 * The last line of defence against node's SIGUSR1 debugger (SPEC 2: SIGUSR1 "never starts a
 * debugger").
 *
 * Node 20 answers SIGUSR1 by opening its inspector on 127.0.0.1:9229 until a JavaScript listener for
 * the signal exists, and src/main.ts can install that listener only once node has booted (about
 * 100 ms here). A SIGUSR1 in that window (logrotate's `postrotate` during a restart) starts the
 * inspector, and every local user can then connect to it and run code as the proxy's user. So,
 * unless the operator asked for an inspector (`--inspect…` in node's flags or `NODE_OPTIONS`), an
 * inspector found open in the first second is closed (`inspector.close()`) and one line says so. The
 * inspector starts on a thread of its own, some milliseconds after the signal, hence a few checks
 * rather than one. What is left is the few milliseconds between the inspector opening and the next
 * check; node 22.14+ closes it for good with `--disable-sigusr1`.
 */
import inspector from 'node:inspector';

/** When the guard looks, in ms after it is armed: at once, then while a late start may still come. */
export const INSPECTOR_CHECKS_MS: readonly number[] = [0, 10, 50, 200, 1000];

/** What the guard needs; the real node:inspector and timers by default (tests pass fakes). */
export interface InspectorGuardDependencies {
  readonly url: () => string | undefined;
  readonly close: () => void;
  /** node's own flags and `NODE_OPTIONS`, searched for `--inspect`. */
  readonly nodeFlags: string;
  readonly setTimeout: (callback: () => void, ms: number) => { unref(): unknown };
}

const realDependencies: InspectorGuardDependencies = {
  url: () => inspector.url(),
  close: () => inspector.close(),
  nodeFlags: `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`,
  setTimeout: (callback, ms) => setTimeout(callback, ms),
};

/**
 * Closes an inspector that a SIGUSR1 opened before src/main.ts could listen for the signal, now and
 * at each of INSPECTOR_CHECKS_MS (unref'ed timers: the guard never keeps the process alive).
 * Does nothing when node was started with `--inspect`, `--inspect-brk` or `--inspect-wait`.
 * @param log where the one warning line goes (no newline)
 */
export function closeSignalledInspector(log: (line: string) => void, deps: InspectorGuardDependencies = realDependencies): void {
  if (/--inspect/.test(deps.nodeFlags)) return;
  const check = (): void => {
    const url = deps.url();
    if (url === undefined) return;
    deps.close();
    log(`closed node's inspector (${url}), opened by a SIGUSR1 during node's start-up: SIGUSR1 only reopens the log files`);
  };
  for (const ms of INSPECTOR_CHECKS_MS) {
    if (ms === 0) check();
    else deps.setTimeout(check, ms).unref();
  }
}
