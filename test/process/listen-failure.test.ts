/**
 * The operator's line for a listener that could not be opened (src/process/listen-failure.ts):
 * what the errno means, and the hint to check the listen settings only where they can be the cause.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { listenFailure } from '../../src/process/listen-failure.js';

/** node's error of a listener that failed with `code`. */
function listenError(code: string): NodeJS.ErrnoException & { address: string; port: number } {
  return Object.assign(new Error(`listen ${code}`), { code, syscall: 'listen', address: '127.0.0.1', port: 8080 });
}

test('listenFailure: a taken port points at the listen settings; no file descriptor left points at the limit instead (a break test: EMFILE said to check listen)', () => {
  assert.equal(listenFailure(listenError('EADDRINUSE')), 'cannot listen on 127.0.0.1:8080: EADDRINUSE, another process listens on that address and port (check listen, tls_listen and [admin] listen)');
  assert.equal(listenFailure(listenError('EMFILE')), "cannot listen on 127.0.0.1:8080: EMFILE, this process has no file descriptor left (raise ulimit -n, systemd's LimitNOFILE)");
  assert.equal(listenFailure(listenError('ENFILE')), 'cannot listen on 127.0.0.1:8080: ENFILE, the system has no file descriptor left (fs.file-max)');
});
