/** crc32 (IEEE) and fnv1a (32-bit) over UTF-8: published check values and node:zlib's crc32. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { crc32, fnv1a, HASH_FUNCTIONS } from '../../../src/upstream/balancer/hash.js';
import { seededRandom } from './helpers.js';

const CHECK_VALUES = [
  { hash: crc32, text: '', want: 0 },
  { hash: crc32, text: '123456789', want: 0xcbf43926 }, // the CRC-32 catalogue's check value
  { hash: crc32, text: '127.0.0.1', want: 3619153832 }, // SPEC 3
  { hash: crc32, text: 'é', want: 0x0e048d3e }, // bytes C3 A9
  { hash: fnv1a, text: '', want: 0x811c9dc5 }, // the offset basis
  { hash: fnv1a, text: 'a', want: 0xe40c292c },
  { hash: fnv1a, text: 'foobar', want: 0xbf9cf968 },
];

for (const { hash, text, want } of CHECK_VALUES) {
  test(`${hash.name}(${JSON.stringify(text)}) = 0x${want.toString(16)}`, () => {
    const got = hash(text);
    assert.equal(got, want, `got 0x${got.toString(16)}, want 0x${want.toString(16)}`);
  });
}

test('crc32 agrees with node:zlib crc32 over the UTF-8 bytes, ASCII and not', () => {
  const random = seededRandom(7);
  const alphabet = ['a', 'Z', '0', '.', ':', 'é', 'ß', '€', '中', '😀', '\ud800' /* lone surrogate → U+FFFD */];
  for (let i = 0; i < 500; i++) {
    let text = '';
    const length = Math.floor(random() * 12);
    for (let j = 0; j < length; j++) text += alphabet[Math.floor(random() * alphabet.length)];
    const want = zlib.crc32(Buffer.from(text, 'utf8'));
    assert.equal(crc32(text), want, `crc32(${JSON.stringify(text)}): got ${crc32(text)}, want ${want}`);
  }
});

test('fnv1a hashes the UTF-8 bytes (a reference loop over Buffer bytes agrees)', () => {
  const reference = (text: string): number => {
    let hash = 0x811c9dc5;
    for (const byte of Buffer.from(text, 'utf8')) hash = Math.imul(hash ^ byte, 0x01000193);
    return hash >>> 0;
  };
  for (const text of ['', 'a', '127.0.0.1', 'é', '€uro', '😀', 'x\ud800y']) {
    assert.equal(fnv1a(text), reference(text), `fnv1a(${JSON.stringify(text)}): got ${fnv1a(text)}, want ${reference(text)}`);
  }
});

test('HASH_FUNCTIONS maps the `hash` key values', () => {
  assert.equal(HASH_FUNCTIONS.crc32, crc32);
  assert.equal(HASH_FUNCTIONS.fnv1a, fnv1a);
});
