/**
 * Signals from the first moment. A node process dies of SIGHUP and SIGTERM until a
 * handler exists, and `run` needs time to load its modules, read the config and listen: a SIGHUP in
 * that window used to kill it with status 129 and no log line. So `main.ts` creates this latch
 * before it loads anything else: from then on SIGHUP, SIGTERM and SIGINT are held while the command
 * starts, and handed over once start-up is done, coalesced. (nginx installs its handlers,
 * `ngx_init_signals`, right after reading the config and opening the listening sockets, before it
 * forks workers: a few milliseconds of C; our start-up is about 100 ms of JavaScript, so we hold them
 * from before it.)
 *
 * - a SIGTERM or SIGINT during start-up: the first one is delivered, so the command stops what it
 *   started and exits 0; a SIGHUP held beside it is dropped (there is nothing left to reload);
 * - otherwise one SIGHUP, however many came: the config is reloaded once;
 * - after start-up, each signal goes to the listeners of its name as it comes.
 *
 * Commands other than `run` call `release()`: the latch lets go and re-raises what it held, so they
 * get node's default behaviour (Ctrl-C ends `passwd`) or their own handlers.
 *
 * What no program can cover: the first tens of milliseconds of a node process, before any
 * JavaScript runs, in which node itself resets signal dispositions (see the README, "Signals").
 */

/**
 * The signals the process lifecycle uses: SIGHUP reloads, SIGTERM and SIGINT stop (SPEC 2), and so
 * does SIGQUIT, nginx's graceful stop (node's default for it is to end the process at once).
 */
export type LifecycleSignal = 'SIGHUP' | 'SIGTERM' | 'SIGINT' | 'SIGQUIT';

const LIFECYCLE_SIGNALS: readonly LifecycleSignal[] = ['SIGHUP', 'SIGTERM', 'SIGINT', 'SIGQUIT'];

/** The signals that stop the proxy, gracefully. */
export const STOP_SIGNALS: readonly LifecycleSignal[] = ['SIGTERM', 'SIGINT', 'SIGQUIT'];

export type SignalListener = (signal: LifecycleSignal) => void;

/** Where signals come from: `process`, or a ProcessSignals latch. */
export interface SignalSource {
  on(signal: LifecycleSignal, listener: SignalListener): unknown;
  off(signal: LifecycleSignal, listener: SignalListener): unknown;
}

/** The parts of `process` the latch uses (tests pass a fake). */
export interface SignalTarget extends SignalSource {
  readonly pid: number;
  kill(pid: number, signal: LifecycleSignal): unknown;
}

export class ProcessSignals implements SignalSource {
  readonly #target: SignalTarget;
  readonly #listeners = new Map<LifecycleSignal, Set<SignalListener>>();
  /** Signals that came during start-up, in order, each name once. */
  readonly #held: LifecycleSignal[] = [];
  #isStartedUp = false;
  #isReleased = false;

  /** Starts holding SIGHUP, SIGTERM, SIGINT and SIGQUIT on `target` (default `process`) at once. */
  constructor(target: SignalTarget = process) {
    this.#target = target;
    for (const signal of LIFECYCLE_SIGNALS) target.on(signal, this.#receive);
  }

  /** Adds `listener` for `signal`; it hears nothing before `startUpDone()`. */
  on(signal: LifecycleSignal, listener: SignalListener): this {
    let listeners = this.#listeners.get(signal);
    if (listeners === undefined) this.#listeners.set(signal, (listeners = new Set()));
    listeners.add(listener);
    return this;
  }

  off(signal: LifecycleSignal, listener: SignalListener): this {
    this.#listeners.get(signal)?.delete(listener);
    return this;
  }

  /**
   * Start-up is done: delivers what was held (the first SIGTERM/SIGINT if any, else one SIGHUP), with
   * a log line saying so, then every signal as it comes.
   */
  startUpDone(log: (line: string) => void): void {
    if (this.#isStartedUp) return;
    this.#isStartedUp = true;
    const stop = this.#held.find((signal) => signal !== 'SIGHUP');
    const due = stop ?? (this.#held.includes('SIGHUP') ? 'SIGHUP' : undefined);
    this.#held.length = 0;
    if (due === undefined) return;
    log(`${due} arrived during start-up; handling it now that start-up is done`);
    this.#deliver(due);
  }

  /** Stops holding: removes the latch's own handlers and re-raises every held signal, in order. */
  release(): void {
    if (this.#isReleased) return;
    this.#isReleased = true;
    for (const signal of LIFECYCLE_SIGNALS) this.#target.off(signal, this.#receive);
    for (const signal of this.#held.splice(0)) this.#target.kill(this.#target.pid, signal);
  }

  readonly #receive = (signal: LifecycleSignal): void => {
    if (this.#isStartedUp) this.#deliver(signal);
    else if (!this.#held.includes(signal)) this.#held.push(signal);
  };

  #deliver(signal: LifecycleSignal): void {
    for (const listener of [...(this.#listeners.get(signal) ?? [])]) listener(signal);
  }
}
