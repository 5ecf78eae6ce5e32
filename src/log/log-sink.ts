/**
 * Log destinations that never stop the proxy (SPEC 2: a log destination that fails — a closed pipe,
 * a full disk — never stops the proxy from serving; the lines are dropped and one warning is written
 * where it can be). `write` never throws: it returns false when the text was dropped, and its caller
 * counts the line (`proxy_log_lines_dropped_total`, src/log/process-log.ts). Nothing here buffers
 * without bound.
 *
 * - `StreamSink` writes to process.stdout or process.stderr. Node writes to a pipe or a socket
 *   asynchronously and queues what the reader has not taken yet, so a reader that is alive but slow
 *   would make that queue grow without end: while more than `MAX_BACKLOG_BYTES` wait, new lines are
 *   dropped. The first write error (EPIPE: the reader went away, as `| head -1` or a restarted
 *   journald do; ENOSPC) ends the destination for the life of the process: a closed pipe does not
 *   open again, and nothing can reopen a descriptor the process was started with.
 * - `FileSink` appends to a file with one write(2) per line on its own descriptor (O_APPEND, so the
 *   lines of several workers never interleave), as nginx writes its access log. A failed write
 *   (ENOSPC: the disk is full) drops that line and the next one is tried again, so the log resumes by
 *   itself once there is room; a line cut by a short write is ended before the next one, so every
 *   line that follows still parses. `reopen()` opens the path anew (after logrotate renamed the file) and
 *   keeps the old descriptor when that fails, as nginx does on SIGUSR1.
 *
 * Where this differs from nginx: nginx's log descriptors are blocking, so a slow pipe reader stalls
 * its worker; we drop lines instead, because a proxy whose event loop waits for its log reader stops
 * serving. A log file is written synchronously by both (a stalled disk stalls both).
 */
import { closeSync, constants, fstatSync, openSync, writeSync } from 'node:fs';
import type { Writable } from 'node:stream';

/** The most bytes a StreamSink lets wait for a slow reader before it drops new lines: 1 MiB. */
export const MAX_BACKLOG_BYTES = 1024 * 1024;

/** Where a warning about a destination goes: the error log (which may itself be the failed one). */
export type Warn = (line: string) => void;

/** write(2) of `bytes` from `offset` on; returns how many were written. */
export type WriteBytes = (fd: number, bytes: Buffer, offset: number) => number;

/** One log destination. */
export interface LogSink {
  /** `stdout`, `stderr`, or the file's path: what warnings call it. */
  readonly name: string;
  /** Writes `text` (whole lines, each ending in `\n`). False when it was dropped. Never throws. */
  write(text: string): boolean;
}

/** process.stdout or process.stderr as a LogSink (see the file comment). */
export class StreamSink implements LogSink {
  readonly name: string;
  readonly #stream: Writable;
  readonly #warn: Warn;
  /** The error code that ended this destination; undefined while it works. */
  #failure: string | undefined;
  /** True while lines are dropped because more than MAX_BACKLOG_BYTES wait for the reader. */
  #isBehind = false;
  #droppedWhileBehind = 0;
  /** True once a log line went through `write`: only then is a failure worth a warning (a command's reader may leave early). */
  #hasLogLines = false;

  constructor(name: string, stream: Writable, warn: Warn) {
    this.name = name;
    this.#stream = stream;
    this.#warn = warn;
    // Without a listener, an EPIPE on process.stdout is an uncaught exception that kills the process.
    stream.on('error', (error: NodeJS.ErrnoException) => this.#fail(error));
  }

  write(text: string): boolean {
    if (this.#failure !== undefined) return false;
    this.#hasLogLines = true;
    if (this.#stream.writableLength > MAX_BACKLOG_BYTES) {
      // The flag is set before warning: the warning may come back here (this is the error log).
      if (!this.#isBehind) {
        this.#isBehind = true;
        this.#warn(`${this.name}: the reader is not keeping up (over ${MAX_BACKLOG_BYTES} bytes waiting); dropping lines until it catches up`);
      }
      this.#droppedWhileBehind++;
      return false;
    }
    if (this.#isBehind) {
      this.#isBehind = false;
      const dropped = this.#droppedWhileBehind;
      this.#droppedWhileBehind = 0;
      this.#warn(`${this.name}: the reader caught up; ${dropped} line(s) were dropped`);
    }
    this.#stream.write(text);
    return true;
  }

  /**
   * Writes a command's output (`--check`'s summary, `simulate`): like `write`, but never dropped for
   * a slow reader — a command that prints and exits waits for its reader; only a failed destination
   * drops it, and a reader that left (`--check | head -1`) is no reason for a warning. Returns false
   * when dropped.
   */
  print(text: string): boolean {
    if (this.#failure !== undefined) return false;
    this.#stream.write(text);
    return true;
  }

  /** Bytes written but not yet taken by the reader (node's queue for the stream). */
  get queuedBytes(): number {
    return this.#stream.writableLength;
  }

  #fail(error: NodeJS.ErrnoException): void {
    if (this.#failure !== undefined) return;
    this.#failure = error.code ?? error.message;
    if (this.#hasLogLines) this.#warn(`${this.name}: ${this.#failure}; its lines are dropped from now on (counted in proxy_log_lines_dropped_total)`);
  }
}

/** A log file as a LogSink (see the file comment). */
export class FileSink implements LogSink {
  readonly name: string;
  readonly #warn: Warn;
  #fd: number | undefined;
  /** The error code of the last failed write while writes fail; undefined while they succeed. */
  #failure: string | undefined;
  #droppedSinceFailure = 0;
  /** A failed write left part of a line in the file: the next write starts with `\n`, so that part stays a line of its own. */
  #isLineCut = false;
  /**
   * The rest of a line a non-blocking pipe took only part of (EAGAIN after a short write: a FIFO
   * reader that is behind, and a line longer than the pipe has room for). It is written before the
   * next line, so the reader still gets whole lines; lines that come while it cannot be written
   * are dropped whole and counted (a break test: lines over 4 KiB reached a slow FIFO reader cut,
   * and the JSON did not parse).
   */
  #pendingTail: Buffer | undefined;

  readonly #writeBytes: WriteBytes;

  /**
   * Opens `path` for appending, creating it if needed.
   * @param writeBytes write(2) from `offset` on, returning the bytes written (tests inject a short write)
   * @throws the open(2) error (ENOENT, EACCES, EISDIR…), or ENOTREG (see openLogForAppending) — at
   *   start-up that is a configuration error
   */
  constructor(path: string, warn: Warn, writeBytes: WriteBytes = (fd, bytes, offset) => writeSync(fd, bytes, offset)) {
    this.name = path;
    this.#warn = warn;
    this.#writeBytes = writeBytes;
    this.#fd = openLogForAppending(path);
  }

  write(text: string): boolean {
    if (this.#fd === undefined) return false;
    const bytes = Buffer.from(this.#isLineCut ? `\n${text}` : text);
    let offset = 0;
    let isTail = this.#pendingTail !== undefined;
    try {
      if (isTail) {
        const tail = this.#pendingTail!;
        while (offset < tail.length) offset += this.#writeBytes(this.#fd, tail, offset);
        this.#pendingTail = undefined;
        isTail = false;
        offset = 0;
      }
      while (offset < bytes.length) offset += this.#writeBytes(this.#fd, bytes, offset);
      this.#isLineCut = false;
    } catch (error) {
      if (isTail) {
        this.#pendingTail = this.#pendingTail!.subarray(offset); // still owed; this line is dropped whole
      } else if (offset > 0 && (error as NodeJS.ErrnoException).code === 'EAGAIN') {
        this.#pendingTail = bytes.subarray(offset); // the pipe took part of it: the rest goes first next time
        return true;
      } else if (offset > 0) {
        this.#isLineCut = true; // a short write, then ENOSPC: the line is cut
      }
      this.#droppedSinceFailure++;
      if (this.#failure === undefined) {
        this.#failure = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
        this.#warn(`${this.name}: write failed (${this.#failure}); dropping lines until writes succeed again (counted in proxy_log_lines_dropped_total)`);
      }
      return false;
    }
    if (this.#failure !== undefined) {
      this.#warn(`${this.name}: writing again after ${this.#droppedSinceFailure} dropped line(s) (${this.#failure})`);
      this.#failure = undefined;
      this.#droppedSinceFailure = 0;
    }
    return true;
  }

  /**
   * Opens the path anew and writes there from now on (log rotation: the old file was renamed). When
   * the path cannot be opened, warns once and keeps writing to the old file (nginx keeps the old
   * descriptor). Returns true when a new file was opened.
   */
  reopen(): boolean {
    if (this.#fd === undefined) return false;
    let fd: number;
    try {
      fd = openLogForAppending(this.name);
    } catch (error) {
      this.#warn(`${this.name}: cannot reopen (${describeOpenError(error)}); still writing to the file opened before`);
      return false;
    }
    closeSync(this.#fd);
    this.#fd = fd;
    return true;
  }

  /** Closes the descriptor, after one more try at the rest of a line a pipe took only part of; later writes are dropped. */
  close(): void {
    if (this.#fd === undefined) return;
    if (this.#pendingTail !== undefined) this.write(''); // writes the rest first, when the pipe has room now
    closeSync(this.#fd);
    this.#fd = undefined;
  }
}

/**
 * Opens a log file for appending, creating it if needed, without ever blocking: a FIFO opened for
 * writing waits for a reader, and the whole process with it (at start-up, at `--check`, at the
 * SIGUSR1 that reopens it: a break test). So the path is opened with O_NONBLOCK first:
 * - a FIFO without a reader, and a socket, fail at once (ENXIO);
 * - a FIFO with a reader (`/dev/stdout` in a container) keeps that descriptor: its writes never
 *   block, and a line its reader cannot take now fails with EAGAIN and is dropped and counted
 *   like any failed write (FileSink);
 * - a regular file keeps it too (O_NONBLOCK changes nothing for a file), so the path is opened
 *   once and cannot be swapped for a FIFO between two opens;
 * - a character device (`/dev/null`, a terminal) is opened again without O_NONBLOCK, so a
 *   terminal that is slow to take output is waited for as before;
 * - anything else (a block device) is refused.
 * @returns the descriptor
 * @throws the open(2) error (ENOENT, EACCES, EISDIR, ENXIO…), or an Error with `code` ENOTREG
 */
export function openLogForAppending(path: string): number {
  const flags = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT;
  const fd = openSync(path, flags | constants.O_NONBLOCK, 0o666);
  const stats = fstatSync(fd);
  if (stats.isFIFO() || stats.isFile()) return fd;
  closeSync(fd);
  if (stats.isCharacterDevice()) return openSync(path, flags, 0o666);
  throw Object.assign(new Error('not a regular file, a FIFO or a character device'), { code: 'ENOTREG' });
}

/** The reason an open failed, for one log line: the errno code (ENOENT…), or the whole reason of ENOTREG, of ENXIO and of an error without a code. */
export function describeOpenError(error: unknown): string {
  const { code, message } = error as NodeJS.ErrnoException;
  if (code === 'ENXIO') return 'ENXIO, a FIFO without a reader or a socket (for a pipe or the journal, write access_log = stdout)';
  return code === undefined || code === 'ENOTREG' ? message : code;
}
