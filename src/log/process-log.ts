/**
 * The process's own log destinations, shared by everything that writes one (SPEC 2: "Logs go to
 * stderr; the access log to where `access_log` says"):
 *
 * - one StreamSink per standard stream (src/log/log-sink.ts), so the error log, an access log on
 *   `stdout`/`stderr` and the CLI's printed output all survive a reader that went away;
 * - `logLine`, the error log (stderr), which every component is handed as its `log`;
 * - the dropped-line counters behind `proxy_log_lines_dropped_total{log}` (per process; a cluster
 *   primary adds up its workers');
 * - the open log files, which SIGUSR1 reopens (nginx's USR1: after logrotate renamed a file, the next
 *   line goes to a new file at the configured path). src/main.ts installs that listener first of all.
 *
 * Warnings about a failed destination go to the error log; when stderr itself failed they are
 * dropped (and counted): we never write them into the access log, whose lines must parse.
 */
import { FileSink, StreamSink } from './log-sink.js';

/** The two logs whose dropped lines are counted: the access log and the error log (stderr). */
export type LogName = 'access' | 'error';

/**
 * Lines dropped since the process started, by log: the source of `proxy_log_lines_dropped_total`.
 * Only this module and the access log add to it.
 */
export const droppedLogLines: Record<LogName, number> = { access: 0, error: 0 };

let stdout: StreamSink | undefined;
let stderr: StreamSink | undefined;
const openFiles = new Set<FileSink>();

/** process.stdout as a sink (created on first use; src/main.ts makes it at start-up). */
export function stdoutSink(): StreamSink {
  return (stdout ??= new StreamSink('stdout', process.stdout, logLine));
}

/** process.stderr as a sink (created on first use; src/main.ts makes it at start-up). */
export function stderrSink(): StreamSink {
  return (stderr ??= new StreamSink('stderr', process.stderr, logLine));
}

/** Writes one line to the error log (stderr); a dropped line is counted under `error`. */
export function logLine(line: string): void {
  if (!stderrSink().write(`${line}\n`)) droppedLogLines.error++;
}

/**
 * Writes a command's printed result (`--help`, `--check`'s summary, `simulate`) to stdout, however
 * slowly its reader takes it. When the reader went away (`| head -1`) the rest is dropped: the
 * command still exits with its own code.
 */
export function printOutput(text: string): void {
  stdoutSink().print(text);
}

/**
 * Opens a log file for appending (an `access_log` path); SIGUSR1 reopens it until `closeLogFile`.
 * @throws the open(2) error (ENOENT, EACCES, EISDIR…)
 */
export function openLogFile(path: string): FileSink {
  const sink = new FileSink(path, logLine);
  openFiles.add(sink);
  return sink;
}

/** Closes a file opened by `openLogFile`. */
export function closeLogFile(sink: FileSink): void {
  openFiles.delete(sink);
  sink.close();
}

/** Set in a cluster primary: its workers hold the log files, so having none here is no news at SIGUSR1. */
let areLogFilesInWorkers = false;

/** A cluster primary's: the log files are its workers' (they reopen them when it tells them to). */
export function noteLogFilesInWorkers(): void {
  areLogFilesInWorkers = true;
}

/**
 * Reopens every log file of this process at its path (SIGUSR1, or the cluster primary's
 * `reopen-logs` message) and logs what it did, each line starting with `who`. A file that cannot be
 * reopened keeps its old descriptor (FileSink.reopen).
 */
export function reopenLogFiles(who: string): void {
  if (openFiles.size === 0) {
    if (!areLogFilesInWorkers) logLine(`${who}: no log file to reopen in this process (stdout and stderr need none)`);
    return;
  }
  for (const sink of openFiles) if (sink.reopen()) logLine(`${who}: reopened ${sink.name}`);
}

/**
 * How long a proxy that has shut down waits for the readers of stdout and stderr to take the log
 * lines still queued for them: 1000 ms.
 */
export const LOG_FLUSH_AT_EXIT_MS = 1000;

/**
 * Lets a proxy process that has shut down end even when a reader of stdout or stderr stalls.
 * Node writes to a pipe asynchronously, and the lines it still holds keep the process alive for as
 * long as the reader stalls: a break test's proxy said `shut down` and was still running 25 s and
 * 60 s later, and with `workers = N` every worker was killed at the deadline. A process whose
 * streams are drained ends on its own, at once, as before. One whose queue is not empty after
 * `waitMs` ends then, with its exit code; the lines still queued are lost, and stderr, when it
 * still works, says how many bytes. Only for the serving commands: a command's printed result
 * (`simulate | less`) waits for its reader as long as it takes.
 * @param waitMs default LOG_FLUSH_AT_EXIT_MS
 */
export function exitWithoutWaitingForStalledReaders(waitMs = LOG_FLUSH_AT_EXIT_MS): void {
  setTimeout(() => {
    const queued = (stdout?.queuedBytes ?? 0) + (stderr?.queuedBytes ?? 0);
    if (queued > 0) logLine(`exiting with ${queued} bytes of log lines not yet taken by the reader of stdout or stderr (it stalled); they are lost`);
    process.exit();
  }, waitMs).unref(); // the process ends before this when nothing else is left
}
