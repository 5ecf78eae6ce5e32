/**
 * A file a config line names is read only when it is a regular file of bounded size
 * (src/config/regular-file.ts): a FIFO or a device read at SIGHUP would block the serving process
 * (a break test froze both listeners with a FIFO as `tls_cert`, and `/dev/zero` grew `--check` past
 * 1 GB).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_CONFIGURED_FILE_BYTES, readBoundedFile, readRegularFile } from '../../src/config/regular-file.js';

/** The error code `read` throws for `file` (default readRegularFile), or undefined when it reads it. */
const codeOf = (file: string, read: (file: string) => Buffer = readRegularFile): string | undefined => {
  try {
    read(file);
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code;
  }
};

test('readRegularFile: a regular file is read whole; a FIFO (without blocking), a device, a directory, a file over the limit and a missing one are refused with a code', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'regular-file-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const pem = join(dir, 'a.pem');
  writeFileSync(pem, '-----BEGIN CERTIFICATE-----\n');
  assert.equal(readRegularFile(pem).toString('latin1'), '-----BEGIN CERTIFICATE-----\n');
  const fifo = join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  const big = join(dir, 'big.pem');
  writeFileSync(big, '');
  truncateSync(big, MAX_CONFIGURED_FILE_BYTES + 1);
  assert.deepEqual(
    [codeOf(fifo), codeOf('/dev/zero'), codeOf(dir), codeOf(big), codeOf(join(dir, 'missing.pem'))],
    ['ENOTREG', 'ENOTREG', 'EISDIR', 'EFBIG', 'ENOENT'],
  );
});

test('readBoundedFile: a FIFO is read as its writer writes, up to the limit; a larger file or stream is refused with EFBIG', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bounded-file-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const fifo = join(dir, 'env.ini');
  execFileSync('mkfifo', [fifo]);
  const writer = spawn('sh', ['-c', `printf '[proxy.a]\\n' > '${fifo}'`]);
  t.after(() => writer.kill());
  assert.equal(readBoundedFile(fifo).toString('latin1'), '[proxy.a]\n');
  const big = join(dir, 'big.ini');
  writeFileSync(big, '');
  truncateSync(big, MAX_CONFIGURED_FILE_BYTES + 1);
  assert.deepEqual(
    [big, '/dev/zero', dir, join(dir, 'missing.ini')].map((file) => codeOf(file, readBoundedFile)),
    ['EFBIG', 'EFBIG', 'EISDIR', 'ENOENT'],
  );
  truncateSync(big, MAX_CONFIGURED_FILE_BYTES);
  assert.equal(readBoundedFile(big).length, MAX_CONFIGURED_FILE_BYTES, 'a file of exactly the limit is read');
});
