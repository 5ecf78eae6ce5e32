/**
 * The HTTP/1.1 connection loop (src/wire/http1-server.ts) and its response writer
 * (src/wire/http1-response.ts), unit level: an `Http1Server` with a fake clock and a handler the
 * test controls, so the head, body, request and keep-alive timeouts are checked exactly by calling
 * `checkTimeouts()` after moving the clock (node's own `connectionsCheckingInterval` idea, without
 * waiting). Then `Http1Response` against a real node `ServerResponse` as the oracle: the same calls
 * to both must put the same bytes on the wire (Node 20, lib/_http_outgoing.js `_storeHeader`;
 * RFC 9112 §6 and §7.1 for the framing).
 */
import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { DISCARD_MAX_BYTES, Http1Server, KEEP_ALIVE_GRACE_MS, LINGER_MS, isTunnelledUpgrade, mayEndHead, type Http1ServerOptions, type ServerAnswer } from '../../src/wire/http1-server.js';
import type { ClientRequest, ClientResponse, RequestBody, RequestBodyReader } from '../../src/wire/client-side.js';

// ---- a server with a fake clock -------------------------------------------------------------------

interface Client {
  readonly socket: net.Socket;
  /** Everything received so far, latin1. */
  text(): string;
  isClosed(): boolean;
}

/** `allowHalfOpen`: keep sending after the server's FIN (as an uploading client does). */
function connect(port: number, allowHalfOpen = false): Promise<Client> {
  return new Promise((resolve, reject) => {
    let received = '';
    let isClosed = false;
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen }, () => resolve({ socket, text: () => received, isClosed: () => isClosed }));
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
  readonly http1: Http1Server;
  readonly port: number;
  /** The fake clock, ms. */
  now: number;
  /** The server's own answers (`onAnswer`). */
  readonly answers: ServerAnswer[];
  /** Requests the server passed on, with their responses (tests answer them). */
  readonly requests: { req: ClientRequest; res: ClientResponse; isExpectingContinue: boolean }[];
}

const servers: net.Server[] = [];
const http1Servers: Http1Server[] = [];
const clientSockets: net.Socket[] = [];
afterEach(async () => {
  for (const socket of clientSockets.splice(0)) socket.destroy();
  for (const http1 of http1Servers.splice(0)) http1.closeAllConnections();
  for (const server of servers.splice(0)) {
    if (server instanceof http.Server) server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

type Timeouts = Pick<Http1ServerOptions, 'headTimeoutMs' | 'bodyTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxHeadBytes'>;

/**
 * A server whose handler is `respond` (default: 200 "ok" at once; return without answering to keep
 * the request in flight).
 */
async function startServer(
  options: Partial<Timeouts>,
  respond: (req: ClientRequest, res: ClientResponse) => void = (req, res) => {
    res.writeHead(200, ['Content-Length', '2']);
    res.end('ok');
  },
): Promise<Harness> {
  const harness: Harness = { http1: undefined as unknown as Http1Server, port: 0, now: 1_000_000, answers: [], requests: [] };
  const http1 = new Http1Server({
    onRequest: (req, res, isExpectingContinue) => {
      harness.requests.push({ req, res, isExpectingContinue });
      respond(req, res);
    },
    onAnswer: (answer) => harness.answers.push(answer),
    isDraining: () => false,
    headTimeoutMs: options.headTimeoutMs ?? 1000,
    bodyTimeoutMs: options.bodyTimeoutMs ?? 3000,
    requestTimeoutMs: options.requestTimeoutMs ?? 0,
    keepAliveTimeoutMs: options.keepAliveTimeoutMs ?? 5000,
    maxHeadBytes: options.maxHeadBytes ?? 8192,
    now: () => harness.now,
  });
  http1Servers.push(http1);
  servers.push(http1.server);
  await new Promise<void>((resolve) => http1.server.listen(0, '127.0.0.1', resolve));
  return Object.assign(harness, { http1, port: (http1.server.address() as AddressInfo).port });
}

const GET = 'GET /a HTTP/1.1\r\nHost: h\r\n\r\n';

describe('Http1Server timeouts (fake clock, checkTimeouts called by hand)', () => {
  test('a new connection that sends nothing is closed silently after headTimeoutMs, not before (nginx)', async () => {
    const h = await startServer({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    await until(() => h.http1.size === 1, 'the server to hold the connection');
    h.now += 999;
    h.http1.checkTimeouts();
    await settle();
    assert.equal(client.isClosed(), false, 'got closed at 999 ms, want open');
    h.now += 1;
    h.http1.checkTimeouts();
    await until(() => client.isClosed(), 'the close at 1000 ms');
    assert.equal(client.text(), '', `got ${JSON.stringify(client.text())}, want no answer`);
    assert.equal(h.answers.length, 0, `got ${h.answers.length} answers reported, want none (nothing to log)`);
    await until(() => h.http1.size === 0, 'the server to let go of the connection');
  });

  test('a head begun and not finished gets 408 after headTimeoutMs, with Connection: close and Date', async () => {
    const h = await startServer({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    client.socket.write('GET /a HTTP/1.1\r\nHost: h\r\n');
    await until(() => h.http1.size === 1, 'the server to hold the connection');
    await settle();
    h.now += 1000;
    h.http1.checkTimeouts();
    assert.deepEqual(h.answers.map((bad) => bad.status), [408], `got ${JSON.stringify(h.answers.map((bad) => bad.status))} at 1000 ms, want one 408`);
    assert.deepEqual([h.answers[0]!.receivedLine, h.answers[0]!.httpVersion], ['GET /a HTTP/1.1', undefined], 'the line received is reported; no version was parsed');
    await until(() => client.isClosed(), 'the close after the 408');
    assert.match(client.text(), /^HTTP\/1\.1 408 Request Timeout\r\n[^]*\r\nConnection: close\r\nDate: [^\r\n]+ GMT\r\n\r\nrequest timeout/);
    h.now += 10_000;
    h.http1.checkTimeouts();
    assert.equal(h.answers.length, 1, 'one answer only');
  });

  test("a 408's durationMs runs from the head's first byte to the answer, as nginx's $request_time: not 0 (found by a break test)", async () => {
    const h = await startServer({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    await until(() => h.http1.size === 1, 'the server to hold the connection');
    // The first head: its first byte 600 ms after the accept, its 408 at 1000 ms from the accept (header_timeout's start).
    h.now += 600;
    client.socket.write('GET /a HTTP/1.1\r\nHo');
    await settle();
    h.now += 400;
    h.http1.checkTimeouts();
    assert.deepEqual(h.answers.map((answer) => [answer.status, answer.durationMs]), [[408, 400]], 'got [status, durationMs], want the 408 400 ms after the first byte');
    // A later head on a kept connection: header_timeout and the duration both start at its first byte.
    const kept = await connect(h.port);
    kept.socket.write(GET);
    await until(() => kept.text().endsWith('ok'), 'the first response');
    h.now += 3000;
    kept.socket.write('GET /b HTTP/1.1\r\n');
    await settle();
    h.now += 1000;
    h.http1.checkTimeouts();
    assert.deepEqual(h.answers.map((answer) => [answer.status, answer.durationMs]), [[408, 400], [408, 1000]], 'got [status, durationMs], want the second 408 1000 ms after its head began');
  });

  test('bytes arriving after the head timeout fired are not read as a request', async () => {
    const h = await startServer({ headTimeoutMs: 1000 });
    const http1 = h.http1;
    const client = await connect(h.port);
    await until(() => http1.size === 1, 'the server to hold the connection');
    h.now += 1000;
    http1.checkTimeouts();
    client.socket.write(GET);
    await settle();
    assert.equal(h.requests.length, 0, 'got a request after the 408, want none');
    assert.ok(http1.server.listening);
  });

  test('a first head that arrives in pieces: its time counts from the connection start', async () => {
    const h = await startServer({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    await until(() => h.http1.size === 1, 'the server to hold the connection');
    h.now += 600;
    client.socket.write('GET /a HTTP/1.1\r\nHo');
    await settle();
    h.now += 399;
    h.http1.checkTimeouts();
    assert.equal(h.answers.length, 0, 'got a 408 at 999 ms, want none');
    h.now += 1;
    h.http1.checkTimeouts();
    assert.deepEqual(h.answers.map((bad) => bad.status), [408], 'a 408 at 1000 ms from the connection start');
    client.socket.write('st: h\r\n\r\n');
    await settle();
    assert.equal(h.requests.length, 0, 'the rest of the head is not read after the 408');
  });

  test('a head trickling in, many pieces, then silence: its 408 comes at headTimeoutMs from the connection start, not later', async () => {
    const h = await startServer({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    client.socket.setNoDelay(true);
    for (const piece of ['G', 'E', 'T', ' ', '/', 'a', ' ', 'H', 'T', 'T']) {
      client.socket.write(piece);
      await settle();
      h.now += 50;
    }
    h.now += 499; // 999 ms since the connection started
    h.http1.checkTimeouts();
    assert.equal(h.answers.length, 0, 'got a 408 at 999 ms, want none');
    h.now += 1;
    h.http1.checkTimeouts();
    assert.deepEqual(h.answers.map((bad) => bad.status), [408]);
  });

  test('mayEndHead: true only when the bytes so far and the piece may hold the end of a head (CRLF CRLF, or a bare LF LF)', () => {
    const cases: [string, string, boolean][] = [
      ['', 'GET / HTTP/1.1\r\nHost: h\r\n\r\n', true],
      ['h\r\n', '\r\n', true], // the end split across the pieces
      ['\r\n\r', '\n', true],
      ['h\r\n', '\n', true], // a bare-LF end: the parser refuses it, at once
      ['\r\nX', '-a: b\r\n', false], // a line ends, the head does not
      ['b\r\n', 'X', false],
      ['\n\r\n', 'X', false], // what the tail held was parsed already
      ['', 'no line end', false],
    ];
    for (const [tail, chunk, want] of cases) {
      assert.equal(mayEndHead(Buffer.from(tail, 'latin1'), Buffer.from(chunk, 'latin1')), want, `${JSON.stringify(tail)} + ${JSON.stringify(chunk)}`);
    }
  });

  test('a head of 200 lines arriving 5 bytes at a time is read once it is whole; a bare LF LF end trickled in still gets its 400 at once', async () => {
    const h = await startServer({ headTimeoutMs: 60_000, maxHeadBytes: 16 * 1024 });
    const head = `GET /t HTTP/1.1\r\nHost: h\r\n${Array.from({ length: 200 }, (_, i) => `X-${i}: v\r\n`).join('')}\r\n`;
    const client = await connect(h.port);
    client.socket.setNoDelay(true);
    for (let i = 0; i < head.length; i += 5) {
      client.socket.write(head.slice(i, i + 5));
      if (i % 50 === 0) await new Promise(setImmediate); // one poll phase: the server reads what came, so many reads of a few pieces each
    }
    await until(() => client.text().endsWith('ok'), 'the response');
    assert.equal(h.requests.length, 1);
    assert.equal(h.requests[0]!.req.rawHeaders.length, 2 * 201, 'every field read');

    const bare = await connect(h.port);
    bare.socket.setNoDelay(true);
    for (const piece of ['GET /t HTTP/1.1\r\n', 'Host: h\r\n', 'X-a: b\r\n', 'X-b: c\r\n', 'X-c: d\n', '\n']) {
      bare.socket.write(piece);
      await settle();
    }
    await until(() => bare.isClosed(), 'the 400 and the close');
    assert.match(bare.text(), /^HTTP\/1\.1 400 /, `got ${JSON.stringify(bare.text().split('\r\n')[0])}`);
  });

  test('a head completed in a second piece is answered', async () => {
    const h = await startServer({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    client.socket.write('GET /a HTTP/1.1\r\nHo');
    await settle();
    h.now += 999;
    h.http1.checkTimeouts();
    client.socket.write('st: h\r\n\r\n');
    await until(() => client.text().endsWith('ok'), 'the response');
    assert.equal(h.requests.length, 1);
    assert.equal(h.requests[0]!.req.url, '/a');
  });

  test('a later head in pieces: its time counts from its first byte, and the keep-alive limit no longer applies', async () => {
    const h = await startServer({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => client.text().endsWith('ok'), 'the first response');
    h.now += 3000;
    client.socket.write('GET /b HTTP/1.1\r\n');
    await settle();
    h.now += 999;
    h.http1.checkTimeouts();
    await settle();
    assert.equal(h.answers.length, 0, 'got a 408 999 ms after the head began, want none');
    assert.equal(client.isClosed(), false);
    h.now += 1;
    h.http1.checkTimeouts();
    assert.deepEqual(h.answers.map((bad) => bad.status), [408], 'a 408 1000 ms after the head began');
    await until(() => client.isClosed(), 'the close after the 408');
  });

  test('a client that ends its side in the middle of a head gets 400', async () => {
    const h = await startServer({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    client.socket.end('GET /a HTTP/1.1\r\nHost: h\r\n');
    await until(() => h.answers.length === 1, 'onBadHead');
    assert.equal(h.answers[0]!.status, 400);
    assert.equal(h.answers[0]!.clientAddress, '127.0.0.1', 'the address is kept for the log though the client is gone');
    await until(() => client.isClosed(), 'the close');
    assert.match(client.text(), /^HTTP\/1\.1 400 /);
  });

  for (const lines of ['\n', '\r\n\r\n']) {
    test(`a client that sends only empty lines (${JSON.stringify(lines)}) and ends its side, or goes quiet, is closed without an answer or a report: no head began (RFC 9112 §2.2)`, async () => {
      const h = await startServer({ headTimeoutMs: 1000 });
      const ending = await connect(h.port);
      ending.socket.end(lines);
      await until(() => ending.isClosed(), 'the close');
      const quiet = await connect(h.port);
      quiet.socket.write(lines);
      await settle();
      h.now += 1000;
      h.http1.checkTimeouts();
      await until(() => quiet.isClosed(), 'the close at headTimeoutMs');
      assert.deepEqual([ending.text(), quiet.text()], ['', ''], 'no answers');
      assert.equal(h.answers.length, 0, `got ${h.answers.length} answers reported, want none`);
    });
  }

  test('a client that ends its side between requests is closed without an answer', async () => {
    const h = await startServer({ headTimeoutMs: 1000 });
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => client.text().endsWith('ok'), 'the response');
    const answered = client.text().length;
    client.socket.end();
    await until(() => client.isClosed(), 'the close');
    assert.equal(client.text().length, answered);
    assert.equal(h.answers.length, 0);
  });

  test('headTimeoutMs 0: a silent new connection is never timed out', async () => {
    const h = await startServer({ headTimeoutMs: 0 });
    const client = await connect(h.port);
    await until(() => h.http1.size === 1, 'the server to hold the connection');
    h.now += 1e9;
    h.http1.checkTimeouts();
    await settle();
    assert.equal(h.answers.length, 0);
    assert.equal(client.isClosed(), false);
  });

  test('an idle keep-alive connection is destroyed silently KEEP_ALIVE_GRACE_MS after keepAliveTimeoutMs, not before', async () => {
    const h = await startServer({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 });
    const client = await connect(h.port);
    h.now += 700; // time before the first request counts for nothing once it came
    client.socket.write(GET);
    await until(() => client.text().endsWith('ok'), 'the response');
    assert.match(client.text(), /\r\nKeep-Alive: timeout=5\r\n/);
    const answered = client.text().length;
    h.now += 4999 + KEEP_ALIVE_GRACE_MS;
    h.http1.checkTimeouts();
    await settle();
    assert.equal(client.isClosed(), false, 'got closed at 5999 ms idle, want open');
    assert.equal(h.answers.length, 0, 'a connection that sent a request is not a head timeout');
    assert.equal(h.http1.size, 1);
    h.now += 1;
    h.http1.checkTimeouts();
    await until(() => client.isClosed(), 'the close at 6000 ms idle');
    assert.equal(client.text().length, answered, `got ${JSON.stringify(client.text().slice(answered))} after the response, want nothing`);
    assert.equal(h.answers.length, 0);
    assert.equal(h.http1.size, 0);
  });

  test('the keep-alive idle time starts when the response finished, not when the request came', async () => {
    let pending: ClientResponse | undefined;
    const h = await startServer({ keepAliveTimeoutMs: 5000 }, (req, res) => (pending = res));
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => pending !== undefined, 'the request');
    h.now += 60_000; // a slow upstream
    h.http1.checkTimeouts();
    pending!.writeHead(200, ['Content-Length', '2']);
    pending!.end('ok');
    await until(() => client.text().endsWith('ok'), 'the response');
    h.now += 4999 + KEEP_ALIVE_GRACE_MS;
    h.http1.checkTimeouts();
    await settle();
    assert.equal(client.isClosed(), false, 'got closed 4999 ms after the response, want open');
    client.socket.write(GET);
    await until(() => h.requests.length === 2, 'the second request');
    assert.equal(h.requests.length, 2);
  });

  test('a connection with a request in flight is never timed out', async () => {
    let pending: ClientResponse | undefined;
    const h = await startServer({ headTimeoutMs: 1000, keepAliveTimeoutMs: 5000 }, (req, res) => (pending = res));
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => pending !== undefined, 'the request');
    for (const step of [999, 1, 5000, 1e9]) {
      h.now += step;
      h.http1.checkTimeouts();
    }
    await settle();
    assert.equal(client.isClosed(), false, 'got the in-flight connection closed, want it open');
    assert.equal(h.answers.length, 0);
    pending!.writeHead(200, ['Content-Length', '4']);
    pending!.end('late');
    await until(() => client.text().endsWith('late'), 'the late response');
    assert.match(client.text(), /^HTTP\/1\.1 200 OK\r\n/);
  });

  test('a pipelined request waiting behind one in flight is not timed out either', async () => {
    const pending: ClientResponse[] = [];
    const h = await startServer({ keepAliveTimeoutMs: 5000 }, (req, res) => pending.push(res));
    const client = await connect(h.port);
    client.socket.write(GET + GET);
    await until(() => pending.length === 1, 'the first request');
    h.now += 1e6;
    h.http1.checkTimeouts();
    pending[0]!.writeHead(200, ['Content-Length', '1']);
    pending[0]!.end('1');
    await until(() => pending.length === 2, 'the second request, started when the first finished');
    h.now += 1e6;
    h.http1.checkTimeouts();
    pending[1]!.writeHead(200, ['Content-Length', '1']);
    pending[1]!.end('2');
    await until(() => client.text().endsWith('2'), 'both responses');
    assert.equal(client.isClosed(), false);
  });

  test('keepAliveTimeoutMs 0: keep-alive is off, every response says Connection: close and the connection closes (nginx)', async () => {
    const h = await startServer({ keepAliveTimeoutMs: 0 });
    const client = await connect(h.port);
    client.socket.write(GET);
    await until(() => client.isClosed(), 'the close after the response');
    assert.doesNotMatch(client.text(), /Keep-Alive:/i);
    assert.match(client.text(), /\r\nConnection: close\r\n/, `got ${JSON.stringify(client.text())}`);
    assert.match(client.text(), /ok$/);
  });

});

/** A handler that reads each body to its end and answers `<bytes> <body>`, or the body's error status and code. */
function echoBody(req: ClientRequest, res: ClientResponse): void {
  const chunks: Buffer[] = [];
  if (req.body === undefined) {
    res.writeHead(200, ['Content-Length', '6']);
    res.end('nobody');
    return;
  }
  readBody(req.body, {
    data: (chunk) => chunks.push(chunk),
    end: () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const answer = `${text.length} ${text}`;
      res.writeHead(200, ['Content-Length', String(answer.length)]);
      res.end(answer);
    },
    error: (error: Error & { status?: number; code?: string }) => {
      const answer = `${error.code}`;
      res.writeHead(error.status ?? 500, ['Content-Length', String(answer.length), 'Connection', 'close']);
      res.end(answer);
    },
  });
}

/** Reads `body` to its end as the upstream exchange does: what is held first, then each piece as it comes. */
function readBody(body: RequestBody, on: { data?: (chunk: Buffer) => void; end?: () => void; error?: (error: Error) => void }): void {
  const held = body.takeHeld();
  if (held !== null) on.data?.(held);
  body.attach({
    onRequestBodyData: (chunk) => on.data?.(chunk),
    onRequestBodyEnd: () => on.end?.(),
    onRequestBodyError: (error) => on.error?.(error),
  });
}

/** A body reader that records what reaches it, in order: `data <bytes>`, `end`, `error <message>`. */
function recordingReader(events: string[]): RequestBodyReader {
  return {
    onRequestBodyData: (chunk) => events.push(`data ${chunk.toString('latin1')}`),
    onRequestBodyEnd: () => events.push('end'),
    onRequestBodyError: (error) => events.push(`error ${error.message}`),
  };
}

/** Answers `res` with `200 ok` and waits until the client has it. */
async function answerOk(res: ClientResponse, client: { text(): string }): Promise<void> {
  res.writeHead(200, ['Content-Length', '2']);
  res.end('ok');
  await until(() => client.text().endsWith('ok'), 'the answer');
}

const POST_HEAD = (length: number): string => `POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: ${length}\r\n\r\n`;

describe('Http1Server bodies (fake clock)', () => {
  test('a Content-Length body and a chunked body with an extension and trailers reach the handler de-chunked; the next request follows', async () => {
    const h = await startServer({}, echoBody);
    const client = await connect(h.port);
    client.socket.write(`${POST_HEAD(5)}hello` + 'POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 9\r\n\r\n' + GET);
    await until(() => client.text().endsWith('nobody'), 'three answers');
    const bodies = client.text().split(/HTTP\/1\.1 200 OK\r\n[^]*?\r\n\r\n/).slice(1);
    assert.deepEqual(bodies, ['5 hello', '5 abcde', 'nobody'], `got ${JSON.stringify(bodies)}`);
    assert.equal(h.requests[0]!.req.complete, true);
  });

  test('body_timeout: an upload that pauses longer gets the body error ClientTimeoutError (408); a steady one never does', async () => {
    const h = await startServer({ bodyTimeoutMs: 3000, headTimeoutMs: 1000 }, echoBody);
    const steady = await connect(h.port);
    steady.socket.write(POST_HEAD(10));
    await until(() => h.requests.length === 1, 'the steady request');
    for (let i = 0; i < 10; i++) {
      h.now += 2999; // 10 × 2999 ms: far longer than body_timeout in all, never a pause of 3000 ms
      h.http1.checkTimeouts();
      steady.socket.write('x');
      await until(() => h.requests[0]!.req.socket.bytesRead >= POST_HEAD(10).length + i + 1, `byte ${i}`);
    }
    await until(() => steady.text().endsWith('10 xxxxxxxxxx'), 'the steady upload answered');

    const paused = await connect(h.port);
    paused.socket.write(`${POST_HEAD(10)}xx`);
    await until(() => h.requests.length === 2, 'the paused request');
    await settle();
    h.now += 2999;
    h.http1.checkTimeouts();
    await settle();
    assert.equal(paused.text(), '', 'got an answer at 2999 ms, want none');
    h.now += 1;
    h.http1.checkTimeouts();
    await until(() => paused.isClosed(), 'the close after the 408');
    assert.match(paused.text(), /^HTTP\/1\.1 408 Request Timeout\r\n[^]*PRX_CLIENT_TIMEOUT$/, `got ${JSON.stringify(paused.text())}`);
  });

  test('body_timeout does not count while the handler has not taken the body (the server is not reading)', async () => {
    let resume: (() => void) | undefined;
    const h = await startServer({ bodyTimeoutMs: 1000 }, (req, res) => {
      resume = () => echoBody(req, res); // reads nothing until then
    });
    const client = await connect(h.port);
    const body = Buffer.alloc(2 * 1024 * 1024, 'b'); // more than the body buffer: the socket is paused
    client.socket.write(POST_HEAD(body.length));
    client.socket.write(body);
    await until(() => resume !== undefined, 'the request');
    await settle();
    const serverSocket = h.requests[0]!.req.socket;
    assert.ok(serverSocket.bytesRead < body.length, `got ${serverSocket.bytesRead} bytes read before the handler wanted the body, want fewer than ${body.length}`);
    h.now += 60_000;
    h.http1.checkTimeouts();
    resume!();
    await until(() => client.text().endsWith('b'.repeat(10)), 'the whole body echoed');
    assert.match(client.text(), /^HTTP\/1\.1 200 OK\r\n/);
  });

  test("the body's reader gets what was held, then each piece as it comes, then the end, never from inside attach; pause holds, resume delivers in order", async () => {
    const h = await startServer({}, () => {}); // the test reads the body itself
    const client = await connect(h.port);
    client.socket.write(`${POST_HEAD(10)}abc`);
    await until(() => h.requests.length === 1, 'the request');
    await settle();
    const { req, res } = h.requests[0]!;
    const body = req.body!;
    assert.equal(body.isReceived, false, 'got a body received whole after 3 of 10 bytes');
    const events: string[] = [];
    body.attach(recordingReader(events));
    events.push('attached');
    await settle();
    client.socket.write('defg');
    await until(() => events.length === 3, 'the second piece');
    body.pause();
    client.socket.write('hij');
    await until(() => body.isReceived, 'the last piece read');
    await settle();
    assert.deepEqual(events, ['attached', 'data abc', 'data defg'], 'got pieces delivered while paused');
    body.resume();
    events.push('resumed');
    await until(() => events.includes('end'), 'the end');
    assert.deepEqual(events, ['attached', 'data abc', 'data defg', 'resumed', 'data hij', 'end']);
    await answerOk(res, client);
  });

  test('what arrives while the reader is paused reaches it as one piece: 2,000 one-byte chunks cost one delivery, not 2,000', async () => {
    const h = await startServer({}, () => {});
    const client = await connect(h.port);
    client.socket.write('POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n');
    await until(() => h.requests.length === 1, 'the request');
    const { req, res } = h.requests[0]!;
    const body = req.body!;
    const events: string[] = [];
    body.attach(recordingReader(events));
    body.pause();
    for (let i = 0; i < 20; i++) client.socket.write('1\r\nz\r\n'.repeat(100));
    client.socket.write('0\r\n\r\n');
    await until(() => body.isReceived, 'the whole body read');
    await settle();
    assert.equal(events.length, 0, `got ${JSON.stringify(events)} while paused, want nothing`);
    body.resume();
    await until(() => events.includes('end'), 'the end');
    assert.deepEqual(events, [`data ${'z'.repeat(2000)}`, 'end'], `got ${events.length - 1} pieces`);
    await answerOk(res, client);
  });

  test('a body that came whole with its head: isReceived at once, takeHeld returns all of it, and attach then brings only the end', async () => {
    const h = await startServer({}, () => {});
    const client = await connect(h.port);
    client.socket.write(`${POST_HEAD(5)}hello`);
    await until(() => h.requests.length === 1, 'the request');
    const { req, res } = h.requests[0]!;
    const body = req.body!;
    assert.equal(body.isReceived, true);
    assert.equal(body.takeHeld()?.toString('latin1'), 'hello');
    assert.equal(body.takeHeld(), null, 'got the held bytes twice');
    const events: string[] = [];
    body.attach(recordingReader(events));
    assert.deepEqual(events, [], 'got the end inside attach');
    await settle();
    assert.deepEqual(events, ['end']);
    await answerOk(res, client);
  });

  test('detach: a reader that stops lets the server read and drop the rest, even from a socket paused with a full buffer', async () => {
    const h = await startServer({}, () => {});
    const client = await connect(h.port);
    const upload = Buffer.alloc(2 * 1024 * 1024, 'd'); // more than the body buffer: the socket is paused
    client.socket.write(POST_HEAD(upload.length));
    client.socket.write(upload);
    await until(() => h.requests.length === 1, 'the request');
    await settle();
    const { req, res } = h.requests[0]!;
    assert.ok(req.socket.bytesRead < upload.length, `got ${req.socket.bytesRead} bytes read with nobody reading, want fewer than ${upload.length}`);
    const events: string[] = [];
    req.body!.attach(recordingReader(events));
    req.body!.detach();
    await until(() => req.complete, 'the whole upload read');
    await settle();
    assert.deepEqual(events, [], 'got pieces or an end after detach');
    await answerOk(res, client);
    client.socket.write(GET);
    await until(() => h.requests.length === 2, 'the next request on the connection');
    h.requests[1]!.res.writeHead(200, ['Content-Length', '4']);
    h.requests[1]!.res.end('next');
    await until(() => client.text().endsWith('next'), 'the next answer');
    assert.equal(client.text().split('HTTP/1.1 200 OK').length, 3, `got ${JSON.stringify(client.text().slice(0, 200))}`);
  });

  test('request_timeout: a whole request (head and body) not received in time gets ClientTimeoutError, phase request', async () => {
    const errors: unknown[] = [];
    const h = await startServer({ requestTimeoutMs: 5000, bodyTimeoutMs: 0 }, (req, res) => {
      readBody(req.body!, {
        error: (error) => {
          errors.push(error);
          res.writeHead(408, ['Content-Length', '0', 'Connection', 'close']);
          res.end();
        },
      });
    });
    const client = await connect(h.port);
    h.now += 2000; // counts: the first request's time starts with the connection
    client.socket.write(`${POST_HEAD(10)}abc`);
    await until(() => h.requests.length === 1, 'the request');
    h.now += 2999;
    h.http1.checkTimeouts();
    await settle();
    assert.equal(errors.length, 0, 'got a timeout at 4999 ms, want none');
    h.now += 1;
    h.http1.checkTimeouts();
    await until(() => errors.length === 1, 'the timeout');
    assert.equal((errors[0] as { code: string; phase: string }).phase, 'request');
    await until(() => client.isClosed(), 'the close');
  });

  test('bad chunked framing: the body fails with a 400 error and the connection carries no other request', async () => {
    const h = await startServer({}, echoBody);
    const client = await connect(h.port);
    client.socket.write('POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n' + GET);
    await until(() => client.isClosed(), 'the close');
    assert.match(client.text(), /^HTTP\/1\.1 400 /, `got ${JSON.stringify(client.text())}`);
    assert.equal(h.requests.length, 1, 'the GET after the bad body is not read');
  });

  test('an answer before the body was read (early 413): the client reads the whole answer while it keeps sending, then the connection closes (lingering close)', async () => {
    const h = await startServer({}, (req, res) => {
      res.writeHead(413, ['Content-Length', '8', 'Connection', 'close']);
      res.end('too big\n');
    });
    const client = await connect(h.port, true);
    let writeError: Error | undefined;
    client.socket.on('error', (error) => (writeError = error));
    client.socket.write(POST_HEAD(4 * 1024 * 1024));
    const piece = Buffer.alloc(64 * 1024, 'u');
    for (let sent = 0; sent < 4 * 1024 * 1024 && !client.isClosed(); sent += piece.length) {
      client.socket.write(piece);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await until(() => client.text().endsWith('too big\n'), 'the 413');
    assert.equal(writeError, undefined, `got ${String(writeError)} while uploading, want the upload read and dropped`);
    assert.equal(client.isClosed(), false, 'the server lingers while the client still sends');
    client.socket.end();
    await until(() => client.isClosed(), 'the close once the client ended');
  });

  test(`an answer before the upload ended: with at most DISCARD_MAX_BYTES (${DISCARD_MAX_BYTES}) left, keep-alive, the rest read and dropped, and the next request served`, async () => {
    const h = await startServer({}, (req, res) => {
      res.writeHead(401, ['Content-Length', '5']); // the handler reads nothing of the body
      res.end('nope\n');
    });
    const client = await connect(h.port, true);
    client.socket.write(`${POST_HEAD(5000)}abc`); // 3 of 5000 body bytes
    await until(() => client.text().endsWith('nope\n'), 'the 401');
    assert.match(client.text(), /\r\nConnection: keep-alive\r\n/, `got ${JSON.stringify(client.text())}`);
    client.socket.write(`${'x'.repeat(4997)}${GET}`); // the rest of the body, then the next request
    await until(() => (client.text().match(/HTTP\/1\.1 401/g) ?? []).length === 2, 'the answer to the next request');
    assert.deepEqual(h.requests.map((r) => r.req.method), ['POST', 'GET'], 'the dropped body was not read as a request');
    assert.equal(client.isClosed(), false);
  });

  test('an answer to an Expect: 100-continue request that got no 100 says Connection: close: its client may never send the body (Go)', async () => {
    const h = await startServer({}, (req, res) => {
      res.writeHead(401, ['Content-Length', '5']);
      res.end('nope\n');
    });
    const client = await connect(h.port, true);
    client.socket.write('POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 40\r\nExpect: 100-continue\r\n\r\n');
    await until(() => client.text().endsWith('nope\n'), 'the 401');
    assert.match(client.text(), /\r\nConnection: close\r\n/, `got ${JSON.stringify(client.text())}`);
    assert.doesNotMatch(client.text(), /100 Continue/);
    client.socket.end();
    await until(() => client.isClosed(), 'the close');
  });

  test(`dropping the rest of a body ends after LINGER_MS (${LINGER_MS} ms) in all, however steadily it trickles`, async () => {
    const h = await startServer({ bodyTimeoutMs: 1000 }, (req, res) => {
      res.writeHead(401, ['Content-Length', '0']);
      res.end();
    });
    const client = await connect(h.port, true);
    client.socket.write(`${POST_HEAD(1000)}a`);
    await until(() => client.text().includes('\r\n\r\n'), 'the 401');
    assert.match(client.text(), /Connection: keep-alive/);
    for (let elapsed = 0; elapsed < LINGER_MS - 500; elapsed += 500) {
      client.socket.write('b'); // a byte every 500 ms: never a body_timeout pause
      await settle();
      h.now += 500;
      h.http1.checkTimeouts();
      assert.equal(h.http1.size, 1, `got closed after ${elapsed + 500} ms of dropping, want ${LINGER_MS}`);
    }
    client.socket.write('b');
    await settle();
    h.now += 500;
    h.http1.checkTimeouts();
    await until(() => h.http1.size === 0, `the server to let go of the connection at LINGER_MS`);
  });

  test(`an answer before the upload ended with more than DISCARD_MAX_BYTES left says Connection: close (RFC 9112 §9.6), then the connection closes`, async () => {
    const h = await startServer({}, (req, res) => {
      res.writeHead(401, ['Content-Length', '5']); // the handler says nothing about the connection
      res.end('nope\n');
    });
    const client = await connect(h.port, true);
    client.socket.write(`${POST_HEAD(DISCARD_MAX_BYTES + 4)}abc`);
    await until(() => client.text().endsWith('nope\n'), 'the 401');
    assert.match(client.text(), /\r\nConnection: close\r\n/, `got ${JSON.stringify(client.text())}`);
    assert.doesNotMatch(client.text(), /keep-alive/i);
    client.socket.end();
    await until(() => client.isClosed(), 'the close');
  });

  test(`a lingering close ends after LINGER_MS (${LINGER_MS} ms) even if the client never closes`, async () => {
    const h = await startServer({}, (req, res) => {
      res.writeHead(413, ['Content-Length', '0', 'Connection', 'close']);
      res.end();
    });
    const client = await connect(h.port, true);
    client.socket.write(`${POST_HEAD(100)}abc`);
    await until(() => client.text().includes('\r\n\r\n'), 'the 413');
    await settle();
    h.now += LINGER_MS - 1;
    h.http1.checkTimeouts();
    await settle();
    // The client has the FIN already (it keeps its side open): only the server side tells the close.
    assert.equal(h.http1.size, 1, 'got closed before LINGER_MS');
    h.now += 1;
    h.http1.checkTimeouts();
    await until(() => h.http1.size === 0, 'the close at LINGER_MS');
  });

  test('a small body that came with its head is complete at once: an answer that ignores it keeps the connection', async () => {
    const h = await startServer({}, (req, res) => {
      res.writeHead(404, ['Content-Length', '1']);
      res.end('n');
    });
    const client = await connect(h.port);
    client.socket.write(`${POST_HEAD(3)}abc${GET}`);
    await until(() => h.requests.length === 2, 'the second request on the same connection');
    assert.equal(h.requests[0]!.req.complete, true);
    assert.equal(client.isClosed(), false);
  });
});

describe('Http1Server requests one at a time, HTTP/1.0, Expect, CONNECT, versions, upgrades', () => {
  test('pipelined requests: the next reaches the handler only when the previous response finished; bytes read ahead stay bounded', async () => {
    const pending: ClientResponse[] = [];
    const h = await startServer({ maxHeadBytes: 8192 }, (req, res) => pending.push(res));
    const client = await connect(h.port);
    const many = GET.repeat(Math.ceil((4 * 1024 * 1024) / GET.length));
    client.socket.write(many);
    await until(() => pending.length === 1, 'the first request');
    await settle();
    assert.equal(pending.length, 1, 'got a second request while the first is in flight, want none');
    const read = h.requests[0]!.req.socket.bytesRead;
    assert.ok(read < 1024 * 1024, `got ${read} bytes read ahead while busy, want a bounded buffer (< 1 MiB of ${many.length})`);
    for (let i = 1; i <= 3; i++) {
      pending[i - 1]!.writeHead(200, ['Content-Length', '1']);
      pending[i - 1]!.end(String(i));
      await until(() => pending.length === i + 1, `request ${i + 1}`);
    }
    assert.ok(client.text().endsWith('3'), 'answers in order');
  });

  test('HTTP/1.0: no chunked answer (close-delimited), keep-alive only when asked', async () => {
    const h = await startServer({}, (req, res) => {
      res.writeHead(200, req.url === '/len' ? ['Content-Length', '2'] : []);
      res.end('ok');
    });
    const plain = await connect(h.port);
    plain.socket.write('GET /len HTTP/1.0\r\n\r\n');
    await until(() => plain.isClosed(), 'the close after an HTTP/1.0 answer');
    assert.match(plain.text(), /\r\nConnection: close\r\n\r\nok$/);
    const kept = await connect(h.port);
    kept.socket.write('GET /len HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
    await until(() => kept.text().endsWith('ok'), 'the answer');
    assert.match(kept.text(), /\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n/);
    kept.socket.write('GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
    await until(() => kept.isClosed(), 'the close that ends the unframed body');
    const second = kept.text().slice(kept.text().lastIndexOf('HTTP/1.1'));
    assert.doesNotMatch(second, /Transfer-Encoding/i);
    assert.match(second, /\r\nConnection: close\r\n\r\nok$/, `got ${JSON.stringify(second)}`);
  });

  test('Expect: 100-continue is passed to the handler; writeContinue sends the 100 before the answer', async () => {
    const h = await startServer({}, (req, res) => {
      res.writeContinue();
      echoBody(req, res);
    });
    const client = await connect(h.port);
    client.socket.write('POST /e HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n');
    await until(() => client.text() === 'HTTP/1.1 100 Continue\r\n\r\n', 'the 100');
    assert.equal(h.requests[0]!.isExpectingContinue, true);
    client.socket.write('hi');
    await until(() => client.text().endsWith('2 hi'), 'the answer');
  });

  for (const [bytes, status, extra] of [
    // A 405 says what is allowed (RFC 9110 §15.5.6): for an authority, nothing.
    ['CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 405, 'Allow: \\r\\n'],
    ['GET /a HTTP/2.0\r\nHost: h\r\n\r\n', 505, ''],
    ['PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 505, ''],
    ['GET /a HTTP/1.1\r\nBad Header\r\n\r\n', 400, ''],
  ] as const) {
    test(`${JSON.stringify(bytes.split('\r\n')[0])}: the server's own ${status}, Connection: close, Date, reported once`, async () => {
      const h = await startServer({});
      const client = await connect(h.port);
      client.socket.write(bytes);
      await until(() => client.isClosed(), 'the close');
      assert.match(client.text(), new RegExp(`^HTTP/1\\.1 ${status} [^\\r\\n]+\\r\\nContent-Type: text/plain; charset=utf-8\\r\\nContent-Length: \\d+\\r\\n${extra}Connection: close\\r\\nDate: [^\\r\\n]+ GMT\\r\\n\\r\\n[^\\n]+\\n$`), `got ${JSON.stringify(client.text())}`);
      assert.deepEqual(h.answers.map((answer) => answer.status), [status]);
      assert.equal(h.requests.length, 0, 'nothing reaches the handler');
    });
  }

  for (const bytes of ['HEAD /a HTTP/2.0\r\nHost: h\r\n\r\n', 'HEAD /a HTTP/1.1\r\nX A: b\r\n\r\n', 'HEAD /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n']) {
    test(`${JSON.stringify(bytes.split('\r\n').slice(0, 2).join(' '))}: the server's own answer to a refused HEAD has its Content-Length and no body (RFC 9110 §9.3.2)`, async () => {
      const h = await startServer({});
      const client = await connect(h.port);
      client.socket.write(bytes);
      await until(() => client.isClosed(), 'the close');
      assert.match(client.text(), /^HTTP\/1\.1 (400|505) [^\r\n]+\r\n[^]*Content-Length: [1-9]\d*\r\n[^]*\r\n\r\n$/, `got ${JSON.stringify(client.text())}`);
    });
  }

  test('refuse: a socket from another listener gets the server own answer before anything is read, the client bytes are dropped, and it lingers until LINGER_MS', async () => {
    const h = await startServer({});
    const other = net.createServer({ allowHalfOpen: true }, (socket) => h.http1.refuse(socket, 400, 'bad request: refused here', Buffer.from('GET /a HTTP/1.1\r\nHost: h\r\n')));
    servers.push(other);
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const client = await connect((other.address() as AddressInfo).port, true);
    await until(() => client.text().endsWith('\r\n\r\nbad request: refused here\n'), 'the answer');
    assert.match(client.text(), /^HTTP\/1\.1 400 Bad Request\r\nContent-Type: text\/plain; charset=utf-8\r\nContent-Length: 26\r\nConnection: close\r\nDate: [^\r\n]+ GMT\r\n\r\n/, `got ${JSON.stringify(client.text())}`);
    assert.deepEqual(h.answers, [{ status: 400, clientAddress: '127.0.0.1', method: '-', target: '-', httpVersion: undefined, receivedLine: 'GET /a HTTP/1.1', bytesSent: 26, durationMs: 0, isRefusedUnread: true }]);
    client.socket.write(GET); // read and dropped while lingering: never a request
    await settle();
    assert.equal(h.requests.length, 0, 'nothing reaches the handler');
    // The client has the FIN already (it keeps its side open): only the server side tells the close.
    assert.equal(h.http1.size, 1, 'lingering: the client may still be sending');
    h.now += LINGER_MS;
    h.http1.checkTimeouts();
    await until(() => h.http1.size === 0, 'the server to let go of the connection at LINGER_MS');
  });

  test('isTunnelledUpgrade: a protocol named, none of them h2c', () => {
    const rows: [string, boolean][] = [
      ['websocket', true],
      ['WebSocket, foo/1', true],
      ['h2c', false],
      ['websocket, H2C', false],
      [' h2c\t', false],
      ['', false], // offers nothing (RFC 9110 §7.8)
      [' \t ', false],
      [',', false],
    ];
    for (const [upgrade, want] of rows) assert.equal(isTunnelledUpgrade(upgrade), want, JSON.stringify(upgrade));
  });

  test('an upgrade that offers h2c reaches the handler as a plain request (no upgrade), and the connection stays open for the next', async () => {
    const h = await startServer({}, (req, res) => {
      res.writeHead(200, ['Content-Length', '2']);
      res.end('ok');
    });
    const client = await connect(h.port);
    client.socket.write('GET /a HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n');
    await until(() => client.text().endsWith('ok'), 'the answer');
    assert.equal(h.requests[0]!.req.upgrade, undefined, 'got an upgrade, want a plain request');
    assert.match(client.text(), /\r\nConnection: keep-alive\r\n/);
    client.socket.write(GET);
    await until(() => h.requests.length === 2, 'the next request on the same connection');
  });

  test('an upgrade request reaches the handler without a body; switchProtocols hands over the socket and the bytes after the head', async () => {
    let handedOver: { socket: net.Socket; head: Buffer } | undefined;
    const h = await startServer({}, (req, res) => {
      assert.equal(req.body, undefined);
      handedOver = res.switchProtocols('Switching Protocols', ['Upgrade', 'echo', 'Connection', 'Upgrade']);
    });
    const client = await connect(h.port);
    client.socket.write('GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nearly bytes');
    await until(() => handedOver !== undefined, 'the upgrade');
    await until(() => client.text().endsWith('\r\n\r\n'), 'the 101');
    assert.equal(client.text(), 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
    assert.equal(h.http1.size, 0, 'the server no longer holds the connection');
    const { socket, head } = handedOver!;
    // Bytes that came with the head are handed over; later ones are the caller's to read.
    await settle();
    socket.on('data', (chunk: Buffer) => socket.write(chunk));
    socket.resume();
    socket.write(head);
    client.socket.write(' and later ones');
    await until(() => client.text().endsWith('early bytes and later ones'), 'the echo');
    h.now += 1e9;
    h.http1.checkTimeouts();
    await settle();
    assert.equal(client.isClosed(), false, 'timeouts no longer apply to the handed-over socket');
    socket.destroy();
  });
});

// ---- Http1Response against node's ServerResponse ---------------------------------------------------

/** What a test does to a response; the same script runs on both implementations. */
type Script = (res: ClientResponse) => void | Promise<void>;

/**
 * Sends `request` (raw) to a node:http server whose handler runs `script` on node's ServerResponse,
 * and to an Http1Server whose onRequest runs it on Http1Response; returns both byte streams (Date values
 * normalized), each read from its first byte until the connection is idle for a moment or closed.
 */
async function bothResponses(request: string, script: Script, keepAliveTimeoutMs = 5000): Promise<{ own: string; node: string; ownClosed: boolean; nodeClosed: boolean }> {
  const nodeServer = http.createServer({ keepAliveTimeout: keepAliveTimeoutMs }, (req, res) => void script(res as unknown as ClientResponse));
  servers.push(nodeServer);
  await new Promise<void>((resolve) => nodeServer.listen(0, '127.0.0.1', resolve));
  const h = await startServer({ keepAliveTimeoutMs }, (req, res) => void script(res));
  const read = async (port: number): Promise<{ text: string; isClosed: boolean }> => {
    const client = await connect(port);
    client.socket.write(request);
    // The first byte may take longer than one idle gap on a busy machine: wait for it (or the close) first.
    const deadline = Date.now() + 5_000;
    while (client.text().length === 0 && !client.isClosed() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    let last = -1;
    while (client.text().length !== last && !client.isClosed()) {
      last = client.text().length;
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    client.socket.destroy();
    return { text: client.text().replace(/\r\nDate: [^\r\n]*\r\n/g, '\r\nDate: <date>\r\n'), isClosed: client.isClosed() };
  };
  const [own, node] = await Promise.all([read(h.port), read((nodeServer.address() as AddressInfo).port)]);
  assert.equal(h.requests.length, 1, 'the Http1Server answered');
  return { own: own.text, node: node.text, ownClosed: own.isClosed, nodeClosed: node.isClosed };
}

async function assertSameBytes(request: string, script: Script, keepAliveTimeoutMs?: number): Promise<string> {
  const result = await bothResponses(request, script, keepAliveTimeoutMs);
  assert.equal(result.own, result.node, 'Http1Response (got) vs ServerResponse (want)');
  assert.ok(result.node.length > 0, 'node answered');
  return result.own;
}

describe('Http1Response writes what ServerResponse writes', () => {
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
    assert.equal(closed.own, closed.node);
    assert.equal(closed.ownClosed, true, 'closed after a Connection: close request');
    assert.equal(closed.nodeClosed, true);
    const callerClose = await bothResponses(GET, (res) => {
      res.writeHead(200, ['Content-Length', '2', 'Connection', 'close']);
      res.end('ok');
    });
    assert.equal(callerClose.own, callerClose.node);
    assert.equal(callerClose.ownClosed, callerClose.nodeClosed);
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
        const side = res instanceof http.ServerResponse ? 'node' : 'own';
        try {
          call(res);
          codes.set(side, 'no error');
        } catch (error) {
          codes.set(side, (error as NodeJS.ErrnoException).code);
        }
        if (!res.headersSent) res.writeHead(200, 'OK', ['Content-Length', '2']);
        res.end('ok');
      });
      assert.equal(codes.get('own'), codes.get('node'), `${name}: got ${String(codes.get('own'))}, want ${String(codes.get('node'))}`);
      assert.notEqual(codes.get('node'), 'no error', `${name}: node threw nothing`);
      assert.equal(result.own, result.node, `${name}: bytes`);
    }
  });

  test('an HTTP/1.0 request: no chunked framing, close-delimited without Content-Length; keep-alive when asked and framed', async () => {
    await assertSameBytes('GET /a HTTP/1.0\r\n\r\n', (res) => {
      res.writeHead(200, ['X-A', '1']);
      res.write(Buffer.from('abc'));
      res.end();
    });
    await assertSameBytes('GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n', (res) => {
      res.writeHead(200, ['Content-Length', '2']);
      res.end('ok');
    });
    await assertSameBytes('GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n', (res) => {
      res.writeHead(200, []);
      res.end('unframed');
    });
  });

  test('writes with no writeHead use statusCode and chunked framing', async () => {
    await assertSameBytes(GET, (res) => {
      res.write(Buffer.from('implicit'));
      res.end();
    });
  });
});

describe('Http1Response writeHead checkedLength', () => {
  test('fields before checkedLength are written without a check, the ones after are still checked (ERR_INVALID_CHAR) and nothing is written then', async () => {
    const errors: string[] = [];
    const h = await startServer({}, (req, res) => {
      if (req.url === '/bad') {
        try {
          res.writeHead(200, 'OK', ['Content-Length', '2', 'X-Late', 'a\r\nInjected: 1'], 2);
        } catch (error) {
          errors.push((error as NodeJS.ErrnoException).code ?? String(error));
        }
      }
      res.writeHead(200, 'OK', ['Content-Length', '2', 'X-Parsed', 'v'], 4);
      res.end('ok');
    });
    const client = await connect(h.port);
    client.socket.write('GET /bad HTTP/1.1\r\nHost: h\r\n\r\n');
    await until(() => client.text().endsWith('ok'), 'the response');
    assert.deepEqual(errors, ['ERR_INVALID_CHAR']);
    assert.match(client.text(), /^HTTP\/1\.1 200 OK\r\nContent-Length: 2\r\nX-Parsed: v\r\n/);
    assert.doesNotMatch(client.text(), /Injected/);
  });

  test('checkedLines are sent in place of the first checkedLength fields, before the fields after them and the writer\'s own', async () => {
    const h = await startServer({}, (req, res) => {
      const headers = ['Content-Length', '2', 'X-Parsed', 'v', 'X-Added', 'w'];
      // Lines that differ from the list (case) show which of the two was written.
      if (req.url === '/lines') res.writeHead(200, 'OK', headers, 4, 'content-length: 2\r\nx-parsed: v\r\n');
      else res.writeHead(200, 'OK', headers, 4);
      res.end('ok');
    });
    const client = await connect(h.port);
    client.socket.write('GET /lines HTTP/1.1\r\nHost: h\r\n\r\nGET /list HTTP/1.1\r\nHost: h\r\n\r\n');
    await until(() => client.text().split('\r\n\r\nok').length === 3, 'both responses');
    const [lines, list] = client.text().split('\r\n\r\nok');
    assert.match(lines!, /^HTTP\/1\.1 200 OK\r\ncontent-length: 2\r\nx-parsed: v\r\nX-Added: w\r\nDate: [^\r]+\r\nConnection: keep-alive\r\n/);
    assert.equal(lines!.replace('content-length', 'Content-Length').replace('x-parsed', 'X-Parsed'), list, 'the same head but for the lines given');
  });
});
