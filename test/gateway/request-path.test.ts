/**
 * The request path (src/gateway/request-path.ts) as a specification of its checklist, with a fake
 * transport: `handleRequest` is driven with fake client objects (the ClientRequest/ClientResponse
 * interfaces of src/wire/client-side.ts) and a fake connection pool that hands out in-memory
 * sockets, whose upstream side each test scripts byte by byte through the connection's handler. No
 * real socket, no timer: every step is observed in the order the request path takes it.
 *
 * The checklist: 404 (no route) before 401 (the route's Basic auth) before 413 (Content-Length over
 * `max_body_size`); a reset retried on another upstream when the retry policy allows it, a 502 when
 * it does not; 503 with Retry-After when no upstream is available; the head committed before the
 * body; a failure after the commit point destroys the client response; a client that goes away
 * aborts the upstream connection; a 101 to an upgrade request → `switchProtocols` and a tunnel.
 */
import { AcmeChallengeStore } from '../../src/gateway/acme-challenge.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { parseConfig } from '../../src/config/load-config.js';
import { hashPassword, validatePasswordHash } from '../../src/auth/password-hash.js';
import { checkUserName } from '../../src/auth/basic-auth.js';
import { combineHeaders, type ClientRequest, type ClientResponse, type RequestBody, type RequestBodyReader } from '../../src/wire/client-side.js';
import { UpstreamConnection, type AcquireOptions, type UpstreamTransport } from '../../src/wire/connection-pool.js';
import { UpstreamConnectError } from '../../src/errors.js';
import type { AccessLogRecord } from '../../src/gateway/access-log.js';
import { handleRequest, type ProxyContext } from '../../src/gateway/request-path.js';
import { Route } from '../../src/upstream/route.js';
import { Router } from '../../src/gateway/router.js';

/** An in-memory socket: what is written to it is kept in `written`; `push` delivers bytes to its reader. */
class FakeSocket extends Duplex {
  written = '';
  timeoutMs = 0;
  readonly remoteAddress = '127.0.0.1';
  #waiters: { text: string; resolve: () => void }[] = [];

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.written += chunk.toString('latin1');
    this.#waiters = this.#waiters.filter((waiter) => !(this.written.includes(waiter.text) && (waiter.resolve(), true)));
    callback();
  }

  override _read(): void {}

  setTimeout(ms: number): this {
    this.timeoutMs = ms;
    return this;
  }

  setNoDelay(): this {
    return this;
  }

  /** Resolves once `text` was written to this socket. */
  until(text: string): Promise<void> {
    if (this.written.includes(text)) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ text, resolve }));
  }
}

/** The fake pool: every acquire is a new in-memory connection; port 1 refuses. */
class FakeTransport implements UpstreamTransport {
  readonly connections: UpstreamConnection[] = [];
  readonly acquired: { port: number; isForUpgrade: boolean }[] = [];
  readonly destroyed = new Set<UpstreamConnection>();
  readonly released = new Set<UpstreamConnection>();
  #waiters: ((connection: UpstreamConnection) => void)[] = [];

  acquireIdle(): undefined {
    return undefined;
  }

  acquire(host: string, port: number, options: AcquireOptions): Promise<UpstreamConnection> {
    this.acquired.push({ port, isForUpgrade: options.isForUpgrade === true });
    if (port === 1) return Promise.reject(new UpstreamConnectError(`connect ECONNREFUSED ${host}:${port}`));
    const connection = new UpstreamConnection(new FakeSocket() as unknown as Socket, host, port, options.isForUpgrade === true);
    this.connections.push(connection);
    this.#waiters.shift()?.(connection);
    return Promise.resolve(connection);
  }

  release(connection: UpstreamConnection): void {
    connection.handler = undefined;
    this.released.add(connection);
  }

  destroy(connection: UpstreamConnection): void {
    connection.handler = undefined;
    this.destroyed.add(connection);
    connection.socket.destroy();
  }

  detach(connection: UpstreamConnection): Socket {
    connection.handler = undefined;
    return connection.socket;
  }

  /** The `index`th connection handed out (0-based), once it is. */
  connection(index: number): Promise<UpstreamConnection> {
    const existing = this.connections[index];
    if (existing !== undefined) return Promise.resolve(existing);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

/** Lets the request path's pending promise callbacks run (not a timer: one turn of the event loop). */
function settled(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The upstream side of a fake connection, as the test scripts it. */
async function upstreamOf(transport: FakeTransport, index: number): Promise<{ socket: FakeSocket; send(text: string): void; reset(syscall?: 'read' | 'write'): void }> {
  const connection = await transport.connection(index);
  const socket = connection.socket as unknown as FakeSocket;
  await socket.until('\r\n\r\n'); // the request head was written
  return {
    socket,
    send: (text) => connection.handler!.onData(Buffer.from(text, 'latin1')),
    /** The RST as node reports it: met by a read (the default) or by a write of the request. */
    reset: (syscall = 'read') => connection.handler!.onError(Object.assign(new Error(`${syscall} ECONNRESET`), { code: 'ECONNRESET', syscall })),
  };
}

/** A request head (and body) as the request path reads it. */
class FakeClientRequest implements ClientRequest {
  readonly httpVersion = '1.1';
  readonly headers;
  readonly socket = { remoteAddress: '127.0.0.1' } as Socket;
  /** As the server read it at accept (a test sets '' for a peer it never learned). */
  remoteAddress = '127.0.0.1';
  /** Came over the HTTPS listener (a test sets it). */
  isTls = false;
  readonly body: RequestBody | undefined;
  /** As the server decides it: `Connection: upgrade` with an `Upgrade` value, and no body. */
  readonly upgrade: string | undefined;
  /** As the server frames it: the Content-Length header's value, undefined for chunked or none. */
  readonly contentLength: number | undefined;
  complete: boolean;

  constructor(
    readonly method: string,
    readonly url: string,
    readonly rawHeaders: string[],
    body?: string,
  ) {
    this.headers = combineHeaders(rawHeaders);
    const upgrade = this.headers.upgrade;
    const isUpgrade = body === undefined && typeof upgrade === 'string' && /(^|,)\s*upgrade\s*(,|$)/i.test(String(this.headers.connection ?? ''));
    this.upgrade = isUpgrade ? upgrade : undefined;
    const length = this.headers['content-length'];
    this.contentLength = length === undefined ? undefined : Number(length);
    this.complete = true;
    if (body !== undefined) this.body = new WholeBody(Buffer.from(body));
  }
}

/** A request body the client sent whole before the request path ran: all of it held, received. */
class WholeBody implements RequestBody {
  readonly errored = null;
  readonly isReceived = true;
  readonly rawTrailers: readonly string[] = [];
  #held: Buffer | null;

  constructor(bytes: Buffer) {
    this.#held = bytes;
  }

  takeHeld(): Buffer | null {
    const held = this.#held;
    this.#held = null;
    return held;
  }

  attach(reader: RequestBodyReader): void {
    process.nextTick(() => {
      const held = this.takeHeld();
      if (held !== null) reader.onRequestBodyData(held);
      reader.onRequestBodyEnd();
    });
  }

  pause(): void {}

  resume(): void {}

  detach(): void {
    this.#held = null;
  }
}

/** Records every call, in order, as `events`; `done` settles when the response ended or was destroyed. */
class FakeClientResponse implements ClientResponse {
  readonly req: { method: string };
  readonly events: string[] = [];
  headers: string[] = [];
  body = '';
  statusCode = 200;
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  switched: { statusMessage: string; headers: string[]; socket: FakeSocket } | undefined;
  readonly done: Promise<void>;
  #markDone!: () => void;
  #closeListeners: (() => void)[] = [];

  constructor(method: string) {
    this.req = { method };
    this.done = new Promise((resolve) => (this.#markDone = resolve));
  }

  writeHead(statusCode: number, statusMessageOrHeaders: string | string[], maybeHeaders?: string[]): this {
    this.statusCode = statusCode;
    this.headers = (typeof statusMessageOrHeaders === 'string' ? maybeHeaders : statusMessageOrHeaders) ?? [];
    this.headersSent = true;
    this.events.push(`head ${statusCode}`);
    return this;
  }

  flushHeaders(): void {
    this.events.push('flush');
  }

  write(chunk: Buffer): boolean {
    this.events.push(chunk.length === 0 ? 'flush' : `body ${chunk.toString('latin1')}`);
    this.body += chunk.toString('latin1');
    return true;
  }

  end(chunk?: string): this {
    if (chunk !== undefined) this.body += chunk;
    this.events.push('end');
    this.writableFinished = true;
    this.#markDone();
    this.#emitClose();
    return this;
  }

  destroy(): this {
    this.events.push('destroy');
    this.destroyed = true;
    this.#markDone();
    this.#emitClose();
    return this;
  }

  addTrailers(): void {}

  writeContinue(): void {
    this.events.push('continue');
  }

  once(event: 'close' | 'drain', listener: () => void): this {
    if (event === 'close') this.#closeListeners.push(listener);
    return this;
  }

  switchProtocols(statusMessage: string, headers: string[]): { socket: Socket; head: Buffer } {
    const socket = new FakeSocket();
    this.statusCode = 101;
    this.headersSent = true;
    this.switched = { statusMessage, headers, socket };
    this.events.push('switch 101');
    this.#markDone();
    return { socket: socket as unknown as Socket, head: Buffer.from('early frame') };
  }

  /** The client connection closed under the response (the client went away). */
  clientLeaves(): void {
    this.#emitClose();
  }

  #emitClose(): void {
    const listeners = this.#closeListeners;
    this.#closeListeners = [];
    for (const listener of listeners) listener();
  }

  header(name: string): string | undefined {
    for (let i = 0; i < this.headers.length; i += 2) if (this.headers[i]!.toLowerCase() === name) return this.headers[i + 1];
    return undefined;
  }
}

const PASSWORD_HASH = hashPassword('secret');

const INI = [
  '[server]\nmax_body_size = 1k\n',
  '[proxy.open]\npath = /open\npass = http://a.test:8001\npass = http://b.test:8002\n',
  `[proxy.private]\npath = /private\npass = http://a.test:8001\nauth_basic = Private\nauth_user = tom:${PASSWORD_HASH}\n`,
  '[proxy.down]\npath = /down\npass = http://a.test:8001 down\n',
  '[proxy.ws]\npath = /ws\npass = http://a.test:8001\nread_timeout = 7s\n',
].join('');

/** A context over the fake transport, with routes from INI, and the access-log records collected. */
function fakeProxy(acmeChallenges?: AcmeChallengeStore): { context: ProxyContext; transport: FakeTransport; logs: AccessLogRecord[] } {
  const config = parseConfig(INI, 'test.ini', { validateAuthHash: validatePasswordHash, validateAuthUserName: checkUserName });
  let clock = 0;
  const deps = { now: () => (clock += 1), random: () => 0, log: () => {} };
  const transport = new FakeTransport();
  const logs: AccessLogRecord[] = [];
  const context: ProxyContext = {
    server: config.server,
    router: new Router(config.routes.map((route) => new Route(route, deps))),
    pool: transport,
    accessLog: { isEnabled: true, write: (record) => logs.push(record), close: async () => {} },
    now: deps.now,
    httpsRedirectPort: undefined,
    isDraining: false,
    isCutting: false,
    tunnels: new Set(),
    acmeChallenges,
  };
  return { context, transport, logs };
}

function send(context: ProxyContext, method: string, url: string, headers: string[] = [], body?: string): FakeClientResponse {
  const clientRes = new FakeClientResponse(method);
  handleRequest(context, new FakeClientRequest(method, url, ['Host', 'proxy.test', ...headers], body), clientRes);
  return clientRes;
}

test('checklist order: 404 before 401 before 413 by Content-Length, and none of them reaches an upstream', async () => {
  const { context, transport } = fakeProxy();
  const tooLong = ['Content-Length', '5000'];
  const basic = (user: string, password: string): string[] => ['Authorization', `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`];
  const cases = [
    { what: 'no route, even with a body over the limit', res: send(context, 'POST', '/nowhere', tooLong), want: 404 },
    { what: 'the auth route without credentials, even with a body over the limit', res: send(context, 'POST', '/private', tooLong), want: 401 },
    { what: 'the auth route with a wrong password', res: send(context, 'POST', '/private', [...basic('tom', 'guess'), ...tooLong]), want: 401 },
    { what: 'the auth route with credentials and a body over the limit', res: send(context, 'POST', '/private', [...basic('tom', 'secret'), ...tooLong]), want: 413 },
    { what: 'an open route with a body over the limit', res: send(context, 'POST', '/open', tooLong), want: 413 },
  ];
  for (const { what, res, want } of cases) {
    await res.done;
    assert.deepEqual(res.events, [`head ${want}`, 'end'], `${what}: got ${JSON.stringify(res.events)}, want ${want}`);
  }
  assert.match(cases[1]!.res.header('www-authenticate') ?? '', /^Basic realm="Private"/, 'a 401 carries the challenge');
  assert.equal(cases[3]!.res.header('connection'), 'close', 'a 413 with the body unread closes the connection');
  assert.deepEqual(transport.acquired, [], `got ${JSON.stringify(transport.acquired)}, want no upstream connection for refused requests`);
});

test('a request whose peer address is unknown is never judged, never forwarded: its response is destroyed', async () => {
  const { context, transport } = fakeProxy();
  const clientReq = new FakeClientRequest('POST', '/open/x', ['Host', 'proxy.test', 'Content-Length', '0']);
  clientReq.remoteAddress = '';
  const clientRes = new FakeClientResponse('POST');
  handleRequest(context, clientReq, clientRes);
  await clientRes.done;
  assert.deepEqual(clientRes.events, ['destroy']);
  assert.deepEqual(transport.acquired, [], 'got an upstream connection for a request from an unknown peer');
});

test('a reset after the request was sent: a GET is retried on the other upstream; a POST whose body streamed is a 502', async () => {
  const { context, transport, logs } = fakeProxy();
  const get = send(context, 'GET', '/open/x');
  (await upstreamOf(transport, 0)).reset();
  (await upstreamOf(transport, 1)).send('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  await get.done;
  assert.deepEqual(get.events, ['head 200', 'body ok', 'end'], `got ${JSON.stringify(get.events)}`);
  assert.deepEqual(transport.acquired.map((a) => a.port), [8001, 8002], 'the retry went to the other upstream');

  const post = send(context, 'POST', '/open/x', ['Content-Length', '5'], 'hello');
  const upstream = await upstreamOf(transport, 2);
  await upstream.socket.until('hello'); // the body streamed: it cannot be replayed
  upstream.reset();
  await post.done;
  assert.deepEqual(post.events, ['head 502', 'end'], `got ${JSON.stringify(post.events)}, want one 502 and no retry`);
  assert.equal(transport.connections.length, 3, `got ${transport.connections.length} connections, want no third attempt`);
  assert.deepEqual(
    logs.map((r) => [r.status, r.attempts.map((a) => `${a.upstream} ${a.status ?? a.error}`)]),
    [
      [200, ['a.test:8001 PRX_UPSTREAM_RESET: reset the connection (ECONNRESET)', 'b.test:8002 200']],
      [502, ['b.test:8002 PRX_UPSTREAM_RESET: reset the connection (ECONNRESET)']],
    ],
  );
});

test('a reset met while the request body is being written is logged as such, apart from a reset met by a read', async () => {
  // What the upstream sent before its reset (a TLS alert refusing our client certificate, say) is
  // lost with a socket whose write failed: the log says only what is known.
  const { context, transport, logs } = fakeProxy();
  const post = send(context, 'POST', '/open/x', ['Content-Length', '5'], 'hello');
  const upstream = await upstreamOf(transport, 0);
  upstream.reset('write');
  await post.done;
  assert.deepEqual(post.events, ['head 502', 'end'], `got ${JSON.stringify(post.events)}, want one 502`);
  assert.deepEqual(logs[0]?.attempts.map((a) => a.error), ['PRX_UPSTREAM_RESET: reset the connection while the request was being sent (ECONNRESET)']);
});

test('no upstream available: 503 with Retry-After', async () => {
  const { context, transport } = fakeProxy();
  const res = send(context, 'GET', '/down');
  await res.done;
  assert.deepEqual(res.events, ['head 503', 'end'], `got ${JSON.stringify(res.events)}`);
  assert.match(res.header('retry-after') ?? '(none)', /^\d+$/, `got Retry-After ${res.header('retry-after')}, want whole seconds`);
  assert.equal(transport.acquired.length, 0);
});

test('the head is committed as soon as the upstream sent it, before any body byte; the body follows as it comes', async () => {
  const { context, transport } = fakeProxy();
  const res = send(context, 'GET', '/open/events');
  const upstream = await upstreamOf(transport, 0);
  upstream.send('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
  await settled();
  assert.deepEqual(res.events, ['head 200', 'flush'], `got ${JSON.stringify(res.events)}, want the head sent before any body byte`);
  upstream.send('6\r\nevent1\r\n');
  assert.deepEqual(res.events, ['head 200', 'flush', 'body event1'], `got ${JSON.stringify(res.events)}`);
  upstream.send('0\r\n\r\n');
  await res.done;
  assert.deepEqual(res.events, ['head 200', 'flush', 'body event1', 'end']);
});

test('a failure after the commit point destroys the client response instead of ending it', async () => {
  const { context, transport, logs } = fakeProxy();
  const res = send(context, 'GET', '/open/file');
  const upstream = await upstreamOf(transport, 0);
  upstream.send('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst part');
  upstream.reset();
  await res.done;
  assert.deepEqual(res.events, ['head 200', 'body first part', 'destroy'], `got ${JSON.stringify(res.events)}, want the response cut, never ended`);
  assert.deepEqual(transport.acquired.length, 1, 'no retry once response bytes went to the client');
  assert.equal(logs[0]?.status, 200, 'the log keeps the status that was sent');
  assert.equal(logs[0]?.attempts[0]?.error, 'PRX_UPSTREAM_RESET: reset the connection (ECONNRESET)');
});

test('a client that goes away aborts its upstream connection at once', async () => {
  const { context, transport, logs } = fakeProxy();
  const res = send(context, 'GET', '/open/slow');
  const upstream = await upstreamOf(transport, 0);
  assert.equal(transport.destroyed.size, 0);
  res.clientLeaves();
  assert.equal(transport.destroyed.has(transport.connections[0]!), true, 'the upstream connection must be destroyed when the client leaves');
  assert.equal(upstream.socket.destroyed, true);
  assert.deepEqual(res.events, [], `got ${JSON.stringify(res.events)}, want nothing written to a gone client`);
  assert.equal(logs[0]?.status, 499, `got ${logs[0]?.status}, want 499 logged`);
  assert.equal(logs[0]?.attempts[0]?.error, 'PRX_CLIENT_ABORT');
});

test('a 101 to an upgrade request: switchProtocols without the hop-by-hop headers, then the sockets are joined both ways', async () => {
  const { context, transport, logs } = fakeProxy();
  const res = send(context, 'GET', '/ws/chat', ['Connection', 'Upgrade', 'Upgrade', 'websocket', 'Sec-WebSocket-Key', 'k']);
  const upstream = await upstreamOf(transport, 0);
  assert.equal(transport.acquired[0]?.isForUpgrade, true, 'an upgrade gets a connection of its own, never pooled');
  assert.match(upstream.socket.written, /\r\nConnection: upgrade\r\nUpgrade: websocket\r\n/, `got ${JSON.stringify(upstream.socket.written)}`);
  upstream.send('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade, X-Hop\r\nX-Hop: secret\r\nSec-WebSocket-Accept: a\r\n\r\nfrom upstream');
  await res.done;
  assert.deepEqual(res.events, ['switch 101'], `got ${JSON.stringify(res.events)}`);
  const switched = res.switched!;
  assert.equal(switched.statusMessage, 'Switching Protocols');
  assert.deepEqual(switched.headers, ['Upgrade', 'websocket', 'Sec-WebSocket-Accept', 'a', 'Connection', 'upgrade'], `got ${JSON.stringify(switched.headers)}`);
  assert.equal(context.tunnels.size, 1, 'an open tunnel is known to the context (a shutdown closes it)');
  const clientSocket = switched.socket;
  await clientSocket.until('from upstream'); // the bytes after the 101 head
  await upstream.socket.until('early frame'); // the bytes the client sent after its request head
  clientSocket.push(Buffer.from(' and more'));
  await upstream.socket.until('early frame and more');
  assert.equal(upstream.socket.timeoutMs, 7000, 'read_timeout is the idle limit of the tunnel');
  assert.equal(logs.length, 0, 'an open tunnel is not logged yet');
  const tunnel = [...context.tunnels][0]!;
  clientSocket.destroy();
  await tunnel.closed;
  assert.equal(upstream.socket.destroyed, true, 'one side closed: the other is closed too');
  assert.equal(context.tunnels.size, 0);
  assert.equal(logs[0]?.status, 101);
  assert.deepEqual(logs[0]?.tunnel, { bytesFromClient: 'early frame and more'.length, bytesFromUpstream: 'from upstream'.length });
});

test('a 101 to a request that did not ask for an upgrade is a 502', async () => {
  const { context, transport } = fakeProxy();
  const res = send(context, 'GET', '/ws/plain');
  const upstream = await upstreamOf(transport, 0);
  assert.equal(transport.acquired[0]?.isForUpgrade, false);
  upstream.send('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
  await res.done;
  assert.deepEqual(res.events, ['head 502', 'end'], `got ${JSON.stringify(res.events)}`);
});

test('a chunked request body is re-framed as chunked for the upstream, the last chunk after it', async () => {
  const { context, transport } = fakeProxy();
  const res = send(context, 'POST', '/open/upload', ['Transfer-Encoding', 'chunked'], 'hello');
  const upstream = await upstreamOf(transport, 0);
  await upstream.socket.until('0\r\n\r\n');
  const written = upstream.socket.written;
  assert.ok(written.endsWith('\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'), `got ${JSON.stringify(written)}`);
  upstream.send('HTTP/1.1 204 No Content\r\n\r\n');
  await res.done;
  assert.deepEqual(res.events, ['head 204', 'end'], `got ${JSON.stringify(res.events)}`);
});

test('a request body sent whole and a keep-alive answer: the upstream connection goes back to the pool', async () => {
  const { context, transport } = fakeProxy();
  const res = send(context, 'POST', '/open/form', ['Content-Length', '5'], 'hello');
  const upstream = await upstreamOf(transport, 0);
  await upstream.socket.until('hello');
  await settled(); // the body's end, one event-loop turn after its last batch
  upstream.send('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  await res.done;
  assert.deepEqual(res.events, ['head 200', 'body ok', 'end'], `got ${JSON.stringify(res.events)}`);
  const connection = transport.connections[0]!;
  assert.equal(transport.released.has(connection), true, 'got the connection closed, want it released for the next request');
  assert.equal(transport.destroyed.has(connection), false);
});

test('with [acme], GET/HEAD /.well-known/acme-challenge/TOKEN is answered before routing: the key authorization exactly, 404 for any other token', async () => {
  const store = new AcmeChallengeStore();
  store.set('tok_1-A', 'tok_1-A.thumbprint');
  const { context, transport } = fakeProxy(store);
  const cases = [
    { what: 'a published token', res: send(context, 'GET', '/.well-known/acme-challenge/tok_1-A'), want: 'head 200 tok_1-A.thumbprint' },
    { what: 'HEAD of it', res: send(context, 'HEAD', '/.well-known/acme-challenge/tok_1-A'), want: 'head 200 ' },
    { what: 'an unknown token', res: send(context, 'GET', '/.well-known/acme-challenge/other'), want: 'head 404 not found: no ACME challenge with this token is being validated\n' },
  ];
  for (const { what, res, want } of cases) {
    await res.done;
    const got = `${res.events[0]} ${res.body}`;
    assert.equal(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
  assert.equal(cases[0]!.res.header('content-type'), 'text/plain');
  store.set('tok_1-A', undefined);
  const withdrawn = send(context, 'GET', '/.well-known/acme-challenge/tok_1-A');
  await withdrawn.done;
  assert.equal(withdrawn.events[0], 'head 404', `a withdrawn token: got ${withdrawn.events[0]}, want head 404`);
  assert.deepEqual(transport.acquired, [], 'no challenge request reaches an upstream');
  // A path that is not exactly the prefix and one token is no challenge: it is routed as any other
  // (no route serves /.well-known here, so the router's 404, not the challenge's).
  const notAToken = send(context, 'GET', '/.well-known/acme-challenge/tok_1-A/x');
  await notAToken.done;
  assert.doesNotMatch(notAToken.body, /ACME/, `a path with a further slash: got ${JSON.stringify(notAToken.body)}, want the router's answer`);
  assert.equal(notAToken.events[0], 'head 404');
});
