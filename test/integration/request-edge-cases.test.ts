/**
 * Requests at the edges of HTTP/1.1, through the real proxy (found by trying the product as a new
 * user would): absolute-form targets, Host rules, transfer codings, many headers, node's own error
 * answers given the proxy's one-line bodies, the header timeout, upstream trailers announced on
 * responses that cannot carry them, and a client that leaves while its request is retried.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { headerValues, listenBackend, rawRequest, startBackend, startRawBackend, startTestProxy, waitFor, startProxiedBackend, wholeResponses } from '../helpers/proxy-harness.js';

function routeIni(url: string, extra = ''): string {
  return `[proxy.a]\npath = /a\npass = ${url}\n${extra}`;
}

test('an absolute-form target is routed by its path, and its authority becomes the Host (RFC 9112 3.2.2)', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url));
  const res = await rawRequest(proxy.port, 'GET http://example.com/a/x?q=1 HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n');
  assert.match(res.text, /^HTTP\/1\.1 200 /);
  assert.equal(backend.requests[0]!.url, '/a/x?q=1');
  assert.deepEqual(headerValues(backend.requests[0]!.rawHeaders, 'host'), ['example.com']);
});

test('Host: two of them, an invalid one, or none in HTTP/1.1, or two Authorization headers → 400 with a one-line body; HTTP/1.0 without Host is fine', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url));
  const cases: [string, RegExp][] = [
    ['GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', /more than one Host header\n$/],
    ['GET /a HTTP/1.1\r\nHost: a b\r\n\r\n', /invalid Host header\n$/],
    ['GET /a HTTP/1.1\r\n\r\n', /missing Host header\n$/],
    ['GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: Basic dG9tOjEyMw==\r\nAuthorization: Basic YWRtaW46YWRtaW4=\r\n\r\n', /more than one Authorization header\n$/],
  ];
  for (const [head, body] of cases) {
    const res = await rawRequest(proxy.port, head);
    assert.match(res.text, /^HTTP\/1\.1 400 /, `${JSON.stringify(head)}: got ${res.text.split('\r\n')[0]}`);
    assert.match(res.text, body);
  }
  assert.equal(backend.requests.length, 0, 'none of them reaches the upstream');
  const old = await rawRequest(proxy.port, 'GET /a HTTP/1.0\r\n\r\n');
  assert.match(old.text, /^HTTP\/1\.1 200 /);
});

test('a target that is neither a path nor an http(s) URL (OPTIONS *, ftp://…) → 400 and nothing forwarded, as nginx', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => `[proxy.any]\npath = ~ .\npass = ${url}\n`);
  for (const target of ['*', 'ftp://h/a', 'h/a']) {
    const res = await rawRequest(proxy.port, `OPTIONS ${target} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n`);
    assert.match(res.text, /^HTTP\/1\.1 400 /, `${target}: got ${res.text.split('\r\n')[0]}, want 400`);
  }
  assert.equal(backend.requests.length, 0);
});

test('a transfer coding other than chunked → 501; Expect other than 100-continue → 417; CONNECT → 405', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url));
  const gzip = await rawRequest(proxy.port, 'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n');
  // Refused by the server's parser before a request exists, with its one-line reason.
  assert.match(gzip.text, /^HTTP\/1\.1 501 [\s\S]*\r\nConnection: close\r\nDate: [^\r\n]+\r\n\r\n[^\n]*transfer coding[^\n]*\n$/);
  const expect = await rawRequest(proxy.port, 'GET /a HTTP/1.1\r\nHost: h\r\nExpect: foo\r\n\r\n');
  assert.match(expect.text, /^HTTP\/1\.1 417 [\s\S]*only 100-continue is supported, got 'foo'\n$/);
  const connect = await rawRequest(proxy.port, `CONNECT 127.0.0.1:${backend.port} HTTP/1.1\r\nHost: 127.0.0.1:${backend.port}\r\n\r\n`);
  assert.match(connect.text, /^HTTP\/1\.1 405 [\s\S]*does not tunnel CONNECT\n$/);
  assert.equal(backend.requests.length, 0);
});

test('2,100 request headers all arrive (the total is bounded by max_header_size, not a count)', async (t) => {
  const backend = await startBackend();
  backend.server.maxHeadersCount = 0;
  // max_header_size counts every byte of the head (19 KB here), as nginx's header buffers do.
  const proxy = await startTestProxy(`[server]\nmax_header_size = 32k\n${routeIni(backend.url)}`);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  let head = 'GET /a HTTP/1.1\r\nHost: h\r\n';
  for (let i = 0; i < 2100; i++) head += `x${i}:1\r\n`;
  await rawRequest(proxy.port, `${head}X-Last: yes\r\nConnection: close\r\n\r\n`);
  const got = backend.requests[0]!.rawHeaders;
  assert.deepEqual(headerValues(got, 'x-last'), ['yes']);
  assert.equal(headerValues(got, 'x2099').length, 1);
});

test('header_timeout is kept to within about a second: a head that never ends gets 408', async (t) => {
  const proxy = await startTestProxy(`[server]\nheader_timeout = 1s\n` + routeIni('http://127.0.0.1:1'));
  t.after(() => proxy.close());
  const startedAt = Date.now();
  const res = await rawRequest(proxy.port, 'GET /a HTTP/1.1\r\nHost: h\r\n', 5000);
  const elapsed = Date.now() - startedAt;
  assert.match(res.text, /^HTTP\/1\.1 408 /);
  assert.ok(elapsed >= 900 && elapsed < 2500, `got 408 after ${elapsed}ms, want about 1000ms`);
});

test('an upstream Trailer announcement on a Content-Length or HEAD response is dropped, not a crash', async (t) => {
  const upstream = await startRawBackend((socket) => {
    socket.on('data', (chunk: Buffer) => {
      const isHead = chunk.toString('latin1').startsWith('HEAD');
      socket.write(isHead ? 'HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n' : 'HTTP/1.1 200 OK\r\nTrailer: X-T\r\nContent-Length: 2\r\n\r\nok');
    });
  });
  const proxy = await startTestProxy(routeIni(upstream.url));
  t.after(async () => {
    await proxy.close();
    await upstream.close();
  });
  const get = await rawRequest(proxy.port, 'GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  assert.match(get.text, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nok$/);
  assert.ok(!/\r\nTrailer:/i.test(get.text), 'no Trailer announcement on a Content-Length body');
  const head = await rawRequest(proxy.port, 'HEAD /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  assert.match(head.text, /^HTTP\/1\.1 200 OK\r\n/);
  await waitFor(() => proxy.proxy.routes[0]!.upstreams[0]!.activeRequests === 0, 2000, 'active requests back to 0');
});

test('a client that leaves is not followed by a resend of its request on a fresh connection', async (t) => {
  const seen = new Map<string, number>();
  const server = http.createServer((req, res) => {
    seen.set(req.url ?? '', (seen.get(req.url ?? '') ?? 0) + 1);
    setTimeout(() => res.end('ok'), 200);
  });
  const backend = await listenBackend(server);
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  await rawRequest(proxy.port, 'GET /a/warm HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n'); // fills the upstream pool
  const socket = net.connect(proxy.port, '127.0.0.1');
  socket.on('error', () => {});
  socket.end('DELETE /a/item HTTP/1.1\r\nHost: h\r\n\r\n'); // head, then FIN at once: the client left
  await new Promise((r) => setTimeout(r, 600));
  const times = seen.get('/a/item') ?? 0;
  assert.ok(times <= 1, `got the DELETE ${times} times at the upstream, want at most once`);
});

test('a client that leaves while the proxy checks its credentials sends nothing upstream', async (t) => {
  const { hashPassword } = await import('../../src/auth/password-hash.js');
  const { backend, proxy } = await startProxiedBackend(t, (url) => `[proxy.a]\npath = /a\npass = ${url}\nauth_basic = Private\nauth_user = tom:${hashPassword('pw')}\n`);
  const socket = net.connect(proxy.port, '127.0.0.1');
  socket.on('error', () => {});
  // scrypt takes tens of ms: leave well before it is done.
  socket.write(`GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: Basic ${Buffer.from('tom:pw').toString('base64')}\r\n\r\n`);
  await new Promise((r) => setTimeout(r, 5));
  socket.destroy();
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(backend.requests.length, 0, 'got the request at the upstream after its client had left');
  assert.equal(proxy.proxy.routes[0]!.upstreams[0]!.activeRequests, 0);
});

test('an upstream that answers before the request body is all sent: the client gets the answer and Connection: close', async (t) => {
  const upstream = await startRawBackend((socket) => {
    socket.once('data', () => socket.end('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large'));
  });
  const proxy = await startTestProxy(routeIni(upstream.url));
  t.after(async () => {
    await proxy.close();
    await upstream.close();
  });
  const socket = net.connect(proxy.port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write('POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 20000000\r\n\r\n' + 'x'.repeat(64 * 1024));
  const text = await new Promise<string>((resolve) => {
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (received.endsWith('too large')) resolve(received);
    });
  });
  socket.destroy();
  assert.match(text, /^HTTP\/1\.1 413 /);
  assert.match(text, /\r\nConnection: close\r\n/i, 'the half-read upload leaves the connection unusable: it must be closed');
});

test('Connection: Content-Length cannot strip the framing: a body is never read upstream as a second request', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url));
  const smuggled = 'GET /a/SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n';
  // 300 ms of silence: a body read as a second request would be answered within milliseconds of the first answer.
  await rawRequest(proxy.port, `POST /a/cx HTTP/1.1\r\nHost: h\r\nConnection: Content-Length\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`, 300);
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(backend.requests.map((r) => r.url), ['/a/cx'], 'got the body read as another request');
  assert.equal(backend.requests[0]!.body.toString(), smuggled, 'the body arrives as a body, byte for byte');
});

test('Expect: 100-continue on a route that demands credentials: 401 without inviting the body first', async (t) => {
  const { hashPassword } = await import('../../src/auth/password-hash.js');
  const { backend, proxy } = await startProxiedBackend(t, (url) => `[proxy.a]\npath = /a\npass = ${url}\nauth_basic = Private\nauth_user = tom:${hashPassword('pw')}\n`);
  const res = await rawRequest(proxy.port, 'POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5000000\r\nExpect: 100-continue\r\n\r\n', { isComplete: wholeResponses(1) });
  assert.match(res.text, /^HTTP\/1\.1 401 /, `got ${res.text.split('\r\n')[0]}, want 401 first (no 100 Continue)`);
  const ok = await rawRequest(proxy.port, `POST /a HTTP/1.1\r\nHost: h\r\nAuthorization: Basic ${Buffer.from('tom:pw').toString('base64')}\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`, { isComplete: (text) => text.includes('\r\n\r\n') });
  assert.match(ok.text, /^HTTP\/1\.1 100 Continue\r\n\r\n/, 'allowed: the body is invited');
});

test('a body whose first bytes are malformed (bad chunk size): the head was committed on arrival, so the connection is cut, never completed', async (t) => {
  const upstream = await startRawBackend((socket) => {
    socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n'));
  });
  const proxy = await startTestProxy(routeIni(upstream.url, 'max_fails = 0\n'));
  t.after(async () => {
    await proxy.close();
    await upstream.close();
  });
  const res = await rawRequest(proxy.port, 'GET /a HTTP/1.1\r\nHost: h\r\n\r\n');
  // As nginx and Go when a body fails after the head went out: the head, then a cut (no last chunk).
  assert.match(res.text, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\nTransfer-Encoding: chunked\r\n(?:[^\r\n]+\r\n)*\r\n$/, `got ${JSON.stringify(res.text)}, want the head alone`);
  assert.equal(res.closedByServer, true, 'got the connection open, want it cut');
  await waitFor(() => proxy.logs.length === 1, 1000, 'the log record');
  assert.equal(proxy.logs[0]?.status, 200, 'the access log says what the client got');
  assert.match(proxy.logs[0]?.attempts[0]?.error ?? '', /^PRX_UPSTREAM_PROTOCOL: malformed upstream response: /, `got attempt error ${String(proxy.logs[0]?.attempts[0]?.error)}, want the code and its reason`);
  assert.equal(proxy.proxy.routes[0]!.upstreams[0]!.activeRequests, 0);
});

test('Expect: 100-continue on a request without a body keeps the connection alive', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url));
  const res = await rawRequest(proxy.port, 'POST /a/z HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\nGET /a/after HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  assert.equal(res.text.match(/HTTP\/1\.1 200 OK/g)?.length, 2, `got ${JSON.stringify(res.text)}, want both requests answered on one connection`);
  assert.deepEqual(backend.requests.map((r) => r.url), ['/a/z', '/a/after']);
});

test('answers written before a request object exists are logged too: 400 unparsable, 431, 405 CONNECT, 417', async (t) => {
  const proxy = await startTestProxy(routeIni('http://127.0.0.1:1'));
  t.after(() => proxy.close());
  await rawRequest(proxy.port, 'GARBAGE\r\n\r\n');
  await rawRequest(proxy.port, `GET /a HTTP/1.1\r\nHost: h\r\nX-Big: ${'b'.repeat(20 * 1024)}\r\n\r\n`);
  await rawRequest(proxy.port, 'CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n');
  await rawRequest(proxy.port, 'GET /a HTTP/1.1\r\nHost: h\r\nExpect: foo\r\n\r\n');
  await waitFor(() => proxy.logs.length === 4, 2000, 'four access log lines');
  assert.deepEqual(proxy.logs.map((r) => r.status), [400, 431, 405, 417]);
  assert.equal(proxy.logs[2]!.method, 'CONNECT');
});
