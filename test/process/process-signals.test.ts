/**
 * The signal latch (src/process/process-signals.ts), on a fake process: signals during
 * start-up are held and handed over once start-up is done, coalesced (a stop signal wins, one SIGHUP
 * however many came); after that each goes to its listeners as it comes; `release()` re-raises what
 * was held and lets go of the process.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { ProcessSignals, type LifecycleSignal, type SignalTarget } from '../../src/process/process-signals.js';

class FakeProcess extends EventEmitter implements SignalTarget {
  readonly pid = 4242;
  readonly raised: string[] = [];
  kill(pid: number, signal: LifecycleSignal): boolean {
    this.raised.push(`${pid} ${signal}`);
    return true;
  }
  send(signal: LifecycleSignal): void {
    this.emit(signal, signal);
  }
}

/** A latch on a fake process with listeners that write down what they heard. */
function setUp(): { target: FakeProcess; signals: ProcessSignals; heard: string[]; logged: string[] } {
  const target = new FakeProcess();
  const signals = new ProcessSignals(target);
  const heard: string[] = [];
  for (const name of ['SIGHUP', 'SIGTERM', 'SIGINT'] as const) signals.on(name, (signal) => heard.push(signal));
  return { target, signals, heard, logged: [] };
}

describe('ProcessSignals during start-up', () => {
  const table: readonly { name: string; during: readonly LifecycleSignal[]; delivered: readonly string[] }[] = [
    { name: 'nothing held: nothing delivered', during: [], delivered: [] },
    { name: 'one SIGHUP: reloaded once start-up is done', during: ['SIGHUP'], delivered: ['SIGHUP'] },
    { name: 'three SIGHUPs: coalesced into one reload', during: ['SIGHUP', 'SIGHUP', 'SIGHUP'], delivered: ['SIGHUP'] },
    { name: 'SIGTERM: delivered, so the command stops', during: ['SIGTERM'], delivered: ['SIGTERM'] },
    { name: 'SIGHUP then SIGTERM: the stop wins, no reload', during: ['SIGHUP', 'SIGTERM'], delivered: ['SIGTERM'] },
    { name: 'SIGTERM then SIGHUP: the stop wins', during: ['SIGTERM', 'SIGHUP'], delivered: ['SIGTERM'] },
    { name: 'SIGINT then SIGTERM: the first stop signal only', during: ['SIGINT', 'SIGTERM'], delivered: ['SIGINT'] },
  ];
  for (const row of table) {
    it(row.name, () => {
      const { target, signals, heard } = setUp();
      for (const signal of row.during) target.send(signal);
      assert.deepEqual(heard, [], `got ${JSON.stringify(heard)} delivered during start-up, want nothing`);
      const logged: string[] = [];
      signals.startUpDone((line) => logged.push(line));
      assert.deepEqual(heard, row.delivered, `got ${JSON.stringify(heard)}, want ${JSON.stringify(row.delivered)}`);
      assert.equal(logged.length, row.delivered.length, `got log ${JSON.stringify(logged)}`);
      if (row.delivered.length > 0) assert.match(logged[0]!, new RegExp(`^${row.delivered[0]} arrived during start-up`));
      assert.deepEqual(target.raised, [], 'got a signal re-raised by a latch that was not released');
    });
  }
});

describe('ProcessSignals after start-up', () => {
  it('delivers every signal as it comes, to the listeners of its name', () => {
    const { target, signals, heard } = setUp();
    signals.startUpDone(() => {});
    for (const signal of ['SIGHUP', 'SIGHUP', 'SIGTERM', 'SIGINT'] as const) target.send(signal);
    assert.deepEqual(heard, ['SIGHUP', 'SIGHUP', 'SIGTERM', 'SIGINT']);
  });

  it('a listener removed with off() hears nothing more', () => {
    const target = new FakeProcess();
    const signals = new ProcessSignals(target);
    const heard: string[] = [];
    const listener = (signal: LifecycleSignal): void => void heard.push(signal);
    signals.on('SIGHUP', listener);
    signals.startUpDone(() => {});
    target.send('SIGHUP');
    signals.off('SIGHUP', listener);
    target.send('SIGHUP');
    assert.deepEqual(heard, ['SIGHUP'], `got ${JSON.stringify(heard)}, want one SIGHUP`);
  });

  it('the latch keeps its own process listener, so a signal nobody listens to does not kill the process', () => {
    const target = new FakeProcess();
    new ProcessSignals(target).startUpDone(() => {});
    for (const signal of ['SIGHUP', 'SIGTERM', 'SIGINT']) assert.equal(target.listenerCount(signal), 1, `got ${target.listenerCount(signal)} ${signal} listeners, want 1`);
  });
});

describe('ProcessSignals.release (commands other than run)', () => {
  it('removes its process listeners and re-raises what it held, in order, each once', () => {
    const { target, signals, heard } = setUp();
    for (const signal of ['SIGINT', 'SIGHUP', 'SIGINT'] as const) target.send(signal);
    signals.release();
    assert.deepEqual(target.raised, ['4242 SIGINT', '4242 SIGHUP'], `got ${JSON.stringify(target.raised)}`);
    for (const signal of ['SIGHUP', 'SIGTERM', 'SIGINT']) assert.equal(target.listenerCount(signal), 0, `got a ${signal} listener left after release`);
    assert.deepEqual(heard, [], 'got held signals delivered to listeners after release');
  });

  it('with nothing held re-raises nothing', () => {
    const { target, signals } = setUp();
    signals.release();
    assert.deepEqual(target.raised, []);
  });
});
