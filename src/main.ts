#!/usr/bin/env node
/**
 * Entry point: `node dist/main.js …` (SPEC 2). Everything lives in src/cli/main-cli.ts; this file
 * only sets the exit code, so the process ends on its own once servers and timers are closed.
 */
import { main } from './cli/main-cli.js';

main(process.argv.slice(2)).then(
  (exitCode) => {
    process.exitCode = exitCode;
  },
  (error: unknown) => {
    process.stderr.write(`fatal: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
