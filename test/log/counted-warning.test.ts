/**
 * CountedWarning (src/log/counted-warning.ts): the first occurrence at once, the others counted
 * into one line at their window's end, a quiet window closing, and stop() dropping the open window.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CountedWarning } from '../../src/log/counted-warning.js';
import { FakeClock } from '../admin/fake-clock.js';

test('CountedWarning: the first at once, the rest of its window at the window\'s end, a quiet window closes, stop() ends the open one without its line', () => {
  const clock = new FakeClock();
  const lines: string[] = [];
  const warning = new CountedWarning(10_000, clock, (count, isWindowed) => lines.push(`${count}${isWindowed ? ' windowed' : ''}`));
  warning.note();
  warning.note();
  warning.note();
  assert.deepEqual(lines, ['1']);
  clock.advance(9_999);
  assert.deepEqual(lines, ['1']);
  clock.advance(1);
  assert.deepEqual(lines, ['1', '2 windowed']);
  clock.advance(10_000); // a window with none: no line, and it closes
  assert.deepEqual(lines, ['1', '2 windowed']);
  warning.note();
  assert.deepEqual(lines, ['1', '2 windowed', '1'], 'after a quiet window the next one is at once');
  warning.note();
  warning.stop();
  clock.advance(20_000);
  assert.deepEqual(lines, ['1', '2 windowed', '1']);
});
