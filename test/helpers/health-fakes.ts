/**
 * Fakes for driving the health checker exactly (SPEC 4 active checks): timers that run only when
 * the test moves the clock, and a probe whose answers the test hands out one by one. Shared by the
 * checker's own tests and the ProxyServer reload tests, so neither sleeps for a timer.
 */
import assert from 'node:assert/strict';
import type { HealthCheckConfig, UpstreamConfig } from '../../src/config/config.js';
import type { Timers } from '../../src/timers.js';
import type { ProbeOptions, ProbeResult } from '../../src/upstream/health/probe.js';

/** Timers driven by `advance(ms)`; handles record whether `unref()` was called. */
export class FakeTimers implements Timers {
  nowMs = 0;
  #nextId = 1;
  readonly pending = new Map<number, { atMs: number; callback: () => void; isUnrefed: boolean }>();
  readonly handles: { id: number; isUnrefed: () => boolean }[] = [];

  /** The clock to give the checker as `now`. */
  readonly now = (): number => this.nowMs;

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.#nextId++;
    const entry = { atMs: this.nowMs + ms, callback, isUnrefed: false };
    this.pending.set(id, entry);
    const handle = { id, unref: () => void (entry.isUnrefed = true), isUnrefed: () => entry.isUnrefed };
    this.handles.push(handle);
    return handle;
  }

  clearTimeout(handle: unknown): void {
    this.pending.delete((handle as { id: number }).id);
  }

  /** Moves the clock forward, running due timers in time order. */
  advance(ms: number): void {
    const endMs = this.nowMs + ms;
    for (;;) {
      const due = [...this.pending.entries()].filter(([, t]) => t.atMs <= endMs).sort((x, y) => x[1].atMs - y[1].atMs)[0];
      if (due === undefined) break;
      this.pending.delete(due[0]);
      this.nowMs = due[1].atMs;
      due[1].callback();
    }
    this.nowMs = endMs;
  }
}

/** One call of the fake probe: what it was asked, when (`atMs` on the fake clock), and its answer. */
export interface FakeProbeCall {
  readonly upstream: UpstreamConfig;
  readonly check: HealthCheckConfig;
  readonly options: ProbeOptions;
  readonly atMs: number;
  readonly resolve: (result: ProbeResult) => void;
}

/** A probe whose results the test hands out one by one. `clock` stamps each call (default: 0). */
export class FakeProbe {
  readonly calls: FakeProbeCall[] = [];
  readonly #answered = new Set<FakeProbeCall>();
  readonly #clock: () => number;

  constructor(clock: () => number = () => 0) {
    this.#clock = clock;
  }

  readonly probe = (upstream: UpstreamConfig, check: HealthCheckConfig, options: ProbeOptions): Promise<ProbeResult> =>
    new Promise((resolve) => this.calls.push({ upstream, check, options, atMs: this.#clock(), resolve }));

  callsFor(port: number): number {
    return this.calls.filter((c) => c.upstream.port === port).length;
  }

  /** The clock times of the probes sent to `port`, in order. */
  timesFor(port: number): number[] {
    return this.calls.filter((c) => c.upstream.port === port).map((c) => c.atMs);
  }

  /** The latest probe sent to `port`. */
  lastFor(port: number): FakeProbeCall {
    const call = this.calls.filter((c) => c.upstream.port === port).at(-1);
    assert.ok(call, `no probe sent to port ${port}`);
    return call;
  }

  /** True when a call for `port` has not been answered by the test yet. */
  hasUnanswered(port: number): boolean {
    return this.calls.some((c) => c.upstream.port === port && !this.#answered.has(c));
  }

  /** Resolves the oldest unresolved call for `port` (an aborted one too: its late result). */
  answer(port: number, result: ProbeResult): void {
    const call = this.calls.find((c) => c.upstream.port === port && !this.#answered.has(c));
    assert.ok(call, `no probe in flight for port ${port}`);
    this.#answered.add(call);
    call.resolve(result);
  }
}

/** Lets every settled probe's `.then` run (setImmediate comes after all pending microtasks). */
export const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export const OK: ProbeResult = { ok: true, status: 200, latencyMs: 3 };
export const REFUSED: ProbeResult = { ok: false, latencyMs: 1, error: 'connect ECONNREFUSED' };
