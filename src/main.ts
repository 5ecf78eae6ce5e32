#!/usr/bin/env node
/**
 * Entry point: `node dist/main.js …` (SPEC 2). Everything lives in src/cli/main-cli.ts; this file
 * only does what must happen before anything else, then sets the exit code, so the process ends on
 * its own once servers and timers are closed.
 *
 * First of all, a SIGUSR1 listener: without one, node answers SIGUSR1 by starting its inspector on
 * 127.0.0.1:9229, and anyone on the box who can signal the process can then run code as its user.
 * A JavaScript listener replaces node's handler (test/integration/log-rotation.test.ts checks it); ours
 * reopens the log files, as nginx's USR1. It is installed before main-cli.js and its module graph are
 * even loaded (hence the dynamic import), and never removed: without a listener SIGUSR1 would again
 * start the inspector (or end the process). Cluster workers run this file too. The standard streams'
 * sinks are made here as well, so an EPIPE on stdout or stderr is never an uncaught exception. A
 * SIGUSR1 that came while node itself was booting, before any of this ran, may have opened the
 * inspector all the same: src/cli/inspector-guard.ts closes it.
 *
 * Then SIGHUP, SIGTERM and SIGINT are held (src/cli/process-signals.ts, issue 11 item 9): `run`
 * handles them once it has started, the other commands get them back.
 */
import { logLine, reopenLogFiles, stderrSink, stdoutSink } from './log/process-log.js';
import { ProcessSignals } from './cli/process-signals.js';
import { closeSignalledInspector } from './cli/inspector-guard.js';

process.on('SIGUSR1', () => reopenLogFiles('SIGUSR1'));
const signals = new ProcessSignals();
stdoutSink();
stderrSink();
closeSignalledInspector(logLine);

const { main } = await import('./cli/main-cli.js');
main(process.argv.slice(2), signals).then(
  (exitCode) => {
    process.exitCode = exitCode;
  },
  (error: unknown) => {
    logLine(`fatal: ${(error as Error)?.stack ?? String(error)}`);
    process.exitCode = 1;
  },
);
