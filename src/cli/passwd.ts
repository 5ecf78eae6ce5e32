/**
 * `node dist/main.js passwd NAME`: reads a password and prints the `auth_user` line to paste into a
 * route of env.ini (SPEC 2), the counterpart of Apache's `htpasswd` for nginx's `auth_basic_user_file`.
 *
 *     $ node dist/main.js passwd tom
 *     Password:
 *     Retype password:
 *     auth_user = tom:$scrypt$N=16384,r=8,p=1$…$…
 *
 * From a terminal the password is typed twice with echo off (raw mode); from a pipe
 * (`echo secret | node dist/main.js passwd tom`) the first line is the password, asked once, so
 * scripts can use it. Prompts go to stderr, the line to stdout, so `>> env.ini` captures only the line.
 * The hash is scrypt with a random salt (src/auth/password-hash.ts).
 */
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { checkUserName, MAX_CREDENTIALS_BYTES } from '../auth/basic-auth.js';
import { hashPassword } from '../auth/password-hash.js';
import { UsageError } from '../errors.js';

/** Where `runPasswd` gets the password; the CLI passes `readPasswordFromTerminal`, tests a fake. */
export interface PasswdIo {
  /** Resolves to the password (without the line ending); rejects with UsageError when none can be read. */
  readPassword(): Promise<string>;
}

/**
 * Validates `name`, reads a password and hashes it into the line `auth_user = NAME:HASH`, which the
 * CLI prints to stdout.
 *
 * @returns the line, without a newline.
 * @throws UsageError (exit code 2) for a bad name (empty, or containing `:`, whitespace, a control
 *   character, `;`, `#` or `"`), before any password is read; for an empty password, one with a
 *   control character (RFC 7617 forbids them, so it could never log in), or one so long that the
 *   credentials would not fit in a 4 KiB Authorization header; or whatever `readPassword` rejects with.
 */
export async function runPasswd(name: string, io: PasswdIo): Promise<string> {
  const badName = checkUserName(name);
  if (badName !== undefined) throw new UsageError(`passwd NAME: ${badName}`);
  const password = await io.readPassword();
  if (password === '') throw new UsageError('empty password');
  if (/[\u0000-\u001f\u007f]/.test(password)) throw new UsageError('password contains a control character');
  if (Buffer.byteLength(`${name}:${password}`) > MAX_CREDENTIALS_BYTES) {
    throw new UsageError(`name and password are longer than ${MAX_CREDENTIALS_BYTES} bytes together`);
  }
  return `auth_user = ${name}:${hashPassword(password)}`;
}

/** The CLI's password source: `createPasswordReader(process.stdin, process.stderr)`. */
export function readPasswordFromTerminal(): Promise<string> {
  return createPasswordReader(process.stdin, process.stderr)();
}

/** A stream the password can come from: process.stdin, or a fake with `isTTY` and `setRawMode` in tests. */
export type PasswordInput = Readable & { readonly isTTY?: boolean; setRawMode?(isRaw: boolean): unknown };

/**
 * A `readPassword` for any streams: when `input` is a terminal (`isTTY` and `setRawMode`), prompts on
 * `prompt` with echo off and asks twice; otherwise reads the first line of `input` (a trailing `\r`
 * is dropped). Rejects with UsageError when the two entries differ, on Ctrl-C or Ctrl-D, or when the
 * input ends before any byte.
 */
export function createPasswordReader(input: PasswordInput, prompt: { write(text: string): unknown }): () => Promise<string> {
  return async () => {
    if (input.isTTY !== true || input.setRawMode === undefined) return readFirstLine(input);
    const password = await readHidden(input, prompt, 'Password: ');
    const again = await readHidden(input, prompt, 'Retype password: ');
    if (password !== again) throw new UsageError('passwords do not match');
    return password;
  };
}

/** Reads bytes up to the first LF (or the end), decodes them as UTF-8, and pauses the stream. */
function readFirstLine(input: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let byteCount = 0;
    const finish = (): void => {
      input.off('data', onData);
      input.off('end', onEnd);
      input.off('error', onError);
      input.pause();
    };
    const onData = (chunk: Buffer | string): void => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      const newline = bytes.indexOf(0x0a);
      chunks.push(newline < 0 ? bytes : bytes.subarray(0, newline));
      byteCount += bytes.length;
      if (newline >= 0) {
        finish();
        resolve(withoutCarriageReturn(Buffer.concat(chunks).toString('utf8')));
      }
    };
    const onEnd = (): void => {
      finish();
      if (byteCount === 0) reject(new UsageError('no password on standard input'));
      else resolve(withoutCarriageReturn(Buffer.concat(chunks).toString('utf8')));
    };
    const onError = (error: Error): void => {
      finish();
      reject(error);
    };
    input.on('data', onData);
    input.on('end', onEnd);
    input.on('error', onError);
    input.resume();
  });
}

function withoutCarriageReturn(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

/**
 * Prompts, then reads one line in raw mode so nothing is echoed: Enter ends it, Backspace/Delete
 * removes the last character, Ctrl-C and Ctrl-D (on an empty line) abort, other control
 * characters are ignored. Raw mode is switched off again however it ends.
 */
function readHidden(input: PasswordInput, prompt: { write(text: string): unknown }, question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const decoder = new StringDecoder('utf8');
    let typed: string[] = [];
    const finish = (): void => {
      input.off('data', onData);
      input.off('end', onEnd);
      input.setRawMode?.(false);
      input.pause();
      prompt.write('\n');
    };
    const onData = (chunk: Buffer | string): void => {
      const text = typeof chunk === 'string' ? chunk : decoder.write(chunk);
      const characters = [...text];
      for (const [index, character] of characters.entries()) {
        if (character === '\r' || character === '\n') {
          finish();
          // A paste can hold both entries: give what follows Enter back for the next prompt.
          let rest = characters.slice(index + 1).join('');
          if (character === '\r' && rest.startsWith('\n')) rest = rest.slice(1); // CRLF is one Enter
          if (rest !== '') input.unshift(Buffer.from(rest));
          resolve(typed.join(''));
          return;
        }
        if (character === '\u0003' || (character === '\u0004' && typed.length === 0)) {
          finish();
          reject(new UsageError('no password given'));
          return;
        }
        if (character === '\u007f' || character === '\b') typed = typed.slice(0, -1);
        else if (character >= ' ') typed.push(character);
      }
    };
    const onEnd = (): void => {
      finish();
      reject(new UsageError('no password given'));
    };
    prompt.write(question);
    input.setRawMode?.(true);
    input.on('data', onData);
    input.on('end', onEnd);
    input.resume();
  });
}
