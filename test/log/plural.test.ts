/** `plural` (src/log/plural.ts): the count and its noun, singular only for exactly 1. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { plural } from '../../src/log/plural.js';

test('plural: 1 is singular, 0 and 2 are plural, -es after s/x/z/ch/sh', () => {
  const cases: [number, string, string][] = [
    [1, 'address', '1 address'],
    [0, 'address', '0 addresses'],
    [2, 'address', '2 addresses'],
    [1, 'request', '1 request'],
    [17, 'request', '17 requests'],
    [3, 'failed check', '3 failed checks'],
    [2, 'match', '2 matches'],
  ];
  for (const [count, noun, want] of cases) assert.equal(plural(count, noun), want, `plural(${count}, '${noun}'): got ${plural(count, noun)}, want ${want}`);
});
