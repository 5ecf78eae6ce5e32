/**
 * The fast lane's own timers and framing (src/http/fast-lane.ts, src/http/fast-lane-response.ts),
 * unit level: a bare `http.createServer()` with a `FastLane` installed and a fake clock, so the
 * head and keep-alive timeouts are checked exactly by calling `checkTimeouts()` after moving the
 * clock (node's own `connectionsCheckingInterval` idea, without waiting). Then `FastLaneResponse`
 * against a real node `ServerResponse`: the same calls to both must put the same bytes on the wire
 * (Node 20, lib/_http_outgoing.js `_storeHeader`; RFC 9112 §6 and §7.1 for the framing).
 */
import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { FastLane, KEEP_ALIVE_GRACE_MS, type FastLaneOptions } from '../../src/http/fast-lane.js';
import type { ClientRequest, ClientResponse } from '../../src/http/client-exchange.js';

// ---- a lane on a bare server, with a fake clock ---------------------------------------------------

interface Client {
  readonly socket: net.Socket;
  /** Everything received so far, latin1. */
  text(): string;
  isClosed(): boolean;
}

function connect(port: number): Promise<Client> {
  return new Promise((resolve, reject) => {
    let received = '';
    let isClosed = false;
    const socket = net.connect(port, '127.0.0.1', () => resolve({ socket, text: () => received, isClosed: () => isClosed }));
    clientSockets.push(socket);
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('close', () => (isClosed = true));
    socket.on('error', reject);
  });
}

/** Lets socket events run (a few turns of the event loop on loopback). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function until(predicate: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

interface Harness {
  readonly lane: FastLane;
  readonly port: number;
  /** The fake clock, ms. */
  now: number;
  /** `onBadHead` calls: the socket and the status the lane asked for. */
  readonly badHeads: { socket: Socket; status: number }[];
  /** Requests the lane passed on, with their responses (tests answer them). */
  readonly requests: { req: ClientRequest; res: ClientResponse }[];
  readonly nodeRequests: http.IncomingMessage[];
}

const servers: http.Server[] = [];
const lanes: FastLane[] = [];
const clientSockets: net.Socket[] = [];
afterEach(async () => {
  for (const socket of clientSockets.splice(0)) socket.destroy();
  for (const lane of lanes.splice(0)) lane.closeAllConnections();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/**
 * A server with a lane: `respond` answers each fast-lane request (default: 200 "ok" at once;
 * return without answering to keep it in flight). node:http answers handed-over requests "node".
 */
async function startLane(
  options: Partial<Pick<FastLaneOptions, 'headTimeoutMs' | 'keepAliveTimeoutMs' | 'maxHeadBytes'>>,
  respond: (req: ClientRequest, res: ClientResponse) => void = (req, res) => {
    res.writeHead(200, ['Content-Length', '2']);
    res.end('ok');
  },
): Promise<Harness> {
  const server = http.createServer((req, res) => {
    harness.nodeRequests.push(req);
    res.end('node');
  });
  servers.push(server);
  const harness: Harness = {
    lane: undefined as unknown as FastLane,
    port: 0,
    now: 1_000_000,
    badHeads: [],
    requests: [],
    nodeRequests: [],
  };
  const lane = new FastLane(server, {
    onRequest: (req, res) => {
      harness.requests.push({ req, res });
      respond(req, res);
    },
    onBadHead: (socket, status) => {
      harness.badHeads.push({ socket, status });
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    },
    isDraining: () => false,
    headTimeoutMs: options.headTimeoutMs ?? 1000,
    keepAliveTimeoutMs: options.keepAliveTimeoutMs ?? 5000,
    maxHeadBytes: options.maxHeadBytes ?? 8192,
    now: () => harness.now,
  });
  lanes.push(lane);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(harness, { lane, port: (server.address() as AddressInfo).port });
}

const GET = 'GET /a HTTP/1.1\r\nHost: h\r\n\r\n';

describe('FastLane timeouts (fake clock, checkTimeouts called by hand)', () => {
  test('a new connection that sends nothing gets onBadHead(408) after headTimeoutMs, not before', async () => {
    const h = await startLane({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    await until(() => h.lane.size === 1, 'the lane to hold the connection');
    h.now += 999;
    h.lane.checkTimeouts();
    await settle();
    assert.equal(h.badHeads.length, 0, `got ${h.badHeads.length} head timeouts at 999 ms, want 0`);
    assert.equal(client.isClosed(), false);
    h.now += 1;
    h.lane.checkTimeouts();
    assert.deepEqual(h.badHeads.map((bad) => bad.status), [408], `got ${JSON.stringify(h.badHeads.map((bad) => bad.status))} at 1000 ms, want one 408`);
    assert.equal(h.lane.size, 0, 'the lane let go of the connection');
    await until(() => client.isClosed(), 'the close after the 408');
    assert.match(client.text(), /^HTTP\/1\.1 408 /);
    h.now += 10_000;
    h.lane.checkTimeouts();
    assert.equal(h.badHeads.length, 1, 'onBadHead once only');
  });

  test('bytes arriving after the head timeout fired are not read as a request', async () => {
    const h = await startLane({ headTimeoutMs: 1000 });
    const server = servers.at(-1)!;
    // Keep the socket open after the timeout to see whether anything still reads it.
    const lane = h.lane;
    const client = await connect(h.port);
    await until(() => lane.size === 1, 'the lane to hold the connection');
    h.now += 1000;
        lane.checkTimeouts();
    client.socket.write(GET);
    await settle();
    assert.equal(h.requests.length, 0, 'got a fast-lane request after the 408, want none');
    assert.equal(h.nodeRequests.length, 0, 'got a node request after the 408, want none');
    assert.ok(server.listening);
  });

  test('a first head that arrives in pieces: its time counts from the connection start', async () => {
    const h = await startLane({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    await until(() => h.lane.size === 1, 'the lane to hold the connection');
    h.now += 600;
    client.socket.write('GET /a HTTP/1.1\r\nHo');
    await settle();
    h.now += 399;
    h.lane.checkTimeouts();
    assert.equal(h.badHeads.length, 0, 'got a 408 at 999 ms, want none');
    h.now += 1;
    h.lane.checkTimeouts();
    assert.deepEqual(h.badHeads.map((bad) => bad.status), [408], 'a 408 at 1000 ms from the connection start');
    client.socket.write('st: h\r\n\r\n');
    await settle();
    assert.equal(h.requests.length + h.nodeRequests.length, 0, 'the rest of the head is not read after the 408');
  });

  test('a head trickling in, many pieces, then silence: the lane keeps it and its 408 comes at headTimeoutMs, not later', async () => {
    const h = await startLane({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    client.socket.setNoDelay(true);
    for (const piece of ['G', 'E', 'T', ' ', '/', 'a', ' ', 'H', 'T', 'T']) {
      client.socket.write(piece);
      await settle();
      h.now += 50;
    }
    assert.equal(h.lane.handOverCount, 0, 'a trickling head stays with the lane (node would start its own head timer)');
    h.now += 499; // 999 ms since the connection started
    h.lane.checkTimeouts();
    assert.equal(h.badHeads.length, 0, 'got a 408 at 999 ms, want none');
    h.now += 1;
    h.lane.checkTimeouts();
    assert.deepEqual(h.badHeads.map((bad) => bad.status), [408]);
  });

  test('a head completed in a second piece is answered by the lane', async () => {
    const h = await startLane({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    client.socket.write('GET /a HTTP/1.1\r\nHo');
    await settle();
    h.now += 999;
    h.lane.checkTimeouts();
    client.socket.write('st: h\r\n\r\n');
    await until(() => client.text().endsWith('ok'), 'the response');
    assert.equal(h.requests.length, 1);
    assert.equal(h.requests[0]!.req.url, '/a');
    assert.equal(h.lane.handOverCount, 0);
  });

  test('a later head in pieces: its time counts from its first byte, and the keep-alive limit no longer applies', async () => {
    const h = await startLane({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => client.text().endsWith('ok'), 'the first response');
    h.now += 3000;
    client.socket.write('GET /b HTTP/1.1\r\n');
    await settle();
    h.now += 999;
    h.lane.checkTimeouts();
    await settle();
    assert.equal(h.badHeads.length, 0, 'got a 408 999 ms after the head began, want none');
    assert.equal(client.isClosed(), false);
    h.now += 1;
    h.lane.checkTimeouts();
    assert.deepEqual(h.badHeads.map((bad) => bad.status), [408], 'a 408 1000 ms after the head began');
    await until(() => client.isClosed(), 'the close after the 408');
  });

  test('a client that ends its side in the middle of a head gets onBadHead(400)', async () => {
    const h = await startLane({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    client.socket.end('GET /a HTTP/1.1\r\nHost: h\r\n');
    await until(() => h.badHeads.length === 1, 'onBadHead');
    assert.equal(h.badHeads[0]!.status, 400);
    await until(() => client.isClosed(), 'the close');
    assert.match(client.text(), /^HTTP\/1\.1 400 /);
  });

  test('a client that ends its side between requests is closed without an answer', async () => {
    const h = await startLane({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => client.text().endsWith('ok'), 'the response');
    const answered = client.text().length;
    client.socket.end();
    await until(() => client.isClosed(), 'the close');
    assert.equal(client.text().length, answered);
    assert.equal(h.badHeads.length, 0);
  });

  test('headTimeoutMs 0: a silent new connection is never timed out', async () => {
    const h = await startLane({ headTimeoutMs: 0 });
    const client = await connect(h.port);
    await until(() => h.lane.size === 1, 'the lane to hold the connection');
    h.now += 1e9;
    h.lane.checkTimeouts();
    await settle();
    assert.equal(h.badHeads.length, 0);
    assert.equal(client.isClosed(), false);
  });

  test('an idle keep-alive connection is destroyed silently KEEP_ALIVE_GRACE_MS after keepAliveTimeoutMs, not before', async () => {
    const h = await startLane({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    h.now += 700; // time before the first request counts for nothing once it came
    client.socket.write(GET);
    await until(() => client.text().endsWith('ok'), 'the response');
    assert.match(client.text(), /\r\nKeep-Alive: timeout=5\r\n/);
    const answered = client.text().length;
    h.now += 4999 + KEEP_ALIVE_GRACE_MS;
    h.lane.checkTimeouts();
    await settle();
    assert.equal(client.isClosed(), false, 'got closed at 5999 ms idle, want open');
    assert.equal(h.badHeads.length, 0, 'a connection that sent a request is not a head timeout');
    assert.equal(h.lane.size, 1);
    h.now += 1;
    h.lane.checkTimeouts();
    await until(() => client.isClosed(), 'the close at 6000 ms idle');
    assert.equal(client.text().length, answered, `got ${JSON.stringify(client.text().slice(answered))} after the response, want nothing`);
    assert.equal(h.badHeads.length, 0);
    assert.equal(h.lane.size, 0);
  });

  test('the keep-alive idle time starts when the response finished, not when the request came', async () => {
    let pending: ClientResponse | undefined;
    const h = await startLane({ keepAliveTimeoutMs: 5000 }, (req, res) => (pending = res));
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => pending !== undefined, 'the request');
    h.now += 60_000; // a slow upstream
    h.lane.checkTimeouts();
    pending!.writeHead(200, ['Content-Length', '2']);
    pending!.end('ok');
    await until(() => client.text().endsWith('ok'), 'the response');
    h.now += 4999 + KEEP_ALIVE_GRACE_MS;
    h.lane.checkTimeouts();
    await settle();
    assert.equal(client.isClosed(), false, 'got closed 4999 ms after the response, want open');
    client.socket.write(GET);
    await until(() => h.requests.length === 2, 'the second request');
    assert.equal(h.requests.length, 2);
  });

  test('a connection with a request in flight is never timed out', async () => {
    let pending: ClientResponse | undefined;
    const h = await startLane({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 }, (req, res) => (pending = res));
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => pending !== undefined, 'the request');
    for (const step of [999, 1, 5000, 1e9]) {
      h.now += step;
      h.lane.checkTimeouts();
    }
    await settle();
    assert.equal(client.isClosed(), false, 'got the in-flight connection closed, want it open');
    assert.equal(h.badHeads.length, 0);
    pending!.writeHead(200, ['Content-Length', '4']);
    pending!.end('late');
    await until(() => client.text().endsWith('late'), 'the late response');
    assert.match(client.text(), /^HTTP\/1\.1 200 OK\r\n/);
  });

  test('a pipelined request waiting behind one in flight is not timed out either', async () => {
    const pending: ClientResponse[] = [];
    const h = await startLane({ keepAliveTimeoutMs: 5000 }, (req, res) => pending.push(res));
    const client = await connect(h.port);
    client.socket.write(GET + GET);
    await until(() => pending.length === 1, 'the first request');
    h.now += 1e6;
    h.lane.checkTimeouts();
    pending[0]!.writeHead(200, ['Content-Length', '1']);
    pending[0]!.end('1');
    await until(() => pending.length === 2, 'the second request, started when the first finished');
    h.now += 1e6;
    h.lane.checkTimeouts();
    pending[1]!.writeHead(200, ['Content-Length', '1']);
    pending[1]!.end('2');
    await until(() => client.text().endsWith('2'), 'both responses');
    assert.equal(client.isClosed(), false);
  });

  test('keepAliveTimeoutMs 0: an idle keep-alive connection is never closed, and no Keep-Alive header', async () => {
    const h = await startLane({ keepAliveTimeoutMs: 0 });
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => client.text().endsWith('ok'), 'the response');
    assert.doesNotMatch(client.text(), /Keep-Alive:/i);
    assert.match(client.text(), /\r\nConnection: keep-alive\r\n/);
    h.now += 1e9;
    h.lane.checkTimeouts();
    await settle();
    assert.equal(client.isClosed(), false, 'got closed, want a keep-alive connection that never times out');
    assert.equal(h.lane.size, 1);
  });

  test('connections handed to node:http are no longer the lane’s: checkTimeouts leaves them alone', async () => {
    const h = await startLane({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    client.socket.write('GET /a HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\n\r\n');
    await until(() => client.text().endsWith('node'), "node's answer");
    assert.equal(h.lane.handOverCount, 1);
    assert.equal(h.lane.size, 0);
    h.now += 1e9;
    h.lane.checkTimeouts();
    await settle();
    assert.equal(h.badHeads.length, 0);
  });
});

// ---- FastLaneResponse against node's ServerResponse ------------------------------------------------

/** What a test does to a response; the same script runs on both implementations. */
type Script = (res: ClientResponse) => void | Promise<void>;

/**
 * Sends `request` (raw) to a server whose handler runs `script` on node's ServerResponse, and to a
 * fast lane whose onRequest runs it on FastLaneResponse; returns both byte streams (Date values
 * normalized), each read until the connection is idle for a moment or closed.
 */
async function bothResponses(request: string, script: Script, keepAliveTimeoutMs = 5000): Promise<{ fast: string; node: string; fastClosed: boolean; nodeClosed: boolean }> {
  const nodeServer = http.createServer({ keepAliveTimeout: keepAliveTimeoutMs }, (req, res) => void script(res as unknown as ClientResponse));
  servers.push(nodeServer);
  await new Promise<void>((resolve) => nodeServer.listen(0, '127.0.0.1', resolve));
  const h = await startLane({ keepAliveTimeoutMs }, (req, res) => void script(res));
  const read = async (port: number): Promise<{ text: string; isClosed: boolean }> => {
    const client = await connect(port);
    client.socket.write(request);
    let last = -1;
    while (client.text().length !== last && !client.isClosed()) {
      last = client.text().length;
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    client.socket.destroy();
    return { text: client.text().replace(/\r\nDate: [^\r\n]*\r\n/g, '\r\nDate: <date>\r\n'), isClosed: client.isClosed() };
  };
  const [fast, node] = await Promise.all([read(h.port), read((nodeServer.address() as AddressInfo).port)]);
  assert.equal(h.requests.length, 1, 'the fast lane answered');
  return { fast: fast.text, node: node.text, fastClosed: fast.isClosed, nodeClosed: node.isClosed };
}

async function assertSameBytes(request: string, script: Script, keepAliveTimeoutMs?: number): Promise<string> {
  const result = await bothResponses(request, script, keepAliveTimeoutMs);
  assert.equal(result.fast, result.node, 'FastLaneResponse (got) vs ServerResponse (want)');
  assert.ok(result.node.length > 0, 'node answered');
  return result.fast;
}

describe('FastLaneResponse writes what ServerResponse writes', () => {
  const HEAD = 'HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n';
  const CLOSE = 'GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n';

  test('writeHead with Content-Length, then end(body)', async () => {
    await assertSameBytes(GET, (res) => {
      res.writeHead(200, ['Content-Type', 'text/plain', 'Content-Length', '5']);
      res.end('hello');
    });
  });

  test('no Content-Length: chunked, writes framed, end() adds the last chunk', async () => {
    const bytes = await assertSameBytes(GET, (res) => {
      res.writeHead(200, ['X-A', '1']);
      res.write(Buffer.from('abc'));
      res.write(Buffer.alloc(0));
      res.write(Buffer.from('x'.repeat(300)));
      res.end();
    });
    assert.match(bytes, /\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n12c\r\n/);
  });

  test('chunked with end(text) and trailers', async () => {
    await assertSameBytes(GET, (res) => {
      res.writeHead(200, ['Trailer', 'X-Sum']);
      res.write(Buffer.from('abc'));
      res.addTrailers([
        ['X-Sum', '42'],
        ['X-More', 'caf\xe9'],
      ]);
      res.end('tail');
    });
  });

  test('a reason phrase: given, empty, and from STATUS_CODES; an unknown status', async () => {
    await assertSameBytes(GET, (res) => {
      res.writeHead(299, 'Quite \xe9trange', ['Content-Length', '0']);
      res.end();
    });
    await assertSameBytes(GET, (res) => {
      res.writeHead(200, '', ['Content-Length', '0']);
      res.end();
    });
    await assertSameBytes(GET, (res) => {
      res.writeHead(599, ['Content-Length', '0']);
      res.end();
    });
  });

  test('204, 304 and HEAD: no body, no chunked framing, body writes ignored', async () => {
    for (const status of [204, 304]) {
      await assertSameBytes(GET, (res) => {
        res.writeHead(status, ['X-A', '1']);
        res.write(Buffer.from('ignored'));
        res.end();
      });
    }
    await assertSameBytes(HEAD, (res) => {
      res.writeHead(200, ['Content-Length', '5']);
      res.end('hello');
    });
    await assertSameBytes(HEAD, (res) => {
      res.writeHead(200, []);
      res.write(Buffer.from('chunk'));
      res.end();
    });
  });

  test('Connection: the client asked for close; the caller gives close; the caller gives keep-alive', async () => {
    const closed = await bothResponses(CLOSE, (res) => {
      res.writeHead(200, ['Content-Length', '2']);
      res.end('ok');
    });
    assert.equal(closed.fast, closed.node);
    assert.equal(closed.fastClosed, true, 'closed after a Connection: close request');
    assert.equal(closed.nodeClosed, true);
    const callerClose = await bothResponses(GET, (res) => {
      res.writeHead(200, ['Content-Length', '2', 'Connection', 'close']);
      res.end('ok');
    });
    assert.equal(callerClose.fast, callerClose.node);
    assert.equal(callerClose.fastClosed, callerClose.nodeClosed);
    await assertSameBytes(GET, (res) => {
      res.writeHead(200, ['Content-Length', '2', 'Keep-Alive', 'timeout=1']);
      res.end('ok');
    });
  });

  test('flushHeaders: the head alone first, the body later; HEAD and 204 too', async () => {
    for (const [request, status] of [[GET, 200], [HEAD, 200], [GET, 204]] as const) {
      await assertSameBytes(request, (res) => {
        res.writeHead(status, ['Content-Type', 'text/event-stream']);
        res.flushHeaders();
        setTimeout(() => {
          res.write(Buffer.from('data: 1\n\n'));
          res.end();
        }, 20);
      });
    }
  });

  test('a Date given by the caller, a 1.5 s keep-alive timeout', async () => {
    await assertSameBytes(GET, (res) => {
      res.writeHead(200, ['date', 'Mon, 01 Jan 2001 00:00:00 GMT', 'Content-Length', '0']);
      res.end();
    });
    await assertSameBytes(
      GET,
      (res) => {
        res.writeHead(200, ['Content-Length', '0']);
        res.end();
      },
      1500,
    );
  });

  test('invalid names, values, reasons and statuses throw the same errors, and nothing is written', async () => {
    const cases: [string, (res: ClientResponse) => void][] = [
      ['a name with a space', (res) => res.writeHead(200, 'OK', ['Bad Name', 'x'])],
      ['a value with LF', (res) => res.writeHead(200, 'OK', ['X-A', 'a\nb'])],
      ['a value with DEL', (res) => res.writeHead(200, 'OK', ['X-A', 'a\x7fb'])],
      ['a reason with CR', (res) => res.writeHead(200, 'bad\rreason', [])],
      ['status 1000', (res) => res.writeHead(1000, 'OK', [])],
      ['status 99', (res) => res.writeHead(99, 'OK', [])],
      ['Trailer without chunked', (res) => res.writeHead(200, 'OK', ['Content-Length', '2', 'Trailer', 'X-Sum'])],
      ['a second writeHead', (res) => {
        res.writeHead(200, 'OK', ['Content-Length', '2']);
        res.writeHead(200, 'OK', []);
      }],
    ];
    for (const [name, call] of cases) {
      const codes = new Map<string, unknown>();
      const result = await bothResponses(GET, (res) => {
        const side = res instanceof http.ServerResponse ? 'node' : 'fast';
        try {
          call(res);
          codes.set(side, 'no error');
        } catch (error) {
          codes.set(side, (error as NodeJS.ErrnoException).code);
        }
        if (!res.headersSent) res.writeHead(200, 'OK', ['Content-Length', '2']);
        res.end('ok');
      });
      assert.equal(codes.get('fast'), codes.get('node'), `${name}: got ${String(codes.get('fast'))}, want ${String(codes.get('node'))}`);
      assert.notEqual(codes.get('node'), 'no error', `${name}: node threw nothing`);
      assert.equal(result.fast, result.node, `${name}: bytes`);
    }
  });

  test('writes with no writeHead use statusCode and chunked framing', async () => {
    await assertSameBytes(GET, (res) => {
      res.write(Buffer.from('implicit'));
      res.end();
    });
  });
});
