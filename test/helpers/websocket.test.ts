/**
 * The WebSocket test kit on its own (client ↔ echo server, no proxy), so a failing tunnel test can
 * blame the proxy and not the kit: RFC 6455's worked examples for the accept value and frames, the
 * incremental decoder fed byte by byte, and real sockets for text, binary, 48 KiB, 1 000 in-order
 * messages, a first message in the handshake packet, ping, half-close and the closing handshake.
 */
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  acceptValueFor,
  connectWebSocket,
  encodeFrame,
  FrameDecoder,
  Opcode,
  startEchoServer,
  WebSocketHandshakeError,
  WebSocketProtocolError,
  type EchoServer,
} from './websocket.js';

const hex = (bytes: Buffer): string => bytes.toString('hex');

describe('handshake and frame codec (RFC 6455 examples)', () => {
  it('computes the accept value of section 1.3', () => {
    const got = acceptValueFor('dGhlIHNhbXBsZSBub25jZQ==');
    assert.equal(got, 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=', `got ${got}, want s3pPLMBiTxaQ9kYGzzhZRbK+xOo=`);
  });

  // Section 5.7 examples: [name, opcode, payload, mask, expected bytes]
  const examples: [string, number, Buffer, Buffer | undefined, string][] = [
    ['unmasked "Hello"', Opcode.text, Buffer.from('Hello'), undefined, '810548656c6c6f'],
    ['masked "Hello"', Opcode.text, Buffer.from('Hello'), Buffer.from('37fa213d', 'hex'), '818537fa213d7f9f4d5158'],
    ['unmasked ping "Hello"', Opcode.ping, Buffer.from('Hello'), undefined, '890548656c6c6f'],
    ['256 bytes binary (16-bit length)', Opcode.binary, Buffer.alloc(256), undefined, `827e0100${'00'.repeat(256)}`],
    ['64 KiB binary (64-bit length)', Opcode.binary, Buffer.alloc(65536), undefined, `827f0000000000010000${'00'.repeat(65536)}`],
  ];
  for (const [name, opcode, payload, mask, bytes] of examples) {
    it(`encodes and decodes ${name}`, () => {
      const encoded = encodeFrame(opcode, payload, { mask: mask ?? false });
      assert.equal(hex(encoded), bytes, `got ${hex(encoded).slice(0, 40)}…, want ${bytes.slice(0, 40)}…`);
      const frames = new FrameDecoder().push(encoded);
      assert.equal(frames.length, 1, `got ${frames.length} frames, want 1`);
      assert.deepEqual(
        [frames[0]!.opcode, frames[0]!.isFinal, frames[0]!.isMasked, hex(frames[0]!.payload)],
        [opcode, true, mask !== undefined, hex(payload)],
        'got another frame back',
      );
    });
  }

  it('decodes frames fed one byte at a time, across 7-, 16- and 64-bit lengths, masked and not', () => {
    const payloads = [Buffer.from('a'), Buffer.alloc(125, 1), Buffer.alloc(126, 2), Buffer.alloc(65535, 3), Buffer.alloc(65536, 4), Buffer.alloc(0)];
    const stream = Buffer.concat(payloads.map((payload, i) => encodeFrame(Opcode.binary, payload, { mask: i % 2 === 0 })));
    const decoder = new FrameDecoder();
    const frames = [];
    for (let i = 0; i < stream.length; i++) frames.push(...decoder.push(stream.subarray(i, i + 1)));
    assert.deepEqual(frames.map((frame) => frame.payload.length), payloads.map((payload) => payload.length), 'got other payload lengths');
    assert.ok(frames.every((frame, i) => frame.payload.equals(payloads[i]!)), 'got other payload bytes');
    assert.equal(decoder.bufferedBytes, 0, `got ${decoder.bufferedBytes} bytes left over, want 0`);
  });

  it('rejects reserved bits, oversized control frames, and 64-bit lengths beyond 2^53', () => {
    const bad = [
      Buffer.from('c100', 'hex'), // RSV1
      encodeFrame(Opcode.ping, Buffer.alloc(126)),
      encodeFrame(Opcode.close, Buffer.alloc(2), { isFinal: false }),
      Buffer.from('827fffffffffffffffff', 'hex'),
    ];
    for (const bytes of bad) {
      assert.throws(() => new FrameDecoder().push(bytes), WebSocketProtocolError, `got no error for ${hex(bytes).slice(0, 20)}`);
    }
  });
});

describe('client ↔ echo server', () => {
  let server: EchoServer;
  before(async () => {
    server = await startEchoServer();
  });
  after(async () => {
    await server.close();
  });

  it('echoes text and binary messages with their opcodes, and passes the request head to the server', async () => {
    const client = await connectWebSocket(server.port, '/chat?room=1', { headers: { 'X-Test': 'yes' } });
    client.send('hello ✓');
    client.send(Buffer.from([0, 1, 2, 255]));
    const text = await client.nextMessage();
    const binary = await client.nextMessage();
    assert.deepEqual([text.opcode, text.text], [Opcode.text, 'hello ✓'], `got ${text.opcode} ${text.text}`);
    assert.deepEqual([binary.opcode, hex(binary.data)], [Opcode.binary, '000102ff'], `got ${binary.opcode} ${hex(binary.data)}`);
    const connection = server.connections.at(-1)!;
    assert.equal(connection.url, '/chat?room=1', `got url ${connection.url}`);
    assert.equal(connection.headers['x-test'], 'yes', `got x-test ${connection.headers['x-test']}, want yes`);
    await client.close();
  });

  it('echoes a 48 KiB message intact', async () => {
    const client = await connectWebSocket(server.port, '/');
    const big = Buffer.alloc(48 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
    client.send(big);
    const echoed = await client.nextMessage();
    assert.equal(echoed.data.length, big.length, `got ${echoed.data.length} bytes, want ${big.length}`);
    assert.ok(echoed.data.equals(big), 'got other bytes back');
    await client.close();
  });

  it('keeps 1 000 interleaved text and binary messages in order', async () => {
    const client = await connectWebSocket(server.port, '/');
    const sent = Array.from({ length: 1000 }, (_, i) => (i % 2 === 0 ? `message ${i}` : Buffer.from(`binary ${i}`)));
    for (const message of sent) client.send(message);
    for (const [i, message] of sent.entries()) {
      const got = await client.nextMessage();
      const want = typeof message === 'string' ? message : message.toString();
      const wantOpcode = typeof message === 'string' ? Opcode.text : Opcode.binary;
      assert.deepEqual([got.opcode, got.text], [wantOpcode, want], `message ${i}: got ${got.opcode} ${got.text}, want ${wantOpcode} ${want}`);
    }
    assert.equal(server.connections.at(-1)!.messagesReceived, 1000, 'got another count on the server, want 1000');
    await client.close();
  });

  it('delivers a first message sent in the same packet as the handshake (node:http `head`)', async () => {
    const client = await connectWebSocket(server.port, '/', { firstMessage: 'early bird' });
    const got = await client.nextMessage();
    assert.equal(got.text, 'early bird', `got ${got.text}, want early bird`);
    const headBytes = server.connections.at(-1)!.headBytes;
    assert.ok(headBytes > 0, `got ${headBytes} head bytes on the server, want > 0 (the frame arrived with the handshake)`);
    await client.close();
  });

  it('answers pings with pongs', async () => {
    const client = await connectWebSocket(server.port, '/');
    client.ping('are you there');
    client.send('after the ping');
    await client.nextMessage();
    assert.deepEqual(client.pongs.map(String), ['are you there'], `got pongs ${client.pongs.map(String)}`);
    await client.close();
  });

  it('half-close: after the client ends, the server still echoes, then both sides close', async () => {
    const client = await connectWebSocket(server.port, '/');
    client.send('last words');
    client.end();
    const got = await client.nextMessage();
    assert.equal(got.text, 'last words', `got ${got.text}, want last words`);
    await client.closed;
    const connection = server.connections.at(-1)!;
    await connection.closed;
    assert.equal(connection.hasEnded, true, 'got hasEnded false on the server, want true');
    assert.equal(client.closeCode, undefined, `got close code ${client.closeCode}, want none (no close frame on a half-close)`);
  });

  it('closing handshake: the server echoes the close code and both sockets close', async () => {
    const client = await connectWebSocket(server.port, '/');
    await client.close(4001);
    assert.equal(client.closeCode, 4001, `got close code ${client.closeCode}, want 4001`);
    await server.connections.at(-1)!.closed;
    assert.equal(server.openSocketCount, 0, `got ${server.openSocketCount} open sockets on the server, want 0`);
    await assert.rejects(client.nextMessage(), /connection closed/);
  });

  it('refuses an upgrade without a valid key with 400, which the client reports with its status', async () => {
    const rejectedBefore = server.rejectedCount;
    await assert.rejects(
      connectWebSocket(server.port, '/', { headers: { 'Sec-WebSocket-Version': '8' } }),
      (error: unknown) => error instanceof WebSocketHandshakeError && error.statusCode === 400,
    );
    assert.equal(server.rejectedCount, rejectedBefore + 1, `got ${server.rejectedCount} rejections, want ${rejectedBefore + 1}`);
  });
});

describe('connectWebSocket against servers that do not upgrade', () => {
  const answers: [string, (response: ServerResponse) => void, number, string][] = [
    ['200 with Content-Length', (response) => response.writeHead(200, { 'Content-Length': '5' }).end('plain'), 200, 'plain'],
    ['426 chunked', (response) => {
        response.writeHead(426, { Upgrade: 'websocket' });
        response.write('upgrade '); // a body in two writes, no length: chunked
        response.end('required');
      }, 426, 'upgrade required'],
  ];
  for (const [name, answer, status, body] of answers) {
    it(`reports ${name} as a WebSocketHandshakeError with status and body`, async () => {
      const plain = createServer((_request, response) => answer(response));
      // No 'upgrade' listener: node:http hands the upgrade request to the request handler.
      await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = plain.address() as AddressInfo;
        await assert.rejects(connectWebSocket(port, '/'), (error: unknown) => {
          assert.ok(error instanceof WebSocketHandshakeError, `got ${String(error)}, want WebSocketHandshakeError`);
          assert.deepEqual([error.statusCode, error.body], [status, body], `got ${error.statusCode} ${JSON.stringify(error.body)}`);
          const framing = error.headers['transfer-encoding'] ?? `content-length ${error.headers['content-length']}`;
          assert.equal(framing, name.includes('chunked') ? 'chunked' : 'content-length 5', `got framing ${framing}`);
          return true;
        });
      } finally {
        plain.closeAllConnections();
        await new Promise((resolve) => plain.close(resolve));
      }
    });
  }
});
