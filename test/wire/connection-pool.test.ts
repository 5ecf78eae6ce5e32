/**
 * Behaviour of the upstream keep-alive pool on real loopback sockets: reuse (LIFO), idle sockets
 * closed by the upstream or sent stray bytes are dropped, idle timeout, per-origin idle limit,
 * connect errors and timeouts, abort, `localhost` on either address family, a new connection to
 * the proxy's own listener refused before a byte is written, and close() leaving no
 * sockets behind, the read buffers (small, large for a large body, the large one given back when
 * idle). Also a full round trip through serializeRequestHead + ResponseParser.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ConnectionPool, LARGE_READ_BUFFER_BYTES, type ConnectionPoolOptions, OWN_NAME_MEMORY_MS, poolKey, SMALL_READ_BUFFER_BYTES, type UpstreamConnection } from '../../src/wire/connection-pool.js';
import type { Timers } from '../../src/timers.js';
import { ResponseParser, type ResponseHead } from '../../src/wire/response-parser.js';
import { serializeRequestHead } from '../../src/wire/request-head.js';
import { ProxyResourceError, UpstreamConnectError, UpstreamLoopError, UpstreamTimeoutError } from '../../src/errors.js';
import { OwnListeners } from '../../src/wire/own-listeners.js';

/** Timers that only fire when the test says so. */
class ManualTimers implements Timers {
  private readonly pending = new Map<number, { callback: () => void; ms: number }>();
  private nextId = 1;
  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.pending.set(id, { callback, ms });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  /** Delays (ms) of the timers still pending. */
  get delays(): number[] {
    return [...this.pending.values()].map(({ ms }) => ms);
  }
  /** Fires every pending timer. */
  fireAll(): void {
    const due = [...this.pending.values()];
    this.pending.clear();
    for (const { callback } of due) callback();
  }
}

/** A keep-alive node:http upstream answering `<method> <path> #<n>`; counts TCP connections. */
async function startUpstream(host = '127.0.0.1'): Promise<{ port: number; connections: net.Socket[]; close(): Promise<void> }> {
  let count = 0;
  const connections: net.Socket[] = [];
  const server = http.createServer((req, res) => {
    count++;
    res.setHeader('Content-Type', 'text/plain');
    res.end(`${req.method} ${req.url} #${count}`);
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket: net.Socket) => connections.push(socket));
  server.listen(0, host);
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    connections,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** One request over a pooled connection, the way the proxy will do it. */
function roundTrip(connection: UpstreamConnection, method: string, path: string): Promise<{ head: ResponseHead; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connection.socket;
    let head: ResponseHead | undefined;
    const body: Buffer[] = [];
    const parser = new ResponseParser({
      method,
      onHead: (h) => (head = h),
      onBody: (chunk) => body.push(Buffer.from(chunk)),
      onComplete: () => {
        cleanup();
        resolve({ head: head as ResponseHead, body: Buffer.concat(body).toString() });
      },
    });
    const onData = (data: Buffer): void => {
      try {
        parser.execute(data);
      } catch (error) {
        cleanup();
        reject(error);
      }
    };
    const onEnd = (): void => {
      try {
        parser.finish();
      } catch (error) {
        cleanup();
        reject(error);
      }
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const cleanup = (): void => {
      connection.handler = undefined;
    };
    connection.handler = { onData, onEnd, onError, onClose: () => onError(new Error('closed')), onTimeout: () => {} };
    socket.write(serializeRequestHead(method, path, ['Host', 'upstream.test', 'User-Agent', 'pool-test']), 'latin1');
  });
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const CONNECT = { connectTimeoutMs: 1000 };

/** Polls `predicate` every 5 ms for a socket event, up to 2 s. */
async function waitUntil(predicate: () => boolean): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for the socket event');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('ConnectionPool', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  async function setUp(host = '127.0.0.1', options: ConstructorParameters<typeof ConnectionPool>[0] = {}) {
    const upstream = await startUpstream(host);
    const pool = new ConnectionPool(options);
    cleanups.push(() => upstream.close(), () => pool.close());
    return { upstream, pool };
  }

  it('retire closes the idle connections of an address at once and a busy one when it is released', async () => {
    const { upstream, pool } = await setUp();
    const idle = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    const busy = await pool.acquire('127.0.0.1', upstream.port, { ...CONNECT, isNewRequired: true });
    await roundTrip(idle, 'GET', '/idle');
    pool.release(idle);
    assert.deepEqual(pool.stats(), { open: 2, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
    pool.retire('127.0.0.1', upstream.port);
    assert.deepEqual(pool.stats(), { open: 1, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 }, 'got the idle connection kept, want it closed now');
    await once(upstream.connections[0]!, 'close');
    const { body } = await roundTrip(busy, 'GET', '/busy');
    assert.match(body, /^GET \/busy/, 'the exchange in flight finishes on its connection');
    pool.release(busy);
    assert.deepEqual(pool.stats(), { open: 0, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 }, 'got the busy connection pooled after its exchange, want it closed');
    await once(upstream.connections[1]!, 'close');
    const fresh = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    assert.equal(fresh.wasReused, false, 'an address that comes back starts with new connections');
    await roundTrip(fresh, 'GET', '/again');
    pool.release(fresh);
    assert.equal(pool.stats().idle, 1, 'a connection made after the retire is pooled as usual');
  });

  it('reuses one socket for sequential requests and says so', async () => {
    const { upstream, pool } = await setUp();
    const seen: { body: string; wasReused: boolean }[] = [];
    for (let i = 0; i < 3; i++) {
      const connection = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
      const { head, body } = await roundTrip(connection, 'GET', `/r${i}`);
      assert.equal(head.isKeepAlive, true);
      seen.push({ body, wasReused: connection.wasReused });
      pool.release(connection);
    }
    assert.deepEqual(seen, [
      { body: 'GET /r0 #1', wasReused: false },
      { body: 'GET /r1 #2', wasReused: true },
      { body: 'GET /r2 #3', wasReused: true },
    ]);
    assert.equal(upstream.connections.length, 1, `got ${upstream.connections.length} upstream connections, want 1`);
    assert.deepEqual(pool.stats(), { open: 1, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
  });

  it('hands out the most recently released socket first (LIFO)', async () => {
    const { upstream, pool } = await setUp();
    const first = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    const second = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    pool.release(first);
    pool.release(second);
    assert.equal(await pool.acquire('127.0.0.1', upstream.port, CONNECT), second, 'got the older socket, want the newest');
    assert.equal(await pool.acquire('127.0.0.1', upstream.port, CONNECT), first);
  });

  it('keeps idle lists per origin', async () => {
    const { upstream, pool } = await setUp();
    const other = await startUpstream();
    cleanups.push(() => other.close());
    const connection = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    pool.release(connection);
    const toOther = await pool.acquire('127.0.0.1', other.port, CONNECT);
    assert.notEqual(toOther, connection, 'got a socket of another origin, want a new one');
    assert.equal(toOther.wasReused, false);
  });

  /** An upstream with a small and a 1 MiB response, and a pool; `exchange` runs one request, released from inside the read that completes it, as the proxy's exchange does. */
  const setUpLargeBodies = async (options: ConnectionPoolOptions = {}) => {
    const large = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < large.length; i++) large[i] = i % 251;
    const server = http.createServer((req, res) => res.end(req.url === '/large' ? large : 'small'));
    server.keepAliveTimeout = 60_000;
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const pool = new ConnectionPool(options);
    cleanups.push(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }), () => pool.close());
    /** `stopAfter`: after this many body bytes, pause the socket and resolve, the connection still held, instead of reading on. */
    const exchange = async (path: string, stopAfter = Infinity) => {
      const connection = await pool.acquire('127.0.0.1', port, CONNECT);
      return new Promise<{ body: Buffer; largestChunk: number; largeBuffersDuringBody: number; connection: UpstreamConnection }>((resolve, reject) => {
        const chunks: Buffer[] = [];
        let bodyBytes = 0;
        let largestChunk = 0;
        let largeBuffersDuringBody = 0;
        const result = () => ({ body: Buffer.concat(chunks), largestChunk, largeBuffersDuringBody, connection });
        const parser = new ResponseParser({
          method: 'GET',
          onHead: () => {},
          onBody: (chunk) => {
            chunks.push(Buffer.from(chunk));
            bodyBytes += chunk.length;
            largestChunk = Math.max(largestChunk, chunk.length);
            largeBuffersDuringBody = Math.max(largeBuffersDuringBody, pool.stats().largeReadBuffers);
            if (bodyBytes >= stopAfter) {
              connection.socket.pause();
              resolve(result());
            }
          },
          onComplete: () => {
            pool.release(connection);
            resolve(result());
          },
        });
        connection.handler = { onData: (data) => parser.execute(data), onEnd: () => parser.finish(), onError: reject, onClose: () => reject(new Error('closed')), onTimeout: () => {} };
        connection.socket.write(serializeRequestHead('GET', path, ['Host', 'upstream.test']), 'latin1');
      });
    };
    return { large, pool, exchange };
  };

  it('a connection reads into its small buffer, switches to a large one for a large body, and gives it back when idle again', async () => {
    const { large, pool, exchange } = await setUpLargeBodies();
    const small = await exchange('/small');
    assert.equal(small.body.toString(), 'small');
    assert.deepEqual(pool.stats(), { open: 1, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 }, 'a small response needs no large buffer');
    for (const round of [1, 2]) {
      const { body, largestChunk, largeBuffersDuringBody } = await exchange('/large');
      assert.ok(body.equals(large), `round ${round}: got ${body.length} bytes that differ from the 1 MiB sent`);
      assert.ok(largestChunk > SMALL_READ_BUFFER_BYTES, `round ${round}: got reads of at most ${largestChunk} bytes, want some into the large buffer`);
      assert.ok(largestChunk <= LARGE_READ_BUFFER_BYTES);
      assert.equal(largeBuffersDuringBody, 1, `round ${round}: want the connection on a large buffer during the body`);
      assert.deepEqual(pool.stats(), { open: 1, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 1 }, `round ${round}: want the large buffer given back (and reused in round 2, not a second one made)`);
    }
    assert.equal((await exchange('/small')).body.toString(), 'small');
  });

  it('maxLargeReadBuffers: past it a large body reads through the small buffer, and a connection destroyed mid-body frees its place', async () => {
    const { large, pool, exchange } = await setUpLargeBodies({ maxLargeReadBuffers: 1 });
    const holder = await exchange('/large', 256 * 1024); // in use, paused, on the one large buffer allowed
    assert.equal(holder.largeBuffersDuringBody, 1);
    const past = await exchange('/large');
    assert.ok(past.body.equals(large), `got ${past.body.length} bytes that differ from the 1 MiB sent`);
    assert.ok(past.largestChunk <= SMALL_READ_BUFFER_BYTES, `got a read of ${past.largestChunk} bytes, want the small buffer's at most while another holds the large one`);
    pool.destroy(holder.connection);
    assert.deepEqual(pool.stats(), { open: 1, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 }, 'a buffer a client may still write from is no spare');
    const after = await exchange('/large');
    assert.ok(after.body.equals(large));
    assert.ok(after.largestChunk > SMALL_READ_BUFFER_BYTES, `got reads of at most ${after.largestChunk} bytes, want the destroyed connection's place taken`);
  });

  it('drops an idle socket the upstream closes', async () => {
    const { upstream, pool } = await setUp();
    const connection = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    await roundTrip(connection, 'GET', '/');
    pool.release(connection);
    assert.deepEqual(pool.stats(), { open: 1, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
    upstream.connections[0]?.end(); // the upstream's keep-alive timeout, say
    await once(connection.socket, 'close');
    assert.deepEqual(pool.stats(), { open: 0, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 }, 'got the closed socket still pooled');
    const next = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    assert.equal(next.wasReused, false);
    assert.equal((await roundTrip(next, 'GET', '/again')).body, 'GET /again #2');
  });

  it('drops an idle socket that receives unexpected bytes', async () => {
    const { upstream, pool } = await setUp();
    const connection = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    await roundTrip(connection, 'GET', '/');
    pool.release(connection);
    upstream.connections[0]?.write('HTTP/1.1 408 Request Timeout\r\n\r\n');
    await once(connection.socket, 'close');
    assert.deepEqual(pool.stats(), { open: 0, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
  });

  it('destroys an idle socket when its idle timeout fires', async () => {
    const timers = new ManualTimers();
    let clockMs = 0;
    const { upstream, pool } = await setUp('127.0.0.1', { timers, idleTimeoutMs: 1234, now: () => clockMs });
    const connection = await pool.acquire('127.0.0.1', upstream.port, { connectTimeoutMs: 0 });
    pool.release(connection);
    assert.deepEqual(timers.delays, [1234], `got timers ${timers.delays}, want one idle timer of 1234 ms`);
    clockMs = 1234;
    timers.fireAll();
    assert.equal(connection.socket.destroyed, true, 'got the socket alive after the idle timeout');
    assert.equal(pool.stats().idle, 0);
  });

  it('a socket reused before its idle timer fires is not closed by it; released again, it gets the rest of its new idle time', async () => {
    const timers = new ManualTimers();
    let clockMs = 0;
    const { upstream, pool } = await setUp('127.0.0.1', { timers, idleTimeoutMs: 1234, now: () => clockMs });
    const connection = await pool.acquire('127.0.0.1', upstream.port, { connectTimeoutMs: 0 });
    pool.release(connection);
    clockMs = 100;
    assert.equal(await pool.acquire('127.0.0.1', upstream.port, { connectTimeoutMs: 0 }), connection, 'got a new connection, want the idle one');
    clockMs = 1234;
    timers.fireAll(); // the timer of the first idle time, while the socket is in use
    assert.equal(connection.socket.destroyed, false, 'got the socket in use closed by its old idle timer');
    assert.deepEqual(timers.delays, [], `got timers ${timers.delays} for a socket in use, want none`);

    pool.release(connection); // idle from 1234 on: the timer is armed again, for the whole timeout
    assert.deepEqual(timers.delays, [1234], `got timers ${timers.delays}, want one idle timer of 1234 ms`);
    clockMs = 1300;
    assert.equal(await pool.acquire('127.0.0.1', upstream.port, { connectTimeoutMs: 0 }), connection);
    clockMs = 2000;
    pool.release(connection); // idle from 2000 on; the timer armed at 1234 fires at 2468
    clockMs = 2468;
    timers.fireAll();
    assert.equal(connection.socket.destroyed, false, 'got the socket closed 468 ms into its idle time, want 1234');
    assert.deepEqual(timers.delays, [766], `got timers ${timers.delays}, want the timer re-armed for the 766 ms left`);
    clockMs = 3234;
    timers.fireAll();
    assert.equal(connection.socket.destroyed, true, 'got the socket alive 1234 ms into its idle time');
    assert.deepEqual(pool.stats(), { open: 0, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
  });

  it('keeps at most maxIdlePerOrigin idle sockets, dropping the oldest', async () => {
    const { upstream, pool } = await setUp('127.0.0.1', { maxIdlePerOrigin: 2 });
    const connections = [];
    for (let i = 0; i < 3; i++) connections.push(await pool.acquire('127.0.0.1', upstream.port, CONNECT));
    for (const connection of connections) pool.release(connection);
    assert.equal(pool.stats().idle, 2);
    assert.equal(connections[0]?.socket.destroyed, true, 'got the oldest idle socket kept, want it destroyed');
  });

  it('with maxOpen connections open, a new connect first closes the longest-idle one of any origin, and with none idle fails with ProxyResourceError', async () => {
    const other = await startUpstream();
    cleanups.push(() => other.close());
    let maxOpen = 2;
    let nowMs = 0;
    const { upstream, pool } = await setUp('127.0.0.1', { maxOpen: () => maxOpen, now: () => nowMs });
    const [older, newer] = [await pool.acquire('127.0.0.1', upstream.port, CONNECT), await pool.acquire('127.0.0.1', upstream.port, CONNECT)];
    pool.release(older);
    nowMs = 1;
    pool.release(newer);
    const third = await pool.acquire('127.0.0.1', other.port, CONNECT);
    assert.equal(older.socket.destroyed, true, 'got the longest-idle connection kept, want it closed to make room');
    assert.equal(newer.socket.destroyed, false);
    assert.deepEqual(pool.stats(), { open: 2, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
    assert.equal(pool.acquireIdle('127.0.0.1', upstream.port), newer, 'an idle connection of the origin is still taken, without a connect');
    await assert.rejects(pool.acquire('127.0.0.1', other.port, { ...CONNECT, isNewRequired: true }), (error: unknown) => {
      assert.ok(error instanceof ProxyResourceError, `got ${String(error)}, want ProxyResourceError`);
      assert.equal(error.message, `connect 127.0.0.1:${other.port}: no descriptor left in the budget (2 upstream connections open, none idle)`);
      return true;
    });
    assert.equal(other.connections.length, 1, 'the refused connect made no connection');
    maxOpen = 3; // the budget grew (a client connection closed)
    const fourth = await pool.acquire('127.0.0.1', other.port, { ...CONNECT, isNewRequired: true });
    assert.deepEqual(pool.stats(), { open: 3, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
    for (const connection of [newer, third, fourth]) pool.destroy(connection);
  });

  it('does not pool a socket that is no longer usable, and ignores a second release', async () => {
    const { upstream, pool } = await setUp();
    const connection = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    connection.socket.destroy();
    pool.release(connection);
    pool.release(connection);
    assert.equal(pool.stats().idle, 0);
  });

  it('turns a refused connect into UpstreamConnectError naming errno and address', async () => {
    const port = await closedPort();
    const pool = new ConnectionPool();
    await assert.rejects(pool.acquire('127.0.0.1', port, CONNECT), (error: unknown) => {
      assert.ok(error instanceof UpstreamConnectError, `got ${String(error)}, want UpstreamConnectError`);
      assert.equal(error.message, `connect ECONNREFUSED 127.0.0.1:${port}`);
      return true;
    });
    assert.deepEqual(pool.stats(), { open: 0, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
  });

  it('refuses a connection to one of ownListeners before making it (an IP literal, a name all of whose addresses are own), and connects to other ports', async () => {
    const own = new OwnListeners(() => []);
    const { upstream, pool } = await setUp('127.0.0.1', { ownListeners: own });
    const other = await startUpstream();
    cleanups.push(() => other.close());
    own.add({ address: '::', port: upstream.port, key: 'listen' }); // both families: every address of localhost
    const refusal = (host: string): Promise<unknown> => pool.acquire(host, upstream.port, CONNECT).then(() => undefined, (reason: unknown) => reason);
    const literal = await refusal('127.0.0.1');
    assert.ok(literal instanceof UpstreamLoopError, `got ${String(literal)}, want UpstreamLoopError`);
    assert.equal(literal.message, `127.0.0.1:${upstream.port} is this proxy's own listener (listen [::]:${upstream.port}): the request would loop`);
    const name = await refusal('localhost');
    assert.ok(name instanceof UpstreamLoopError, `got ${String(name)} for localhost, want UpstreamLoopError`);
    assert.deepEqual(pool.stats(), { open: 0, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 }, 'got a refused connection kept by the pool');
    await new Promise((resolve) => setTimeout(resolve, 50)); // a connection made anyway would have been accepted by now
    assert.equal(upstream.connections.length, 0, `got ${upstream.connections.length} connections at the listener, want none made`);
    const connection = await pool.acquire('127.0.0.1', other.port, CONNECT);
    assert.equal(connection.socket.remotePort, other.port, 'a port that is not a listener connects as usual');
  });

  it('refuses a name that resolved only to ownListeners without a new lookup for OWN_NAME_MEMORY_MS, then asks again', async () => {
    const own = new OwnListeners(() => []);
    const { upstream } = await setUp('127.0.0.1');
    own.add({ address: '::', port: upstream.port, key: 'listen' }); // every address of localhost
    let clock = 0;
    let connects = 0;
    const pool = new ConnectionPool({ ownListeners: own, now: () => clock, connect: (options) => (connects++, net.connect(options)) });
    cleanups.push(() => pool.close());
    const refusal = (): Promise<unknown> => pool.acquire('localhost', upstream.port, CONNECT).then(() => undefined, (reason: unknown) => reason);
    assert.ok((await refusal()) instanceof UpstreamLoopError);
    assert.equal(connects, 1, 'the first refusal comes from the lookup of a connect');
    clock = OWN_NAME_MEMORY_MS - 1;
    const remembered = await refusal();
    assert.ok(remembered instanceof UpstreamLoopError, `got ${String(remembered)}, want UpstreamLoopError`);
    assert.equal(connects, 1, `got ${connects} connects (lookups), want 1: a remembered name is refused without one`);
    clock = OWN_NAME_MEMORY_MS;
    assert.ok((await refusal()) instanceof UpstreamLoopError);
    assert.equal(connects, 2, 'after OWN_NAME_MEMORY_MS the name is looked up again');
  });

  it('destroys a connection whose peer still turns out to be one of ownListeners (the backstop), writing nothing', async () => {
    const own = new OwnListeners(() => []);
    const { upstream } = await setUp('127.0.0.1');
    own.add({ address: '0.0.0.0', port: upstream.port, key: 'listen' });
    // A connect function that lands on the listener whatever the host: what the lookup could not see.
    const pool = new ConnectionPool({ ownListeners: own, connect: (options) => net.connect({ ...options, host: '127.0.0.1', lookup: undefined }) });
    cleanups.push(() => pool.close());
    const error = await pool.acquire('upstream.test', upstream.port, CONNECT).then(() => undefined, (reason: unknown) => reason);
    assert.ok(error instanceof UpstreamLoopError, `got ${String(error)}, want UpstreamLoopError`);
    assert.equal(error.message, `127.0.0.1:${upstream.port} is this proxy's own listener (listen 0.0.0.0:${upstream.port}): the request would loop`);
    assert.deepEqual(pool.stats(), { open: 0, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 }, 'got a refused connection kept by the pool');
    await waitUntil(() => upstream.connections.length === 1 && upstream.connections[0]!.closed);
    assert.equal(upstream.connections[0]!.bytesRead, 0, `got ${upstream.connections[0]!.bytesRead} bytes at the listener, want 0`);
  });

  it('turns a connect that never completes into UpstreamTimeoutError (phase connect)', async () => {
    const timers = new ManualTimers();
    let socket: net.Socket | undefined;
    const pool = new ConnectionPool({ timers, connect: () => (socket = new net.Socket()) }); // never connects
    const pending = pool.acquire('10.255.255.1', 80, { connectTimeoutMs: 5000 });
    assert.deepEqual(timers.delays, [5000]);
    timers.fireAll();
    await assert.rejects(pending, (error: unknown) => {
      assert.ok(error instanceof UpstreamTimeoutError, `got ${String(error)}, want UpstreamTimeoutError`);
      assert.equal(error.phase, 'connect');
      assert.equal(error.message, 'connect timeout after 5000 ms to 10.255.255.1:80');
      return true;
    });
    assert.equal(socket?.destroyed, true, 'got the timed-out socket alive');
  });

  it('rejects with the abort reason and destroys the socket when the signal aborts', async () => {
    const timers = new ManualTimers();
    let socket: net.Socket | undefined;
    const pool = new ConnectionPool({ timers, connect: () => (socket = new net.Socket()) });
    const controller = new AbortController();
    const pending = pool.acquire('127.0.0.1', 80, { connectTimeoutMs: 5000, signal: controller.signal });
    const reason = new Error('client went away');
    controller.abort(reason);
    await assert.rejects(pending, (error: unknown) => error === reason);
    assert.equal(socket?.destroyed, true);
    assert.deepEqual(timers.delays, [], 'got the connect timer still pending');
    await assert.rejects(pool.acquire('127.0.0.1', 80, { connectTimeoutMs: 0, signal: controller.signal }), (error: unknown) => error === reason);
  });

  it('rejects a pending connect when the pool is closed', async () => {
    const pool = new ConnectionPool({ timers: new ManualTimers(), connect: () => new net.Socket() });
    const rejection = assert.rejects(pool.acquire('127.0.0.1', 80, { connectTimeoutMs: 5000 }), UpstreamConnectError);
    await pool.close();
    await rejection;
  });

  for (const [listenOn, resolvesTo] of [
    ['127.0.0.1', ['::1', '127.0.0.1']],
    ['::1', ['127.0.0.1', '::1']],
  ] as const) {
    it(`connects to localhost listening on ${listenOn} when localhost resolves to ${resolvesTo.join(' then ')}`, async () => {
      const upstream = await startUpstream(listenOn);
      cleanups.push(() => upstream.close());
      // a resolver that answers like a host whose /etc/hosts lists both addresses in this order
      const lookup = ((_host: string, _options: unknown, callback: (error: null, addresses: { address: string; family: number }[]) => void) =>
        callback(
          null,
          resolvesTo.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
        )) as unknown as net.LookupFunction;
      const pool = new ConnectionPool({ connect: (options) => net.connect({ ...options, lookup }) });
      cleanups.push(() => pool.close());
      const connection = await pool.acquire('localhost', upstream.port, CONNECT);
      assert.equal(connection.socket.remoteAddress, listenOn);
      assert.equal((await roundTrip(connection, 'GET', '/')).body, 'GET / #1');
    });
  }

  it('an upgrade connection is new, half-open capable, never pooled, and detach hands its socket over without the pool listening', async () => {
    const { upstream, pool } = await setUp();
    const pooled = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    await roundTrip(pooled, 'GET', '/pooled');
    pool.release(pooled);
    const upgrade = await pool.acquire('127.0.0.1', upstream.port, { ...CONNECT, isForUpgrade: true });
    assert.notEqual(upgrade.socket, pooled.socket, 'an upgrade never takes an idle connection');
    assert.equal(upgrade.socket.allowHalfOpen, true, 'a FIN from the upstream must not end our writing half of a tunnel');
    assert.equal((await roundTrip(upgrade, 'GET', '/once')).body, 'GET /once #2');
    pool.release(upgrade); // an upgrade request answered without a 101: closed, not pooled
    assert.equal(upgrade.socket.destroyed, true, 'got an upgrade connection kept, want it closed on release');
    assert.deepEqual(pool.stats(), { open: 1, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 });

    const tunnel = await pool.acquire('127.0.0.1', upstream.port, { ...CONNECT, isForUpgrade: true });
    const listeners = (): number[] => ['data', 'end', 'error', 'timeout', 'close'].map((event) => tunnel.socket.listenerCount(event));
    const before = listeners();
    const socket = pool.detach(tunnel);
    assert.deepEqual(pool.stats(), { open: 1, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 }, 'a detached connection is no longer the pool\'s');
    const after = listeners();
    assert.deepEqual(after, before.map((count) => count - 1), `got listeners ${after} after detach (${before} before), want the pool's one of each removed`);
    await pool.close();
    assert.equal(socket.destroyed, false, 'close() must leave a detached socket alone');
    socket.destroy();
    assert.throws(() => pool.detach(pooled), /only a connection made for an upgrade request can be detached/);
  });

  it('close() destroys idle and in-use sockets and leaves no TCP handles', async () => {
    const tcpHandles = (): number => process.getActiveResourcesInfo().filter((name) => name === 'TCPSocketWrap').length;
    const before = tcpHandles();
    const upstream = await startUpstream();
    const pool = new ConnectionPool();
    const idle = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    const inUse = await pool.acquire('127.0.0.1', upstream.port, CONNECT);
    pool.release(idle);
    assert.deepEqual(pool.stats(), { open: 2, idle: 1, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
    await pool.close();
    assert.deepEqual(pool.stats(), { open: 0, idle: 0, largeReadBuffers: 0, spareLargeReadBuffers: 0 });
    assert.equal(idle.socket.closed && inUse.socket.closed, true, 'got a pool socket not closed after close() resolved');
    await assert.rejects(pool.acquire('127.0.0.1', upstream.port, CONNECT), UpstreamConnectError);
    // the upstream's ends of the two connections see our close and go away too
    await Promise.all(upstream.connections.map((socket) => (socket.closed ? undefined : once(socket, 'close'))));
    await upstream.close();
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(tcpHandles() <= before, `got ${tcpHandles()} TCP handles, want at most ${before} as before the test`);
  });

  it('no pooled socket keeps the process alive, idle or in use: a process whose only handles are pool sockets exits on its own', async () => {
    // In a child process: two connections to an upstream in this process (one released, one
    // held); with a ref'd socket left the child would wait for the idle timeout of 10 minutes.
    const upstream = await startUpstream();
    const poolModule = fileURLToPath(new URL('../../src/wire/connection-pool.ts', import.meta.url));
    const script = `
      const { ConnectionPool } = await import(${JSON.stringify(poolModule)});
      const pool = new ConnectionPool({ idleTimeoutMs: 600000 });
      const idle = await pool.acquire('127.0.0.1', ${upstream.port}, { connectTimeoutMs: 1000 });
      await pool.acquire('127.0.0.1', ${upstream.port}, { connectTimeoutMs: 1000, isNewRequired: true });
      pool.release(idle);
      process.stdout.write('released ' + JSON.stringify(pool.stats()));
    `;
    try {
      await assertExitsAlone(script);
    } finally {
      await upstream.close();
    }
  });
});

/** Runs `script` (ESM) in a child node process and asserts it exits by itself, code 0, within 10 s, printing `released {"open":2,"idle":1,"largeReadBuffers":0,"spareLargeReadBuffers":0}`. */
async function assertExitsAlone(script: string): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  clearTimeout(timer);
  assert.equal(signal, null, `the child was still running after 10 s (killed): a pool socket kept it alive; output: ${output}`);
  assert.equal(code, 0, output);
  assert.equal(output, 'released {"open":2,"idle":1,"largeReadBuffers":0,"spareLargeReadBuffers":0}');
}

describe('poolKey', () => {
  it('names an origin by host and port, and TLS by identity and verified name, the same however often it is asked', () => {
    assert.equal(poolKey('127.0.0.1', 9001), '127.0.0.1:9001');
    assert.equal(poolKey('127.0.0.1', 9001), '127.0.0.1:9001', 'a key kept from the first call');
    assert.equal(poolKey('127.0.0.1', 9002), '127.0.0.1:9002', 'another port of the same host');
    assert.equal(poolKey('::1', 9001), '::1:9001');
    const tls = { identity: 'ca-1' } as Parameters<typeof poolKey>[2];
    assert.equal(poolKey('127.0.0.1', 9001, tls), '127.0.0.1:9001 ca-1 127.0.0.1');
    assert.equal(poolKey('127.0.0.1', 9001, tls, 'a.test'), '127.0.0.1:9001 ca-1 a.test');
    // More hosts than the kept keys hold (discovery can bring new ones forever): every key still right.
    for (let i = 0; i < 3000; i++) assert.equal(poolKey(`10.0.${i >> 8}.${i & 255}`, 80 + (i % 3)), `10.0.${i >> 8}.${i & 255}:${80 + (i % 3)}`);
    for (let port = 1; port < 6000; port++) assert.equal(poolKey('10.9.9.9', port), `10.9.9.9:${port}`, 'many ports of one host');
    assert.equal(poolKey('127.0.0.1', 9001), '127.0.0.1:9001');
  });
});
