/**
 * firstDuplicateKey (src/admin/duplicate-json-key.ts): the first name repeated within one object,
 * compared decoded; names in different objects, values that look like names, and escapes inside
 * strings are no duplicates.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { firstDuplicateKey } from '../../src/admin/duplicate-json-key.js';

const cases: [string, string | undefined][] = [
  ['{"url": "http://a:1"}', undefined],
  ['{"url": "http://a:1", "url": "http://b:1"}', 'url'],
  ['{"url": 1, "\\u0075rl": 2}', 'url'],
  ['{"a": {"url": 1}, "b": {"url": 2}}', undefined],
  ['[{"url": 1}, {"url": 2}]', undefined],
  ['{"a": [{"x": 1, "x": 2}]}', 'x'],
  ['{"a": "url", "url": 1}', undefined],
  ['{"a": "\\":", "b": "\\\\", "a" : 2}', 'a'],
  ['{"a": {"b": 1}, "a": 2}', 'a'],
  ['"url"', undefined],
  ['{}', undefined],
];

test('firstDuplicateKey: the repeated name of one object, or undefined', () => {
  for (const [text, want] of cases) {
    JSON.parse(text); // every case is valid JSON, as the function expects
    assert.equal(firstDuplicateKey(text), want, `got ${firstDuplicateKey(text)} for ${text}, want ${want}`);
  }
});
