/**
 * Reading a file a config line names (a `tls_cert` pair, `tls_ca`, `tls_client_cert`, `[acme]
 * directory_ca`), and the config file itself at a reload: at start-up, by `--check`, and by a SIGHUP
 * in the serving process, where a read that blocks or never ends would stop every listener. So only
 * a regular file of at most {@link MAX_CONFIGURED_FILE_BYTES} is read (the config file: of any size):
 * a FIFO (opened without blocking), a device such as `/dev/zero`, or a file too large is refused
 * with an errno-like code, as a file that cannot be opened is.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/** The largest file a config line may name: 4 MiB (a system CA bundle is about 200 KiB). */
export const MAX_CONFIGURED_FILE_BYTES = 4 * 1024 * 1024;

/**
 * The bytes of the regular file `file`.
 * @param maxBytes the largest file read; default MAX_CONFIGURED_FILE_BYTES
 * @throws the open(2) error (ENOENT, EACCES…), or an Error with `code` EISDIR, ENOTREG (not a regular
 *   file: a FIFO, a device) or EFBIG (over `maxBytes`)
 */
export function readRegularFile(file: string, maxBytes = MAX_CONFIGURED_FILE_BYTES): Buffer {
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
