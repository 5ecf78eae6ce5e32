/**
 * The proxy's HTTP/1.1 server (src/wire/http1-server.ts) through the real proxy, on raw sockets:
 * behaviour specifications for every request shape the server reads.
 *
 * 1. Answers: upstream framings (Content-Length, chunked, trailers, HEAD, 204, 304, close-delimited,
 *    1xx), status lines and header bytes relayed unchanged, the proxy's own answers (404, 401, 502,
 *    503, 504, 400) dated and one line long, keep-alive and `Connection: close`, pipelining in order,
 *    forwarding headers as the backend sees them. Each exchange must leave no stray byte.
 * 2. Request shapes: bodies, heads in pieces, upgrades, Expect, HTTP/1.0, malformed or large heads,
 *    also in the middle of a keep-alive connection; timeouts (`header_timeout`, `keepalive_timeout`).
 * 3. Connection behaviour: a client that half-closes aborts its upstream request (499 logged);
 *    graceful shutdown closes idle connections at once and lets an in-flight request finish with
 *    `Connection: close`; a slow reader gets every byte of a large response.
 * 4. The issue 12 specifications: 3000 pipelined POSTs on one connection use one upstream
 *    connection at a time with RSS flat; `body_timeout` cuts a paused upload, never a steady one;
 *    an early 413 reaches a client still uploading 8 MiB (lingering close), 10 of 10 tries.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { hashPassword } from '../../src/auth/password-hash.js';
import {
  headerValues,
  listenBackend,
  startBackend,
  startRawBackend,
  startTestProxy,
  waitFor,
  type Backend,
  type RecordedRequest,
  type TestProxy,
} from '../helpers/proxy-harness.js';
import { encodeFrame, FrameDecoder, Opcode, startEchoServer, acceptValueFor, type EchoServer } from '../helpers/websocket.js';

/** Every backend answer carries this Date, so an upstream Date is compared exactly. */
const UPSTREAM_DATE = 'Mon, 01 Jan 2001 00:00:00 GMT';
const PASSWORD = 'secret';
const HASH = hashPassword(PASSWORD);
const ONE_MIB = patternBytes(1024 * 1024);

// ---- a raw HTTP/1.1 client that knows where responses end ----------------------------------------

/**
 * Where the first response in `data` ends (RFC 9112 §6.3), or undefined while incomplete. `method`
 * is the request's (HEAD: no body); a response without framing ends at `isClosed`.
 */
function responseEnd(data: Buffer, method: string, isClosed: boolean): number | undefined {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const bodyStart = headEnd + 4;
  const lines = data.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = Number(lines[0]!.slice(9, 12));
  const values = (name: string): string[] =>
    lines
      .slice(1)
      .filter((line) => line.toLowerCase().startsWith(`${name}:`))
      .map((line) => line.slice(name.length + 1).trim());
  if (method === 'HEAD' || status < 200 || status === 204 || status === 304) return bodyStart;
  if (values('transfer-encoding').some((value) => /chunked/i.test(value))) {
    let pos = bodyStart;
    for (;;) {
      const lineEnd = data.indexOf('\r\n', pos);
      if (lineEnd < 0) return undefined;
      const size = parseInt(data.subarray(pos, lineEnd).toString('latin1'), 16);
      if (size === 0) {
        for (let p = lineEnd + 2; ; ) {
          const end = data.indexOf('\r\n', p);
          if (end < 0) return undefined;
          if (end === p) return end + 2;
          p = end + 2;
        }
      }
      pos = lineEnd + 2 + size + 2;
      if (pos > data.length) return undefined;
    }
  }
  const contentLength = values('content-length')[0];
  if (contentLength !== undefined) {
    const end = bodyStart + Number(contentLength);
    return data.length >= end ? end : undefined;
  }
  return isClosed ? data.length : undefined;
}

class RawClient {
  readonly socket: net.Socket;
  #data = Buffer.alloc(0);
  isClosed = false;
  #wake: (() => void) | undefined;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#data = Buffer.concat([this.#data, chunk]);
      this.#wake?.();
    });
    socket.on('close', () => {
      this.isClosed = true;
      this.#wake?.();
    });
    socket.on('error', () => {});
  }

  static connect(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => resolve(new RawClient(socket)));
      socket.once('error', reject);
    });
  }

  write(bytes: string | Buffer): void {
    this.socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
  }

  /** Bytes received and not yet consumed. */
  get pending(): Buffer {
    return this.#data;
  }

  /** Resolves when `predicate` holds (checked on every event), rejects after `timeoutMs`. */
  async #until(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; got so far: ${JSON.stringify(this.#data.toString('latin1').slice(0, 300))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  /** The next whole response (its bytes), for a request with `method`. */
  async readResponse(method = 'GET', timeoutMs = 3000): Promise<Buffer> {
    let end: number | undefined;
    await this.#until(() => (end = responseEnd(this.#data, method, this.isClosed)) !== undefined || (this.isClosed && this.#data.length === 0), timeoutMs, `a response to ${method}`);
    if (end === undefined) return Buffer.alloc(0);
    const response = this.#data.subarray(0, end);
    this.#data = this.#data.subarray(end);
    return response;
  }

  /** The next `byteCount` bytes (or fewer if the connection closes). */
  async readBytes(byteCount: number, timeoutMs = 3000): Promise<Buffer> {
    await this.#until(() => this.#data.length >= byteCount || this.isClosed, timeoutMs, `${byteCount} bytes`);
    const bytes = this.#data.subarray(0, byteCount);
    this.#data = this.#data.subarray(bytes.length);
    return bytes;
  }

  /** True once the server closed the connection, false if it is still open after `timeoutMs`. */
  async waitClose(timeoutMs: number): Promise<boolean> {
    await this.#until(() => this.isClosed, timeoutMs, 'close').catch(() => {});
    return this.isClosed;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** The proxy's own `Date` values become `<date>`; the upstream's fixed one stays. */
function normalizeDates(text: string): string {
  return text.replace(/\r\nDate: ([^\r\n]*)\r\n/gi, (line: string, value: string) => (value === UPSTREAM_DATE ? line : '\r\nDate: <date>\r\n'));
}

function patternBytes(length: number): Buffer {
  const bytes = Buffer.alloc(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + (i >> 8)) & 0xff;
  return bytes;
}

function sha1(bytes: Buffer): string {
  return createHash('sha1').update(bytes).digest('hex');
}

function statusOf(response: Buffer): number {
  return Number(response.subarray(9, 12).toString('latin1'));
}

function bodyOf(response: Buffer): string {
  return response.subarray(response.indexOf('\r\n\r\n') + 4).toString('latin1');
}

function headOf(response: Buffer): string {
  return response.subarray(0, response.indexOf('\r\n\r\n') + 2).toString('latin1');
}

// ---- backends -------------------------------------------------------------------------------------

/** node:http backend: answers by the last path segment. */
function nodeHandler(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): void {
  res.setHeader('Date', UPSTREAM_DATE);
  const name = (req.url ?? '/').split('?')[0]!.split('/').pop();
  switch (name) {
    case 'cl':
      res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '5', 'Set-Cookie': ['a=1', 'b=2'] });
      res.end('hello');
      return;
    case 'chunked':
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.write('one ');
      res.write('two ');
      setTimeout(() => res.end('three'), 5);
      return;
    case 'empty':
      res.end();
      return;
    case '204':
      res.writeHead(204, { 'X-Empty': 'yes' });
      res.end();
      return;
    case '304':
      res.writeHead(304, { ETag: '"v1"' });
      res.end();
      return;
    case 'big':
      res.writeHead(200, { 'Content-Length': String(ONE_MIB.length) });
      res.end(ONE_MIB);
      return;
    case 'big-chunked':
      res.write(ONE_MIB.subarray(0, 300_000));
      res.end(ONE_MIB.subarray(300_000));
      return;
    case 'echo':
      res.end(`${req.method} ${req.url} ${body.length} ${body.toString('latin1')}`);
      return;
    default:
      res.end('ok');
  }
}

/** Raw upstream answers, by path: bytes node:http's server would not write (odd status lines, obs-text, trailers). */
const RAW_RESPONSES: Readonly<Record<string, string>> = {
  '/r/trailers-announced': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n`,
  '/r/trailers-unannounced': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: 42\r\nX-Other: x\r\n\r\n`,
  '/r/head-cl': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nContent-Length: 5\r\n\r\n`,
  '/r/head-chunked': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nTransfer-Encoding: chunked\r\n\r\n`,
  '/r/empty-reason': `HTTP/1.1 200 \r\nDate: ${UPSTREAM_DATE}\r\nContent-Length: 2\r\n\r\nok`,
  '/r/odd-reason': `HTTP/1.1 299 Fine, thank you -- (really) !\r\nDate: ${UPSTREAM_DATE}\r\nContent-Length: 2\r\n\r\nok`,
  '/r/latin1-reason': `HTTP/1.1 200 D\xe9j\xe0 vu\r\nDate: ${UPSTREAM_DATE}\r\nContent-Length: 2\r\n\r\nok`,
  '/r/obs-text': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nX-Latin: caf\xe9 \x80\xff end\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Length: 4\r\n\r\ncaf\xe9`,
  '/r/obs-text-chunked': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nX-Latin: \xe9t\xe9\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n\xe9t\xe9\r\n0\r\n\r\n`,
  '/r/obs-text-204': `HTTP/1.1 204 No Content\r\nDate: ${UPSTREAM_DATE}\r\nX-Latin: \xe9t\xe9\r\n\r\n`,
  '/r/no-date': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  '/r/304-length': `HTTP/1.1 304 Not Modified\r\nDate: ${UPSTREAM_DATE}\r\nETag: "x"\r\nContent-Length: 100\r\n\r\n`,
  '/r/early-hints': `HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nContent-Length: 2\r\n\r\nok`,
  '/r/205': `HTTP/1.1 205 Reset Content\r\nDate: ${UPSTREAM_DATE}\r\nContent-Length: 0\r\n\r\n`,
  '/r/hop-by-hop': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=99\r\nX-Empty: \r\ndate-like: no\r\nContent-Length: 2\r\n\r\nok`,
  '/r/interleaved': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nSet-Cookie: a=1\r\nX-Mid: m\r\nset-cookie: b=2\r\nVary: Accept\r\nX-MID: n\r\nvary: Origin\r\nContent-Length: 2\r\n\r\nok`,
  '/r/disposition': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nContent-Length: 2\r\nContent-Disposition: attachment; filename="caf\xe9.txt"\r\n\r\nok`,
  '/r/disposition-first': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nContent-Disposition: attachment; filename="caf\xe9.txt"\r\nContent-Length: 2\r\n\r\nok`,
  '/r/control-char': `HTTP/1.1 200 Fine\r\nDate: ${UPSTREAM_DATE}\r\nX-Del: a\x7fb\r\nContent-Length: 2\r\n\r\nok`,
  '/r/lower-date': `HTTP/1.1 200 OK\r\ndate: ${UPSTREAM_DATE}\r\ncontent-length: 2\r\n\r\nok`,
  '/r/bad-chunk-after-data': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n`,
  '/r/traced': `HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\nX-Before: 1\r\nx-proxy-trace:  spoofed \r\nX-Proxy-Trace: route=inner\r\nX-After: 2\r\nContent-Length: 2\r\n\r\nok`,
};

/** A keep-alive raw backend answering bodiless requests from RAW_RESPONSES; `/r/hang` is never answered. */
function rawHandler(socket: net.Socket): void {
  let received = '';
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
    for (let end = received.indexOf('\r\n\r\n'); end >= 0; end = received.indexOf('\r\n\r\n')) {
      const head = received.slice(0, end);
      received = received.slice(end + 4);
      const target = head.split(' ')[1] ?? '';
      const answer = RAW_RESPONSES[target];
      if (answer !== undefined) socket.write(Buffer.from(answer, 'latin1'));
      else if (target === '/r/close-delimited') socket.end(`HTTP/1.1 200 OK\r\nDate: ${UPSTREAM_DATE}\r\n\r\nuntil the end`);
      else if (target !== '/r/hang') socket.write(`HTTP/1.1 404 Not Found\r\nDate: ${UPSTREAM_DATE}\r\nContent-Length: 0\r\n\r\n`);
    }
  });
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function pairIni(nodeUrl: string, rawUrl: string, refusedPort: number): string {
  return [
    '[proxy.node]',
    'path = /n',
    `pass = ${nodeUrl}`,
    '[proxy.raw]',
    'path = /r',
    `pass = ${rawUrl}`,
    '[proxy.hang]',
    'path = /r/hang',
    `pass = ${rawUrl}`,
    'read_timeout = 100ms',
    '[proxy.private]',
    'path = /private',
    `pass = ${nodeUrl}`,
    'auth_basic = Private',
    `auth_user = tom:${HASH}`,
    '[proxy.refused]',
    'path = /refused',
    `pass = http://127.0.0.1:${refusedPort}`,
    '[proxy.none]',
    'path = /none',
    `pass = ${nodeUrl} down`,
    '[proxy.traced]',
    'path = /traced',
    `pass = ${nodeUrl}`,
    'trace = on',
    '[proxy.traced-raw]',
    'path = /r/traced',
    `pass = ${rawUrl}`,
    'trace = on',
    '',
  ].join('\n');
}

// ---- 1. differential ------------------------------------------------------------------------------

describe('answers: what the client receives, byte for byte', () => {
  let nodeBackend: Backend;
  let rawBackend: Awaited<ReturnType<typeof startRawBackend>>;
  let proxy: TestProxy;

  before(async () => {
    nodeBackend = await startBackend(nodeHandler);
    rawBackend = await startRawBackend(rawHandler);
    proxy = await startTestProxy(pairIni(nodeBackend.url, rawBackend.url, await closedPort()));
  });
  after(async () => {
    await proxy.close();
    await nodeBackend.close();
    await rawBackend.close();
  });

  interface Outcome {
    readonly responses: string[];
    readonly isClosed: boolean;
    readonly backendRequests: RecordedRequest[];
  }

  /**
   * Sends `request` (one write, or several 20 ms apart) on one connection, reads one response per
   * method and notes whether the server closed; every request is logged once and no stray byte follows.
   */
  async function exchange(request: string | readonly string[], methods: readonly string[] = ['GET']): Promise<Outcome> {
    const writes = typeof request === 'string' ? [request] : request;
    const recordedBefore = nodeBackend.requests.length;
    const loggedBefore = proxy.logs.length;
    const client = await RawClient.connect(proxy.port);
    for (const [i, bytes] of writes.entries()) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 20));
      client.write(bytes);
    }
    const responses: Buffer[] = [];
    for (const method of methods) responses.push(await client.readResponse(method));
    const last = responses.at(-1)?.toString('latin1') ?? '';
    // A response that announces the close must be followed by it; otherwise give a close a moment to show.
    const isClosed = /\r\nConnection: close\r\n/i.test(headOf(Buffer.from(last, 'latin1'))) ? await client.waitClose(1000) : await client.waitClose(10);
    assert.equal(client.pending.length, 0, `got ${client.pending.length} unexpected extra bytes ${JSON.stringify(client.pending.toString('latin1'))}, want none`);
    client.destroy();
    await waitFor(() => proxy.logs.length >= loggedBefore + methods.length, 1000, 'one log record per request');
    return {
      responses: responses.map((response) => normalizeDates(response.toString('latin1'))),
      isClosed,
      backendRequests: nodeBackend.requests.slice(recordedBefore),
    };
  }

  const get = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: example.test\r\n${extra}\r\n`;

  test('upstream Content-Length response, two Set-Cookie headers', async () => {
    const { responses, isClosed } = await exchange(get('/n/cl'));
    assert.match(responses[0]!, /^HTTP\/1\.1 200 OK\r\n/, `got ${responses[0]}`);
    assert.match(responses[0]!, /\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n/);
    assert.match(responses[0]!, /\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n/);
    assert.match(responses[0]!, new RegExp(`\\r\\nDate: ${UPSTREAM_DATE}\\r\\n`), 'upstream Date passes through');
    assert.ok(responses[0]!.endsWith('\r\n\r\nhello'), `got ${JSON.stringify(responses[0])}`);
    assert.equal(isClosed, false, 'got a closed keep-alive connection, want it open');
  });

  test('upstream chunked response: chunked again, the small chunks of one read merged (chunk boundaries are the transfer coding\'s, RFC 9112 §7.1, and nginx and Go re-chunk too)', async () => {
    const { responses } = await exchange(get('/n/chunked'));
    assert.match(responses[0]!, /\r\nTransfer-Encoding: chunked\r\n/);
    const body = responses[0]!.slice(responses[0]!.indexOf('\r\n\r\n') + 4);
    assert.match(body, /^(?:[0-9a-f]+\r\n[a-z ]+\r\n)+0\r\n\r\n$/, `got ${JSON.stringify(body)}`);
    assert.equal(body.replace(/[0-9a-f]+\r\n([a-z ]*)\r\n/g, '$1'), 'one two three', `got ${JSON.stringify(body)}`);
  });

  test('chunked with announced trailers, with and without TE: trailers', async () => {
    for (const extra of ['', 'TE: trailers\r\n']) {
      const { responses } = await exchange(get('/r/trailers-announced', extra));
      assert.match(responses[0]!, /\r\nTrailer: X-Sum\r\n/);
      assert.ok(responses[0]!.endsWith('0\r\nX-Sum: 42\r\n\r\n'), `got ${JSON.stringify(responses[0])}`);
    }
  });

  test('chunked with unannounced trailers, with and without TE: trailers', async () => {
    for (const extra of ['', 'TE: trailers\r\n']) {
      const { responses } = await exchange(get('/r/trailers-unannounced', extra));
      assert.ok(responses[0]!.endsWith('5\r\nhello\r\n0\r\nX-Sum: 42\r\nX-Other: x\r\n\r\n'), `got ${JSON.stringify(responses[0])}`);
    }
  });

  test('empty 200, 204 and 304', async () => {
    const empty = await exchange(get('/n/empty'));
    assert.match(empty.responses[0]!, /\r\nContent-Length: 0\r\n/);
    const noContent = await exchange(get('/n/204'));
    assert.match(noContent.responses[0]!, /^HTTP\/1\.1 204 No Content\r\n/);
    assert.doesNotMatch(noContent.responses[0]!, /Transfer-Encoding/);
    const notModified = await exchange(get('/n/304', 'If-None-Match: "v1"\r\n'));
    assert.match(notModified.responses[0]!, /^HTTP\/1\.1 304 Not Modified\r\n/);
  });

  test('HEAD to a Content-Length response and to a chunked response', async () => {
    const head = (path: string): string => `HEAD ${path} HTTP/1.1\r\nHost: example.test\r\n\r\n`;
    const cl = await exchange(head('/r/head-cl'), ['HEAD']);
    assert.match(cl.responses[0]!, /\r\nContent-Length: 5\r\n/);
    assert.ok(cl.responses[0]!.endsWith('\r\n\r\n'));
    await exchange(head('/r/head-chunked'), ['HEAD']);
    await exchange(head('/n/cl'), ['HEAD']);
    await exchange(head('/n/chunked'), ['HEAD']);
  });

  test('a 1 MiB body, with Content-Length and chunked', async () => {
    const { responses } = await exchange(get('/n/big'));
    assert.equal(responses[0]!.length - responses[0]!.indexOf('\r\n\r\n') - 4, ONE_MIB.length);
    assert.equal(sha1(Buffer.from(bodyOf(Buffer.from(responses[0]!, 'latin1')), 'latin1')), sha1(ONE_MIB), 'body bytes');
    await exchange(get('/n/big-chunked'));
  });

  test('upstream status lines: empty reason, odd reason, obs-text reason', async () => {
    const empty = await exchange(get('/r/empty-reason'));
    assert.match(empty.responses[0]!, /^HTTP\/1\.1 200 \r\n/, `got ${JSON.stringify(empty.responses[0]!.slice(0, 30))}`);
    const odd = await exchange(get('/r/odd-reason'));
    assert.match(odd.responses[0]!, /^HTTP\/1\.1 299 Fine, thank you -- \(really\) !\r\n/);
    const latin1 = await exchange(get('/r/latin1-reason'));
    assert.match(latin1.responses[0]!, /^HTTP\/1\.1 200 D\xe9j\xe0 vu\r\n/);
  });

  test('upstream headers with obs-text bytes pass unchanged', async () => {
    const { responses } = await exchange(get('/r/obs-text'));
    assert.match(responses[0]!, /\r\nX-Latin: caf\xe9 \x80\xff end\r\n/, `got ${JSON.stringify(responses[0])}`);
    assert.ok(responses[0]!.endsWith('\r\n\r\ncaf\xe9'));
    const chunked = await exchange(get('/r/obs-text-chunked'));
    assert.match(chunked.responses[0]!, /\r\nX-Latin: \xe9t\xe9\r\n/);
    const noContent = await exchange(get('/r/obs-text-204'));
    assert.match(noContent.responses[0]!, /\r\nX-Latin: \xe9t\xe9\r\n/);
  });

  test("an upstream without Date gets the proxy's (RFC 9110 §6.6.1); one with Date keeps it", async () => {
    const { responses } = await exchange(get('/r/no-date'));
    assert.match(responses[0]!, /\r\nDate: <date>\r\n/, `got ${JSON.stringify(responses[0])}, want the proxy's Date`);
    const dated = await exchange(get('/r/lower-date'));
    assert.match(dated.responses[0]!, new RegExp(`\\r\\ndate: ${UPSTREAM_DATE}\\r\\n`), 'the upstream Date byte for byte');
    assert.doesNotMatch(dated.responses[0]!, /\r\nDate: <date>/, 'and no second one');
  });

  test("the proxy's own 404 (no route), also to HEAD", async () => {
    const { responses } = await exchange(get('/nowhere'));
    assert.match(responses[0]!, /^HTTP\/1\.1 404 Not Found\r\n/);
    assert.match(responses[0]!, /\r\nDate: <date>\r\n/, 'the proxy dates its own answers');
    assert.ok(responses[0]!.endsWith('\r\n\r\nno route for this request\n'));
    await exchange('HEAD /nowhere HTTP/1.1\r\nHost: x\r\n\r\n', ['HEAD']);
  });

  test("the proxy's own 401 (auth_basic), without and with wrong credentials; right ones pass", async () => {
    const missing = await exchange(get('/private/x'));
    assert.match(missing.responses[0]!, /^HTTP\/1\.1 401 Unauthorized\r\n/);
    assert.match(missing.responses[0]!, /\r\nWWW-Authenticate: Basic realm="Private", charset="UTF-8"\r\n/);
    const basic = (password: string): string => `Authorization: Basic ${Buffer.from(`tom:${password}`).toString('base64')}\r\n`;
    const wrong = await exchange(get('/private/x', basic('nope')));
    assert.match(wrong.responses[0]!, /^HTTP\/1\.1 401 /);
    const right = await exchange(get('/private/cl', basic(PASSWORD)));
    assert.match(right.responses[0]!, /^HTTP\/1\.1 200 OK\r\n/);
    assert.equal(right.backendRequests.length, 1);
    assert.deepEqual(headerValues(right.backendRequests[0]!.rawHeaders, 'authorization'), [], 'credentials checked by the proxy stay with it');
  });

  test("the proxy's own 502 (upstream refuses the connection)", async () => {
    const { responses } = await exchange(get('/refused'));
    assert.match(responses[0]!, /^HTTP\/1\.1 502 Bad Gateway\r\n/);
  });

  test("the proxy's own 503 (no upstream available), with Retry-After", async () => {
    const { responses } = await exchange(get('/none'));
    assert.match(responses[0]!, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
    assert.match(responses[0]!, /\r\nRetry-After: \d+\r\n/);
  });

  test("the proxy's own 504 (read_timeout)", async () => {
    const { responses } = await exchange(get('/r/hang'));
    assert.match(responses[0]!, /^HTTP\/1\.1 504 Gateway Timeout\r\n/);
  });

  test('client Connection: close: answered, then closed', async () => {
    const { responses, isClosed } = await exchange(get('/n/cl', 'Connection: close\r\n'));
    assert.match(responses[0]!, /\r\nConnection: close\r\n/);
    assert.equal(isClosed, true, 'got an open connection, want it closed');
    const error = await exchange(get('/nowhere', 'Connection: close\r\n'));
    assert.equal(error.isClosed, true);
  });

  test('two pipelined GETs in one write, answered in order', async () => {
    const { responses } = await exchange(get('/n/chunked') + get('/n/cl'), ['GET', 'GET']);
    assert.ok(responses[0]!.includes('three'), 'first answer is the first request');
    assert.ok(responses[1]!.endsWith('hello'));
  });

  test('pipelined GET, HEAD and a 404 then Connection: close', async () => {
    const { isClosed } = await exchange(
      get('/n/cl') + 'HEAD /n/big HTTP/1.1\r\nHost: h\r\n\r\n' + get('/nowhere') + get('/n/empty', 'Connection: close\r\n'),
      ['GET', 'HEAD', 'GET', 'GET'],
    );
    assert.equal(isClosed, true);
  });

  test('a trace = on route: X-Proxy-Trace', async () => {
    const { responses } = await exchange(get('/traced/cl'));
    assert.match(responses[0]!, /\r\nX-Proxy-Trace: route=traced; [^\r\n]*pick=/);
  });

  test('a trace = on route: the upstream\'s own X-Proxy-Trace fields, in any case, give way to the proxy\'s (a break test saw both), the others stay in order', async () => {
    const { responses } = await exchange(get('/r/traced'));
    const traces = responses[0]!.split('\r\n').filter((line) => /^x-proxy-trace:/i.test(line));
    assert.equal(traces.length, 1, `got ${JSON.stringify(traces)}, want the proxy's alone`);
    assert.match(traces[0]!, /^X-Proxy-Trace: route=traced-raw; /);
    assert.match(responses[0]!, /\r\nX-Before: 1\r\nX-After: 2\r\nContent-Length: 2\r\n/);
  });

  test('forwarding headers and hop-by-hop removal as the backend sees them', async () => {
    const { backendRequests } = await exchange(
      'GET /n/echo?q=1&r=%20 HTTP/1.1\r\nHost: example.test:8080\r\nUser-Agent: t\r\nX-Forwarded-For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\n' +
        'X-Forwarded-Host: evil\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\nKeep-Alive: timeout=9\r\nTE: trailers\r\nCookie: a=1\r\nCookie: b=2\r\n' +
        'Accept:  */*  \r\nX-Empty:\r\nContent-Length: 0\r\n\r\n',
    );
    const raw = backendRequests[0]!.rawHeaders;
    assert.deepEqual(headerValues(raw, 'x-forwarded-for'), ['127.0.0.1'], `got ${JSON.stringify(raw)}`);
    assert.deepEqual(headerValues(raw, 'x-drop'), []);
    assert.deepEqual(headerValues(raw, 'cookie'), ['a=1', 'b=2']);
    for (const method of ['DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH']) {
      const outcome = await exchange(`${method} /n/echo HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n`);
      assert.equal(outcome.backendRequests[0]?.method, method);
    }
    await exchange('POST /n/echo HTTP/1.1\r\nHost: h\r\n\r\n');
  });

  test('more upstream shapes: 304 with Content-Length, 103 before 200, 205, close-delimited body, hop-by-hop and empty headers, lowercase date', async () => {
    await exchange(get('/r/304-length'));
    await exchange(get('/r/early-hints'));
    await exchange(get('/r/205'));
    const closeDelimited = await exchange(get('/r/close-delimited'));
    assert.ok(closeDelimited.responses[0]!.includes('until the end'), `got ${JSON.stringify(closeDelimited.responses[0])}`);
    const hop = await exchange(get('/r/hop-by-hop'));
    assert.doesNotMatch(hop.responses[0]!, /X-Hop|timeout=99/);
    await exchange(get('/r/lower-date'));
  });

  test('repeated upstream header names, interleaved and in different case', async () => {
    const { responses } = await exchange(get('/r/interleaved'));
    assert.equal((responses[0]!.match(/set-cookie: /gi) ?? []).length, 2, `got ${JSON.stringify(responses[0])}`);
  });

  // node:http's ServerResponse turns a Content-Disposition value into latin1 bytes once a
  // Content-Length came before it, then refuses it (ERR_INVALID_CHAR) when it had obs-text: the
  // proxy's own writer relays the bytes unchanged, as the README promises (found by issue 12).
  test('Content-Disposition with obs-text, before and after Content-Length: relayed unchanged', async () => {
    for (const path of ['/r/disposition-first', '/r/disposition']) {
      const { responses } = await exchange(get(path));
      assert.match(responses[0]!, /^HTTP\/1\.1 200 OK\r\n/, `${path}: got ${JSON.stringify(responses[0])}`);
      assert.match(responses[0]!, /\r\nContent-Disposition: attachment; filename="caf\xe9\.txt"\r\n/);
    }
  });

  test('a body that turns malformed after the head: what came before is sent, then the connection is cut; the log says how it ended', async () => {
    const loggedBefore = proxy.logs.length;
    const client = await RawClient.connect(proxy.port);
    client.write(get('/r/bad-chunk-after-data'));
    assert.equal(await client.waitClose(2000), true, 'got the connection open, want it cut');
    await waitFor(() => proxy.logs.length > loggedBefore, 1000, 'the log record');
    const record = proxy.logs[loggedBefore]!;
    assert.match(client.pending.toString('latin1'), /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\n5\r\nhello\r\n$/, `got ${JSON.stringify(client.pending.toString('latin1'))}`);
    assert.equal(record.status, 200);
    assert.equal(record.bytesSent, 5);
    assert.equal(record.attempts[0]?.error, 'PRX_UPSTREAM_PROTOCOL: malformed upstream response: invalid chunk size line "zz"', `got attempt error ${String(record.attempts[0]?.error)}`);
  });

  test("an upstream header node refuses to write (DEL byte): the proxy's own 502", async () => {
    const { responses } = await exchange(get('/r/control-char'));
    assert.match(responses[0]!, /^HTTP\/1\.1 502 Bad Gateway\r\n/, `got ${JSON.stringify(responses[0]!.slice(0, 40))}`);
  });

  test('a head in three pieces 20 ms apart', async () => {
    const { responses } = await exchange(['GET /n/cl HTTP/1.1\r\nHo', 'st: h\r\nX-A: 1\r', '\n\r\n']);
    assert.ok(responses[0]!.endsWith('hello'));
  });

  test('Connection: close spelled other ways', async () => {
    for (const value of ['CLOSE', 'keep-alive, close', 'Close , x-foo']) {
      const outcome = await exchange(get('/n/cl', `Connection: ${value}\r\n`));
      assert.equal(outcome.isClosed, true, `Connection: ${value}: got open, want closed`);
    }
    const open = await exchange(get('/n/cl', 'Connection: keep-alive\r\n'));
    assert.equal(open.isClosed, false);
  });

  test("the proxy's own 400s from request checks (bad Host, two Authorization headers)", async () => {
    const badHost = await exchange('GET /n/cl HTTP/1.1\r\nHost: exa mple\r\n\r\n');
    assert.match(badHost.responses[0]!, /^HTTP\/1\.1 400 Bad Request\r\n/, `got ${JSON.stringify(badHost.responses[0])}`);
    const twoAuth = await exchange('GET /n/cl HTTP/1.1\r\nHost: h\r\nAuthorization: Basic a\r\nAuthorization: Basic b\r\n\r\n');
    assert.match(twoAuth.responses[0]!, /^HTTP\/1\.1 400 Bad Request\r\n/);
    assert.equal(twoAuth.isClosed, true);
  });
});

// The cases wait for real timeouts (the server's clock is not faked here), so they run at the same time.
describe('timeouts on real sockets: header_timeout and keepalive_timeout', { concurrency: true }, () => {
  let backend: Backend;
  let proxy: TestProxy;

  before(async () => {
    backend = await startBackend(nodeHandler);
    proxy = await startTestProxy(`[server]\nheader_timeout = 200ms\nkeepalive_timeout = 300ms\n[proxy.node]\npath = /\npass = ${backend.url}\n`);
  });
  after(async () => {
    await proxy.close();
    await backend.close();
  });

  /** Opens a connection, runs `scenario`, and returns what came after it and when the server closed. */
  async function closing(scenario: (client: RawClient) => Promise<void>): Promise<{ text: string; closedAfterMs: number }> {
    const client = await RawClient.connect(proxy.port);
    await scenario(client);
    const startedAt = Date.now();
    const isClosed = await client.waitClose(2000);
    assert.equal(isClosed, true, 'got an open connection, want it closed by the timeout');
    return { text: normalizeDates(client.pending.toString('latin1')), closedAfterMs: Date.now() - startedAt };
  }

  // That nothing is reported to the log either is test/wire/http1-server.test.ts's (these cases share one log).
  test('a connection that sends nothing is closed silently after header_timeout (nginx)', async () => {
    const result = await closing(async () => {});
    assert.equal(result.text, '', `got ${JSON.stringify(result.text)}, want no answer`);
    assert.ok(result.closedAfterMs >= 150, `closed after ${result.closedAfterMs} ms, want about 200`);
  });

  test('a head that stops half-way gets 408 and a log line', async () => {
    const logged = proxy.logs.length;
    const result = await closing(async (client) => client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\n'));
    assert.match(result.text, /^HTTP\/1\.1 408 Request Timeout\r\n[^]*\r\nConnection: close\r\nDate: <date>\r\n\r\n[^\n]+\n$/, `got ${JSON.stringify(result.text)}`);
    await waitFor(() => proxy.logs.slice(logged).some((record) => record.status === 408), 1000, 'the log line');
  });

  test('a later head that stops half-way gets 408', async () => {
    const result = await closing(async (client) => {
      client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n');
      await client.readResponse();
      client.write('GET /n/cl HTTP/1.1\r\n');
    });
    assert.match(result.text, /^HTTP\/1\.1 408 /);
  });

  test('a head in pieces keeps its first header_timeout: pieces every 100 ms do not extend it', async () => {
    const startedAt = Date.now();
    const result = await closing(async (client) => {
      for (const piece of ['GET /n/cl', ' HTTP/1.1\r\n', 'Host: h\r\n', 'X-A: 1\r\n']) {
        if (client.isClosed) break;
        client.write(piece);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
    const totalMs = Date.now() - startedAt;
    assert.match(result.text, /^HTTP\/1\.1 408 /);
    assert.ok(totalMs < 450, `got the 408 after ${totalMs} ms, want it at header_timeout (200 ms) from the connection's start`);
  });

  test('a client that ends its side in the middle of a head gets 400, logged', async () => {
    const logged = proxy.logs.length;
    const result = await closing(async (client) => void client.socket.end('GET /n/cl HTTP/1.1\r\nHost: h\r\n'));
    assert.match(result.text, /^HTTP\/1\.1 400 /);
    await waitFor(() => proxy.logs.slice(logged).some((record) => record.status === 400), 1000, 'the 400 log line');
  });

  test('an idle keep-alive connection is closed silently 1 s after keepalive_timeout (node:http does the same)', async () => {
    const result = await closing(async (client) => {
      client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n');
      assert.match(headOf(await client.readResponse()), /\r\nKeep-Alive: timeout=0\r\n/); // 300 ms, in whole seconds
    });
    assert.equal(result.text, '', 'nothing after the response');
    // keepalive_timeout + 1 s (node's HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER), so a client that trusts
    // `Keep-Alive: timeout=N` never races the close.
    assert.ok(result.closedAfterMs >= 1200 && result.closedAfterMs < 1900, `closed after ${result.closedAfterMs} ms, want about 1300`);
  });
});

// ---- 2. request shapes ------------------------------------------------------------------------------

describe('request shapes: bodies, pieces, upgrades, Expect, HTTP/1.0, odd heads, on one connection too', () => {
  let backend: Backend;
  let echo: EchoServer;
  let proxy: TestProxy;

  before(async () => {
    backend = await startBackend(nodeHandler);
    echo = await startEchoServer();
    proxy = await startTestProxy(`[proxy.node]\npath = /n\npass = ${backend.url}\n[proxy.ws]\npath = /ws\npass = http://127.0.0.1:${echo.port}\n`);
  });
  after(async () => {
    await proxy.close();
    await backend.close();
    await echo.close();
  });

  /** Runs `body` and returns how many requests the server read meanwhile. */
  async function counting(body: () => Promise<void>): Promise<number> {
    const before = proxy.proxy.serverStats.requests;
    await body();
    return proxy.proxy.serverStats.requests - before;
  }

  const post = (body: string): string => `POST /n/echo HTTP/1.1\r\nHost: h\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

  test('pipelined after a request that closes the connection: the answers due still come, the rest is dropped', async () => {
    for (const closing of ['GET /n/cl HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n', 'GET /n/cl HTTP/1.0\r\n\r\n']) {
      const client = await RawClient.connect(proxy.port);
      client.write(post('z') + closing + 'GET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n');
      const first = await client.readResponse();
      assert.equal(bodyOf(first), 'POST /n/echo 1 z', `got ${JSON.stringify(first.toString('latin1').slice(0, 60))}`);
      const second = await client.readResponse();
      assert.equal(statusOf(second), 200, `${JSON.stringify(closing)}: got ${headOf(second)}`);
      assert.equal(bodyOf(second), 'hello');
      assert.equal(await client.waitClose(2000), true, 'got the connection open, want it closed after the closing request');
      assert.equal(client.pending.length, 0, `got ${JSON.stringify(client.pending.toString('latin1'))} after the close-marked answer, want nothing`);
    }
  });

  test('a GET then a POST with a body on one keep-alive connection', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(async () => {
      client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n');
      const first = await client.readResponse();
      assert.equal(bodyOf(first), 'hello');
      client.write(post('payload'));
      const second = await client.readResponse();
      assert.equal(statusOf(second), 200, `got ${headOf(second)}`);
      assert.equal(bodyOf(second), 'POST /n/echo 7 payload');
      client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n');
      assert.equal(bodyOf(await client.readResponse()), 'hello', 'node keeps serving the connection');
    });
    client.destroy();
    assert.equal(moved, 3, `got ${moved} requests read, want 3`);
  });

  test('a head split across two writes 50 ms apart is answered (the server waits for the rest)', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(async () => {
      client.write('GET /n/cl HTTP/1.1\r\nHo');
      await new Promise((resolve) => setTimeout(resolve, 50));
      client.write('st: h\r\n\r\n');
      const response = await client.readResponse();
      assert.equal(statusOf(response), 200, `got ${headOf(response)}`);
      assert.equal(bodyOf(response), 'hello');
    });
    client.destroy();
    assert.equal(moved, 1, `got ${moved} requests read, want 1`);
  });

  test('a head trickling in, byte after byte, is answered', async () => {
    const client = await RawClient.connect(proxy.port);
    client.socket.setNoDelay(true);
    const head = 'GET /n/cl HTTP/1.1\r\nHost: h\r\nX-Slow: 1\r\n\r\n';
    const moved = await counting(async () => {
      for (const byte of head) {
        client.write(byte);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      const response = await client.readResponse();
      assert.equal(statusOf(response), 200, `got ${headOf(response)}`);
      assert.equal(bodyOf(response), 'hello');
    });
    client.destroy();
    assert.equal(moved, 1, `got ${moved} requests read, want 1`);
  });

  test('a head that ends in bare LFs, or is not HTTP at all, gets 400 at once, not a 408 after header_timeout', async () => {
    for (const bytes of ['GET /n/cl HTTP/1.1\r\nHost: h\r\n\n', '\x16\x03\x01\x00\xa5\x01\x00']) {
      const client = await RawClient.connect(proxy.port);
      const startedAt = Date.now();
      client.socket.write(Buffer.from(bytes, 'latin1'));
      assert.equal(await client.waitClose(2000), true, `${JSON.stringify(bytes)}: got the connection still open after 2 s, want an answer and a close`);
      const elapsedMs = Date.now() - startedAt;
      assert.match(client.pending.toString('latin1'), /^HTTP\/1\.1 400 /, `${JSON.stringify(bytes)}: got ${JSON.stringify(client.pending.toString('latin1').slice(0, 40))}`);
      assert.ok(elapsedMs < 1000, `${JSON.stringify(bytes)}: answered after ${elapsedMs} ms, want at once`);
    }
  });

  test('a GET pipelined with a POST and its body in one write', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(async () => {
      client.write('GET /n/chunked HTTP/1.1\r\nHost: h\r\n\r\n' + post('abc') + 'GET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n');
      assert.ok(bodyOf(await client.readResponse()).includes('three'));
      assert.equal(bodyOf(await client.readResponse()), 'POST /n/echo 3 abc');
      assert.equal(bodyOf(await client.readResponse()), 'hello');
    });
    client.destroy();
    assert.equal(moved, 3, `got ${moved} requests read, want 3`);
  });

  /** A WebSocket handshake on `client`; checks the 101 and one echoed frame. */
  async function upgradeAndEcho(client: RawClient): Promise<void> {
    const key = Buffer.alloc(16, 7).toString('base64');
    client.write(`GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    const response = await client.readResponse();
    assert.equal(statusOf(response), 101, `got ${headOf(response)}`);
    assert.match(headOf(response), new RegExp(`\\r\\nSec-WebSocket-Accept: ${acceptValueFor(key).replace(/[+/]/g, '\\$&')}\\r\\n`, 'i'));
    client.write(encodeFrame(Opcode.text, 'ping over the tunnel', { mask: true }));
    const frame = await client.readBytes(2 + 'ping over the tunnel'.length);
    const decoder = new FrameDecoder();
    const frames = decoder.push(frame);
    assert.equal(frames[0]?.payload.toString(), 'ping over the tunnel', 'echoed frame');
  }

  test('a WebSocket upgrade as the first request', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(() => upgradeAndEcho(client));
    client.destroy();
    assert.equal(moved, 1, `got ${moved} requests read, want 1`);
  });

  test('a WebSocket upgrade after a GET on the same connection', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(async () => {
      client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n');
      assert.equal(bodyOf(await client.readResponse()), 'hello');
      await upgradeAndEcho(client);
    });
    client.destroy();
    assert.equal(moved, 2, `got ${moved} requests read, want 2`);
  });

  test('Expect: 100-continue', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(async () => {
      client.write('POST /n/echo HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n');
      const interim = await client.readResponse();
      assert.equal(interim.toString('latin1'), 'HTTP/1.1 100 Continue\r\n\r\n');
      client.write('body');
      const response = await client.readResponse();
      assert.equal(bodyOf(response), 'POST /n/echo 4 body');
    });
    client.destroy();
    assert.equal(moved, 1, `got ${moved} requests read, want 1`);
  });

  test('Expect: 100-continue on a request without a body: no 100, just the answer (nginx)', async () => {
    const client = await RawClient.connect(proxy.port);
    client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n');
    const response = await client.readResponse();
    assert.equal(statusOf(response), 200, `got ${headOf(response)}, want the 200 at once, not a 100 first`);
    client.destroy();
  });

  test('an HTTP/1.0 request', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(async () => {
      client.write('GET /n/cl HTTP/1.0\r\nHost: h\r\n\r\n');
      const response = await client.readResponse();
      assert.equal(statusOf(response), 200, `got ${headOf(response)}`);
      assert.equal(bodyOf(response), 'hello');
      assert.equal(await client.waitClose(1000), true, 'HTTP/1.0 without keep-alive: closed after the answer');
    });
    assert.equal(moved, 1, `got ${moved} requests read, want 1`);
  });

  test("a malformed head: the proxy's own 400 with the parser's reason, logged", async () => {
    const client = await RawClient.connect(proxy.port);
    const logged = proxy.logs.length;
    const moved = await counting(async () => {
      client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\nBad Header Line\r\n\r\n');
      const response = await client.readResponse();
      assert.equal(statusOf(response), 400, `got ${headOf(response)}`);
      assert.equal(await client.waitClose(1000), true);
    });
    assert.equal(moved, 0, `got ${moved} requests read, want 0 (refused before it is one)`);
    await waitFor(() => proxy.logs.length > logged, 1000, 'the access log record');
    assert.equal(proxy.logs.at(-1)?.status, 400);
  });

  test('a POST with a 100 kB body sent while a GET is in flight', async () => {
    const client = await RawClient.connect(proxy.port);
    const big = 'x'.repeat(100_000);
    const moved = await counting(async () => {
      client.write('GET /n/chunked HTTP/1.1\r\nHost: h\r\n\r\n');
      await new Promise((resolve) => setTimeout(resolve, 20)); // the GET in flight
      client.write(post(big));
      assert.ok(bodyOf(await client.readResponse()).includes('three'));
      assert.equal(bodyOf(await client.readResponse()), `POST /n/echo 100000 ${big}`);
    });
    client.destroy();
    assert.equal(moved, 2, `got ${moved} requests read, want 2`);
  });

  test('an empty line before the next request is skipped (RFC 9112 §2.2)', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(async () => {
      client.write('GET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n\r\nGET /n/cl HTTP/1.1\r\nHost: h\r\n\r\n');
      assert.equal(bodyOf(await client.readResponse()), 'hello');
      assert.equal(bodyOf(await client.readResponse()), 'hello');
    });
    client.destroy();
    assert.equal(moved, 2, `got ${moved} requests read, want 2`);
  });

  test('a head under max_header_size (16k) is served; one over it gets 431', async () => {
    const client = await RawClient.connect(proxy.port);
    const moved = await counting(async () => {
      client.write(`GET /n/echo HTTP/1.1\r\nHost: h\r\nX-Big: ${'b'.repeat(10_000)}\r\n\r\n`);
      const response = await client.readResponse();
      assert.equal(statusOf(response), 200, `got ${headOf(response)}`);
    });
    client.destroy();
    assert.equal(moved, 1, `got ${moved} requests read, want 1`);
    assert.equal(headerValues(backend.requests.at(-1)!.rawHeaders, 'x-big')[0]?.length, 10_000);
    const tooLarge = await RawClient.connect(proxy.port);
    tooLarge.write(`GET /n/echo HTTP/1.1\r\nHost: h\r\nX-Big: ${'b'.repeat(17_000)}\r\n\r\n`);
    const refused = await tooLarge.readResponse();
    assert.equal(statusOf(refused), 431, `got ${headOf(refused)}`);
    assert.equal(await tooLarge.waitClose(1000), true);
  });
});

// ---- 3. connection behaviour -----------------------------------------------------------------------

describe('connections', () => {
  test('a client that half-closes after its GET aborts the upstream request; 499 logged', async (t) => {
    let arrivedUpstreamRequests = 0;
    let closedUpstreamRequests = 0;
    const backend = await listenBackend(
      http.createServer((req, res) => {
        arrivedUpstreamRequests++;
        res.on('close', () => closedUpstreamRequests++); // never answered: only the proxy can end it
      }),
    );
    const proxy = await startTestProxy(`[proxy.slow]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const client = await RawClient.connect(proxy.port);
    client.write('GET /slow HTTP/1.1\r\nHost: h\r\n\r\n');
    await waitFor(() => proxy.proxy.serverStats.requests === 1, 2000, 'the server to read the request');
    await waitFor(() => arrivedUpstreamRequests === 1, 2000, 'the request at the backend');
    assert.equal(closedUpstreamRequests, 0);
    client.socket.end();
    await waitFor(() => closedUpstreamRequests === 1, 2000, 'the backend to see its request closed');
    await waitFor(() => proxy.logs.length === 1, 2000, 'the access log record');
    assert.equal(proxy.logs[0]!.status, 499, `got status ${proxy.logs[0]!.status}, want 499`);
    assert.equal(await client.waitClose(1000), true, 'the proxy closes the half-closed connection');
    assert.equal(client.pending.length, 0, 'no response bytes');
  });

  test('a client that half-closes in the middle of its upload gets nothing, and the log says 499 with 0 bytes sent (nginx)', async (t) => {
    let arrivedUpstreamRequests = 0;
    const backend = await listenBackend(
      http.createServer((req) => {
        arrivedUpstreamRequests++;
        req.resume();
      }),
    );
    const proxy = await startTestProxy(`[proxy.up]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const client = await RawClient.connect(proxy.port);
    client.write(`POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n${'u'.repeat(4096)}`);
    await waitFor(() => arrivedUpstreamRequests === 1, 2000, 'the request at the backend');
    client.socket.end();
    await waitFor(() => proxy.logs.length === 1, 2000, 'the access log record');
    assert.deepEqual([proxy.logs[0]!.status, proxy.logs[0]!.bytesSent], [499, 0], `got ${JSON.stringify(proxy.logs[0])}`);
    assert.equal(await client.waitClose(1000), true, 'the proxy closes the half-closed connection');
    assert.equal(client.pending.length, 0, 'no response bytes');
  });

  test('graceful shutdown: idle connections close at once, an in-flight request finishes with Connection: close', async (t) => {
    let release: (() => void) | undefined;
    const backend = await startBackend((req, res) => {
      if (req.url === '/slow') release = () => res.end('late');
      else res.end('ok');
    });
    const proxy = await startTestProxy(`[proxy.all]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const idle = await RawClient.connect(proxy.port);
    idle.write('GET /fast HTTP/1.1\r\nHost: h\r\n\r\n');
    assert.match(headOf(await idle.readResponse()), /\r\nConnection: keep-alive\r\n/);
    const busy = await RawClient.connect(proxy.port);
    busy.write('GET /slow HTTP/1.1\r\nHost: h\r\n\r\n');
    await waitFor(() => release !== undefined, 2000, 'the slow request at the backend');
    assert.equal(proxy.proxy.serverStats.requests, 2);
    assert.equal(proxy.proxy.serverStats.openConnections, 2);

    const startedAt = Date.now();
    const closing = proxy.proxy.close(3000);
    assert.equal(await idle.waitClose(500), true, 'the idle connection closes at once');
    assert.ok(Date.now() - startedAt < 400, `idle connection closed after ${Date.now() - startedAt} ms, want at once`);
    assert.equal(idle.pending.length, 0, 'silently');
    assert.equal(busy.isClosed, false, 'the in-flight request is not cut');
    release!();
    const response = await busy.readResponse();
    assert.equal(statusOf(response), 200);
    assert.equal(bodyOf(response), 'late');
    assert.match(headOf(response), /\r\nConnection: close\r\n/, `got ${headOf(response)}`);
    assert.equal(await busy.waitClose(1000), true, 'closed after the last response');
    assert.equal(await closing, true, 'close() drained in time');
    assert.equal(proxy.proxy.serverStats.openConnections, 0);
  });

  test('a client that stops reading for read_timeout is cut as its own stall, not as an upstream timeout', async (t) => {
    const body = Buffer.alloc(16 * 1024 * 1024, 'x');
    const backend = await startBackend((req, res) => {
      res.writeHead(200, { 'Content-Length': String(body.length) });
      res.end(body);
    });
    const proxy = await startTestProxy(`[proxy.all]\npath = /\npass = ${backend.url}\nread_timeout = 300ms\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const client = await RawClient.connect(proxy.port);
    client.socket.pause(); // reads nothing
    client.write('GET /big HTTP/1.1\r\nHost: h\r\n\r\n');
    await waitFor(() => proxy.logs.length === 1, 3000, 'the log record of the cut response');
    const record = proxy.logs[0]!;
    assert.equal(record.status, 200, 'the head was sent');
    assert.equal(record.attempts[0]?.error, 'PRX_CLIENT_ABORT', `got attempt ${JSON.stringify(record.attempts[0])}, want the client's stall`);
    client.destroy();
  });

  test('a slow reader of a 4 MiB response gets every byte (backpressure through drain)', async (t) => {
    const body = patternBytes(4 * 1024 * 1024);
    let pausedWrites = 0;
    const backend = await startBackend((req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      let offset = 0;
      const pump = (): void => {
        while (offset < body.length) {
          const chunk = body.subarray(offset, offset + 64 * 1024);
          offset += chunk.length;
          if (!res.write(chunk)) {
            pausedWrites++;
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
    });
    const proxy = await startTestProxy(`[proxy.all]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const client = await RawClient.connect(proxy.port);
    client.socket.pause();
    client.write('GET /big HTTP/1.1\r\nHost: h\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(proxy.proxy.serverStats.requests, 1);
    client.socket.resume();
    const response = await client.readResponse('GET', 5000);
    assert.equal(statusOf(response), 200);
    const chunked = response.subarray(response.indexOf('\r\n\r\n') + 4);
    const received: Buffer[] = [];
    for (let pos = 0; ; ) {
      const lineEnd = chunked.indexOf('\r\n', pos);
      const size = parseInt(chunked.subarray(pos, lineEnd).toString('latin1'), 16);
      if (size === 0) break;
      received.push(chunked.subarray(lineEnd + 2, lineEnd + 2 + size));
      pos = lineEnd + 2 + size + 2;
    }
    const all = Buffer.concat(received);
    assert.equal(all.length, body.length, `got ${all.length} body bytes, want ${body.length}`);
    if (!all.equals(body)) {
      let at = 0;
      while (all[at] === body[at]) at++;
      const chunkSizes = received.slice(0, 8).map((chunk) => chunk.length);
      assert.fail(`body bytes differ from byte ${at} on (${all.length} bytes received; first chunk sizes ${chunkSizes.join(', ')})`);
    }
    assert.ok(pausedWrites > 0, `got ${pausedWrites} paused backend writes, want the slow reader to push back to the backend`);
  });
});

// ---- 4. the issue 12 specifications ----------------------------------------------------------------

describe('issue 12: one request at a time, body_timeout, early answers, versions', () => {
  test('3000 pipelined POSTs on one connection: answered in order over one upstream connection at a time, RSS flat', async (t) => {
    let openConnections = 0;
    let mostOpenConnections = 0;
    let inFlight = 0;
    let mostInFlight = 0;
    let served = 0;
    const server = http.createServer((req, res) => {
      inFlight++;
      mostInFlight = Math.max(mostInFlight, inFlight);
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = `${served++}:${Buffer.concat(chunks).toString('latin1')}`;
        res.writeHead(200, { 'Content-Length': String(body.length) });
        res.end(body, () => inFlight--);
      });
    });
    server.on('connection', (socket: net.Socket) => {
      openConnections++;
      mostOpenConnections = Math.max(mostOpenConnections, openConnections);
      socket.on('close', () => openConnections--);
    });
    const backend = await listenBackend(server);
    const proxy = await startTestProxy(`[server]\nkeepalive_timeout = 60s\n[proxy.all]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const COUNT = 3000;
    const client = await RawClient.connect(proxy.port);
    const post = (i: number): string => `POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: ${String(i).length}\r\n\r\n${i}`;
    // All requests are on the wire before the first answer; the proxy reads them as it answers.
    for (let first = 0; first < COUNT; first += 500) {
      client.write(Array.from({ length: 500 }, (_, k) => post(first + k)).join(''));
    }
    let rssAtThousand = 0;
    for (let i = 0; i < COUNT; i++) {
      const response = await client.readResponse('POST', 5000);
      assert.equal(bodyOf(response), `${i}:${i}`, `response ${i}: got ${JSON.stringify(bodyOf(response))}, want the answers in order`);
      if (i === 1000) rssAtThousand = process.memoryUsage().rss;
    }
    const rssGrowth = process.memoryUsage().rss - rssAtThousand;
    client.destroy();
    assert.equal(mostInFlight, 1, `got up to ${mostInFlight} requests in flight at the backend, want 1`);
    assert.equal(mostOpenConnections, 1, `got up to ${mostOpenConnections} upstream connections open at once, want 1`);
    assert.ok(rssGrowth < 32 * 1024 * 1024, `RSS grew ${(rssGrowth / 1048576).toFixed(1)} MiB from the 1000th to the 3000th answer, want flat (< 32 MiB)`);
  });

  test('body_timeout cuts a paused upload with 408, never a steady slow one', async (t) => {
    const backend = await startBackend((req, res, body) => res.end(`got ${body.length}`));
    const proxy = await startTestProxy(`[server]\nbody_timeout = 300ms\n[proxy.all]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const steady = await RawClient.connect(proxy.port);
    steady.write('POST /s HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n');
    const startedAt = Date.now();
    for (let i = 0; i < 12; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100)); // 1.2 s in all, never a 300 ms pause
      steady.write('s');
    }
    const answer = await steady.readResponse('POST', 3000);
    assert.equal(statusOf(answer), 200, `steady upload: got ${headOf(answer)}, want 200`);
    assert.equal(bodyOf(answer), 'got 12');
    assert.ok(Date.now() - startedAt >= 1100, 'the upload took longer than body_timeout in all');
    steady.destroy();

    const paused = await RawClient.connect(proxy.port);
    const pausedAt = Date.now();
    paused.write('POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\nabc');
    const cut = await paused.readResponse('POST', 3000);
    const afterMs = Date.now() - pausedAt;
    assert.equal(statusOf(cut), 408, `paused upload: got ${JSON.stringify(cut.toString('latin1').slice(0, 60))}, want 408`);
    assert.ok(afterMs >= 250 && afterMs < 1500, `got the 408 after ${afterMs} ms, want about body_timeout (300 ms)`);
    assert.equal(await paused.waitClose(1000), true, 'the connection is closed after the 408');
    await waitFor(() => proxy.logs.some((record) => record.status === 408), 1000, 'the 408 in the access log');
  });

  test('a client that pauses its upload longer than read_timeout is not the upstream timing out: 200 when it goes on, 408 at body_timeout (not 504)', async (t) => {
    const backend = await startBackend((req, res, body) => res.end(`got ${body.length}`));
    const proxy = await startTestProxy(`[server]\nbody_timeout = 900ms\n[proxy.all]\npath = /\nread_timeout = 200ms\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const resumed = await RawClient.connect(proxy.port);
    resumed.write('POST /r HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nabc');
    await new Promise((resolve) => setTimeout(resolve, 500)); // 2.5 × read_timeout, under body_timeout
    resumed.write('def');
    const answer = await resumed.readResponse('POST', 3000);
    assert.equal(statusOf(answer), 200, `resumed upload: got ${headOf(answer)}, want 200`);
    assert.equal(bodyOf(answer), 'got 6');
    resumed.destroy();

    const stalled = await RawClient.connect(proxy.port);
    const stalledAt = Date.now();
    stalled.write('POST /s HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nabc');
    const cut = await stalled.readResponse('POST', 3000);
    const afterMs = Date.now() - stalledAt;
    assert.equal(statusOf(cut), 408, `stalled upload: got ${headOf(cut)}, want 408 (the client's stall), not 504`);
    assert.ok(afterMs >= 800, `got the 408 after ${afterMs} ms, want body_timeout (900 ms), not read_timeout`);
    stalled.destroy();
    await waitFor(() => proxy.logs.some((record) => record.status === 408), 1000, 'the 408 in the access log');
    assert.equal(proxy.logs.some((record) => record.status === 504), false, 'no 504 in the log');
  });

  test('an upstream that answers after the head and keeps its connection (reading and dropping the body, as nginx does): both connections carry the next POST', async (t) => {
    let upstreamConnections = 0;
    const backend = await startRawBackend((socket) => {
      upstreamConnections++;
      let pending = Buffer.alloc(0);
      let bodyLeft = 0;
      socket.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        for (;;) {
          if (bodyLeft > 0) {
            const dropped = Math.min(bodyLeft, pending.length);
            bodyLeft -= dropped;
            pending = pending.subarray(dropped);
            if (bodyLeft > 0) return;
          }
          const end = pending.indexOf('\r\n\r\n');
          if (end < 0) return;
          bodyLeft = Number(/content-length: (\d+)/i.exec(pending.subarray(0, end).toString('latin1'))?.[1] ?? 0);
          pending = pending.subarray(end + 4);
          socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'); // at once, before the body
        }
      });
    });
    const proxy = await startTestProxy(`[proxy.all]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const client = await RawClient.connect(proxy.port);
    for (let i = 0; i < 3; i++) {
      client.write(`POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 70000\r\n\r\n`);
      await new Promise((resolve) => setTimeout(resolve, 20)); // the answer can come before the body
      client.write('b'.repeat(70000));
      const answer = await client.readResponse('POST', 3000);
      assert.equal(statusOf(answer), 200, `POST ${i}: got ${headOf(answer)}`);
      assert.match(headOf(answer), /Connection: keep-alive/i, `POST ${i}: got ${headOf(answer)}, want the client connection kept`);
      await new Promise((resolve) => setTimeout(resolve, 50)); // the body's last batch leaves, and the connection is released
    }
    assert.equal(client.isClosed, false, 'the client connection carried all three');
    client.destroy();
    assert.equal(upstreamConnections, 1, `got ${upstreamConnections} upstream connections for 3 POSTs, want 1 (released once each body was sent)`);
  });

  test('an upstream that answers a chunked upload at once and keeps its connection: once the answer went out and the body will not be read to its end, the upstream connection is closed at once, not at read_timeout', async (t) => {
    let open = 0;
    let closedAt = 0;
    const backend = await startRawBackend((socket) => {
      open++;
      socket.on('close', () => {
        open--;
        closedAt = Date.now();
      });
      socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')); // at once, keep-alive, body unread
    });
    const proxy = await startTestProxy(`[proxy.all]\npath = /\nread_timeout = 5s\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const client = await RawClient.connect(proxy.port);
    client.write('POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
    const answer = await client.readResponse('POST', 3000);
    const answeredAt = Date.now();
    assert.equal(statusOf(answer), 200, `got ${headOf(answer)}`);
    assert.match(headOf(answer), /Connection: close/i, 'a chunked rest is not read on: the client connection closes after the answer');
    client.write('ZZZ\r\n'); // a malformed chunk: the body never ends
    await waitFor(() => open === 0, 2000, 'the upstream connection to close');
    assert.ok(closedAt - answeredAt < 1000, `got the upstream connection closed ${closedAt - answeredAt} ms after the answer, want at once (read_timeout is 5 s)`);
    client.destroy();
  });

  test('an upstream that answers after the head, then drops its connection while the body is still coming: the rest is read and dropped, and the client connection carries the next request', async (t) => {
    const backend = await startRawBackend((socket) => {
      socket.once('data', (chunk: Buffer) => {
        if (chunk.toString('latin1').startsWith('GET')) {
          socket.end('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext');
          return;
        }
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'); // at once, keep-alive
        setTimeout(() => socket.destroy(), 10); // then gone, mid-body
      });
    });
    const proxy = await startTestProxy(`[proxy.all]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const client = await RawClient.connect(proxy.port);
    client.write('POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n');
    const first = await client.readResponse('POST', 3000);
    assert.equal(statusOf(first), 200, `got ${headOf(first)}`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the upstream connection is gone by now
    client.write(`${'b'.repeat(1000)}GET /n HTTP/1.1\r\nHost: h\r\n\r\n`);
    const second = await client.readResponse('GET', 3000);
    assert.equal(bodyOf(second), 'next', `got ${JSON.stringify(second.toString('latin1').slice(0, 80))}, want the next request answered on the same connection`);
    client.destroy();
  });

  test('an early 413 reaches a client still uploading 8 MiB, 10 of 10 tries (lingering close)', async (t) => {
    const backend = await startBackend();
    const proxy = await startTestProxy(`[server]\nmax_body_size = 1k\n[proxy.all]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    const upload = Buffer.alloc(8 * 1024 * 1024, 'u');
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) {
      const client = await RawClient.connect(proxy.port);
      client.write(`POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: ${upload.length}\r\n\r\n`);
      client.write(upload);
      const response = await client.readResponse('POST', 5000);
      outcomes.push(response.toString('latin1').split('\r\n')[0] ?? '');
      client.destroy();
    }
    assert.deepEqual(outcomes, Array(10).fill('HTTP/1.1 413 Payload Too Large'), `got ${JSON.stringify(outcomes)}`);
    assert.equal(backend.requests.length, 0, 'nothing reached the backend');
  });

  test('HTTP/2.0 and the HTTP/2 preface get 505 and a close; HTTP/1.2 is served as HTTP/1.1', async (t) => {
    const backend = await startBackend();
    const proxy = await startTestProxy(`[proxy.all]\npath = /\npass = ${backend.url}\n`);
    t.after(async () => {
      await proxy.close();
      await backend.close();
    });
    for (const bytes of ['GET / HTTP/2.0\r\nHost: h\r\n\r\n', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n']) {
      const client = await RawClient.connect(proxy.port);
      client.write(bytes);
      const response = await client.readResponse();
      assert.equal(statusOf(response), 505, `${JSON.stringify(bytes)}: got ${headOf(response)}`);
      assert.equal(await client.waitClose(1000), true);
    }
    const client = await RawClient.connect(proxy.port);
    client.write('GET / HTTP/1.2\r\nHost: h\r\n\r\n');
    assert.equal(statusOf(await client.readResponse()), 200);
    client.destroy();
    assert.equal(backend.requests.length, 1);
  });
});
