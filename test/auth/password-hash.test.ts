/**
 * password-hash.ts: scrypt hashes in the `$scrypt$N=…,r=…,p=…$salt$key` format round-trip, reject
 * wrong passwords, and malformed strings are refused by `parsePasswordHash` with a reason (what
 * `--check` prints after file:line:column).
 */
import assert from 'node:assert/strict';
import { scryptSync } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  DEFAULT_SCRYPT_PARAMETERS,
  hashPassword,
  parsePasswordHash,
  validatePasswordHash,
  verifyPassword,
  verifyPasswordAsync,
  type PasswordHash,
} from '../../src/auth/password-hash.js';

function parsed(text: string): PasswordHash {
  const hash = parsePasswordHash(text);
  if (typeof hash === 'string') assert.fail(`parsePasswordHash(${text}) got error "${hash}", want a hash`);
  return hash;
}

describe('hashPassword', () => {
  const fixedSalt = Buffer.from('0123456789abcdef');

  it('produces $scrypt$N=16384,r=8,p=1$<salt>$<key> with unpadded base64 and no INI-unsafe characters', () => {
    const text = hashPassword('123');
    assert.match(text, /^\$scrypt\$N=16384,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/, `got ${text}`);
    assert.doesNotMatch(text, /[:;#"\s]/, `got ${text}, want no ':', ';', '#', '"' or whitespace`);
  });

  it('is scrypt(password, salt, N=16384, r=8, p=1, 32 bytes), checked against node:crypto directly', () => {
    const text = hashPassword('tom-password', { salt: fixedSalt });
    const key = scryptSync('tom-password', fixedSalt, 32, { N: 16384, r: 8, p: 1 });
    const want = `$scrypt$N=16384,r=8,p=1$${fixedSalt.toString('base64').replace(/=+$/, '')}$${key.toString('base64').replace(/=+$/, '')}`;
    assert.equal(text, want, `got ${text}, want ${want}`);
  });

  it('uses a fresh random salt each time', () => {
    const first = hashPassword('same');
    const second = hashPassword('same');
    assert.notEqual(first, second, `got the same hash twice (${first}), want different salts`);
    assert.equal(parsed(first).salt.length, DEFAULT_SCRYPT_PARAMETERS.saltBytes, 'got salt length, want 16');
  });
});

describe('verifyPassword / verifyPasswordAsync', () => {
  const hash = parsed(hashPassword('correct horse £ ✓'));

  it('accepts the right password (UTF-8) and rejects wrong ones', async () => {
    assert.equal(verifyPassword('correct horse £ ✓', hash), true, 'got false for the right password, want true');
    assert.equal(await verifyPasswordAsync('correct horse £ ✓', hash), true, 'async: got false for the right password, want true');
    for (const wrong of ['', 'correct horse £', 'correct horse £ ✓ ', 'Correct horse £ ✓']) {
      assert.equal(verifyPassword(wrong, hash), false, `got true for ${JSON.stringify(wrong)}, want false`);
      assert.equal(await verifyPasswordAsync(wrong, hash), false, `async: got true for ${JSON.stringify(wrong)}, want false`);
    }
  });

  it('honours the parameters written in the hash (N=1024, r=4, p=2, 16-byte key)', () => {
    const salt = Buffer.alloc(8, 7);
    const key = scryptSync('pw', salt, 16, { N: 1024, r: 4, p: 2 });
    const text = `$scrypt$N=1024,r=4,p=2$${salt.toString('base64').replace(/=+$/, '')}$${key.toString('base64').replace(/=+$/, '')}`;
    const custom = parsed(text);
    assert.deepEqual([custom.cost, custom.blockSize, custom.parallelization], [1024, 4, 2], 'got other parameters, want 1024,4,2');
    assert.equal(verifyPassword('pw', custom), true, 'got false, want true');
    assert.equal(verifyPassword('pW', custom), false, 'got true, want false');
  });
});

describe('parsePasswordHash', () => {
  const good = hashPassword('x', { salt: Buffer.alloc(16, 1) });
  const [, , , salt = '', key = ''] = good.split('$');

  it('round-trips a hash from hashPassword', () => {
    const hash = parsed(good);
    assert.equal(hash.text, good, `got text ${hash.text}, want ${good}`);
    assert.equal(hash.key.length, 32, `got key length ${hash.key.length}, want 32`);
  });

  // [input, a fragment the reason must contain]
  const malformed: [string, string][] = [
    ['', 'malformed password hash'],
    ['123', 'malformed password hash'],
    ['plain-text-password', 'malformed password hash'],
    [`scrypt$N=16384,r=8,p=1$${salt}$${key}`, 'malformed password hash'],
    [`$scrypt$N=16384,r=8,p=1$${salt}`, 'malformed password hash'],
    [`$scrypt$N=16384,r=8,p=1$${salt}$${key}$`, 'malformed password hash'],
    [`$2y$10$${salt}$${key}`, "unsupported password hash algorithm '2y'"],
    [`$SCRYPT$N=16384,r=8,p=1$${salt}$${key}`, "unsupported password hash algorithm 'SCRYPT'"],
    [`$scrypt$ln=14,r=8,p=1$${salt}$${key}`, 'malformed scrypt parameters'],
    [`$scrypt$r=8,N=16384,p=1$${salt}$${key}`, 'malformed scrypt parameters'],
    [`$scrypt$N=16384,r=8$${salt}$${key}`, 'malformed scrypt parameters'],
    [`$scrypt$N=016384,r=8,p=1$${salt}$${key}`, 'malformed scrypt parameters'],
    [`$scrypt$N=16384,r=0,p=1$${salt}$${key}`, 'malformed scrypt parameters'],
    [`$scrypt$N=16384, r=8,p=1$${salt}$${key}`, 'malformed scrypt parameters'],
    [`$scrypt$N=-16384,r=8,p=1$${salt}$${key}`, 'malformed scrypt parameters'],
    [`$scrypt$N=16383,r=8,p=1$${salt}$${key}`, 'power of two'],
    [`$scrypt$N=1,r=8,p=1$${salt}$${key}`, 'power of two'],
    [`$scrypt$N=4294967298,r=8,p=1$${salt}$${key}`, 'power of two'],
    [`$scrypt$N=1048576,r=8,p=1$${salt}$${key}`, 'MiB'],
    [`$scrypt$N=16384,r=8,p=17$${salt}$${key}`, 'scrypt p must be 1..16'],
    [`$scrypt$N=16384,r=8,p=1$${salt}==$${key}`, 'salt is not canonical'],
    [`$scrypt$N=16384,r=8,p=1$${salt.slice(0, -1)}!$${key}`, 'salt is not canonical'],
    [`$scrypt$N=16384,r=8,p=1$$${key}`, 'salt is not canonical'],
    [`$scrypt$N=16384,r=8,p=1$AAAAAAA$${key}`, 'salt must be 8..64 bytes, got 5'],
    [`$scrypt$N=16384,r=8,p=1$${salt}$${key.slice(0, -1)}B`, 'key is not canonical'], // stray low bits
    [`$scrypt$N=16384,r=8,p=1$${salt}$${key}=`, 'key is not canonical'],
    [`$scrypt$N=16384,r=8,p=1$${salt}$${key.slice(0, 20)}`, 'key must be 16..64 bytes, got 15'],
    [`$scrypt$N=16384,r=8,p=1$${salt}$${key} `, 'key is not canonical'],
  ];
  it('validatePasswordHash gives undefined for a good hash and the same reason for a bad one', () => {
    assert.equal(validatePasswordHash(good), undefined, `got "${validatePasswordHash(good)}", want undefined`);
    assert.equal(validatePasswordHash('123'), parsePasswordHash('123'), 'got another reason than parsePasswordHash');
  });

  for (const [input, reason] of malformed) {
    it(`rejects ${JSON.stringify(input)} with "…${reason}…"`, () => {
      const result = parsePasswordHash(input);
      assert.equal(typeof result, 'string', `got a parsed hash for ${JSON.stringify(input)}, want an error message`);
      assert.ok((result as string).includes(reason), `got "${String(result)}", want it to contain "${reason}"`);
      assert.doesNotMatch(result as string, /\n/, `got a multi-line message, want one line`);
    });
  }
});
