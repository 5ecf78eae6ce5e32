/**
 * src/cli/passwd.ts: `passwd NAME` turns a password into an `auth_user` line whose hash verifies and
 * that a BasicAuthenticator accepts once "pasted" (split at the first colon, as the config loader
 * does); bad names and passwords are usage errors; the password is read from a pipe (first line) or
 * a terminal (raw mode, twice).
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { BasicAuthenticator } from '../../src/auth/basic-auth.js';
import { parsePasswordHash, verifyPassword } from '../../src/auth/password-hash.js';
import { createPasswordReader, runPasswd, type PasswordInput } from '../../src/cli/passwd.js';
import { UsageError } from '../../src/errors.js';

const place = { file: 'env.ini', line: 1, column: 1 };

describe('runPasswd', () => {
  it('prints auth_user = NAME:HASH whose hash verifies and works when pasted into a route', async () => {
    const line = await runPasswd('tom', { readPassword: async () => 'p@ss: wörd' });
    const match = /^auth_user = (tom):(\$scrypt\$\S+)$/.exec(line);
    assert.ok(match !== null, `got ${JSON.stringify(line)}, want "auth_user = tom:$scrypt$…"`);
    const value = line.slice('auth_user = '.length);
    const colon = value.indexOf(':');
    const [name, hashText] = [value.slice(0, colon), value.slice(colon + 1)];
    const hash = parsePasswordHash(hashText);
    assert.equal(typeof hash, 'object', `got "${String(hash)}", want a parsed hash`);
    if (typeof hash === 'string') return;
    assert.equal(verifyPassword('p@ss: wörd', hash), true, 'got false for the typed password, want true');
    assert.equal(verifyPassword('p@ss: word', hash), false, 'got true for another password, want false');
    const auth = new BasicAuthenticator('r', [{ name, hash: hashText, place }]);
    const header = `Basic ${Buffer.from('tom:p@ss: wörd').toString('base64')}`;
    assert.equal(await auth.check(header), true, 'got false from the authenticator, want true');
  });

  it('refuses bad names before reading a password', async () => {
    for (const name of ['', 'to:m', 'to m', 'tom\n', '#tom', ';tom', 'to"m']) {
      let wasRead = false;
      const readPassword = async () => {
        wasRead = true;
        return 'x';
      };
      await assert.rejects(runPasswd(name, { readPassword }), UsageError, `got no UsageError for ${JSON.stringify(name)}`);
      assert.equal(wasRead, false, `got a password read for bad name ${JSON.stringify(name)}, want none`);
    }
  });

  it('refuses an empty password, a control character, and credentials too long for a 4 KiB header', async () => {
    for (const password of ['', 'a\u0007b', 'x'.repeat(4000)]) {
      await assert.rejects(runPasswd('tom', { readPassword: async () => password }), UsageError, `got no UsageError for a ${password.length}-character password`);
    }
  });
});

/** A fake terminal: a stream with isTTY and a recorded setRawMode. */
function fakeTerminal(): { input: PassThrough & PasswordInput; rawModes: boolean[]; prompt: { text: string; write(text: string): void } } {
  const rawModes: boolean[] = [];
  const input = Object.assign(new PassThrough(), {
    isTTY: true,
    setRawMode(isRaw: boolean) {
      rawModes.push(isRaw);
    },
  });
  const prompt = {
    text: '',
    write(text: string) {
      prompt.text += text;
    },
  };
  return { input, rawModes, prompt };
}

describe('createPasswordReader', () => {
  it('reads the first line of a pipe, dropping CR, across chunks', async () => {
    const input = new PassThrough();
    const prompt = { write: () => assert.fail('got a prompt on a pipe, want none') };
    input.write('sec');
    input.write('ret £\r\nsecond line\n');
    assert.equal(await createPasswordReader(input, prompt)(), 'secret £', 'got another first line');
  });

  it('reads a pipe without a final newline, and refuses an empty pipe', async () => {
    const input = new PassThrough();
    input.end('no-newline');
    assert.equal(await createPasswordReader(input, { write() {} })(), 'no-newline');
    const empty = new PassThrough();
    empty.end();
    await assert.rejects(createPasswordReader(empty, { write() {} })(), UsageError, 'got no UsageError for an empty pipe');
  });

  it('on a terminal prompts twice on the prompt stream with echo off, handling Backspace', async () => {
    const { input, rawModes, prompt } = fakeTerminal();
    const reading = createPasswordReader(input, prompt)();
    input.write('ab');
    input.write('x\u007fc\r'); // typo corrected with Backspace
    input.write('abc\r');
    assert.equal(await reading, 'abc', 'got another password');
    assert.equal(prompt.text, 'Password: \nRetype password: \n', `got prompts ${JSON.stringify(prompt.text)}`);
    assert.deepEqual(rawModes, [true, false, true, false], `got raw modes ${rawModes}, want on/off twice`);
  });

  it('on a terminal takes both entries from one pasted chunk (CRLF counts as one Enter)', async () => {
    const { input, prompt } = fakeTerminal();
    const reading = createPasswordReader(input, prompt)();
    input.write('pässword\r\npässword\r\n');
    assert.equal(await reading, 'pässword', 'got another password');
  });

  it('on a terminal refuses two different entries, and Ctrl-C, leaving raw mode off', async () => {
    const mismatch = fakeTerminal();
    const reading = createPasswordReader(mismatch.input, mismatch.prompt)();
    mismatch.input.write('one\rtwo\r');
    await assert.rejects(reading, /passwords do not match/);
    const interrupted = fakeTerminal();
    const aborted = createPasswordReader(interrupted.input, interrupted.prompt)();
    interrupted.input.write('sec\u0003');
    await assert.rejects(aborted, UsageError);
    assert.deepEqual(interrupted.rawModes, [true, false], `got raw modes ${interrupted.rawModes}, want on then off`);
  });
});
