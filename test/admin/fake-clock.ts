/** A manual clock with the Timers shape (setTimeout/clearTimeout): `advance(ms)` fires what is due, in order. */
export class FakeClock {
  nowMs = 1_000_000;
  #next = 1;
  readonly #timers = new Map<number, { at: number; callback: () => void }>();

  now = (): number => this.nowMs;

  setTimeout = (callback: () => void, ms: number): unknown => {
    const id = this.#next++;
    this.#timers.set(id, { at: this.nowMs + ms, callback });
    return id;
  };

  clearTimeout = (handle: unknown): void => {
    this.#timers.delete(handle as number);
  };

  advance(ms: number): void {
    const end = this.nowMs + ms;
    for (;;) {
      const due = [...this.#timers.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (due === undefined) break;
      this.#timers.delete(due[0]);
      this.nowMs = due[1].at;
      due[1].callback();
    }
    this.nowMs = end;
  }
}
