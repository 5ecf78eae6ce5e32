/**
 * The primary's start-up line with `workers = 2` and listeners on port 0, with the built CLI: it names
 * the ports the workers actually bound, as single-process mode does (break test: it said
 * `proxy on 0.0.0.0:0`), and each named port answers its own scheme.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildCli } from '../../helpers/built-cli.js';
import { get, killAll, spawnCli, writeConfig } from '../../helpers/cli-process.js';
import { startBackend } from '../../helpers/proxy-harness.js';
import { httpsRequest, tlsCertLine } from '../../tls/https-client.js';

test('workers = 2 with listen and tls_listen on port 0: the start-up line names the ports bound', async (t) => {
  await buildCli();
  const backend = await startBackend((_req, res) => res.end('backend'));
  t.after(() => backend.close());
  const configFile = writeConfig(
    ['[server]', 'listen = 127.0.0.1:0', 'tls_listen = 127.0.0.1:0', tlsCertLine('localhost'), 'workers = 2', 'shutdown_timeout = 1s', '[proxy.all]', 'path = /', `pass = ${backend.url}`, ''].join('\n'),
  );
  const cli = await spawnCli(configFile);
  t.after(() => killAll([cli.pid]));
  const [line, httpPort, httpsPort] = await cli.line(/proxy on 127\.0\.0\.1:(\d+) \(http\) and 127\.0\.0\.1:(\d+) \(https\)/);
  assert.ok(Number(httpPort) > 0 && Number(httpsPort) > 0 && httpPort !== httpsPort, `got ${line}, want two distinct bound ports`);
  const plain = await get(Number(httpPort), '/');
  assert.equal(plain.body, 'backend', `got ${plain.status} ${plain.body} on the http port, want the backend's answer`);
  const secure = await httpsRequest(Number(httpsPort));
  assert.equal(secure.body, 'backend', `got ${secure.status} ${secure.body} on the https port, want the backend's answer`);
  cli.child.kill('SIGTERM');
  const exit = await cli.exited;
  assert.equal(exit.code, 0, `got exit ${JSON.stringify(exit)}, want code 0 after SIGTERM`);
});
