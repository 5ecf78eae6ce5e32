#!/usr/bin/env node
/**
 * Entry point: `node dist/main.js …` (SPEC 2). Everything lives in src/cli/main-cli.ts; this file
 * only does what must happen before anything else, then sets the exit code, so the process ends on
 * its own once servers and timers are closed.
 *
 * First of all, the signals, before the rest of the program is even loaded (hence the dynamic
 * imports: a static one would be loaded, all of its module graph, before the first line here runs):
 *
 * - SIGHUP, SIGTERM, SIGINT and SIGQUIT are held (src/process/process-signals.ts, which imports
 *   nothing): `run` and `demo` handle them once they have started, the other commands get them back;
 * - a SIGUSR2 listener that says the signal is ignored: node's default would end the process at
 *   once, cutting every request, and nginx users send USR2 for a binary upgrade, HAProxy's for a reload;
 * - a SIGUSR1 listener: without one, node answers SIGUSR1 by starting its inspector on
 *   127.0.0.1:9229, and anyone on the box who can signal the process can then run code as its user.
 *   A JavaScript listener replaces node's handler (test/integration/log-rotation.test.ts checks it);
 *   ours reopens the log files, as nginx's USR1. It is never removed: without a listener SIGUSR1
 *   would again start the inspector (or end the process). Cluster workers run this file too.
 *
 * Then the standard streams' sinks, so an EPIPE on stdout or stderr is never an uncaught exception,
 * and the inspector guard: a SIGUSR1 that came while node itself was booting, before any of this
 * ran, may have opened the inspector all the same, and src/process/inspector-guard.ts closes it.
 */
import { ProcessSignals } from './process/process-signals.js';

const signals = new ProcessSignals();
const processLog = import('./log/process-log.js');
process.on('SIGUSR1', () => void processLog.then(({ reopenLogFiles }) => reopenLogFiles('SIGUSR1')));
process.on('SIGUSR2', () => void processLog.then(({ logLine }) => logLine(`SIGUSR2 ignored by process ${process.pid}: SIGHUP reloads the config; SIGTERM, SIGINT and SIGQUIT stop gracefully`)));

const { logLine, stderrSink, stdoutSink } = await processLog;
stdoutSink();
stderrSink();
const { closeSignalledInspector } = await import('./process/inspector-guard.js');
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
