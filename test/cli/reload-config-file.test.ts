/**
 * A reload reads the config file only when it is a regular file (src/cli/run-proxy.ts
 * `reloadOnHangup`, src/config/load-config.ts `isRegularFileRequired`): a FIFO put at the config's
 * path would block the serving process at SIGHUP until someone wrote to it. At start-up a FIFO is
 * read as any file is (test/integration/log-rotation.test.ts starts the proxy from one).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../../src/config/config.js';
import { reloadOnHangup } from '../../src/cli/run-proxy.js';
import { MAX_CONFIGURED_FILE_BYTES } from '../../src/config/regular-file.js';
import type { SignalSource } from '../../src/process/process-signals.js';

test('SIGHUP with a FIFO at the config path is rejected at once, without reading it; a regular file after it is applied', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'reload-config-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const configFile = join(dir, 'env.ini');
  execFileSync('mkfifo', [configFile]);
  const applied: Config[] = [];
  const log: string[] = [];
  const signals = new EventEmitter();
  const stop = reloadOnHangup(configFile, (config) => (applied.push(config), { kept: 0, added: 1, removed: 0, warnings: [] }), (line) => log.push(line), signals as unknown as SignalSource);
  t.after(stop);

  signals.emit('SIGHUP'); // a blocking read would hang here, with no writer on the FIFO
  assert.deepEqual(log, [`reload rejected, still serving the previous config: config file '${configFile}' is not a regular file (a FIFO or a device is read at start-up only)`]);
  assert.equal(applied.length, 0);

  rmSync(configFile);
  writeFileSync(configFile, '[proxy.a]\npath = /\npass = http://127.0.0.1:9\n');
  signals.emit('SIGHUP');
  assert.equal(applied.length, 1, `got ${JSON.stringify(log)}`);
  assert.equal(log[1], `reloaded ${configFile}: 1 route(s); upstreams kept 0, added 1, removed 0`);

  // Over 4 MiB: refused before it is read (a break test's 200 MB config held every listener 5.5 s).
  truncateSync(configFile, MAX_CONFIGURED_FILE_BYTES + 1);
  signals.emit('SIGHUP');
  assert.equal(log[2], `reload rejected, still serving the previous config: config file '${configFile}' is over ${MAX_CONFIGURED_FILE_BYTES} bytes (4 MiB), the largest config file read`);
  assert.equal(applied.length, 1);
});
