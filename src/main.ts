#!/usr/bin/env node
/**
 * Entry point: `node dist/main.js …` (SPEC 2). Everything lives in src/cli/main-cli.ts; this file
 * holds the lifecycle signals first (src/cli/process-signals.ts), loads the rest, and sets the exit
 * code, so the process ends on its own once servers and timers are closed.
 */
import { ProcessSignals } from './cli/process-signals.js';

// SIGHUP, SIGTERM and SIGINT are held from the first moment, before the rest of the program loads
// (issue 11 item 9): `run` handles them once it has started, the other commands get them back.
const signals = new ProcessSignals();

import('./cli/main-cli.js')
  .then(({ main }) => main(process.argv.slice(2), signals))
  .then(
    (exitCode) => {
      process.exitCode = exitCode;
    },
    (error: unknown) => {
      process.stderr.write(`fatal: ${(error as Error)?.stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
