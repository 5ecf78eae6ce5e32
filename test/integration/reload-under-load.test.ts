/**
 * Issue 7's reload checks with the real process (`node dist/main.js`, SIGHUP): 5,000 requests at 32
 * connections while a reload adds an upstream — no request fails and the new upstream gets traffic
 * afterwards; a broken file on SIGHUP changes nothing and is logged with its file:line:column.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBackend, request, waitFor } from '../helpers/proxy-harness.js';
import { startCli } from '../helpers/built-cli.js';
import { runLoad } from './upstream-control.js';

test('SIGHUP under load adds an upstream with zero failed requests; a broken file changes nothing', async (t) => {
  const a = await startBackend();
  const b = await startBackend();
  t.after(async () => {
    await a.close();
    await b.close();
  });
  const dir = mkdtempSync(join(tmpdir(), 'proxy-reload-'));
  const file = join(dir, 'env.ini');
  const head = '[server]\nlisten = 127.0.0.1:0\naccess_log = off\n\n[proxy.app]\npath = /\n';
  writeFileSync(file, `${head}pass = ${a.url}\n`);
  const cli = await startCli(['--config', file]);
  t.after(() => cli.kill());
  const port = await cli.port;

  let requestsAtReload = 0;
  const load = await runLoad(port, {
    total: 5000,
    concurrency: 32,
    path: '/x',
    onCompleted(completed) {
      if (completed === 1500) {
        writeFileSync(file, `${head}pass = ${a.url}\npass = ${b.url}\n`);
        cli.child.kill('SIGHUP');
        requestsAtReload = b.requests.length;
      }
    },
  });
  assert.deepEqual(load.errors, [], 'no client-side failures');
  const failed = load.statuses.filter((status) => status !== 200);
  assert.equal(failed.length, 0, `got ${failed.length} non-200 answers (${[...new Set(failed)].join(', ')}), want none`);
  assert.equal(requestsAtReload, 0, 'b had no traffic before the reload');
  assert.ok(b.requests.length > 1000, `got ${b.requests.length} requests at the added upstream, want a share of the 3,500 after the reload`);
  assert.match(cli.stderr(), /reloaded .*env\.ini: 1 route\(s\); upstreams kept 1, added 1, removed 0/);

  // A broken file: rejected with its place, the running config keeps serving both upstreams.
  writeFileSync(file, `${head}pass = ${a.url}\npas = ${b.url}\n`);
  cli.child.kill('SIGHUP');
  await waitFor(() => /reload rejected/.test(cli.stderr()), 3000, 'the rejected reload to be logged');
  assert.match(cli.stderr(), /reload rejected, still serving the previous config: .*env\.ini:8:1: unknown key 'pas'.*did you mean 'pass'/);
  const before = { a: a.requests.length, b: b.requests.length };
  for (let i = 0; i < 10; i++) assert.equal((await request(port, { path: '/y' })).status, 200);
  assert.equal(a.requests.length - before.a, 5, 'round-robin over both upstreams still: a gets half');
  assert.equal(b.requests.length - before.b, 5, 'round-robin over both upstreams still: b gets half');

  cli.child.kill('SIGTERM');
  assert.equal(await cli.exited, 0);
});
