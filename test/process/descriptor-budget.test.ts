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
import { descriptorBudget, readOpenFileLimit, RESERVED_DESCRIPTORS } from '../../src/process/descriptor-budget.js';
import { REFUSAL_LOG_INTERVAL_MS } from '../../src/gateway/proxy-server.js';
import { listenBackend, rawRequest, startTestProxy, waitFor, wholeResponses } from '../helpers/proxy-harness.js';

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

test('descriptorBudget keeps RESERVED_DESCRIPTORS out and gives the client connections half of the rest, two descriptors each (HAProxy\'s maxconn rule)', () => {
  assert.equal(RESERVED_DESCRIPTORS, 32);
  assert.deepEqual(descriptorBudget(64), { openFileLimit: 64, maxClientConnections: 16, maxSockets: 32 });
  assert.deepEqual(descriptorBudget(1024), { openFileLimit: 1024, maxClientConnections: 496, maxSockets: 992 });
  assert.deepEqual(descriptorBudget(33), { openFileLimit: 33, maxClientConnections: 1, maxSockets: 2 });
  assert.deepEqual(descriptorBudget(8), { openFileLimit: 8, maxClientConnections: 1, maxSockets: 2 });
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

test('a ProxyServer with a descriptor budget closes client connections over maxClientConnections at once, logs it at most once per 10 s, and serves again once one left', async (t) => {
  const lines: string[] = [];
  let nowMs = 0;
  const budget = { openFileLimit: 36, maxClientConnections: 2, maxSockets: 4 };
  const { port, close } = await startTestProxy('[proxy.a]\npath = /\npass = http://127.0.0.1:9\n', {
    descriptorBudget: budget,
    deps: { log: (line) => lines.push(line), now: () => nowMs },
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
  const warning = `warning: process ${process.pid} serves at most 2 client connections with 36 file descriptors (ulimit -n): closed 1 new connection; raise the limit (ulimit -n, systemd's LimitNOFILE)`;
  assert.deepEqual(lines, [warning]);

  nowMs = REFUSAL_LOG_INTERVAL_MS - 1;
  const fourth = await connect(port);
  sockets.push(fourth);
  assert.equal(await closedWithin(fourth, 2000), 'closed after ""');
  assert.equal(lines.length, 1, 'a second refusal within 10 s is not logged');
  nowMs = REFUSAL_LOG_INTERVAL_MS;
  const fifth = await connect(port);
  sockets.push(fifth);
  assert.equal(await closedWithin(fifth, 2000), 'closed after ""');
  assert.deepEqual(lines, [warning, warning.replace('closed 1 new connection', 'closed 2 new connections')]);

  // One client leaves: the next connection is served (a 502: nothing listens on port 9).
  sockets[0]!.destroy();
  let text = '';
  for (let tries = 0; tries < 20 && !text.startsWith('HTTP/1.1 '); tries++) {
    ({ text } = await rawRequest(port, 'GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n', 2000));
  }
  assert.match(text, /^HTTP\/1\.1 502 /);
});

test('with a descriptor budget, an upstream connection that would exceed maxSockets (client connections counted) is a 503 PRX_PROXY_RESOURCES with Retry-After, and the held connection serves the next request once idle', async (t) => {
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
    descriptorBudget: { openFileLimit: 36, maxClientConnections: 2, maxSockets: 3 },
    deps: { log: () => {} },
  });
  t.after(async () => {
    release();
    await close();
    await backend.close();
  });
  // Two clients leave one socket to the upstreams: the slow request holds it.
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
