/**
 * The log sinks as specifications (src/log/log-sink.ts): a stream whose reader went away or fell
 * behind drops lines (and says so once) instead of throwing or buffering without bound; a log file
 * drops what a full disk refuses, and reopens at its path after a rename, keeping the old descriptor
 * when the path cannot be opened.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, renameSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSink, MAX_BACKLOG_BYTES, StreamSink } from '../../src/log/log-sink.js';

/** A writable whose writes complete only when `release()` is called: a reader that is alive but slow. */
function slowStream(): { stream: Writable; release(): void } {
  const pending: (() => void)[] = [];
  const stream = new Writable({
    highWaterMark: 16 * 1024,
    write(_chunk, _encoding, callback) {
      pending.push(callback);
    },
  });
  return {
    stream,
    release: () => {
      while (pending.length > 0) pending.shift()!();
    },
  };
}

test('StreamSink: a reader that falls behind by more than MAX_BACKLOG_BYTES gets no more lines, one warning, then a count when it catches up', async () => {
  const { stream, release } = slowStream();
  const warnings: string[] = [];
  const sink = new StreamSink('stdout', stream, (line) => warnings.push(line));
  const line = `${'x'.repeat(1023)}\n`;
  let written = 0;
  while (sink.write(line)) written++;
  // Lines are taken while at most 1 MiB waits: 1024 lines of 1 KiB, and the one that goes past it.
  assert.equal(written, MAX_BACKLOG_BYTES / 1024 + 1, `got ${written} lines accepted, want ${MAX_BACKLOG_BYTES / 1024 + 1}`);
  assert.equal(sink.write(line), false, 'got a line accepted while behind, want it dropped');
  assert.equal(warnings.length, 1, `got ${JSON.stringify(warnings)}, want one warning`);
  assert.match(warnings[0]!, /^stdout: the reader is not keeping up/);

  // The reader takes everything: writes flow again, and the warning says how many were dropped.
  for (let i = 0; i < 2000 && stream.writableLength > 0; i++) {
    release();
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(sink.write(line), true, 'got the line dropped after the reader caught up, want it written');
  assert.deepEqual(warnings.slice(1), ['stdout: the reader caught up; 2 line(s) were dropped']);
});

test('StreamSink: print (a command\'s output) is never dropped for a slow reader, only after a failure', () => {
  const { stream } = slowStream();
  const sink = new StreamSink('stdout', stream, (line) => assert.fail(`unexpected warning: ${line}`));
  assert.equal(sink.print('x'.repeat(2 * MAX_BACKLOG_BYTES)), true);
  assert.equal(sink.print('configuration file env.ini is valid\n'), true, 'got the last line of a long output dropped, want it kept');
  assert.equal(stream.writableLength, 2 * MAX_BACKLOG_BYTES + 36);
});

test('StreamSink: after EPIPE nothing throws, every later line is dropped, and one warning is given', () => {
  const stream = new Writable({ write: (_chunk, _encoding, callback) => callback() });
  const warnings: string[] = [];
  const sink = new StreamSink('stderr', stream, (line) => warnings.push(line));
  assert.equal(sink.write('before\n'), true);
  stream.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
  stream.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
  assert.equal(sink.write('after\n'), false, 'got a line accepted after EPIPE, want it dropped');
  assert.deepEqual(warnings, ['stderr: EPIPE; its lines are dropped from now on (counted in proxy_log_lines_dropped_total)']);
});

test('StreamSink: the warning about its own failure may come back to the same sink without looping', () => {
  const stream = new Writable({ write: (_chunk, _encoding, callback) => callback() });
  const written: boolean[] = [];
  const sink: StreamSink = new StreamSink('stderr', stream, (line) => written.push(sink.write(`${line}\n`)));
  sink.write('a log line\n');
  stream.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
  assert.deepEqual(written, [false], 'got the warning written to the failed sink, want it dropped once');
});

test('FileSink: a full disk (/dev/full) drops each line with one warning, and never throws', { skip: !existsSync('/dev/full') && 'no /dev/full here' }, () => {
  const warnings: string[] = [];
  const sink = new FileSink('/dev/full', (line) => warnings.push(line));
  assert.equal(sink.write('one\n'), false);
  assert.equal(sink.write('two\n'), false);
  assert.deepEqual(warnings, ['/dev/full: write failed (ENOSPC); dropping lines until writes succeed again (counted in proxy_log_lines_dropped_total)']);
  sink.close();
});

test('StreamSink: a reader that leaves a command early (`--check | head -1`) drops the rest of its output without a warning', () => {
  const stream = new Writable({ write: (_chunk, _encoding, callback) => callback() });
  const sink = new StreamSink('stdout', stream, (line) => assert.fail(`got a warning: ${line}`));
  assert.equal(sink.print('first line\n'), true);
  stream.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
  assert.equal(sink.print('second line\n'), false);
});

test('FileSink: a line cut by a short write on a full disk is ended before the next line, so the lines after it still parse (found by a break test)', () => {
  const path = join(mkdtempSync(join(tmpdir(), 'proxy-sink-')), 'access.log');
  let isFull = false;
  const warnings: string[] = [];
  const sink = new FileSink(path, (line) => warnings.push(line), (fd, bytes, offset) => {
    if (!isFull) return writeSync(fd, bytes, offset);
    if (offset > 0) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    return writeSync(fd, bytes, offset, 10); // the disk fills after 10 bytes of this line
  });
  assert.equal(sink.write('first line\n'), true);
  isFull = true;
  assert.equal(sink.write('second line, cut\n'), false);
  isFull = false;
  assert.equal(sink.write('third line\n'), true);
  assert.deepEqual(readFileSync(path, 'utf8').split('\n'), ['first line', 'second lin', 'third line', '']);
  assert.equal(warnings.length, 2, `got warnings ${JSON.stringify(warnings)}, want the failure and the recovery`);
  sink.close();
});

test('FileSink: a line a non-blocking pipe took only part of (EAGAIN) is finished before the next line, and lines that come while it cannot be are dropped whole, so every line read is whole, also at close (a break test: lines over 4 KiB reached a slow FIFO reader cut)', () => {
  const path = join(mkdtempSync(join(tmpdir(), 'proxy-sink-')), 'access.log');
  let room = Infinity; // bytes the "pipe" takes before EAGAIN
  const sink = new FileSink(path, () => {}, (fd, bytes, offset) => {
    if (room === 0) throw Object.assign(new Error('EAGAIN: resource temporarily unavailable'), { code: 'EAGAIN' });
    const length = Math.min(room, bytes.length - offset);
    room -= length;
    return writeSync(fd, bytes, offset, length);
  });
  room = 6;
  assert.equal(sink.write('a long line\n'), true, 'part of it is in, the rest is owed: not dropped');
  assert.equal(sink.write('dropped while the rest is owed\n'), false);
  room = Infinity;
  assert.equal(sink.write('next\n'), true);
  assert.deepEqual(readFileSync(path, 'utf8').split('\n'), ['a long line', 'next', '']);
  room = 0;
  assert.equal(sink.write('no room at all\n'), false, 'EAGAIN before any byte: the line is dropped whole, as before');
  room = Infinity;
  assert.equal(sink.write('last\n'), true);
  assert.deepEqual(readFileSync(path, 'utf8').split('\n'), ['a long line', 'next', 'last', '']);
  room = 3;
  assert.equal(sink.write('owed at close\n'), true);
  room = Infinity;
  sink.close(); // one more try at the rest before the descriptor goes
  assert.deepEqual(readFileSync(path, 'utf8').split('\n'), ['a long line', 'next', 'last', 'owed at close', '']);
});

test('FileSink: reopen after a rename writes the next line to a new file at the path, as logrotate expects', () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-log-sink-'));
  const path = join(dir, 'access.log');
  const sink = new FileSink(path, (line) => assert.fail(`unexpected warning: ${line}`));
  assert.equal(sink.write('before rotation\n'), true);
  renameSync(path, `${path}.1`);
  assert.equal(sink.write('still the old file\n'), true);
  assert.equal(sink.reopen(), true);
  assert.equal(sink.write('after rotation\n'), true);
  sink.close();
  assert.equal(readFileSync(`${path}.1`, 'utf8'), 'before rotation\nstill the old file\n');
  assert.equal(readFileSync(path, 'utf8'), 'after rotation\n');
  assert.equal(sink.write('after close\n'), false, 'got a line accepted after close, want it dropped');
});

test('FileSink: a reopen that fails (its directory is gone) warns once and keeps writing to the old file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-log-sink-'));
  mkdirSync(join(dir, 'logs'));
  const path = join(dir, 'logs', 'access.log');
  const warnings: string[] = [];
  const sink = new FileSink(path, (line) => warnings.push(line));
  renameSync(join(dir, 'logs'), join(dir, 'old-logs'));
  assert.equal(sink.reopen(), false);
  assert.deepEqual(warnings, [`${path}: cannot reopen (ENOENT); still writing to the file opened before`]);
  assert.equal(sink.write('kept\n'), true);
  sink.close();
  assert.equal(readFileSync(join(dir, 'old-logs', 'access.log'), 'utf8'), 'kept\n');
});

test('FileSink: a FIFO at the path never blocks — without a reader it is refused at once (ENXIO); with one (/dev/stdout in a container) a line the reader cannot take now is dropped, not waited for; at a reopen the old file keeps the lines (a break test: open(2) waited for a reader, and the whole process with it)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-log-sink-'));
  const path = join(dir, 'access.log');
  execFileSync('mkfifo', [path]);
  assert.throws(() => new FileSink(path, () => {}), { code: 'ENXIO' });
  const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK); // a reader that reads only when told
  const warnings: string[] = [];
  try {
    const sink = new FileSink(path, (line) => warnings.push(line));
    assert.equal(sink.write('first\n'), true);
    const buffer = Buffer.alloc(1 << 20);
    assert.equal(buffer.toString('latin1', 0, readSync(reader, buffer)), 'first\n');
    const line = `${'x'.repeat(1023)}\n`;
    const written = Array.from({ length: 200 }, () => sink.write(line)); // 200 KiB into a 64 KiB pipe that nobody reads
    assert.ok(written.includes(false), 'a full pipe drops lines instead of blocking');
    assert.match(warnings[0] ?? '', /write failed \(EAGAIN\); dropping lines until writes succeed again/);
    while (readSync(reader, buffer) === buffer.length); // the reader catches up
    assert.equal(sink.write('after\n'), true);
    assert.match(warnings.at(-1) ?? '', /writing again after \d+ dropped line\(s\) \(EAGAIN\)/);
    sink.close();
  } finally {
    closeSync(reader);
  }
  const filePath = join(dir, 'file.log');
  const reopenWarnings: string[] = [];
  const sink = new FileSink(filePath, (line) => reopenWarnings.push(line));
  renameSync(filePath, `${filePath}.1`);
  execFileSync('mkfifo', [filePath]);
  assert.equal(sink.reopen(), false);
  assert.deepEqual(reopenWarnings, [`${filePath}: cannot reopen (ENXIO, a FIFO without a reader or a socket (for a pipe or the journal, write access_log = stdout)); still writing to the file opened before`]);
  assert.equal(sink.write('kept\n'), true);
  sink.close();
  assert.equal(readFileSync(`${filePath}.1`, 'utf8'), 'kept\n');
  const devNull = new FileSink('/dev/null', (warning) => assert.fail(`unexpected warning: ${warning}`));
  assert.equal(devNull.write('gone\n'), true, 'a character device such as /dev/null is taken');
  devNull.close();
});
