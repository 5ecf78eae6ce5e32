/**
 * When the primary takes a worker for gone (src/process/cluster/worker-gone.ts), on a fake worker and a fake
 * timer: after `'exit'` and `'disconnect'`, or, when `'disconnect'` never comes (seen on Node 20
 * under load, which left a killed worker unreplaced), once the grace time after `'exit'` is over.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { DISCONNECT_GRACE_MS, whenWorkerGone, type WorkerExit } from '../../../src/process/cluster/worker-gone.js';

function fakeTimer(): { setTimer: (callback: () => void, ms: number) => void; fire(): void; delays: number[] } {
  const pending: (() => void)[] = [];
  const delays: number[] = [];
  return {
    setTimer: (callback, ms) => {
      pending.push(callback);
      delays.push(ms);
    },
    fire: () => pending.splice(0).forEach((callback) => callback()),
    delays,
  };
}

/** A fake node:cluster Worker: events, and a channel that is connected until `disconnect()`. */
class FakeWorker extends EventEmitter {
  disconnectCalls = 0;
  #isConnected = true;
  isConnected(): boolean {
    return this.#isConnected;
  }
  disconnect(): void {
    this.disconnectCalls++;
    this.#isConnected = false;
  }
  /** node's own 'disconnect' (the channel read to its end). */
  channelClosed(): void {
    this.#isConnected = false;
    this.emit('disconnect');
  }
}

/** Lets queued promise callbacks run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('gone once it exited and its channel disconnected, in either order', async () => {
  for (const order of [['exit', 'disconnect'], ['disconnect', 'exit']]) {
    const worker = new FakeWorker();
    const timer = fakeTimer();
    let gone: WorkerExit | undefined;
    void whenWorkerGone(worker, DISCONNECT_GRACE_MS, timer.setTimer).then((exit) => (gone = exit));
    for (const event of order) {
      if (event === 'exit') worker.emit('exit', null, 'SIGKILL');
      else worker.channelClosed();
    }
    await settle();
    assert.deepEqual(gone, { code: null, signal: 'SIGKILL' }, `${order.join(' then ')}: got ${JSON.stringify(gone)}`);
  }
});

test('an exit without a disconnect is gone when the grace time is over, not never', async () => {
  const worker = new FakeWorker();
  const timer = fakeTimer();
  let gone: WorkerExit | undefined;
  void whenWorkerGone(worker, DISCONNECT_GRACE_MS, timer.setTimer).then((exit) => (gone = exit));
  worker.emit('exit', 137, null);
  await settle();
  assert.equal(worker.disconnectCalls, 1, 'got the dead worker left connected at its exit: node:cluster would keep dealing new connections to it');
  assert.equal(gone, undefined, 'got it gone before the channel disconnected or the grace time ran out');
  assert.deepEqual(timer.delays, [1000]);
  timer.fire();
  await settle();
  assert.deepEqual(gone, { code: 137, signal: null });
  assert.equal(worker.disconnectCalls, 1, 'disconnected once');
});

test('a worker whose channel closed before its exit is not disconnected again', async () => {
  const worker = new FakeWorker();
  const timer = fakeTimer();
  void whenWorkerGone(worker, DISCONNECT_GRACE_MS, timer.setTimer);
  worker.channelClosed();
  worker.emit('exit', null, 'SIGKILL');
  timer.fire();
  await settle();
  assert.equal(worker.disconnectCalls, 0);
});

test('no grace timer before the exit: a disconnect alone is not gone', async () => {
  const worker = new FakeWorker();
  const timer = fakeTimer();
  let gone: WorkerExit | undefined;
  void whenWorkerGone(worker, DISCONNECT_GRACE_MS, timer.setTimer).then((exit) => (gone = exit));
  worker.channelClosed();
  await settle();
  assert.equal(gone, undefined);
  assert.deepEqual(timer.delays, []);
});
