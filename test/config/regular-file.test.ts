/**
 * A file a config line names is read only when it is a regular file of bounded size
 * (src/config/regular-file.ts): a FIFO or a device read at SIGHUP would block the serving process
 * (a break test froze both listeners with a FIFO as `tls_cert`, and `/dev/zero` grew `--check` past
 * 1 GB).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_CONFIGURED_FILE_BYTES, readRegularFile } from '../../src/config/regular-file.js';

const codeOf = (file: string): string | undefined => {
  try {
    readRegularFile(file);
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
