/**
 * Reading a file a config line names (a `tls_cert` pair, `tls_ca`, `tls_client_cert`, `[acme]
 * directory_ca`), and the config file itself: at start-up, by `--check`, and by a SIGHUP in the
 * serving process, where a read that blocks, never ends or takes seconds would stop every
 * listener. So only a regular file of at most {@link MAX_CONFIGURED_FILE_BYTES} is read: a FIFO
 * (opened without blocking), a device such as `/dev/zero`, or a file too large is refused with an
 * errno-like code, as a file that cannot be opened is. The config file at start-up may also be a
 * FIFO (`--config <(…)`): `readBoundedFile` reads it to the same limit.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/**
 * The largest file read: 4 MiB, for the config file and every file it names (a system CA bundle
 * is about 200 KiB; a config of 40,000 routes fits). A break test's 200 MB config held a reload,
 * and every listener, for 5.5 s.
 */
export const MAX_CONFIGURED_FILE_BYTES = 4 * 1024 * 1024;

/**
 * The bytes of the regular file `file`.
 * @throws the open(2) error (ENOENT, EACCES…), or an Error with `code` EISDIR, ENOTREG (not a regular
 *   file: a FIFO, a device) or EFBIG (over MAX_CONFIGURED_FILE_BYTES)
 */
export function readRegularFile(file: string): Buffer {
  const maxBytes = MAX_CONFIGURED_FILE_BYTES;
  const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stats = fstatSync(fd);
    if (stats.isDirectory()) throw Object.assign(new Error(`'${file}' is a directory`), { code: 'EISDIR' });
    if (!stats.isFile()) throw Object.assign(new Error(`'${file}' is not a regular file`), { code: 'ENOTREG' });
    if (stats.size > maxBytes) throw Object.assign(new Error(`'${file}' is over ${maxBytes} bytes`), { code: 'EFBIG' });
    const bytes = Buffer.alloc(stats.size);
    let read = 0;
    while (read < bytes.length) {
      const count = readSync(fd, bytes, read, bytes.length - read, read);
      if (count === 0) break;
      read += count;
    }
    return bytes.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}

/**
 * The bytes of `file`, whatever it is (a FIFO waits for its writer), read to at most
 * MAX_CONFIGURED_FILE_BYTES: the config file at start-up, before anything is served.
 * @throws the open(2) or read(2) error (ENOENT, EACCES, EISDIR…), or an Error with `code` EFBIG
 *   once more than MAX_CONFIGURED_FILE_BYTES came
 */
export function readBoundedFile(file: string): Buffer {
  const fd = openSync(file, constants.O_RDONLY);
  try {
    const pieces: Buffer[] = [];
    let total = 0;
    const buffer = Buffer.allocUnsafe(64 * 1024);
    for (;;) {
      const count = readSync(fd, buffer, 0, buffer.length, null);
      if (count === 0) return Buffer.concat(pieces, total);
      total += count;
      if (total > MAX_CONFIGURED_FILE_BYTES) throw Object.assign(new Error(`'${file}' is over ${MAX_CONFIGURED_FILE_BYTES} bytes`), { code: 'EFBIG' });
      pieces.push(Buffer.from(buffer.subarray(0, count)));
    }
  } finally {
    closeSync(fd);
  }
}
