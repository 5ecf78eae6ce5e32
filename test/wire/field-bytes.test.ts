/**
 * The field-name comparisons of src/wire/field-bytes.ts that replace `toLowerCase` on the request
 * path: they must say exactly what `name.toLowerCase() === lowerName` says, for every byte.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { equalsIgnoringCase, FieldNameSet, hasInvalidFieldChar, IS_FIELD_CHAR, IS_TOKEN, isToken, listElements } from '../../src/wire/field-bytes.js';

test('equalsIgnoringCase agrees with toLowerCase for every one-character name against every lower-case target of the token set', () => {
  const targets = "abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~".split('');
  for (let code = 0; code < 0x180; code++) {
    const name = String.fromCharCode(code);
    for (const target of targets) {
      assert.equal(equalsIgnoringCase(name, target), name.toLowerCase() === target, `${JSON.stringify(name)} against ${JSON.stringify(target)}`);
    }
  }
});

test('equalsIgnoringCase: any case matches, a different length or one different character does not; "@" and "[" are not "`" and "{"', () => {
  assert.equal(equalsIgnoringCase('Content-Length', 'content-length'), true);
  assert.equal(equalsIgnoringCase('CONTENT-LENGTH', 'content-length'), true);
  assert.equal(equalsIgnoringCase('Content-Lengths', 'content-length'), false);
  assert.equal(equalsIgnoringCase('Content_Length', 'content-length'), false);
  assert.equal(equalsIgnoringCase('Content-Lengtg', 'content-length'), false);
  assert.equal(equalsIgnoringCase('', ''), true);
  assert.equal(equalsIgnoringCase('@', '`'), false); // 0x40 | 0x20 is 0x60: only letters fold
  assert.equal(equalsIgnoringCase('[', '{'), false);
  assert.equal(equalsIgnoringCase('\u212a', 'k'), false); // KELVIN SIGN lower-cases to "k" in Unicode, not in a field name
});

test('FieldNameSet.has matches its names in any case and nothing else; it refuses a name that is not lower-case', () => {
  const names = new FieldNameSet(['te', 'trailer', 'upgrade', 'connection', 'keep-alive']);
  for (const name of ['TE', 'te', 'Trailer', 'UPGRADE', 'Connection', 'keep-ALIVE']) assert.equal(names.has(name), true, name);
  for (const name of ['', 't', 'tee', 'Trailers', 'upgrade ', 'connectio', 'keep_alive', 'x-connection']) assert.equal(names.has(name), false, name);
  // The first-byte table: a first character past latin1 whose low byte is a member's first letter
  // (U+0174, U+0163), and members' other letters in first place.
  for (const name of ['\u0174e', '\u0163railer', 'ee', 'Rpgrade']) assert.equal(names.has(name), false, JSON.stringify(name));
  assert.throws(() => new FieldNameSet(['Connection']), /not lower-case/);
});

test('FieldNameSet with thousands of names (a Connection header that lists them, duplicates too) answers the same in any case', () => {
  const listed = Array.from({ length: 3000 }, (_, i) => `x-${i % 1500}`);
  const names = new FieldNameSet(listed);
  for (const name of ['x-0', 'X-0', 'x-1499', 'X-1499', 'x-750']) assert.equal(names.has(name), true, name);
  for (const name of ['x-1500', 'x-', 'x_0', '', 'X-15000']) assert.equal(names.has(name), false, name);
  assert.throws(() => new FieldNameSet([...listed, 'X-Big']), /not lower-case/);
});

test('listElements: a list field split at commas, each element trimmed, empty ones left out; a value without a comma is one element', () => {
  assert.deepEqual(listElements('keep-alive'), ['keep-alive']);
  assert.deepEqual(listElements('  close\t'), ['close']);
  assert.deepEqual(listElements(''), []);
  assert.deepEqual(listElements(' , ,'), []);
  assert.deepEqual(listElements('keep-alive, X-A ,,x-b'), ['keep-alive', 'X-A', 'x-b']);
});

test('the parsers\' byte tables accept exactly the characters the writers\' checks accept: a field read by a parser needs no second check (the writers\' checkedLength)', () => {
  for (let code = 0; code < 0x100; code++) {
    const char = String.fromCharCode(code);
    assert.equal(IS_FIELD_CHAR[code] === 1, !hasInvalidFieldChar(char), `value byte 0x${code.toString(16)}`);
    assert.equal(IS_TOKEN[code] === 1, isToken(char), `name byte 0x${code.toString(16)}`);
  }
});
