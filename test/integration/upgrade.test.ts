/**
 * Step 5, upgrade tunnelling (SPEC 5; RFC 9110 §7.8, RFC 6455 §4) through the real proxy: WebSocket
 * messages both ways over the joined raw sockets (test/helpers/websocket.ts is the backend and the
 * client), half-close crossing the tunnel, `read_timeout` as the idle limit, non-101 answers relayed
 * without leaking the upstream socket, tunnels counted as active requests by least-connections, a
 * 101 the client never asked for turned into a 502, hop-by-hop headers of the 101 (those its
 * Connection names too) kept from the client, and upgrade requests refused exactly as any request
 * (they go through the same request path).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { Socket } from 'node:net';
import { hashPassword } from '../../src/auth/password-hash.js';
import { HALF_CLOSED_IDLE_MS } from '../../src/gateway/upgrade-tunnel.js';
import { listenBackend, rawRequest, request, startRawBackend, startTestProxy, waitFor, wholeResponses, type TestProxy } from '../helpers/proxy-harness.js';
import {
  acceptValueFor,
  connectWebSocket,
  encodeFrame,
  Opcode,
  startEchoServer,
  WebSocketHandshakeError,
  type EchoServer,
  type WebSocketClient,
} from '../helpers/websocket.js';

function routeIni(urls: readonly string[], extra = ''): string {
  return `[proxy.ws]\npath = /ws\n${urls.map((url) => `pass = ${url}\n`).join('')}${extra}`;
}

/**
 * An echo backend behind a proxy. Tunnels opened with `connect` are destroyed first by `close`:
 * ProxyServer.close() waits for upgraded sockets, which only their two ends can close.
 */
async function startEchoProxy(extra = '') {
  const echo = await startEchoServer();
  const proxy = await startTestProxy(routeIni([`http://127.0.0.1:${echo.port}`], extra));
  const clients: WebSocketClient[] = [];
  return {
    echo,
    proxy,
    async connect(path: string, options: Parameters<typeof connectWebSocket>[2] = {}): Promise<WebSocketClient> {
      const client = await connectWebSocket(proxy.port, path, options);
      clients.push(client);
      return client;
    },
    async close() {
      for (const client of clients) client.destroy();
      await proxy.close();
      await echo.close();
    },
  };
}

/** Active requests of the route's upstreams, in `pass` order. */
function activeRequests(proxy: TestProxy): number[] {
  return proxy.proxy.routes[0]!.upstreams.map((upstream) => upstream.activeRequests);
}

/**
 * A WebSocket backend the test drives by hand: it answers the handshake with a valid 101 and then
 * sends nothing on its own, keeping each upgraded socket in `sockets`. Like most servers it answers
 * a FIN by ending its side too, unless `isHoldingHalfOpen` is set. Plain requests get `name` as the
 * body. `close` destroys every connection, tunnels included.
 */
async function startManualBackend(name: string) {
  const sockets: Socket[] = [];
  const connections = new Set<Socket>();
  const server = http.createServer((_req, res) => res.end(name));
  server.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.on('close', () => connections.delete(socket));
  });
  const backend = await listenBackend(server);
  const manual = {
    ...backend,
    sockets,
    isHoldingHalfOpen: false,
    async close() {
      for (const socket of connections) socket.destroy();
      await backend.close();
    },
  };
  server.on('upgrade', (req: http.IncomingMessage, socket: Socket) => {
    socket.on('error', () => {});
    socket.on('end', () => {
      if (!manual.isHoldingHalfOpen) socket.end();
    });
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${acceptValueFor(String(req.headers['sec-websocket-key']))}\r\n\r\n`,
    );
    sockets.push(socket);
  });
  return manual;
}

test('text and binary messages cross the tunnel both ways; the backend sees the upgrade headers and X-Forwarded-For', async (t) => {
  const { echo, proxy, connect, close } = await startEchoProxy();
  t.after(close);
  const client = await connect('/ws/chat?room=1');

  client.send('hello, tunnel');
  const text = await client.nextMessage();
  assert.equal(text.opcode, Opcode.text, `got opcode ${text.opcode}, want text`);
  assert.equal(text.text, 'hello, tunnel', `got ${JSON.stringify(text.text)}, want the text echoed`);

  const binary = Buffer.from([0, 1, 2, 0xfe, 0xff, 0x80, 0x0d, 0x0a]);
  client.send(binary);
  const binaryEcho = await client.nextMessage();
  assert.equal(binaryEcho.opcode, Opcode.binary, `got opcode ${binaryEcho.opcode}, want binary`);
  assert.deepEqual(binaryEcho.data, binary, `got ${binaryEcho.data.toString('hex')}, want ${binary.toString('hex')}`);

  const big = Buffer.alloc(48 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = (i * 31 + 7) & 0xff;
  client.send(big);
  const bigEcho = await client.nextMessage();
  assert.equal(bigEcho.data.length, big.length, `got ${bigEcho.data.length} bytes, want ${big.length}`);
  assert.ok(bigEcho.data.equals(big), 'the 48 KiB message came back altered');

  client.ping('are you there');
  await waitFor(() => client.pongs.length === 1, 2000, 'the pong');
  assert.equal(client.pongs[0]!.toString(), 'are you there');

  const seen = echo.connections[0]!;
  assert.equal(echo.connectionCount, 1, `got ${echo.connectionCount} upgrades at the backend, want 1`);
  assert.equal(seen.url, '/ws/chat?room=1', `got ${seen.url}, want the target unchanged`);
  assert.match(String(seen.headers.connection), /(^|,)\s*upgrade\s*(,|$)/i, `got Connection: ${seen.headers.connection}, want upgrade`);
  assert.equal(seen.headers.upgrade, 'websocket', `got Upgrade: ${seen.headers.upgrade}, want websocket`);
  assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1', `got X-Forwarded-For: ${seen.headers['x-forwarded-for']}, want 127.0.0.1`);
  assert.equal(seen.headers['x-forwarded-proto'], 'http');
  assert.ok(seen.headers['sec-websocket-key'] !== undefined, 'Sec-WebSocket-Key must reach the backend');
  assert.equal(seen.messagesReceived, 3, `got ${seen.messagesReceived} messages at the backend, want 3`);
  assert.deepEqual(activeRequests(proxy), [1], 'an open tunnel is one active request');

  await client.close();
  await waitFor(() => proxy.logs.length === 1, 2000, 'the access log record');
  const record = proxy.logs[0]!;
  assert.equal(record.status, 101, `got status ${record.status} in the log, want 101`);
  assert.ok(record.tunnel !== undefined, 'the log record of a tunnel carries its byte counts');
  assert.equal(record.tunnel.bytesFromClient, seen.bytesReceived, `got ${record.tunnel.bytesFromClient} bytes from the client, want ${seen.bytesReceived}`);
  // What the echo server sent after its 101: three echoes, the pong and the close frame, unmasked.
  const wantFromUpstream = [
    encodeFrame(Opcode.text, 'hello, tunnel'),
    encodeFrame(Opcode.binary, binary),
    encodeFrame(Opcode.binary, big),
    encodeFrame(Opcode.pong, 'are you there'),
    encodeFrame(Opcode.close, Buffer.from([0x03, 0xe8])),
  ].reduce((sum, frame) => sum + frame.length, 0);
  assert.equal(record.tunnel.bytesFromUpstream, wantFromUpstream, `got ${record.tunnel.bytesFromUpstream} bytes from the upstream, want ${wantFromUpstream}`);
  assert.equal(record.bytesSent, wantFromUpstream, `got bytesSent ${record.bytesSent}, want the tunnel's bytes to the client`);
  assert.equal(record.attempts[0]?.status, 101);
  assert.deepEqual(activeRequests(proxy), [0], 'a closed tunnel is no longer an active request');
});

test('1,000 interleaved messages on two tunnels each arrive in order, on their own tunnel', async (t) => {
  const { echo, proxy, connect, close } = await startEchoProxy();
  t.after(close);
  const clients = await Promise.all([connect('/ws/one'), connect('/ws/two')]);
  const messageFor = (clientIndex: number, i: number): string | Buffer =>
    i % 2 === 0 ? `client ${clientIndex} message ${i} ${'x'.repeat(i % 300)}` : Buffer.from(`c${clientIndex}:${i}:`.padEnd(10 + (i % 200), '#'));

  for (let i = 0; i < 1000; i++) for (const [index, client] of clients.entries()) client.send(messageFor(index, i));
  for (const [index, client] of clients.entries()) {
    for (let i = 0; i < 1000; i++) {
      const message = await client.nextMessage();
      const want = messageFor(index, i);
      const wantText = typeof want === 'string' ? want : want.toString();
      assert.equal(message.text, wantText, `client ${index}, message ${i}: got ${JSON.stringify(message.text.slice(0, 40))}, want ${JSON.stringify(wantText.slice(0, 40))}`);
      assert.equal(message.opcode, typeof want === 'string' ? Opcode.text : Opcode.binary, `client ${index}, message ${i}: wrong opcode`);
    }
  }
  assert.deepEqual(
    echo.connections.map((c) => c.messagesReceived),
    [1000, 1000],
    'each backend connection received exactly its own 1,000 messages',
  );
});

test('a message sent in the same packet as the handshake arrives and is echoed', async (t) => {
  const { echo, proxy, connect, close } = await startEchoProxy();
  t.after(close);
  const client = await connect('/ws', { firstMessage: 'early bird' });
  const message = await client.nextMessage();
  assert.equal(message.text, 'early bird', `got ${JSON.stringify(message.text)}, want "early bird"`);
  assert.equal(echo.connections[0]!.messagesReceived, 1);

  // Binary, too, and the tunnel works normally afterwards.
  const second = await connect('/ws', { firstMessage: Buffer.from([9, 8, 7]) });
  assert.deepEqual((await second.nextMessage()).data, Buffer.from([9, 8, 7]));
  second.send('after');
  assert.equal((await second.nextMessage()).text, 'after');
});

test('half-close: the client ends its side, the backend still gets every byte and answers, then both sockets close', async (t) => {
  const { echo, proxy, connect, close } = await startEchoProxy();
  t.after(close);
  const client = await connect('/ws');
  const payloads = Array.from({ length: 50 }, (_, i) => `last words ${i} ${'y'.repeat(i * 40)}`);
  for (const payload of payloads) client.send(payload);
  client.end(); // FIN right behind the frames, no close frame

  for (const [i, payload] of payloads.entries()) {
    const message = await client.nextMessage();
    assert.equal(message.text, payload, `message ${i} after the half-close: got ${JSON.stringify(message.text.slice(0, 30))}, want ${JSON.stringify(payload.slice(0, 30))}`);
  }
  await client.ended;
  await client.closed;
  const seen = echo.connections[0]!;
  await seen.closed;
  assert.ok(seen.hasEnded, 'the backend must see the client FIN as its end');
  assert.equal(seen.messagesReceived, payloads.length, `got ${seen.messagesReceived} messages at the backend, want ${payloads.length}`);
  const wantBytes = payloads.reduce((sum, payload) => sum + encodeFrame(Opcode.text, payload, { mask: true }).length, 0);
  assert.equal(seen.bytesReceived, wantBytes, `got ${seen.bytesReceived} bytes at the backend, want ${wantBytes}`);
  await waitFor(() => proxy.logs.length === 1, 2000, 'the access log record');
  assert.deepEqual(activeRequests(proxy), [0]);
  assert.equal(echo.openSocketCount, 0, `got ${echo.openSocketCount} open sockets on the backend, want 0`);
});

test('an idle tunnel is closed after read_timeout; traffic keeps it open', async (t) => {
  const { echo, proxy, connect, close } = await startEchoProxy('read_timeout = 300ms\n');
  t.after(close);
  const client = await connect('/ws');
  let isEnded = false;
  void client.ended.then(() => (isEnded = true));

  // Messages every 100 ms for 600 ms: twice the idle limit in all, never idle for 300 ms.
  for (let i = 0; i < 6; i++) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    client.send(`tick ${i}`);
    assert.equal((await client.nextMessage()).text, `tick ${i}`);
  }
  assert.equal(isEnded, false, 'a tunnel with traffic every 100 ms must stay open under read_timeout = 300ms');

  const idleSince = Date.now(); // the last byte crossed both proxy sockets just now
  await client.ended; // the proxy closed its socket to the client
  const idleMs = Date.now() - idleSince;
  client.end();
  await client.closed;
  assert.ok(idleMs >= 250 && idleMs < 1500, `got the tunnel closed after ${idleMs}ms idle, want about 300ms`);
  await echo.connections[0]!.closed;
  await waitFor(() => proxy.logs.length === 1, 2000, 'the access log record');
  assert.deepEqual(activeRequests(proxy), [0]);
});

for (const { status, headers, body } of [
  { status: 200, headers: { 'Content-Type': 'text/plain' }, body: 'just a page, no websocket here\n' },
  { status: 426, headers: { 'Sec-WebSocket-Version': '13', 'X-Reason': 'version' }, body: 'upgrade required: wrong version\n' },
]) {
  test(`a backend answering ${status} to an upgrade request: the client gets that response and no upstream socket is left open`, async (t) => {
    const connections = new Set<Socket>();
    let upgradeRequests = 0;
    // No 'upgrade' listener: node hands the upgrade request to the request handler, and keeps the
    // connection alive afterwards — so it is the proxy that must close it.
    const server = http.createServer((req, res) => {
      upgradeRequests += req.headers.upgrade === 'websocket' ? 1 : 0;
      // A 426 also names the protocol in Upgrade (RFC 9110 §15.5.22): the proxy must keep it.
      res.writeHead(status, { ...headers, ...(status === 426 ? { Upgrade: 'websocket' } : {}), 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
    server.on('connection', (socket: Socket) => {
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
    });
    const backend = await listenBackend(server);
    const proxy = await startTestProxy(routeIni([backend.url]));
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });

    for (let round = 1; round <= 3; round++) {
      const error = await connectWebSocket(proxy.port, '/ws').then(
        () => assert.fail(`got a WebSocket, want a ${status} response`),
        (e: unknown) => e,
      );
      assert.ok(error instanceof WebSocketHandshakeError, `got ${String(error)}, want a WebSocketHandshakeError`);
      assert.equal(error.statusCode, status, `got ${error.statusCode}, want ${status}`);
      assert.equal(error.body, body, `got body ${JSON.stringify(error.body)}, want ${JSON.stringify(body)}`);
      for (const [name, value] of Object.entries(headers)) {
        assert.equal(error.headers[name.toLowerCase()], value, `got ${name}: ${error.headers[name.toLowerCase()]}, want ${value}`);
      }
      if (status === 426) assert.equal(error.headers['upgrade'], 'websocket', 'a 426 must keep its Upgrade header');
      await waitFor(() => connections.size === 0, 2000, `round ${round}: the backend's sockets to close (open: ${connections.size})`);
    }
    assert.equal(upgradeRequests, 3, `got ${upgradeRequests} upgrade requests at the backend, want 3`);
    await waitFor(() => proxy.logs.length === 3, 2000, 'three access log records');
    assert.deepEqual(
      proxy.logs.map((r) => r.status),
      [status, status, status],
    );
    assert.ok(proxy.logs.every((r) => r.tunnel === undefined), 'a relayed non-101 answer is not a tunnel');
    assert.deepEqual(activeRequests(proxy), [0], 'the relayed answer ends the active request');

    // The raw client connection: the proxy closes it after the response (the upgrade request's
    // connection is not reused).
    const raw = await rawRequest(proxy.port, 'GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n', 2000);
    assert.match(raw.text, new RegExp(`^HTTP/1\\.1 ${status} `), `got ${JSON.stringify(raw.text.slice(0, 30))}, want ${status}`);
    assert.ok(raw.text.endsWith(body), 'the whole body reaches the client');
    assert.ok(raw.closedByServer, 'the proxy must close the client connection after relaying a non-101 answer');
    await waitFor(() => connections.size === 0, 2000, 'the backend socket to close');
  });
}

test('least-connections counts an open tunnel as an active request: the next plain requests go to the other upstream', async (t) => {
  const a = await startManualBackend('a');
  const b = await startManualBackend('b');
  const proxy = await startTestProxy(routeIni([a.url, b.url], 'strategy = least-connections\n'));
  t.after(async () => {
    await a.close(); // the backends close any tunnel left, so the proxy can drain
    await b.close();
    await proxy.close();
  });

  const client = await connectWebSocket(proxy.port, '/ws');
  assert.equal(a.sockets.length, 1, `got ${a.sockets.length} tunnels on a, want 1 (first pick of a tie is a)`);
  assert.deepEqual(activeRequests(proxy), [1, 0]);

  const bodies: string[] = [];
  for (let i = 0; i < 10; i++) bodies.push((await request(proxy.port, { path: '/ws/plain' })).body.toString());
  assert.deepEqual(bodies, Array(10).fill('b'), `got ${bodies.join(' ')}, want b ×10 while the tunnel holds a`);
  assert.deepEqual(activeRequests(proxy), [1, 0], 'the plain requests ended; the tunnel still counts');

  client.destroy();
  await waitFor(() => activeRequests(proxy)[0] === 0, 2000, 'the counter of a to return to zero');
  assert.deepEqual(activeRequests(proxy), [0, 0]);
  const spread: string[] = [];
  for (let i = 0; i < 4; i++) spread.push((await request(proxy.port, { path: '/ws/plain' })).body.toString());
  assert.deepEqual([...spread].sort(), ['a', 'a', 'b', 'b'], `got ${spread.join(' ')}, want a and b shared once the tunnel closed`);
});

test('a backend that never answers the client\'s FIN cannot hold the tunnel for read_timeout: it ends HALF_CLOSED_IDLE_MS after the last byte', async (t) => {
  const backend = await startManualBackend('only');
  const proxy = await startTestProxy(routeIni([backend.url], 'read_timeout = 30s\n'));
  t.after(async () => {
    await backend.close();
    await proxy.close();
  });
  const upstream = proxy.proxy.routes[0]!.upstreams[0]!;
  const client = await connectWebSocket(proxy.port, '/ws');
  const backendSocket = backend.sockets[0]!;
  backend.isHoldingHalfOpen = true; // the backend reads the FIN and never ends its side
  t.after(() => backendSocket.destroy());
  const endedAt = performance.now();
  client.end();
  await new Promise((resolve) => backendSocket.once('end', resolve));
  assert.equal(upstream.activeRequests, 1, 'the half-closed tunnel is still an active request');
  await waitFor(() => upstream.activeRequests === 0, 5_000, 'the proxy to close the half-closed tunnel and give back its active request (and a conn_limit slot)');
  const tookMs = performance.now() - endedAt;
  assert.ok(tookMs >= HALF_CLOSED_IDLE_MS - 50 && tookMs < HALF_CLOSED_IDLE_MS + 1_500, `got the tunnel closed after ${Math.round(tookMs)}ms, want about ${HALF_CLOSED_IDLE_MS}ms (not read_timeout's 30 s)`);
  await waitFor(() => proxy.logs.length === 1, 2_000, 'the access log record of the tunnel');
  client.destroy();
  backendSocket.destroy();
});

test('the active-request counter returns to zero exactly once, whichever side closes the tunnel', async (t) => {
  const backend = await startManualBackend('only');
  const proxy = await startTestProxy(routeIni([backend.url], 'read_timeout = 10s\n'));
  t.after(async () => {
    await backend.close(); // closes any tunnel left, so the proxy can drain
    await proxy.close();
  });
  const upstream = proxy.proxy.routes[0]!.upstreams[0]!;
  const nextData = (socket: Socket): Promise<Buffer> => new Promise((resolve) => socket.once('data', resolve));

  const closings: { name: string; close(client: WebSocketClient, backendSocket: Socket): Promise<void> }[] = [
    { name: 'client destroys', close: async (client) => client.destroy() },
    {
      name: 'client sends a close frame, backend answers it and ends',
      close: async (client, backendSocket) => {
        const closed = client.close(1000);
        const frame = await nextData(backendSocket);
        assert.equal(frame[0]! & 0x0f, Opcode.close, `got opcode ${frame[0]! & 0x0f} at the backend, want close`);
        backendSocket.end(encodeFrame(Opcode.close, Buffer.from([0x03, 0xe8])));
        await closed;
      },
    },
    {
      name: 'client half-closes, then backend ends',
      close: async (client, backendSocket) => {
        backend.isHoldingHalfOpen = true;
        client.end();
        await new Promise((resolve) => backendSocket.once('end', resolve));
        assert.equal(upstream.activeRequests, 1, 'a half-closed tunnel is still an active request');
        backendSocket.end(encodeFrame(Opcode.text, 'answer after your FIN'));
        assert.equal((await client.nextMessage()).text, 'answer after your FIN');
        backend.isHoldingHalfOpen = false;
      },
    },
    { name: 'backend destroys', close: async (_client, backendSocket) => void backendSocket.destroy() },
    {
      name: 'backend half-closes, then client ends',
      close: async (client, backendSocket) => {
        backendSocket.end();
        await client.ended;
        assert.equal(upstream.activeRequests, 1, 'a half-closed tunnel is still an active request');
        client.socket.write('still talking after your FIN'); // raw bytes: the manual backend reads them as they are
        assert.ok((await nextData(backendSocket)).includes('still talking after your FIN'), 'bytes after the backend FIN must still reach it');
        client.end();
      },
    },
  ];
  for (const [index, closing] of closings.entries()) {
    const client = await connectWebSocket(proxy.port, '/ws');
    const backendSocket = backend.sockets[index]!;
    assert.ok(backendSocket !== undefined, `${closing.name}: the backend got no tunnel`);
    assert.equal(upstream.activeRequests, 1, `${closing.name}: got ${upstream.activeRequests} active requests with the tunnel open, want 1`);
    await closing.close(client, backendSocket);
    // Whatever happened, the client sees the proxy end its side; it then ends its own (a no-op if done).
    await client.ended;
    client.end();
    await client.closed;
    await waitFor(() => backendSocket.destroyed, 2000, `${closing.name}: the backend socket to close`);
    await waitFor(() => proxy.logs.length === index + 1, 2000, `${closing.name}: the access log record`);
    assert.equal(upstream.activeRequests, 0, `${closing.name}: got ${upstream.activeRequests} active requests after close, want 0`);
    assert.equal(proxy.logs[index]!.status, 101, `${closing.name}: got status ${proxy.logs[index]!.status} in the log, want 101`);
  }
  // Nothing counted twice: one more tunnel brings the counter to exactly 1.
  const last = await connectWebSocket(proxy.port, '/ws');
  assert.equal(upstream.activeRequests, 1, `got ${upstream.activeRequests}, want 1`);
  last.destroy();
  await waitFor(() => upstream.activeRequests === 0, 2000, 'the last tunnel to end');
  assert.equal(proxy.logs.length, closings.length + 1, `got ${proxy.logs.length} log records, want one per tunnel`);
});

test('a 101 the client did not ask for is a 502, and the upstream socket is closed', async (t) => {
  let connectionCount = 0;
  let openCount = 0;
  const rogue = await startRawBackend((socket) => {
    connectionCount++;
    openCount++;
    socket.on('close', () => openCount--);
    socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nsurprise bytes'));
  });
  const bare = await startRawBackend((socket) => {
    socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\n\r\n'));
  });
  const proxy = await startTestProxy(
    `[proxy.rogue]\npath = /rogue\npass = ${rogue.url}\nread_timeout = 2s\nmax_fails = 0\n` +
      `[proxy.bare]\npath = /bare\npass = ${bare.url}\nread_timeout = 2s\nmax_fails = 0\n`,
  );
  t.after(async () => {
    await proxy.close();
    await rogue.close();
    await bare.close();
  });

  for (const path of ['/rogue', '/bare']) {
    const startedAt = Date.now();
    const res = await request(proxy.port, { path, headers: { 'X-Test': path } });
    const elapsed = Date.now() - startedAt;
    assert.equal(res.status, 502, `${path}: got ${res.status}, want 502`);
    assert.ok(!res.body.includes('surprise'), `${path}: bytes after an unrequested 101 must not reach the client`);
    assert.ok(elapsed < 1500, `${path}: got the 502 after ${elapsed}ms, want it at once (not after read_timeout)`);
  }
  assert.equal(connectionCount, 1, `got ${connectionCount} connections to the rogue backend, want 1 (the lone upstream is not retried)`);
  await waitFor(() => openCount === 0, 2000, 'the rogue upstream socket to close');
  const routesActive = proxy.proxy.routes.map((route) => route.upstreams[0]!.activeRequests);
  assert.deepEqual(routesActive, [0, 0], `got active requests ${routesActive}, want 0 on both`);
});

test('a 101 to a protocol the request did not offer is a 502 (as Go\'s ReverseProxy), and nothing of it reaches the client; one picked from an offered list switches (RFC 9110 §7.8)', async (t) => {
  const switcher = await startRawBackend((socket) => {
    socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nframes'));
  });
  const proxy = await startTestProxy(`[proxy.echo]\npath = /\npass = ${switcher.url}\nmax_fails = 0\n`);
  t.after(async () => {
    await proxy.close();
    await switcher.close();
  });
  const asked = await rawRequest(proxy.port, 'GET /x HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n', { idleMs: 2000, isComplete: wholeResponses(1) });
  assert.match(asked.text, /^HTTP\/1\.1 502 /, `Upgrade: echo answered with websocket: got ${JSON.stringify(asked.text.split('\r\n')[0])}, want 502`);
  assert.ok(!asked.text.includes('frames'), 'bytes after the mismatched 101 must not reach the client');
  const same = await rawRequest(proxy.port, 'GET /x HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\n\r\n', { idleMs: 2000, isComplete: (text) => text.includes('\r\n\r\n') });
  assert.match(same.text, /^HTTP\/1\.1 101 /, `the same protocol in another case: got ${JSON.stringify(same.text.split('\r\n')[0])}, want 101`);
  const picked = await rawRequest(proxy.port, 'GET /x HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: foo/1, websocket\r\n\r\n', { idleMs: 2000, isComplete: (text) => text.includes('frames') });
  assert.match(picked.text, /^HTTP\/1\.1 101 [^]*\r\n\r\nframes$/, `websocket picked from 'foo/1, websocket': got ${JSON.stringify(picked.text)}, want the 101 and the tunnel`);
});

test('a 101 without Connection: upgrade is a 502 with its reason logged and the upstream closed, never a tunnel (Go\'s upgradeType); Connection: Upgrade in any case or in a list still switches', async (t) => {
  const connectionOf: Record<string, string> = { '/none': '', '/list': 'Connection: keep-alive, Upgrade\r\n', '/lower': 'connection: upgrade\r\n' };
  let openCount = 0;
  const switcher = await startRawBackend((socket) => {
    openCount++;
    socket.on('close', () => openCount--);
    socket.once('data', (chunk: Buffer) => {
      const path = /^GET (\S+)/.exec(chunk.toString('latin1'))?.[1] ?? '';
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n${connectionOf[path] ?? ''}\r\nframes`);
    });
  });
  const proxy = await startTestProxy(`[proxy.ws]\npath = /\npass = ${switcher.url}\nmax_fails = 0\n`);
  t.after(async () => {
    await proxy.close();
    await switcher.close();
  });
  const upgrade = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`;

  const bare = await rawRequest(proxy.port, upgrade('/none'), 2000);
  assert.match(bare.text, /^HTTP\/1\.1 502 /, `101 without Connection: got ${JSON.stringify(bare.text.split('\r\n')[0])}, want 502`);
  assert.ok(!bare.text.includes('frames'), `got ${JSON.stringify(bare.text)}: bytes after the refused 101 must not reach the client`);
  await waitFor(() => openCount === 0, 2000, 'the upstream socket of the refused 101 to close');
  const record = proxy.logs.find((r) => r.target === '/none');
  assert.equal(record?.attempts[0]?.error, 'PRX_UPSTREAM_PROTOCOL: 101 without Connection: upgrade', `got attempts ${JSON.stringify(record?.attempts)}`);

  for (const path of ['/list', '/lower']) {
    const switched = await rawRequest(proxy.port, upgrade(path), 300);
    assert.match(switched.text, /^HTTP\/1\.1 101 /, `${path}: got ${JSON.stringify(switched.text.split('\r\n')[0])}, want 101`);
    assert.ok(switched.text.endsWith('\r\n\r\nframes'), `${path}: got ${JSON.stringify(switched.text)}, want the tunnel's bytes after the 101 head`);
  }
});

test('a graceful shutdown with a tunnel still open ends it at shutdown_timeout instead of hanging', async (t) => {
  const echo = await startEchoServer();
  const proxy = await startTestProxy(routeIni([`http://127.0.0.1:${echo.port}`]));
  t.after(() => echo.close());
  const client = await connectWebSocket(proxy.port, '/ws');
  client.send('still here');
  assert.equal((await client.nextMessage()).data.toString(), 'still here');
  const startedAt = Date.now();
  const isDrained = await proxy.proxy.close(300);
  const elapsed = Date.now() - startedAt;
  assert.equal(isDrained, false, 'got drained, want the timeout to end the open tunnel');
  assert.ok(elapsed >= 280 && elapsed < 2000, `got close() after ${elapsed}ms, want about 300ms`);
  await client.ended; // the proxy closed the client's side of the tunnel
  client.destroy();
});

test('a client that leaves during the upgrade handshake aborts the upstream handshake at once', async (t) => {
  let upstreamClosedAt = 0;
  const slow = await startRawBackend((socket) => {
    socket.resume(); // read, so the proxy's close is seen
    socket.on('close', () => (upstreamClosedAt = Date.now()));
    // answers nothing for a second: the handshake is in flight when the client leaves
    setTimeout(() => socket.destroyed || socket.end('HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n'), 1000);
  });
  const proxy = await startTestProxy(routeIni([slow.url]));
  t.after(async () => {
    await proxy.close();
    await slow.close();
  });
  const { connect } = await import('node:net');
  const client = connect(proxy.port, '127.0.0.1');
  client.on('error', () => {});
  client.write('GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  await waitFor(() => activeRequests(proxy)[0] === 1, 2000, 'the handshake to reach the upstream');
  const leftAt = Date.now();
  client.destroy();
  await waitFor(() => activeRequests(proxy)[0] === 0, 2000, 'the active request to end');
  assert.ok(Date.now() - leftAt < 500, `got the upstream handshake held ${Date.now() - leftAt}ms after the client left, want < 500ms`);
  await waitFor(() => upstreamClosedAt > 0, 2000, 'the upstream connection to close');
  assert.ok(upstreamClosedAt - leftAt < 500);
});

test('an upgrade abandoned during the handshake is logged as 499', async (t) => {
  const slow = await startRawBackend((socket) => socket.resume()); // never answers
  const proxy = await startTestProxy(routeIni([slow.url]));
  t.after(async () => {
    await proxy.close();
    await slow.close();
  });
  const { connect } = await import('node:net');
  const client = connect(proxy.port, '127.0.0.1');
  client.on('error', () => {});
  client.write('GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
  await waitFor(() => activeRequests(proxy)[0] === 1, 2000, 'the handshake to reach the upstream');
  client.destroy();
  await waitFor(() => proxy.logs.length === 1, 2000, 'one access log line');
  assert.equal(proxy.logs[0]!.status, 499);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(proxy.logs.length, 1, 'exactly one line');
});

test('an upgrade that offers h2c, or no protocol, is a plain request: the upstream gets no Upgrade, HTTP2-Settings or Connection, and a 101 from it is a 502, never a tunnel past the routes', async (t) => {
  const received: string[] = [];
  const plain = await startRawBackend((socket) => {
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk.toString('latin1'));
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
  });
  const switcher = await startRawBackend((socket) => {
    socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\nframes'));
  });
  const proxy = await startTestProxy(`[proxy.plain]\npath = /plain\npass = ${plain.url}\n[proxy.switcher]\npath = /\npass = ${switcher.url}\nmax_fails = 0\n`);
  t.after(async () => {
    await proxy.close();
    await plain.close();
    await switcher.close();
  });
  const h2c = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n`;

  const served = await rawRequest(proxy.port, h2c('/plain'), { idleMs: 2000, isComplete: wholeResponses(1) });
  assert.match(served.text, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nok$/, `got ${JSON.stringify(served.text)}, want the upstream's 200 as a plain response`);
  assert.equal(received.length, 1, 'one request reached the upstream');
  assert.doesNotMatch(received[0]!, /^(upgrade|http2-settings):/im, `got ${JSON.stringify(received[0])}, want no Upgrade or HTTP2-Settings`);
  assert.doesNotMatch(received[0]!, /^connection:.*upgrade/im, `got ${JSON.stringify(received[0])}, want no Connection: upgrade`);

  const mixed = await rawRequest(proxy.port, h2c('/plain').replace('Upgrade: h2c', 'Upgrade: websocket, H2C'), { idleMs: 2000, isComplete: wholeResponses(1) });
  assert.match(mixed.text, /^HTTP\/1\.1 200 OK\r\n/, 'h2c among other protocols, in any case: a plain request too');

  const empty = await rawRequest(proxy.port, 'GET /plain HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: \r\n\r\n', { idleMs: 2000, isComplete: wholeResponses(1) });
  assert.match(empty.text, /^HTTP\/1\.1 200 OK\r\n/, 'an empty Upgrade offers nothing: a plain request');
  assert.doesNotMatch(received.at(-1)!, /^upgrade:/im, `got ${JSON.stringify(received.at(-1))}, want no Upgrade`);

  const switched = await rawRequest(proxy.port, h2c('/x'), { idleMs: 2000, isComplete: wholeResponses(1) });
  assert.match(switched.text, /^HTTP\/1\.1 502 /, `an upstream that switches to h2c anyway: got ${JSON.stringify(switched.text.split('\r\n')[0])}, want 502`);
  assert.ok(!switched.text.includes('frames'), 'nothing after its 101 reaches the client');
});

test("headers named in the 101's Connection (and the other hop-by-hop ones, and Content-Length) do not reach the client; Upgrade and Connection: upgrade do", async (t) => {
  const backend = await startRawBackend((socket) => {
    let received = '';
    const onData = (chunk: Buffer): void => {
      received += chunk.toString('latin1');
      if (!received.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      const key = /\r\nSec-WebSocket-Key: ([^\r\n]+)/i.exec(received)?.[1] ?? '';
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade, X-Upstream-Secret\r\n' +
          `X-Upstream-Secret: for the proxy only\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\nSec-WebSocket-Accept: ${acceptValueFor(key)}\r\nX-End-To-End: kept\r\n\r\n`,
      );
    };
    socket.on('data', onData);
  });
  const proxy = await startTestProxy(routeIni([backend.url]));
  t.after(async () => {
    await backend.close(); // closes the tunnel's upstream side, so the proxy can drain
    await proxy.close();
  });
  const raw = await rawRequest(
    proxy.port,
    'GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    300,
  );
  const head = raw.text.slice(0, raw.text.indexOf('\r\n\r\n'));
  const lines = head.split('\r\n');
  assert.equal(lines[0], 'HTTP/1.1 101 Switching Protocols', `got ${JSON.stringify(lines[0])}`);
  const names = lines.slice(1).map((line) => line.slice(0, line.indexOf(':')).toLowerCase());
  assert.ok(!names.includes('x-upstream-secret'), `got ${JSON.stringify(head)}: a header the 101's Connection names must not reach the client`);
  assert.ok(!names.includes('keep-alive'), `got ${JSON.stringify(head)}: Keep-Alive is hop-by-hop`);
  assert.ok(!names.includes('content-length'), `got ${JSON.stringify(head)}: a 1xx carries no Content-Length (RFC 9110 §8.6)`);
  assert.deepEqual(
    lines.slice(1).filter((line) => /^(upgrade|connection):/i.test(line)),
    ['Upgrade: websocket', 'Connection: upgrade'],
    `got ${JSON.stringify(head)}, want the upgrade headers only`,
  );
  assert.ok(lines.includes(`Sec-WebSocket-Accept: ${acceptValueFor('dGhlIHNhbXBsZSBub25jZQ==')}`), `got ${JSON.stringify(head)}, want Sec-WebSocket-Accept kept`);
  assert.ok(lines.includes('X-End-To-End: kept'), `got ${JSON.stringify(head)}, want end-to-end headers kept`);
});

test('an upgrade request is answered exactly as the same request without Upgrade: 404, 401, 502 (refused), 503 + Retry-After (all down), 504 (read_timeout), never 500', async (t) => {
  const silent = await startRawBackend((socket) => socket.resume()); // reads, never answers
  const proxy = await startTestProxy(
    `[proxy.refused]\npath = /refused\npass = http://127.0.0.1:1\nmax_fails = 0\n` +
      `[proxy.down]\npath = /down\npass = http://127.0.0.1:1 down\n` +
      `[proxy.slow]\npath = /slow\npass = ${silent.url}\nread_timeout = 200ms\nmax_fails = 0\n` +
      `[proxy.private]\npath = /private\npass = http://127.0.0.1:1\nauth_basic = Private\nauth_user = tom:${hashPassword('secret')}\n`,
  );
  t.after(async () => {
    await proxy.close();
    await silent.close();
  });
  const UPGRADE = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
  /** Status line, the headers that matter here, and the body. */
  const answerOf = (text: string): string => {
    const end = text.indexOf('\r\n\r\n');
    const lines = text.slice(0, end).split('\r\n');
    const kept = lines.slice(1).filter((line) => /^(content-type|content-length|retry-after|www-authenticate):/i.test(line));
    return [lines[0], ...kept, text.slice(end + 4)].join('\n');
  };
  for (const [path, want] of [
    ['/nowhere', 404],
    ['/private', 401],
    ['/refused', 502],
    ['/down', 503],
    ['/slow', 504],
  ] as const) {
    const plain = await rawRequest(proxy.port, `GET ${path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n`);
    const upgrade = await rawRequest(proxy.port, `GET ${path} HTTP/1.1\r\nHost: h\r\n${UPGRADE}\r\n`);
    assert.match(plain.text, new RegExp(`^HTTP/1\\.1 ${want} `), `${path} without Upgrade: got ${JSON.stringify(plain.text.slice(0, 30))}, want ${want}`);
    assert.equal(answerOf(upgrade.text), answerOf(plain.text), `${path}: got the upgrade answered ${JSON.stringify(upgrade.text.slice(0, 30))}, want what the plain request got`);
    assert.ok(upgrade.closedByServer, `${path}: the proxy must close the connection after refusing an upgrade`);
    if (want === 503) assert.match(upgrade.text, /\r\nRetry-After: \d+\r\n/, `${path}: got no Retry-After on the upgrade's 503`);
  }
  await waitFor(() => proxy.logs.length === 10, 2000, 'ten access log records');
  const upgradeStatuses = proxy.logs.filter((_r, i) => i % 2 === 1).map((r) => r.status);
  assert.deepEqual(upgradeStatuses, [404, 401, 502, 503, 504], `got ${upgradeStatuses} in the upgrades' log records`);
});
