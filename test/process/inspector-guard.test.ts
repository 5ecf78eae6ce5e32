/**
 * The inspector guard (src/process/inspector-guard.ts) on fakes: an inspector found open is closed at
 * once or at a later check, with one line each time; one the operator asked for is left alone.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSignalledInspector, INSPECTOR_CHECKS_MS, type InspectorGuardDependencies } from '../../src/process/inspector-guard.js';

/** An inspector that opens at the given check (index into INSPECTOR_CHECKS_MS), and hand-run timers. */
function fakeInspector(opensAtCheck: number, nodeFlags = ''): { deps: InspectorGuardDependencies; runTimers(): void; closedAt: number[]; scheduled: number[] } {
  let check = 0;
  let isOpen = false;
  const closedAt: number[] = [];
  const scheduled: number[] = [];
  const pending: (() => void)[] = [];
  const deps: InspectorGuardDependencies = {
    url: () => {
      if (check === opensAtCheck) isOpen = true;
      check++;
      return isOpen ? 'ws://127.0.0.1:9229/x' : undefined;
    },
    close: () => {
      isOpen = false;
      closedAt.push(check - 1);
    },
    nodeFlags,
    setTimeout: (callback, ms) => {
      scheduled.push(ms);
      pending.push(callback);
      return { unref: () => undefined };
    },
  };
  return { deps, runTimers: () => pending.splice(0).forEach((run) => run()), closedAt, scheduled };
}

test('an inspector open when the guard is armed is closed at once, with one line', () => {
  const fake = fakeInspector(0);
  const lines: string[] = [];
  closeSignalledInspector((line) => lines.push(line), fake.deps);
  assert.deepEqual(fake.closedAt, [0], `got closes at checks ${JSON.stringify(fake.closedAt)}, want [0]`);
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /closed node's inspector \(ws:\/\/127\.0\.0\.1:9229\/x\)/);
  fake.runTimers();
  assert.equal(lines.length, 1, 'got more lines after the inspector stayed closed');
});

test('an inspector that opens after the guard was armed is closed at the next check', () => {
  const fake = fakeInspector(2);
  const lines: string[] = [];
  closeSignalledInspector((line) => lines.push(line), fake.deps);
  assert.deepEqual(fake.scheduled, INSPECTOR_CHECKS_MS.slice(1), 'got other check times');
  assert.deepEqual(fake.closedAt, []);
  fake.runTimers();
  assert.deepEqual(fake.closedAt, [2], `got closes at checks ${JSON.stringify(fake.closedAt)}, want [2]`);
  assert.equal(lines.length, 1);
});

test('an inspector the operator asked for (--inspect in the node flags) is left open', () => {
  for (const flags of ['--inspect', '--inspect-brk=0.0.0.0:9230', '--max-old-space-size=64 --inspect-wait']) {
    const fake = fakeInspector(0, flags);
    closeSignalledInspector(() => assert.fail('logged'), fake.deps);
    fake.runTimers();
    assert.deepEqual(fake.closedAt, [], `got the inspector closed with flags '${flags}'`);
  }
});
