/** verification-cache.ts: bounded LRU memory of successful checks, keyed so that nothing collides. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_VERIFICATION_CACHE_SIZE, VerificationCache } from '../../src/auth/verification-cache.js';

describe('VerificationCache', () => {
  it('remembers, and keys differ whenever user, password or hash differ (no ambiguity at ":" or NUL)', () => {
    const cache = new VerificationCache();
    cache.remember(cache.keyOf('tom', '123', 'H1'));
    assert.equal(cache.has(cache.keyOf('tom', '123', 'H1')), true, 'got false for the remembered entry, want true');
    for (const [user, password, hash] of [
      ['tom', '123', 'H2'],
      ['tom', '1234', 'H1'],
      ['tom:', '123', 'H1'],
      ['to', 'm\u0000123', 'H1'],
      ['', 'tom123', 'H1'],
    ] as const) {
      assert.equal(cache.has(cache.keyOf(user, password, hash)), false, `got true for ${JSON.stringify([user, password, hash])}, want false`);
    }
  });

  it('does not keep the password in the key', () => {
    const cache = new VerificationCache();
    const key = cache.keyOf('tom', 'hunter2-secret', 'H');
    assert.doesNotMatch(key, /hunter2/, `got key ${key}, want no plain password`);
    assert.notEqual(new VerificationCache().keyOf('tom', 'hunter2-secret', 'H'), key, 'got the same key in two caches, want per-cache HMAC keys');
  });

  it(`holds at most maxEntries (default ${DEFAULT_VERIFICATION_CACHE_SIZE}), evicting the least recently used`, () => {
    const cache = new VerificationCache(3);
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => cache.keyOf(name, 'p', 'h')) as [string, string, string, string];
    cache.remember(a);
    cache.remember(b);
    cache.remember(c);
    assert.equal(cache.has(a), true, 'a: got false, want true'); // a is now the most recent
    cache.remember(d); // evicts b
    assert.deepEqual([cache.has(b), cache.has(c), cache.has(a), cache.has(d)], [false, true, true, true], 'got other survivors, want b evicted');
    assert.equal(cache.size, 3, `got size ${cache.size}, want 3`);
    const full = new VerificationCache();
    for (let i = 0; i < 1500; i++) full.remember(full.keyOf(`user${i}`, 'p', 'h'));
    assert.equal(full.size, DEFAULT_VERIFICATION_CACHE_SIZE, `got size ${full.size}, want ${DEFAULT_VERIFICATION_CACHE_SIZE}`);
  });

  it('remembers nothing with capacity 0, and forgets everything on clear()', () => {
    const none = new VerificationCache(0);
    none.remember(none.keyOf('tom', 'p', 'h'));
    assert.equal(none.size, 0, `got size ${none.size}, want 0`);
    const cache = new VerificationCache();
    cache.remember(cache.keyOf('tom', 'p', 'h'));
    cache.clear();
    assert.equal(cache.has(cache.keyOf('tom', 'p', 'h')), false, 'got true after clear, want false');
  });
});
