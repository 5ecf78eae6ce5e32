/**
 * A listener that could not be opened (`listen`, `tls_listen` or `[admin] listen`), in words for
 * the operator: a configuration error (exit 1) with one line, never a crash with a stack trace.
 * node reports it as a `listen` error in one process, and as a `bind` error in a cluster worker
 * (the primary binds the shared socket).
 */

/** What the common listen(2) and bind(2) failures mean. */
const LISTEN_FAILURES: Readonly<Record<string, string>> = {
  EADDRINUSE: 'another process listens on that address and port',
  EACCES: 'ports below 1024 need root or the CAP_NET_BIND_SERVICE capability',
  EADDRNOTAVAIL: "that address is none of this host's (see `ip addr`)",
};

/** True for node's error of a listener that could not be opened. */
export function isListenFailure(error: unknown): error is NodeJS.ErrnoException {
  const syscall = (error as NodeJS.ErrnoException | undefined)?.syscall;
  return syscall === 'listen' || syscall === 'bind';
}

/** node's message, which names the address, and what its code means. */
export function listenFailure(error: NodeJS.ErrnoException): string {
  const meaning = LISTEN_FAILURES[error.code ?? ''];
  return `${error.message}${meaning === undefined ? '' : `: ${meaning}`} (check listen, tls_listen and [admin] listen)`;
}
