/**
 * Http1Response's promise about the chunks given to `write` (src/wire/http1-response.ts, `#flush`):
 * once `write` returned true its chunks are free, so no later flush may hand them to the socket in
 * place. A fake socket that keeps every buffer by reference and never finishes a write (its queue
 * stays full) shows which bytes a slow client would get after the caller reused its buffer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { Http1Response, type ResponseConnection } from '../../src/wire/http1-response.js';

/** A socket whose writes are kept as given (views stay views) and never leave its queue. */
function heldSocket(): { socket: Socket; received: () => Buffer } {
  const kept: Buffer[] = [];
  const socket = {
    destroyed: false,
    writableNeedDrain: false,
    writableLength: 0,
    write(data: string | Buffer, encodingOrCallback?: unknown): boolean {
      kept.push(typeof data === 'string' ? Buffer.from(data, typeof encodingOrCallback === 'string' ? (encodingOrCallback as BufferEncoding) : 'utf8') : data);
      socket.writableLength += data.length; // held: a client that does not read
      return true;
    },
    cork() {},
    uncork() {},
  };
  // What the client reads once it reads: the kept buffers as they are now.
  return { socket: socket as unknown as Socket, received: () => Buffer.concat(kept) };
}

function connectionOn(socket: Socket): ResponseConnection {
  return {
    socket,
    tcpSocket: socket,
    keepAliveTimeoutMs: 0,
    strictTransportSecurity: undefined,
    isRequestBodyUnread: false,
    onContinueSent() {},
    onResponseFinished() {},
    releaseSocket: () => Buffer.alloc(0),
  };
}

for (const trailer of [undefined, 'X-Sum']) {
  test(`a chunk that write() returned true for is copied when end() ${trailer === undefined ? 'adds the last chunk' : 'adds the last chunk and trailers'} past 16 KiB, never sent from the caller's buffer, which it may reuse at once (a break test: another response's bytes at the end of a body)`, () => {
    const { socket, received } = heldSocket();
    const response = new Http1Response(connectionOn(socket), 'GET', '1.1', true);
    response.writeHead(200, ['Content-Type', 'text/plain', 'Transfer-Encoding', 'chunked', ...(trailer === undefined ? [] : ['Trailer', trailer])]);
    response.write(Buffer.alloc(20_000, 'h')); // over 16 KiB at once: in place, the head with it
    // Just under 16 KiB with its framing: queued, and free for the caller (true).
    const readBuffer = Buffer.alloc(16_384 - 10, 't');
    assert.equal(response.write(readBuffer), true);
    if (trailer !== undefined) response.addTrailers([[trailer, 'a'.repeat(100)]]);
    response.end();
    readBuffer.fill('#'); // the caller reads the next response into its buffer
    const text = received().toString('latin1');
    assert.ok(!text.includes('#'), `got ${text.split('#').length - 1} bytes of the reused buffer in the response`);
    assert.ok(text.includes(`${(16_384 - 10).toString(16)}\r\n${'t'.repeat(16_384 - 10)}\r\n0\r\n`), 'the chunk as it was written, then the last chunk');
  });
}

test('a write() over 16 KiB is sent in place, and its false says its chunks are held', () => {
  const { socket, received } = heldSocket();
  const response = new Http1Response(connectionOn(socket), 'GET', '1.1', true);
  response.writeHead(200, ['Content-Length', '20000']);
  const readBuffer = Buffer.alloc(20_000, 'b');
  assert.equal(response.write(readBuffer), false, 'held in the socket: the caller must wait for drain');
  readBuffer.fill('Y');
  assert.ok(received().toString('latin1').endsWith('Y'.repeat(20_000)), 'in place: the buffer itself went to the socket (no copy of a large body)');
});
