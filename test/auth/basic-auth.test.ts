/**
 * basic-auth.ts: RFC 7617 parsing (strict and total), the challenge string, and the authenticator's
 * behaviour: right/wrong/unknown credentials, the dummy check for unknown names, the cache of
 * successes, shared concurrent checks, and 1 000 seeded malformed headers that never throw.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  BasicAuthenticator,
  checkUserName,
  MAX_AUTHORIZATION_LENGTH,
  MAX_CREDENTIALS_BYTES,
  parseBasicAuthorization,
} from '../../src/auth/basic-auth.js';
import { hashPassword, parsePasswordHash, verifyPasswordAsync, type PasswordHash } from '../../src/auth/password-hash.js';
import type { AuthUser } from '../../src/config/config.js';
import { ConfigValueError } from '../../src/errors.js';
import { seededRandom } from '../helpers/seeded-random.js';

const place = { file: 'env.ini', line: 7, column: 13 };
const basic = (text: string): string => `Basic ${Buffer.from(text).toString('base64')}`;


describe('parseBasicAuthorization', () => {
  const valid: [string, string, string][] = [
    // [header, user, password]
    ['Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==', 'Aladdin', 'open sesame'], // RFC 7617 section 2
    ['Basic dGVzdDoxMjPCow==', 'test', '123£'], // RFC 7617 section 2.1, UTF-8
    ['basic dG9tOjEyMw==', 'tom', '123'],
    ['BASIC dG9tOjEyMw==', 'tom', '123'],
    ['Basic    dG9tOjEyMw==', 'tom', '123'],
    [' Basic dG9tOjEyMw== ', 'tom', '123'],
    [basic('tom:a:b:c'), 'tom', 'a:b:c'],
    [basic('tom:'), 'tom', ''],
    [basic(':secret'), '', 'secret'],
    [basic('ünïcødé:пароль ✓'), 'ünïcødé', 'пароль ✓'],
  ];
  for (const [header, user, password] of valid) {
    it(`decodes ${JSON.stringify(header)}`, () => {
      const got = parseBasicAuthorization(header);
      assert.deepEqual(got, { user, password }, `got ${JSON.stringify(got)}, want ${JSON.stringify({ user, password })}`);
    });
  }

  const invalid: [string, string | undefined][] = [
    ['missing header', undefined],
    ['empty', ''],
    ['scheme only', 'Basic'],
    ['scheme and space', 'Basic '],
    ['other scheme', 'Bearer dG9tOjEyMw=='],
    ['scheme prefix', 'Basicx dG9tOjEyMw=='],
    ['no space', 'BasicdG9tOjEyMw=='],
    ['tab instead of space', 'Basic\tdG9tOjEyMw=='],
    ['two tokens', 'Basic dG9tOjEyMw== dG9tOjEyMw=='],
    ['auth-params', 'Basic realm="x"'],
    ['missing padding', 'Basic dG9tOjEyMw'],
    ['too much padding', 'Basic dG9tOjEyMw==='],
    ['padding in the middle', 'Basic dG9t=OjEyMw='],
    ['base64url alphabet', `Basic ${Buffer.from('tom:>>>???').toString('base64url')}`],
    ['stray bits', 'Basic dG9tOjEyMx=='],
    ['no colon', basic('tom123')],
    ['invalid UTF-8', `Basic ${Buffer.from([0x74, 0x3a, 0xff, 0xfe]).toString('base64')}`],
    ['control character in password', basic('tom:12\n3')],
    ['NUL in user', basic('to\u0000m:123')],
    ['huge', basic(`tom:${'x'.repeat(MAX_AUTHORIZATION_LENGTH)}`)],
  ];
  for (const [name, header] of invalid) {
    it(`gives undefined for ${name}`, () => {
      const got = parseBasicAuthorization(header);
      assert.equal(got, undefined, `got ${JSON.stringify(got)}, want undefined`);
    });
  }

  it('accepts exactly up to MAX_AUTHORIZATION_LENGTH characters', () => {
    const longest = basic(`tom:${'x'.repeat(MAX_CREDENTIALS_BYTES - 4)}`);
    assert.ok(longest.length <= MAX_AUTHORIZATION_LENGTH, `got length ${longest.length}, want ≤ ${MAX_AUTHORIZATION_LENGTH}`);
    assert.notEqual(parseBasicAuthorization(longest), undefined, 'got undefined for the longest allowed credentials, want them');
    const tooLong = basic(`tom:${'x'.repeat(MAX_CREDENTIALS_BYTES - 3)}`);
    assert.ok(tooLong.length > MAX_AUTHORIZATION_LENGTH, `got length ${tooLong.length}, want > ${MAX_AUTHORIZATION_LENGTH}`);
    assert.equal(parseBasicAuthorization(tooLong), undefined, 'got credentials one byte over the limit, want undefined');
  });

  it('never throws on non-string input', () => {
    for (const value of [null, 42, ['Basic dG9tOjEyMw=='], {}]) {
      assert.equal(parseBasicAuthorization(value as unknown as string), undefined, `got credentials for ${JSON.stringify(value)}, want undefined`);
    }
  });
});

describe('checkUserName', () => {
  it('accepts ordinary names and refuses empty, colon, whitespace, control, ; # "', () => {
    for (const name of ['tom', 'alice.smith', 'bob@example.com', 'ünïcødé', 'a-b_c']) {
      assert.equal(checkUserName(name), undefined, `got "${checkUserName(name)}" for ${name}, want undefined`);
    }
    for (const name of ['', 'to:m', 'to m', 'tom\t', 'to\u0001m', ';tom', '#tom', 'to"m']) {
      assert.equal(typeof checkUserName(name), 'string', `got undefined for ${JSON.stringify(name)}, want a reason`);
    }
  });
});

describe('BasicAuthenticator', () => {
  const tomHash = hashPassword('123');
  const aliceHash = hashPassword('wonder:land');
  const users: AuthUser[] = [
    { name: 'tom', hash: tomHash, place },
    { name: 'alice', hash: aliceHash, place },
  ];

  /** verifyPasswordAsync, counting its calls and recording the hashes it was asked about. */
  function countingVerify() {
    const calls: PasswordHash[] = [];
    const verify = (password: string, hash: PasswordHash): Promise<boolean> => {
      calls.push(hash);
      return verifyPasswordAsync(password, hash);
    };
    return { calls, verify };
  }

  it('challenges with Basic realm="REALM", charset="UTF-8", escaping " and \\', () => {
    assert.equal(new BasicAuthenticator('web1', users).challenge(), 'Basic realm="web1", charset="UTF-8"');
    const tricky = new BasicAuthenticator('say "hi" \\ bye', users).challenge();
    assert.equal(tricky, 'Basic realm="say \\"hi\\" \\\\ bye", charset="UTF-8"', `got ${tricky}`);
  });

  it('accepts the right credentials and refuses wrong password, unknown user and none', async () => {
    const auth = new BasicAuthenticator('r', users);
    assert.equal(await auth.check(basic('tom:123')), true, 'tom:123: got false, want true');
    assert.equal(await auth.check(basic('alice:wonder:land')), true, 'alice: got false, want true');
    assert.equal(await auth.check(basic('tom:1234')), false, 'wrong password: got true, want false');
    assert.equal(await auth.check(basic('alice:123')), false, "tom's password for alice: got true, want false");
    assert.equal(await auth.check(basic('Tom:123')), false, 'names are case-sensitive: got true, want false');
    assert.equal(await auth.check(basic('bob:123')), false, 'unknown user: got true, want false');
    assert.equal(await auth.check(undefined), false, 'no header: got true, want false');
  });

  it('checks an unknown name against a dummy hash with the same parameters (one scrypt run, like a known name)', async () => {
    const { calls, verify } = countingVerify();
    const auth = new BasicAuthenticator('r', users, { verify });
    assert.equal(await auth.check(basic('mallory:123')), false, 'got true, want false');
    assert.equal(calls.length, 1, `got ${calls.length} verifications for an unknown name, want 1`);
    const dummy = calls[0]!;
    const tom = parsePasswordHash(tomHash) as PasswordHash;
    assert.notEqual(dummy.text, tomHash, 'got a real user hash, want the dummy');
    assert.deepEqual(
      [dummy.cost, dummy.blockSize, dummy.parallelization, dummy.salt.length, dummy.key.length],
      [tom.cost, tom.blockSize, tom.parallelization, tom.salt.length, tom.key.length],
      'got other dummy parameters, want those of the users',
    );
  });

  it('does not run scrypt for a malformed header', async () => {
    const { calls, verify } = countingVerify();
    const auth = new BasicAuthenticator('r', users, { verify });
    assert.equal(await auth.check('Basic !!!'), false, 'got true, want false');
    assert.equal(calls.length, 0, `got ${calls.length} verifications, want 0`);
  });

  it('remembers successes, not failures', async () => {
    const { calls, verify } = countingVerify();
    const auth = new BasicAuthenticator('r', users, { verify });
    for (let i = 0; i < 3; i++) assert.equal(await auth.check(basic('tom:123')), true, `check ${i}: got false, want true`);
    assert.equal(calls.length, 1, `got ${calls.length} scrypt runs for 3 right checks, want 1`);
    for (let i = 0; i < 3; i++) assert.equal(await auth.check(basic('tom:nope')), false, `wrong ${i}: got true, want false`);
    assert.equal(calls.length, 4, `got ${calls.length} scrypt runs after 3 wrong checks, want 4`);
  });

  it('evicts the least recently used success when the cache is full', async () => {
    const { calls, verify } = countingVerify();
    const auth = new BasicAuthenticator('r', users, { verify, cacheSize: 1 });
    await auth.check(basic('tom:123'));
    await auth.check(basic('alice:wonder:land')); // evicts tom
    await auth.check(basic('alice:wonder:land')); // hit
    assert.equal(calls.length, 2, `got ${calls.length} runs, want 2`);
    assert.equal(await auth.check(basic('tom:123')), true, 'got false, want true');
    assert.equal(calls.length, 3, `got ${calls.length} runs after tom was evicted, want 3`);
  });

  it('shares one scrypt run among identical concurrent checks', async () => {
    const { calls, verify } = countingVerify();
    const auth = new BasicAuthenticator('r', users, { verify });
    const results = await Promise.all(Array.from({ length: 6 }, () => auth.check(basic('tom:123'))));
    assert.deepEqual(results, [true, true, true, true, true, true], `got ${results}, want all true`);
    assert.equal(calls.length, 1, `got ${calls.length} runs for 6 concurrent checks, want 1`);
  });

  it('refuses everyone when there are no users', async () => {
    const auth = new BasicAuthenticator('r', []);
    assert.equal(await auth.check(basic('tom:123')), false, 'got true, want false');
  });

  it('throws ConfigValueError at the line for a malformed hash, a bad name, or a repeated name', () => {
    const cases: [AuthUser[], RegExp][] = [
      [[{ name: 'tom', hash: '123', place }], /^env\.ini:7:13: auth_user 'tom': malformed password hash/],
      [[{ name: 'to m', hash: tomHash, place }], /^env\.ini:7:13: user name 'to m' contains whitespace/],
      [[users[0]!, { ...users[1]!, name: 'tom' }], /^env\.ini:7:13: auth_user 'tom' is given twice/],
    ];
    for (const [list, message] of cases) {
      assert.throws(() => new BasicAuthenticator('r', list), (error: unknown) => {
        assert.ok(error instanceof ConfigValueError, `got ${String(error)}, want ConfigValueError`);
        assert.match(error.message, message);
        return true;
      });
    }
  });

  it('1 000 seeded malformed Authorization headers never throw and never authenticate', async () => {
    const random = seededRandom(20240617);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const randomBytes = (length: number): Buffer => Buffer.from(Array.from({ length }, () => Math.floor(random() * 256)));
    const base64Alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const generators: (() => string)[] = [
      // random bytes as a header value (latin1, as node:http would hand them over)
      () => randomBytes(Math.floor(random() * 64)).toString('latin1'),
      // a wrong or mangled scheme with tom's real credentials
      () => `${pick(['Bearer', 'Digest', 'Basicx', 'Basi', 'B asic', 'Negotiate', '', 'Basic\t', 'Basic,'])} ${Buffer.from('tom:123').toString('base64')}`,
      // bad base64: a random character outside the alphabet, or broken padding
      () => {
        const token = 'dG9tOjEyMw=='.split(''); // tom:123; the padding is kept, so '=' lands mid-token
        token.splice(Math.floor(random() * (token.length - 2)), 1, pick(['!', '-', '_', '*', '.', ' ', '=', '\u00e9', '%']));
        return `Basic ${token.join('')}`;
      },
      () => `Basic ${Buffer.from('tom:123').toString('base64').replace(/=+$/, '')}${'='.repeat(pick([1, 3, 4]))}`,
      () => `Basic ${Array.from({ length: 1 + Math.floor(random() * 40) }, () => pick(base64Alphabet.split(''))).join('')}=`,
      // valid base64 without a colon
      () => `Basic ${Buffer.from(`tom${Math.floor(random() * 1e6)}`).toString('base64')}`,
      // invalid UTF-8 with a colon
      () => `Basic ${Buffer.concat([Buffer.from('tom:'), Buffer.from([0xc0 + Math.floor(random() * 32)]), Buffer.from('x')]).toString('base64')}`,
      // huge: tom's right credentials padded past 4 KiB
      () => basic('tom:123'.padEnd(MAX_CREDENTIALS_BYTES + 1 + Math.floor(random() * 10000), 'x')),
      () => `Basic ${'A'.repeat(MAX_AUTHORIZATION_LENGTH + Math.floor(random() * 100))}`,
    ];
    const { calls, verify } = countingVerify();
    const auth = new BasicAuthenticator('r', users, { verify });
    for (let i = 0; i < 1000; i++) {
      const header = generators[i % generators.length]!();
      let parsedCredentials: unknown;
      assert.doesNotThrow(() => (parsedCredentials = parseBasicAuthorization(header)), `case ${i}: threw on ${JSON.stringify(header)}`);
      assert.equal(parsedCredentials, undefined, `case ${i}: got ${JSON.stringify(parsedCredentials)} for ${JSON.stringify(header.slice(0, 80))}, want undefined`);
      assert.equal(await auth.check(header), false, `case ${i}: check got true for ${JSON.stringify(header.slice(0, 80))}, want false`);
    }
    assert.equal(calls.length, 0, `got ${calls.length} scrypt runs for malformed headers, want 0`);
  });
});
