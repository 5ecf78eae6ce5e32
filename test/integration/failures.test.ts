/**
 * Step 1 failure behaviour through the real proxy: 502 refused, 504 read_timeout, an upstream dying
 * mid-body, client aborts reaching the upstream, framing errors (400), big heads (431), big bodies
 * (413), and streaming (the head reaches the client before the body ends).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { listenBackend, rawRequest, request, startRawBackend, startTestProxy, waitFor } from '../helpers/proxy-harness.js';

function routeIni(url: string, extra = ''): string {
  return `[proxy.a]\npath = /a\npass = ${url}\n${extra}`;
}

/** A port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

test('upstream refused → 502 with a one-line body', async (t) => {
  const proxy = await startTestProxy(routeIni(`http://127.0.0.1:${await closedPort()}`, 'max_fails = 0\n'));
  t.after(() => proxy.close());
  const res = await request(proxy.port, { path: '/a' });
  assert.equal(res.status, 502, `got ${res.status}, want 502`);
  assert.equal(res.body.toString(), 'bad gateway: the upstream failed\n');
  assert.equal(proxy.logs[0]!.attempts[0]!.error, 'PRX_UPSTREAM_CONNECT');
});

test('upstream that never answers → 504 after read_timeout', async (t) => {
  const silent = await startRawBackend(() => {});
  const proxy = await startTestProxy(routeIni(silent.url, 'read_timeout = 300ms\nmax_fails = 0\n'));
  t.after(async () => {
    await proxy.close();
    await silent.close();
  });
  const startedAt = Date.now();
  const res = await request(proxy.port, { path: '/a' });
  const elapsed = Date.now() - startedAt;
  assert.equal(res.status, 504);
  assert.ok(elapsed >= 290 && elapsed < 2000, `got 504 after ${elapsed}ms, want about 300ms`);
});

test('upstream that dies mid-body → the client connection is closed, not a clean end', async (t) => {
  const dying = await startRawBackend((socket) => {
    socket.once('data', () => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n' + 'x'.repeat(40));
      setTimeout(() => socket.destroy(), 50);
    });
  });
  const chunkedDying = await startRawBackend((socket) => {
    socket.once('data', () => {
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
      setTimeout(() => socket.destroy(), 50);
    });
  });
  const proxy = await startTestProxy(`[proxy.a]\npath=/a\npass=${dying.url}\n[proxy.b]\npath=/b\npass=${chunkedDying.url}\n`);
  t.after(async () => {
    await proxy.close();
    await dying.close();
    await chunkedDying.close();
  });
  for (const path of ['/a', '/b']) {
    const res = await rawRequest(proxy.port, `GET ${path} HTTP/1.1\r\nHost: h\r\n\r\n`, 3000);
    assert.ok(res.closedByServer, `${path}: got an open connection, want it closed by the proxy`);
    assert.match(res.text, /^HTTP\/1\.1 200 OK/);
    assert.ok(!res.text.endsWith('0\r\n\r\n'), `${path}: the client must not see a complete chunked body`);
    if (path === '/a') assert.ok(res.data.length - res.text.indexOf('\r\n\r\n') - 4 < 100, 'body must be short of Content-Length');
  }
});

test('an upstream that closes (FIN) early is logged as a close with how far the response got; one that resets (RST) as a reset; the client sees the same either way', async (t) => {
  const HEAD = 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n';
  // Each answers its first request as its name says, the body part 10 of 100 bytes.
  const behaviours: Record<string, (socket: net.Socket) => void> = {
    'fin-in-body': (socket) => socket.end(`${HEAD}${'x'.repeat(10)}`),
    'rst-in-body': (socket) => socket.write(`${HEAD}${'x'.repeat(10)}`, () => setTimeout(() => socket.resetAndDestroy(), 20)),
    'fin-in-head': (socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Le'),
    'fin-before-answer': (socket) => socket.end(),
    'rst-before-answer': (socket) => socket.resetAndDestroy(),
  };
  const names = Object.keys(behaviours);
  const backends = await Promise.all(names.map((name) => startRawBackend((socket) => socket.once('data', () => behaviours[name]!(socket)))));
  const ini = names.map((name, i) => `[proxy.${name}]\npath = /${name}\npass = ${backends[i]!.url}\nmax_fails = 0\n`).join('');
  const proxy = await startTestProxy(ini);
  t.after(async () => {
    await proxy.close();
    for (const backend of backends) await backend.close();
  });
  const want: Record<string, { readonly status: number; readonly error: string }> = {
    'fin-in-body': { status: 200, error: 'PRX_UPSTREAM_RESET: closed the connection before the response was complete (10 of 100 body bytes)' },
    'rst-in-body': { status: 200, error: 'PRX_UPSTREAM_RESET: reset the connection (ECONNRESET)' },
    'fin-in-head': { status: 502, error: 'PRX_UPSTREAM_RESET: closed the connection before the response head was complete' },
    'fin-before-answer': { status: 502, error: 'PRX_UPSTREAM_RESET: closed the connection before sending a response' },
    'rst-before-answer': { status: 502, error: 'PRX_UPSTREAM_RESET: reset the connection (ECONNRESET)' },
  };
  for (const name of names) {
    const res = await rawRequest(proxy.port, `GET /${name} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n`, 3000);
    const { status, error } = want[name]!;
    // The client side does not depend on how the upstream ended: a 502 before the head, a cut connection after it.
    assert.match(res.text, new RegExp(`^HTTP/1\\.1 ${status} `), `${name}: got ${JSON.stringify(res.text.slice(0, 40))}, want ${status}`);
    assert.ok(res.closedByServer, `${name}: got an open connection, want it closed by the proxy`);
    if (status === 200) assert.equal(res.data.length - res.text.indexOf('\r\n\r\n') - 4, 10, `${name}: want the 10 body bytes and no more`);
    await waitFor(() => proxy.logs.some((r) => r.target === `/${name}`), 2000, `the log record of /${name}`);
    const attempts = proxy.logs.find((r) => r.target === `/${name}`)!.attempts;
    assert.deepEqual(attempts.map((a) => [a.status, a.error]), [[status === 200 ? 200 : undefined, error]], `${name}: got ${JSON.stringify(attempts)}, want ${error}`);
  }
});

test('upstream that dies mid-body, to an HTTP/1.0 client (a body delimited by the close) → the connection is reset, not ended as if complete', async (t) => {
  const chunkedDying = await startRawBackend((socket) => {
    socket.once('data', () => {
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
      setTimeout(() => socket.destroy(), 50);
    });
  });
  const whole = await startRawBackend((socket) => {
    socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'));
  });
  const proxy = await startTestProxy(`[proxy.cut]\npath=/cut\npass=${chunkedDying.url}\n[proxy.whole]\npath=/whole\npass=${whole.url}\n`);
  t.after(async () => {
    await proxy.close();
    await chunkedDying.close();
    await whole.close();
  });
  const http10 = (path: string): Promise<{ text: string; ending: string }> =>
    new Promise((resolve) => {
      const socket = net.connect(proxy.port, '127.0.0.1');
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
      socket.on('end', () => resolve({ text, ending: 'end' }));
      socket.on('error', (error: NodeJS.ErrnoException) => resolve({ text, ending: error.code ?? error.message }));
      socket.write(`GET ${path} HTTP/1.0\r\nHost: h\r\n\r\n`);
    });
  const cut = await http10('/cut');
  assert.equal(cut.ending, 'ECONNRESET', `got the cut body ended by ${cut.ending}, want a reset`);
  const complete = await http10('/whole');
  assert.equal(complete.ending, 'end', 'a whole body delimited by the close still ends with a FIN');
  assert.match(complete.text, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nhello$/);
});

test('a client that disconnects mid-request aborts the upstream request within a second', async (t) => {
  let upstreamClosedAt = 0;
  const server = http.createServer((req) => {
    req.on('data', () => {});
    req.socket.on('close', () => {
      upstreamClosedAt = Date.now();
    });
  });
  const backend = await listenBackend(server);
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const socket = net.connect(proxy.port, '127.0.0.1');
  socket.write('POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1000000\r\n\r\n' + 'x'.repeat(1000));
  await waitFor(() => backend.server.listenerCount('request') > 0 && proxy.proxy.routes[0]!.upstreams[0]!.activeRequests === 1, 3000, 'request in flight');
  await new Promise((r) => setTimeout(r, 100));
  const abortedAt = Date.now();
  socket.destroy();
  await waitFor(() => upstreamClosedAt > 0, 2000, 'upstream connection closed');
  assert.ok(upstreamClosedAt - abortedAt < 1000, `upstream saw the abort after ${upstreamClosedAt - abortedAt}ms, want < 1000`);
  await waitFor(() => proxy.proxy.routes[0]!.upstreams[0]!.activeRequests === 0, 2000, 'active requests back to 0');
});

test('Content-Length with Transfer-Encoding → 400 and closed; a 20 KiB head → 431; over max_body_size → 413', async (t) => {
  const proxy = await startTestProxy(`[server]\nmax_body_size = 1k\n` + routeIni('http://127.0.0.1:1'));
  t.after(() => proxy.close());
  const smuggle = await rawRequest(proxy.port, 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
  assert.match(smuggle.text, /^HTTP\/1\.1 400 /);
  assert.ok(smuggle.closedByServer, 'the connection must be closed after a framing error');
  const big = await rawRequest(proxy.port, `GET /a HTTP/1.1\r\nHost: h\r\nX-Big: ${'b'.repeat(20 * 1024)}\r\n\r\n`);
  assert.match(big.text, /^HTTP\/1\.1 431 /);
  const tooLong = await rawRequest(proxy.port, 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2048\r\n\r\n');
  assert.match(tooLong.text, /^HTTP\/1\.1 413 /);
  assert.match(tooLong.text, /request body too large\n$/);
});

test('a chunked body with a bad chunk size → 400 whose one line says what was wrong, and the connection closed', async (t) => {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('done'));
  });
  const backend = await listenBackend(server);
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const bad = await rawRequest(proxy.port, 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n');
  assert.match(bad.text, /^HTTP\/1\.1 400 /, `got ${JSON.stringify(bad.text.split('\r\n')[0])}`);
  assert.match(bad.text, /\r\n\r\nbad request: malformed request body: [^\n]+\n$/, `got ${JSON.stringify(bad.text)}`);
  assert.ok(bad.closedByServer, 'the connection must be closed after a framing error');
});

test('a chunked body over max_body_size → 413 and the upstream request aborted', async (t) => {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('done'));
  });
  const backend = await listenBackend(server);
  const proxy = await startTestProxy(`[server]\nmax_body_size = 1k\n` + routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const chunk = 'y'.repeat(600);
  const res = await rawRequest(proxy.port, `POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n${chunk}\r\n258\r\n${chunk}\r\n0\r\n\r\n`);
  assert.match(res.text, /^HTTP\/1\.1 413 /);
});

test('a chunked body that goes over max_body_size while it streams → 413, and the upstream never gets the piece over the limit', async (t) => {
  let received = 0;
  let isAborted = false;
  const server = http.createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (received += chunk.length));
    req.on('aborted', () => (isAborted = true));
    req.on('close', () => (isAborted ||= !req.complete));
    req.on('end', () => res.end('done'));
  });
  const backend = await listenBackend(server);
  const proxy = await startTestProxy(`[server]\nmax_body_size = 1k\n` + routeIni(backend.url));
  const client = net.connect(proxy.port, '127.0.0.1');
  t.after(async () => {
    client.destroy();
    await proxy.close();
    await backend.close();
  });
  let answer = '';
  client.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  client.write(`POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n${'y'.repeat(600)}\r\n`);
  await waitFor(() => received === 600, 3000, 'the first piece at the upstream');
  client.write(`258\r\n${'z'.repeat(600)}\r\n`);
  await waitFor(() => answer.includes('\r\n\r\n'), 3000, 'the answer');
  assert.match(answer, /^HTTP\/1\.1 413 /, `got ${JSON.stringify(answer.split('\r\n')[0])}`);
  await waitFor(() => isAborted, 3000, 'the upstream request aborted');
  assert.equal(received, 600, 'got bytes over the limit at the upstream');
});

test('streaming: the client receives the head before the upstream finishes the body', async (t) => {
  let finishBody: (() => void) | undefined;
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.write('first part;');
    finishBody = () => res.end('second part');
  });
  const backend = await listenBackend(server);
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const received: string[] = [];
  const done = new Promise<void>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: proxy.port, path: '/a', agent: false }, (res) => {
        received.push(`head ${res.statusCode}`);
        res.on('data', (c: Buffer) => {
          received.push(c.toString());
          finishBody?.();
        });
        res.on('end', resolve);
      })
      .on('error', reject);
  });
  await done;
  assert.deepEqual(received, ['head 200', 'first part;', 'second part']);
});

test('a request body streams to the upstream before the client has sent all of it', async (t) => {
  let firstChunkAt = 0;
  const server = http.createServer((req, res) => {
    req.once('data', () => {
      firstChunkAt = Date.now();
    });
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  const backend = await listenBackend(server);
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const socket = net.connect(proxy.port, '127.0.0.1');
  socket.write('POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 20\r\nConnection: close\r\n\r\n0123456789');
  await waitFor(() => firstChunkAt > 0, 3000, 'first body chunk at the upstream');
  socket.write('0123456789'); // no half-close: like nginx, node treats a client FIN as an abort
  const response = await new Promise<string>((resolve) => {
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString()));
    socket.on('close', () => resolve(text));
  });
  assert.match(response, /^HTTP\/1\.1 200 OK[\s\S]*ok$/);
});
