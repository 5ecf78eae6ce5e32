/**
 * A warning about something that can happen thousands of times a second (a connection closed for
 * the descriptor budget, a health probe made to wait): the first occurrence is logged at once, the
 * ones after it are counted and logged as one line when their window ends, and a window with none
 * closes, so the next occurrence is logged at once again. Nothing is lost and nothing is late by
 * more than one window (a review: logging "at most once per window, when the next one comes"
 * never reported a burst that ended inside the window).
 */
import type { Timers } from '../timers.js';

export class CountedWarning {
  readonly #windowMs: number;
  readonly #timers: Timers;
  /** Writes the line for `count` occurrences; `isWindowed`: they came over the last window, not just now. */
  readonly #write: (count: number, isWindowed: boolean) => void;
  #count = 0;
  /** The timer of the open window's end; undefined: no window open. */
  #timer: unknown = undefined;

  /**
   * @param windowMs how long occurrences after the first are counted before their line, ms
   * @param timers the window's timers (tests pass fake ones); the caller's should be unref'ed
   * @param write writes the line for `count` occurrences
   */
  constructor(windowMs: number, timers: Timers, write: (count: number, isWindowed: boolean) => void) {
    this.#windowMs = windowMs;
    this.#timers = timers;
    this.#write = write;
  }

  /** Counts one occurrence; logs it at once when no window is open. */
  note(): void {
    this.#count++;
    if (this.#timer === undefined) this.#flush(false);
  }

  /** Ends the open window without its line (at shutdown). */
  stop(): void {
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#count = 0;
  }

  #flush(isWindowed: boolean): void {
    this.#timer = undefined;
    if (this.#count === 0) return;
    this.#write(this.#count, isWindowed);
    this.#count = 0;
    this.#timer = this.#timers.setTimeout(() => this.#flush(true), this.#windowMs);
  }
}
