/**
 * The demo as the README runs it (SPEC 6): `node dist/main.js demo` starts web1 on :9001 (Basic
 * auth tom:123), web2 on :9002 and the proxy with the tutorial's routes. The proxy listens on a free
 * port here (the routes are the tutorial's, the listen address is not), the backends on their fixed
 * ports, as the tutorial has them.
 *
 * Everything stays on loopback unless `--listen` says otherwise. Which address a listener is bound to
 * is told apart with loopback addresses only: a socket bound to 127.0.0.1 refuses 127.0.0.2, one bound
 * to 0.0.0.0 accepts it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { request } from '../helpers/proxy-harness.js';
import { startCli } from '../helpers/built-cli.js';

/** True when something already listens on 127.0.0.1:`port` (a demo the user is running, say). */
function isPortTaken(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

test('demo: /a answers from web1 with the credentials, /b from web2, each with the client IP', async (t) => {
  if ((await isPortTaken(9001)) || (await isPortTaken(9002))) {
    t.skip('ports 9001/9002 are taken (is `npm run demo` running?): the demo backends cannot start');
    return;
  }
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-demo-')), 'env.ini');
  writeFileSync(file, '[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy]\n\n[proxy.a]\npath=/a\npass=http://localhost:9001\n\n[proxy.b]\npath=/b\npass=http://localhost:9002\n');
  const cli = await startCli(['demo', '--config', file]);
  t.after(() => cli.kill());
  const port = await cli.port;

  const web1 = await request(port, { path: '/a', headers: { Authorization: `Basic ${Buffer.from('tom:123').toString('base64')}` } });
  assert.equal(web1.status, 200);
  assert.equal(web1.body.toString(), 'web1, from ip: 127.0.0.1\n');
  const refused = await request(port, { path: '/a' });
  assert.equal(refused.status, 401, 'web1 demands credentials, and its 401 passes through');
  assert.match(String(refused.headers['www-authenticate']), /^Basic realm=/);
  const web2 = await request(port, { path: '/b' });
  assert.equal(web2.body.toString(), 'web2, from ip: 127.0.0.1\n');

  cli.child.kill('SIGINT');
  assert.equal(await cli.exited, 0, `demo exited uncleanly: ${cli.stderr()}`);
});

test('demo stays on loopback: a config listening on 0.0.0.0 is narrowed to 127.0.0.1, backends too; --listen widens the proxy only', async (t) => {
  if ((await isPortTaken(9001)) || (await isPortTaken(9002))) {
    t.skip('ports 9001/9002 are taken (is `npm run demo` running?): the demo backends cannot start');
    return;
  }
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-demo-')), 'env.ini');
  writeFileSync(file, '[server]\nlisten = 0.0.0.0:0\naccess_log = off\n[proxy]\n\n[proxy.b]\npath=/b\npass=http://localhost:9002\n');

  const narrowed = await startCli(['demo', '--config', file]);
  t.after(() => narrowed.kill());
  const port = await narrowed.port;
  assert.match(narrowed.stderr(), /proxy listening on 127\.0\.0\.1:\d+/, `got ${narrowed.stderr()}`);
  assert.match(narrowed.stderr(), /demo: the proxy listens on 127\.0\.0\.1:0, not 0\.0\.0\.0:0 .*--listen 0\.0\.0\.0:0 widens it/);
  assert.equal((await request(port, { path: '/b' })).status, 200);
  for (const [name, p] of [['proxy', port], ['web1', 9001], ['web2', 9002]] as const) {
    assert.equal(await isPortTaken(p, '127.0.0.2'), false, `got ${name} reachable on 127.0.0.2:${p}, want it bound to 127.0.0.1 only`);
  }
  narrowed.child.kill('SIGINT');
  assert.equal(await narrowed.exited, 0, `demo exited uncleanly: ${narrowed.stderr()}`);

  const widened = await startCli(['demo', '--config', file, '--listen', '0.0.0.0:0']);
  t.after(() => widened.kill());
  const widePort = await widened.port;
  assert.match(widened.stderr(), /proxy listening on 0\.0\.0\.0:\d+/, `got ${widened.stderr()}`);
  assert.match(widened.stderr(), /demo: warning: the proxy listens on 0\.0\.0\.0:0, reachable from other machines/);
  assert.equal(await isPortTaken(widePort, '127.0.0.2'), true, 'got the proxy refusing 127.0.0.2 with --listen 0.0.0.0:0, want it on every address');
  assert.equal(await isPortTaken(9001, '127.0.0.2'), false, 'got web1 widened by --listen, want the backends on 127.0.0.1');
  widened.child.kill('SIGINT');
  assert.equal(await widened.exited, 0, `demo exited uncleanly: ${widened.stderr()}`);
});

test('demo: a SIGINT during start-up is handled once it listens (exit 0, not death by the signal); SIGHUP (a closed terminal) ends it too', async (t) => {
  if ((await isPortTaken(9001)) || (await isPortTaken(9002))) {
    t.skip('ports 9001/9002 are taken (is `npm run demo` running?): the demo backends cannot start');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'proxy-demo-'));
  const config = '[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy]\n\n[proxy.b]\npath=/b\npass=http://localhost:9002\n';
  // The config is a FIFO: opening it for writing completes once the demo is reading it, in start-up.
  const fifo = join(dir, 'env.ini');
  execFileSync('mkfifo', [fifo]);
  const early = await startCli(['demo', '--config', fifo]);
  t.after(() => early.kill());
  const writer = await open(fifo, 'w');
  early.child.kill('SIGINT');
  await writer.writeFile(config);
  await writer.close();
  assert.equal(await early.exited, 0, `got exit ${early.child.signalCode ?? early.child.exitCode}, want 0: ${early.stderr()}`);
  assert.match(early.stderr(), /proxy listening on 127\.0\.0\.1:\d+[^]*SIGINT: no longer accepting connections/, 'got the demo stopped before it listened');

  const file = join(dir, 'plain.ini');
  writeFileSync(file, config);
  const hungUp = await startCli(['demo', '--config', file]);
  t.after(() => hungUp.kill());
  await hungUp.port;
  hungUp.child.kill('SIGHUP');
  assert.equal(await hungUp.exited, 0, `got exit ${hungUp.child.signalCode ?? hungUp.child.exitCode}, want 0: ${hungUp.stderr()}`);
});
