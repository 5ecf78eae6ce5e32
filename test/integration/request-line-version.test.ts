/**
 * The request line's version through the real proxy, on raw sockets (SPEC "Routing order"; RFC 9110
 * §2.5 and §15.6.6): `HTTP/1.0` and `HTTP/1.1` are served, `HTTP/1.x` with a higher minor digit is
 * served as HTTP/1.1, another major version is a 505, anything else a 400; a refused request reaches
 * no upstream and its connection is closed. Every version goes in every request shape: a bodiless
 * GET, the same with a Content-Length or a chunked body, and a request on a kept-alive connection
 * after one with a body.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { listenBackend, rawRequest, startTestProxy, type TestProxy } from '../helpers/proxy-harness.js';

/** A served request's answer from the backend below. */
const BACKEND_BODY = 'ok';

/** A backend that records each request line as it received it (`GET /x HTTP/1.1`). */
async function startLineRecordingBackend(): Promise<{ lines: string[]; close(): Promise<void>; url: string }> {
  const lines: string[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      lines.push(`${req.method} ${req.url} HTTP/${req.httpVersion}`);
      res.end(BACKEND_BODY);
    });
  });
  const backend = await listenBackend(server);
  return { lines, close: () => backend.close(), url: backend.url };
}

async function setUp(t: { after(fn: () => Promise<void>): void }): Promise<{ proxy: TestProxy; lines: string[] }> {
  const backend = await startLineRecordingBackend();
  // header_timeout far longer than any wait below: an answer must never be the timeout's 408.
  const proxy = await startTestProxy(`[server]\nheader_timeout = 10s\n[proxy.all]\npath = /\npass = ${backend.url}\n`);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  return { proxy, lines: backend.lines };
}

type Expected = { status: 200; upstreamLine: string } | { status: 400 | 505 };

/** Each version as it stands in the request line (`undefined`: a request line without one), and the SPEC's answer. */
const VERSIONS: readonly [version: string | undefined, expected: Expected][] = [
  ['HTTP/1.0', { status: 200, upstreamLine: 'GET /x HTTP/1.1' }],
  ['HTTP/1.1', { status: 200, upstreamLine: 'GET /x HTTP/1.1' }],
  ['HTTP/1.2', { status: 200, upstreamLine: 'GET /x HTTP/1.1' }],
  ['HTTP/1.9', { status: 200, upstreamLine: 'GET /x HTTP/1.1' }],
  ['HTTP/2.0', { status: 505 }],
  ['HTTP/0.9', { status: 505 }],
  ['HTTP/3.0', { status: 505 }],
  ['HTTP/2', { status: 505 }],
  ['HTTP/1.1x', { status: 400 }],
  ['http/1.1', { status: 400 }],
  ['HTTP/1', { status: 400 }],
  ['HTTP/11.1', { status: 400 }],
  ['HTTP/1.10', { status: 400 }],
  [undefined, { status: 400 }],
];

/** The proxy's own answers have a one-line body (the parser's reason). */
const REFUSAL_BODY = /^[^\n]+\n$/;

/** The rest of the head after the request line, ending the request, in each request shape. */
const FRESH_LANES: readonly [lane: string, rest: string][] = [
  ['bodiless GET', 'Host: h\r\nConnection: close\r\n\r\n'],
  ['Content-Length body', 'Host: h\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi'],
  ['chunked body', 'Host: h\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n'],
];

function requestLine(version: string | undefined): string {
  return version === undefined ? 'GET /x' : `GET /x ${version}`;
}

function describeVersion(version: string | undefined): string {
  return version === undefined ? 'no version' : version;
}

/** Status, headers and body of the one response in `text` (the proxy's raw bytes). */
function readResponse(text: string): { status: number; head: string; body: string } {
  const end = text.indexOf('\r\n\r\n');
  const head = end === -1 ? text : text.slice(0, end);
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1] ?? 0), head, body: end === -1 ? '' : text.slice(end + 4) };
}

function assertAnswer(label: string, text: string, closedByServer: boolean, expected: Expected, lines: readonly string[]): void {
  const response = readResponse(text);
  assert.equal(response.status, expected.status, `${label}: got ${JSON.stringify(text.split('\r\n')[0])}, want ${expected.status}`);
  if (expected.status === 200) {
    assert.deepEqual(lines, [expected.upstreamLine], `${label}: the upstream got ${JSON.stringify(lines)}, want ${JSON.stringify([expected.upstreamLine])}`);
    assert.equal(response.body, BACKEND_BODY, `${label}: got body ${JSON.stringify(response.body)}`);
    return;
  }
  assert.deepEqual(lines, [], `${label}: the upstream got ${JSON.stringify(lines)}, want nothing`);
  assert.match(response.body, REFUSAL_BODY, `${label}: got body ${JSON.stringify(response.body)}, want one line`);
  assert.match(response.head, /\r\nConnection: close(\r\n|$)/i, `${label}: got head ${JSON.stringify(response.head)}, want Connection: close`);
  assert.equal(closedByServer, true, `${label}: the proxy kept the connection open, want it closed`);
}

for (const [lane, rest] of FRESH_LANES) {
  test(`request-line versions on a new connection, ${lane}: the SPEC's answer, and nothing forwarded for 400 and 505`, async (t) => {
    const { proxy, lines } = await setUp(t);
    for (const [version, served] of VERSIONS) {
      lines.length = 0;
      // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing (nginx: 400).
      const expected: Expected = version === 'HTTP/1.0' && rest.includes('Transfer-Encoding') ? { status: 400 } : served;
      const { text, closedByServer } = await rawRequest(proxy.port, `${requestLine(version)}\r\n${rest}`, 1000);
      assertAnswer(`${lane}, ${describeVersion(version)}`, text, closedByServer, expected, lines);
    }
  });
}

test('empty lines before the request line are ignored (RFC 9112 §2.2), and the version after them judged as any other (found by a break test)', async (t) => {
  const { proxy, lines } = await setUp(t);
  const cases: [prefix: string, version: string, expected: Expected][] = [
    ['\r\n', 'HTTP/1.2', { status: 200, upstreamLine: 'GET /x HTTP/1.1' }],
    ['\n', 'HTTP/1.9', { status: 200, upstreamLine: 'GET /x HTTP/1.1' }],
    ['\r\n\r\n', 'HTTP/1.1', { status: 200, upstreamLine: 'GET /x HTTP/1.1' }],
    ['\r\n', 'HTTP/2.0', { status: 505 }],
    ['\r\n', 'http/1.1', { status: 400 }],
  ];
  for (const [prefix, version, expected] of cases) {
    lines.length = 0;
    const { text, closedByServer } = await rawRequest(proxy.port, `${prefix}GET /x ${version}\r\n${FRESH_LANES[0]![1]}`, 1000);
    assertAnswer(`${JSON.stringify(prefix)} before ${version}`, text, closedByServer, expected, lines);
  }
});

/**
 * Writes `first` on a new connection and, once its answer (ending in the backend's body) is in,
 * `second`; collects what comes after the first answer until the proxy closes or `idleMs` passes.
 */
function secondRequest(port: number, first: string, second: string, idleMs = 1000): Promise<{ text: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    let firstAnswerEnd = -1;
    let timer: NodeJS.Timeout | undefined;
    const done = (closedByServer: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: firstAnswerEnd === -1 ? '' : received.slice(firstAnswerEnd), closedByServer });
    };
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (firstAnswerEnd === -1 && received.endsWith(`\r\n\r\n${BACKEND_BODY}`)) {
        firstAnswerEnd = received.length;
        socket.write(second);
      }
      clearTimeout(timer);
      timer = setTimeout(done, idleMs, false);
    });
    socket.on('end', () => done(true));
    socket.on('error', () => done(true));
    timer = setTimeout(done, idleMs, false);
    socket.write(first);
  });
}

/** A request with a body, before the one under test on the same connection. */
const FIRST_REQUEST = 'POST /first HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi';

for (const [version, expected] of VERSIONS) {
  test(`request-line version ${describeVersion(version)} on a kept-alive connection (after a request with a body): ${expected.status}`, async (t) => {
    const { proxy, lines } = await setUp(t);
    const { text, closedByServer } = await secondRequest(proxy.port, FIRST_REQUEST, `${requestLine(version)}\r\nHost: h\r\nConnection: close\r\n\r\n`);
    assert.equal(lines[0], 'POST /first HTTP/1.1', `got ${JSON.stringify(lines)}, want the first request served`);
    assertAnswer(`held connection, ${describeVersion(version)}`, text, closedByServer, expected, lines.slice(1));
  });
}

test('an HTTP/2 client with prior knowledge (PRI * HTTP/2.0 preface, then SETTINGS) gets 505 within 1 s and a closed connection, on a new connection and on a kept-alive one', async (t) => {
  const { proxy, lines } = await setUp(t);
  // RFC 9113 §3.4: the preface, then an empty SETTINGS frame (length 0, type 4, flags 0, stream 0).
  const preface = Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), Buffer.from('000000040000000000', 'hex')]);
  const startedAt = performance.now();
  const fresh = await rawRequest(proxy.port, preface, 1000);
  const elapsedMs = performance.now() - startedAt;
  assert.equal(fresh.closedByServer, true, `got no close within 1 s (${Math.round(elapsedMs)} ms), want the connection closed at once`);
  assert.ok(elapsedMs < 1000, `got the answer after ${Math.round(elapsedMs)} ms, want < 1000 ms`);
  assertAnswer('preface on a new connection', fresh.text, fresh.closedByServer, { status: 505 }, lines);

  // The whole preface, and its request line followed by something else.
  for (const second of [preface.toString('latin1'), 'PRI * HTTP/2.0\r\nHost: h\r\n\r\n']) {
    lines.length = 0;
    const held = await secondRequest(proxy.port, FIRST_REQUEST, second);
    assertAnswer(`held connection, ${JSON.stringify(second.slice(0, 20))}`, held.text, held.closedByServer, { status: 505 }, lines.slice(1));
  }
});

test('a request line that arrives a byte at a time is judged once it is whole: HTTP/1.2 served as HTTP/1.1, PROPFIND … HTTP/3.0 → 505', async (t) => {
  const { proxy, lines } = await setUp(t);
  const cases: [bytes: string, expected: Expected][] = [
    ['GET /x HTTP/1.2\r\nHost: h\r\nConnection: close\r\n\r\n', { status: 200, upstreamLine: 'GET /x HTTP/1.1' }],
    ['PROPFIND /x HTTP/3.0\r\nHost: h\r\n\r\n', { status: 505 }],
  ];
  for (const [bytes, expected] of cases) {
    lines.length = 0;
    const socket = net.connect(proxy.port, '127.0.0.1');
    t.after(() => void socket.destroy());
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise<boolean>((resolve) => {
      socket.on('close', () => resolve(true));
      setTimeout(resolve, 3000, false).unref();
    });
    for (const byte of bytes) {
      if (socket.destroyed) break;
      socket.write(byte);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const closedByServer = await closed;
    assertAnswer(`a byte at a time, ${JSON.stringify(bytes.split('\r\n')[0])}`, received, closedByServer, expected, lines);
  }
});
