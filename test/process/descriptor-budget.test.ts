/**
 * A cluster worker's connection limits from its file descriptor limit (src/process/descriptor-budget.ts):
 * the limit read from /proc/self/limits, the limits computed from it, and a ProxyServer given a
 * budget closing the client connections over it, logging that at most once per 10 s, and answering
 * 503 PRX_PROXY_RESOURCES for an upstream connection over its sockets' share (real sockets).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { adminConnectionLimit, descriptorBudget, MAX_ADMIN_CONNECTIONS, probeLimit, readOpenFileLimit, RESERVED_DESCRIPTORS } from '../../src/process/descriptor-budget.js';
import { REFUSAL_LOG_INTERVAL_MS } from '../../src/gateway/proxy-server.js';
import { listenBackend, rawRequest, startTestProxy, waitFor, wholeResponses, type Backend } from '../helpers/proxy-harness.js';
import { FakeClock } from '../admin/fake-clock.js';

const LIMITS_TEXT = [
  'Limit                     Soft Limit           Hard Limit           Units     ',
  'Max cpu time              unlimited            unlimited            seconds   ',
  'Max open files            1024                 524288               files     ',
  'Max locked memory         8388608              8388608              bytes     ',
].join('\n');

test('readOpenFileLimit reads the soft limit of the "Max open files" line; no line or "unlimited" gives undefined', () => {
  assert.equal(readOpenFileLimit(LIMITS_TEXT), 1024);
  assert.equal(readOpenFileLimit(LIMITS_TEXT.replace('Max open files', 'Max open filez')), undefined);
  assert.equal(readOpenFileLimit('Max open files            unlimited            unlimited            files     \n'), undefined);
  if (process.platform === 'linux') {
    const own = readOpenFileLimit();
    assert.ok(own !== undefined && own > 0, `got ${own} for this process, want its limit`);
  }
});

test('descriptorBudget keeps RESERVED_DESCRIPTORS out and splits the rest between client connections and upstream sockets, two descriptors a proxied connection (HAProxy\'s maxconn rule)', () => {
  assert.equal(RESERVED_DESCRIPTORS, 32);
  assert.deepEqual(descriptorBudget(64), { openFileLimit: 64, maxClientConnections: 16, maxUpstreamSockets: 16 });
  assert.deepEqual(descriptorBudget(1024), { openFileLimit: 1024, maxClientConnections: 496, maxUpstreamSockets: 496 });
  assert.deepEqual(descriptorBudget(65), { openFileLimit: 65, maxClientConnections: 16, maxUpstreamSockets: 17 });
  assert.deepEqual(descriptorBudget(33), { openFileLimit: 33, maxClientConnections: 1, maxUpstreamSockets: 1 });
  assert.deepEqual(descriptorBudget(8), { openFileLimit: 8, maxClientConnections: 1, maxUpstreamSockets: 1 });
});

test('adminConnectionLimit: at most 64 admin connections, and at most a quarter of what the reserve leaves of the descriptor limit', () => {
  assert.equal(MAX_ADMIN_CONNECTIONS, 64);
  assert.equal(adminConnectionLimit(undefined), 64);
  assert.equal(adminConnectionLimit(524_288), 64);
  assert.equal(adminConnectionLimit(64), 8);
  assert.equal(adminConnectionLimit(36), 1);
  assert.equal(adminConnectionLimit(10), 1);
});

test('probeLimit: a quarter of what the reserve leaves of the descriptor limit, at least 1; no limit when it is unknown', () => {
  assert.equal(probeLimit(undefined), Infinity);
  assert.equal(probeLimit(64), 8);
  assert.equal(probeLimit(524_288), 131_064);
  assert.equal(probeLimit(30), 1);
});

/** Opens a connection and resolves once it is established. */
async function connect(port: number): Promise<net.Socket> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  return socket;
}

/** Resolves with what the server sent before it closed `socket`, or 'open' when it is still open after `ms`. */
function closedWithin(socket: net.Socket, ms: number): Promise<string> {
  return new Promise((resolve) => {
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const timer = setTimeout(() => resolve('open'), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(`closed after ${JSON.stringify(received)}`);
    });
  });
}

test('a ProxyServer with a descriptor budget closes client connections over maxClientConnections at once, logs the first at once and the others at the end of a 10 s window, and serves again once one left', async (t) => {
  const lines: string[] = [];
  const clock = new FakeClock();
  const budget = { openFileLimit: 36, maxClientConnections: 2, maxUpstreamSockets: 2 };
  const { port, close } = await startTestProxy('[proxy.a]\npath = /\npass = http://127.0.0.1:9\n', {
    descriptorBudget: budget,
    timers: clock,
    deps: { log: (line) => lines.push(line) },
  });
  const sockets: net.Socket[] = [];
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    await close();
  });
  sockets.push(await connect(port), await connect(port));
  const third = await connect(port);
  sockets.push(third);
  assert.equal(await closedWithin(third, 2000), 'closed after ""');
  const warning = `warning: worker ${process.pid} serves at most 2 client connections with 36 file descriptors (ulimit -n): closed 1 new connection; raise the limit (ulimit -n, systemd's LimitNOFILE)`;
  assert.deepEqual(lines, [warning]);

  for (let i = 0; i < 2; i++) {
    const refused = await connect(port);
    sockets.push(refused);
    assert.equal(await closedWithin(refused, 2000), 'closed after ""');
  }
  clock.advance(REFUSAL_LOG_INTERVAL_MS - 1);
  assert.equal(lines.length, 1, 'refusals within the window wait for its end');
  clock.advance(1);
  assert.deepEqual(lines, [warning, warning.replace('closed 1 new connection;', 'closed 2 new connections in the last 10 s;')]);
  clock.advance(REFUSAL_LOG_INTERVAL_MS); // a window without refusals: no line, and the window closes
  assert.equal(lines.length, 2);
  const later = await connect(port);
  sockets.push(later);
  assert.equal(await closedWithin(later, 2000), 'closed after ""');
  assert.deepEqual(lines.at(-1), warning, 'the first refusal after a quiet window is logged at once');

  // One client leaves: the next connection is served (a 502: nothing listens on port 9).
  sockets[0]!.destroy();
  let text = '';
  for (let tries = 0; tries < 20 && !text.startsWith('HTTP/1.1 '); tries++) {
    ({ text } = await rawRequest(port, 'GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n', 2000));
  }
  assert.match(text, /^HTTP\/1\.1 502 /);
});

test('with a descriptor budget, an upstream connection over maxUpstreamSockets with none idle is a 503 PRX_PROXY_RESOURCES with Retry-After, and the held connection serves the next request once idle', async (t) => {
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  let isSlowHeld = false;
  const backend = await listenBackend(
    http.createServer((req, res) => {
      if (req.url !== '/slow') return res.end('fast');
      isSlowHeld = true;
      void held.then(() => res.end('slow'));
    }),
  );
  const { port, logs, close } = await startTestProxy(`[proxy.a]\npath = /\npass = ${backend.url}\n`, {
    descriptorBudget: { openFileLimit: 36, maxClientConnections: 2, maxUpstreamSockets: 1 },
    deps: { log: () => {} },
  });
  t.after(async () => {
    release();
    await close();
    await backend.close();
  });
  // One upstream socket: the slow request holds it.
  const slow = rawRequest(port, 'GET /slow HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n', { idleMs: 5000, isComplete: wholeResponses(1) });
  await waitFor(() => isSlowHeld, 3000, 'the slow request at the backend');
  const refused = await rawRequest(port, 'GET /fast HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n', { idleMs: 3000, isComplete: wholeResponses(1) });
  assert.match(refused.text, /^HTTP\/1\.1 503 /, refused.text);
  assert.match(refused.text, /\r\nRetry-After: 1\r\n/i);
  assert.deepEqual(logs.at(-1)?.attempts, [{ upstream: `127.0.0.1:${backend.port}`, error: `PRX_PROXY_RESOURCES: connect 127.0.0.1:${backend.port}: no descriptor left in the budget (1 upstream connection open, none idle)` }]);
  release();
  assert.match((await slow).text, /^HTTP\/1\.1 200 [^]*slow$/);
  // The slow request's connection went idle, and the next request takes it.
  const again = await rawRequest(port, 'GET /fast HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n', { idleMs: 3000, isComplete: wholeResponses(1) });
  assert.match(again.text, /^HTTP\/1\.1 200 [^]*fast$/);
});

test('with a descriptor budget, the upstream sockets keep to their share however few clients are connected: one client\'s requests to three upstreams leave at most maxUpstreamSockets open (a review: a pool filled that way left the later clients no descriptor)', async (t) => {
  const backends: Backend[] = [];
  for (let i = 0; i < 3; i++) backends.push(await listenBackend(http.createServer((req, res) => res.end('ok'))));
  const { port, close } = await startTestProxy(`[proxy.a]\npath = /\nstrategy = round-robin\n${backends.map((b) => `pass = ${b.url}\n`).join('')}`, {
    descriptorBudget: { openFileLimit: 40, maxClientConnections: 4, maxUpstreamSockets: 2 },
    deps: { log: () => {} },
  });
  t.after(async () => {
    await close();
    for (const backend of backends) await backend.close();
  });
  const pipelined = Array.from({ length: 6 }, (_, i) => `GET /r${i} HTTP/1.1\r\nHost: h\r\n\r\n`);
  const { text } = await rawRequest(port, pipelined, { idleMs: 3000, isComplete: wholeResponses(6) });
  assert.equal(text.match(/HTTP\/1\.1 200 /g)?.length, 6, text);
  const connections = async (): Promise<number> => {
    let sum = 0;
    for (const backend of backends) sum += await new Promise<number>((resolve) => backend.server.getConnections((_, count) => resolve(count)));
    return sum;
  };
  let open = await connections();
  for (let tries = 0; tries < 50 && open > 2; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 20)); // a closed connection reaches the backend a moment later
    open = await connections();
  }
  assert.equal(open, 2, 'got more upstream connections open than the share of 2');
});
