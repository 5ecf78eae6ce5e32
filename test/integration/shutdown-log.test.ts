/**
 * A shutdown that runs out of `shutdown_timeout` cuts what is still in flight; every request it cut
 * is still in the access log, written before the log closes (nginx logs aborted requests too).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { parseConfig } from '../../src/config/load-config.js';
import type { AccessLog, AccessLogRecord } from '../../src/gateway/access-log.js';
import { ProxyServer } from '../../src/gateway/proxy-server.js';
import { listenBackend, waitFor } from '../helpers/proxy-harness.js';
import { startEchoServer } from '../helpers/websocket.js';

test('requests and tunnels cut at shutdown_timeout are logged before the access log closes', async (t) => {
  const held: http.ServerResponse[] = [];
  const backend = await listenBackend(
    http.createServer((req, res) => {
      if (req.url === '/slow') held.push(res); // never answered
      else if (req.url === '/big') {
        res.writeHead(200, { 'Content-Length': String(64 * 1024 * 1024) });
        res.write(Buffer.alloc(4 * 1024 * 1024, 'b')); // more than the client will read
        held.push(res);
      }
    }),
  );
  t.after(async () => {
    for (const res of held) res.destroy();
    await backend.close();
  });
  const echo = await startEchoServer();
  t.after(() => echo.close());
  const config = parseConfig(`[proxy.ws]\npath = /ws\npass = http://127.0.0.1:${echo.port}\n[proxy.all]\npath = /\npass = ${backend.url}\n`, 'test.ini');
  const written: { record: AccessLogRecord; isAfterClose: boolean }[] = [];
  let isClosed = false;
  const accessLog: AccessLog = {
    isEnabled: true,
    write: (record) => written.push({ record, isAfterClose: isClosed }),
    close: async () => {
      isClosed = true;
    },
  };
  const proxy = new ProxyServer(config, { accessLog });
  const port = await proxy.listen(0, '127.0.0.1');

  const clients = ['/slow', '/big', '/slow'].map((path, i) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    if (i === 1) socket.pause(); // a client that does not read its response
    socket.write(`GET ${path} HTTP/1.1\r\nHost: h\r\n${i === 2 ? 'Content-Length: 3\r\n' : ''}\r\n${i === 2 ? 'abc' : ''}`);
    return socket;
  });
  await waitFor(() => held.length === 3, 2000, 'the three requests at the backend');
  const tunnel = net.connect(port, '127.0.0.1');
  tunnel.on('error', () => {});
  let handshake = '';
  tunnel.on('data', (chunk: Buffer) => (handshake += chunk.toString('latin1')));
  tunnel.write('GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
  clients.push(tunnel);
  await waitFor(() => handshake.startsWith('HTTP/1.1 101'), 2000, 'the tunnel');

  const isDrained = await proxy.close(200);
  assert.equal(isDrained, false, 'got a drained shutdown, want one cut at shutdown_timeout');
  const lost = written.filter((w) => w.isAfterClose).map((w) => w.record.target);
  assert.deepEqual(lost, [], `got records written after the access log closed: ${JSON.stringify(lost)}`);
  const targets = written.map((w) => w.record.target).sort();
  assert.deepEqual(targets, ['/big', '/slow', '/slow', '/ws'], `got records for ${JSON.stringify(targets)}, want all four exchanges`);
  const tunnelRecord = written.find((w) => w.record.target === '/ws')!.record;
  assert.equal(tunnelRecord.status, 101);
  assert.ok(tunnelRecord.tunnel !== undefined, 'the tunnel record carries its byte counts');
  assert.deepEqual(tunnelRecord.attempts.map((attempt) => attempt.error), ['PRX_SHUTDOWN_CUT'], 'the tunnel the cut closed says so, as a request cut then does');
  const big = written.find((w) => w.record.target === '/big')!.record;
  assert.equal(big.status, 200, 'the cut download keeps the status its head was sent with (nginx)');
  assert.ok(big.attempts[0]?.error !== undefined, `got attempts ${JSON.stringify(big.attempts)}, want the cut attempt to say how it ended`);
  const slow = written.filter((w) => w.record.target === '/slow').map((w) => w.record.attempts.map((attempt) => attempt.error));
  assert.deepEqual(slow, [['PRX_SHUTDOWN_CUT'], ['PRX_SHUTDOWN_CUT']], `got ${JSON.stringify(slow)}: a request the proxy cut is not the client's abort`);
  for (const socket of clients) socket.destroy();
});
