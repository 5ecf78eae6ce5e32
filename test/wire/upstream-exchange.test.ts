/**
 * The upstream exchange (src/wire/upstream-exchange.ts) over a real pooled connection: what happens
 * to the connection once a response is complete, whatever the client side does afterwards.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { EventEmitter, once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { ConnectionPool } from '../../src/wire/connection-pool.js';
import { UpstreamExchange, type BodySink } from '../../src/wire/upstream-exchange.js';

/** A sink that holds every chunk (write returns false) until `drain()`. */
class FullSink extends EventEmitter implements BodySink {
  readonly received: Buffer[] = [];
  write(chunk: Buffer): boolean {
    this.received.push(Buffer.from(chunk));
    return false;
  }
  drain(): void {
    this.emit('drain');
  }
}

test('a response complete in one read, its small chunks copied before the sink came, goes back to the pool flowing: a full sink afterwards does not pause the next request on that connection (break test: 504 after read_timeout)', async (t) => {
  // 10 chunks of 2 KiB (copied while no sink is attached) and the last chunk, in one write.
  const chunked = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${`800\r\n${'x'.repeat(0x800)}\r\n`.repeat(10)}0\r\n\r\n`;
  let connections = 0;
  const backend = net.createServer((socket) => {
    connections++;
    socket.on('error', () => {}); // the pool's close resets it
    socket.on('data', (bytes) => {
      const isChunked = bytes.toString('latin1').startsWith('GET /chunked ');
      socket.write(isChunked ? chunked : 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello');
    });
  });
  backend.listen(0, '127.0.0.1');
  await once(backend, 'listening');
  const { port } = backend.address() as AddressInfo;
  const pool = new ConnectionPool();
  t.after(() => {
    pool.close();
    backend.close();
  });
  const exchange = (target: string) =>
    new UpstreamExchange({
      pool,
      upstream: { host: '127.0.0.1', port, origin: `http://127.0.0.1:${port}` },
      method: 'GET',
      target,
      headers: ['Host', 'h'],
      body: undefined,
      isChunkedBody: false,
      connectTimeoutMs: 1000,
      readTimeoutMs: 2000,
    });

  const first = exchange('/chunked');
  assert.equal((await first.response).statusCode, 200);
  await new Promise((resolve) => setImmediate(resolve)); // the whole response is read by now
  const sink = new FullSink();
  const ended = new Promise<void>((resolve, reject) => first.streamBodyTo(sink, { onEnd: () => resolve(), onError: reject }));
  await ended;
  assert.equal(Buffer.concat(sink.received).length, 20480, 'got the wrong body length');

  // The sink is still full (no drain yet): the next request takes the same pooled connection.
  const second = exchange('/small');
  const startedAt = Date.now();
  const head = await second.response;
  const body: Buffer[] = [];
  await new Promise<void>((resolve, reject) => second.streamBodyTo({ write: (chunk) => (body.push(Buffer.from(chunk)), true), once: () => undefined }, { onEnd: () => resolve(), onError: reject }));
  assert.equal(head.statusCode, 200);
  assert.equal(Buffer.concat(body).toString(), 'hello');
  assert.ok(Date.now() - startedAt < 1000, `got the second response after ${Date.now() - startedAt} ms, want it at once`);
  assert.equal(connections, 1, `got ${connections} upstream connections, want the pooled one reused`);
  sink.drain(); // late: changes nothing for a connection that is someone else's now
});
