/**
 * Active-request counters through the real proxy (SPEC 3: "up when a request is dispatched and down
 * exactly once when it ends, whatever way it ends"). least-connections and power-of-two-choices read
 * these counters, so one that leaks upward starves its upstream for good. Each test watches the
 * counter go to 1 while the attempt is in flight where that can be seen, then back to 0: after a
 * success, an upstream error, a timeout, a client abort before and after the response head, and an
 * upstream that dies mid-body.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { listenBackend, request, startBackend, startRawBackend, startTestProxy, waitFor, type TestProxy } from '../helpers/proxy-harness.js';
import type { Upstream } from '../../src/upstream/upstream.js';
import { closedPort, onWholeRequest } from './upstream-control.js';

async function proxyTo(url: string, extra = ''): Promise<{ proxy: TestProxy; upstream: Upstream }> {
  const proxy = await startTestProxy(`[proxy.r]\npath = /\npass = ${url}\n${extra}`, { deps: { log: () => {} } });
  return { proxy, upstream: proxy.proxy.routes[0]!.upstreams[0]! };
}

async function backToZero(upstream: Upstream, dispatched: number): Promise<void> {
  assert.equal(upstream.requestsTotal, dispatched, `got ${upstream.requestsTotal} dispatched, want ${dispatched}`);
  await waitFor(() => upstream.activeRequests === 0, 2000, `active requests of ${upstream.origin} back to 0 (now ${upstream.activeRequests})`);
}

test('active requests: back to 0 after successes, sequential and concurrent', async (t) => {
  let release: (() => void)[] = [];
  const backend = await startBackend((req, res) => {
    if (req.url === '/held') release.push(() => res.end('held'));
    else res.end('ok');
  });
  const { proxy, upstream } = await proxyTo(backend.url);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  for (let i = 0; i < 5; i++) assert.equal((await request(proxy.port, { path: '/' })).status, 200);
  await backToZero(upstream, 5);

  const held = Array.from({ length: 8 }, () => request(proxy.port, { path: '/held' }));
  await waitFor(() => release.length === 8, 2000, '8 requests at the upstream');
  assert.equal(upstream.activeRequests, 8, `got ${upstream.activeRequests} active, want 8 while held`);
  for (const finish of release) finish();
  release = [];
  for (const res of await Promise.all(held)) assert.equal(res.status, 200);
  await backToZero(upstream, 13);
});

test('active requests: back to 0 after upstream errors (refused, reset) and a read timeout', async (t) => {
  const refused = await proxyTo(`http://127.0.0.1:${await closedPort()}`);
  const resetting = await startRawBackend((socket) => onWholeRequest(socket, () => socket.resetAndDestroy()));
  const reset = await proxyTo(resetting.url);
  const silent = await startRawBackend(() => {});
  const slow = await proxyTo(silent.url, 'read_timeout = 200ms\n');
  t.after(async () => {
    await refused.proxy.close();
    await reset.proxy.close();
    await slow.proxy.close();
    await resetting.close();
    await silent.close();
  });

  assert.equal((await request(refused.proxy.port, { path: '/' })).status, 502);
  await backToZero(refused.upstream, 1);
  assert.equal((await request(reset.proxy.port, { path: '/' })).status, 502);
  await backToZero(reset.upstream, 1);

  const timedOut = request(slow.proxy.port, { path: '/' });
  await waitFor(() => slow.upstream.activeRequests === 1, 2000, 'request in flight');
  assert.equal((await timedOut).status, 504);
  await backToZero(slow.upstream, 1);
});

test('active requests: back to 0 after a client abort before the response head and during the body', async (t) => {
  let streaming: http.ServerResponse | undefined;
  const server = http.createServer((req, res) => {
    if (req.url === '/stream') {
      streaming = res;
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.write('part of a body that never ends;');
    }
    // '/hang': never answers
  });
  const backend = await listenBackend(server);
  const { proxy, upstream } = await proxyTo(backend.url);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });

  // Before the head: the client goes away while the upstream has not answered.
  const hanging = net.connect(proxy.port, '127.0.0.1');
  hanging.on('error', () => {});
  hanging.write('GET /hang HTTP/1.1\r\nHost: h\r\n\r\n');
  await waitFor(() => upstream.activeRequests === 1, 2000, '/hang in flight');
  hanging.destroy();
  await backToZero(upstream, 1);

  // During the body: the head and some bytes reached the client, then it goes away.
  const reading = net.connect(proxy.port, '127.0.0.1');
  reading.on('error', () => {});
  let received = '';
  reading.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  reading.write('GET /stream HTTP/1.1\r\nHost: h\r\n\r\n');
  await waitFor(() => received.includes('never ends'), 2000, 'the head and first bytes at the client');
  assert.equal(upstream.activeRequests, 1, `got ${upstream.activeRequests} active while streaming, want 1`);
  reading.destroy();
  await backToZero(upstream, 2);
  assert.ok(streaming !== undefined);
  await waitFor(() => streaming!.destroyed, 2000, 'the upstream response aborted');
});

test('active requests: back to 0 after an upstream dies mid-body', async (t) => {
  const dying = await startRawBackend((socket) =>
    onWholeRequest(socket, () => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n' + 'x'.repeat(40));
      setImmediate(() => socket.destroy());
    }),
  );
  const { proxy, upstream } = await proxyTo(dying.url);
  t.after(async () => {
    await proxy.close();
    await dying.close();
  });
  await assert.rejects(request(proxy.port, { path: '/' }), 'the client must see the connection cut, not a complete response');
  await backToZero(upstream, 1);
});
