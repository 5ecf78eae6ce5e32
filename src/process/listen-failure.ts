/**
 * A listener that could not be opened (`listen`, `tls_listen` or `[admin] listen`), in words for
 * the operator: a configuration error (exit 1) with one line, never a crash with a stack trace.
 * node reports it as a `listen` error in one process, and as a `bind` error in a cluster worker
 * (the primary binds the shared socket).
 */
import { formatListenAddress } from '../config/values.js';

/** What the common listen(2) and bind(2) failures mean. */
const LISTEN_FAILURES: Readonly<Record<string, string>> = {
  EADDRINUSE: 'another process listens on that address and port',
  EACCES: 'ports below 1024 need root or the CAP_NET_BIND_SERVICE capability',
  EADDRNOTAVAIL: "that address is none of this host's (see `ip addr`)",
  EMFILE: "this process has no file descriptor left (raise ulimit -n, systemd's LimitNOFILE)",
  ENFILE: 'the system has no file descriptor left (fs.file-max)',
};

/** Failures that are the process's or the machine's, not the listen settings': no hint to check them. */
const RESOURCE_FAILURES = new Set(['EMFILE', 'ENFILE']);

/** True for node's error of a listener that could not be opened. */
export function isListenFailure(error: unknown): error is NodeJS.ErrnoException {
  const syscall = (error as NodeJS.ErrnoException | undefined)?.syscall;
  return syscall === 'listen' || syscall === 'bind';
}

/**
 * The one line for the operator, the same in one process and in a cluster worker (whose node error
 * says `bind EADDRINUSE 127.0.0.1:80` where one process's says `listen EADDRINUSE: address already
 * in use 127.0.0.1:80`): `cannot listen on 127.0.0.1:80: EADDRINUSE, another process listens on
 * that address and port (check listen, tls_listen and [admin] listen)`. An error without an address
 * keeps node's message.
 */
export function listenFailure(error: NodeJS.ErrnoException & { address?: string; port?: number }): string {
  const meaning = LISTEN_FAILURES[error.code ?? ''];
  const what =
    error.address === undefined || error.port === undefined || error.code === undefined
      ? error.message
      : `cannot listen on ${formatListenAddress({ host: error.address, port: error.port })}: ${error.code}`;
  const hint = RESOURCE_FAILURES.has(error.code ?? '') ? '' : ' (check listen, tls_listen and [admin] listen)';
  return `${what}${meaning === undefined ? '' : `, ${meaning}`}${hint}`;
}
