/**
 * Step 1 behaviour through the real proxy: header cloning, hop-by-hop removal, X-Forwarded-*,
 * paths and query strings, response headers, HEAD/204/304, trailers, 100-continue, keep-alive reuse.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { headerValues, rawRequest, request, startBackend, startTestProxy, startProxiedBackend, waitFor } from '../helpers/proxy-harness.js';

function routeIni(url: string, extra = '', path = '/a'): string {
  return `[proxy.a]\npath = ${path}\npass = ${url}\n${extra}`;
}

test('every end-to-end request header and value arrives in order, hop-by-hop ones are gone', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url));
  const head =
    'GET /a/x HTTP/1.1\r\nHost: example.test\r\nX-One: 1\r\nAccept: */*\r\nX-Custom: secret\r\nX-One: 2\r\n' +
    'Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers, deflate\r\nProxy-Authorization: Basic eDp5\r\n' +
    'Upgrade: h2c\r\nConnection: close, X-Custom\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n';
  const res = await rawRequest(proxy.port, head);
  assert.match(res.text, /^HTTP\/1\.1 200/, `got ${res.text.slice(0, 40)}, want 200`);
  const got = backend.requests[0]!.rawHeaders;
  const names = [];
  for (let i = 0; i < got.length; i += 2) names.push(`${got[i]}: ${got[i + 1]}`);
  assert.deepEqual(
    names.filter((h) => !/^(x-forwarded|connection)/i.test(h)),
    ['Host: example.test', 'X-One: 1', 'Accept: */*', 'X-One: 2', 'TE: trailers', 'Cookie: a=1', 'Cookie: b=2'],
  );
  assert.deepEqual(headerValues(got, 'x-custom'), [], 'X-Custom was named by Connection and must be removed');
});

test("a client's Connection: X-Forwarded-For cannot remove the proxy's own X-Forwarded-For", async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url));
  await rawRequest(proxy.port, 'GET /a HTTP/1.1\r\nHost: h\r\nConnection: X-Forwarded-For, close\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n');
  assert.deepEqual(headerValues(backend.requests[0]!.rawHeaders, 'x-forwarded-for'), ['127.0.0.1']);
});

test('X-Forwarded-* (every one), Forwarded, X-Real-IP, the other client-address and rewritten-URL headers and their _ spellings are dropped for an untrusted peer; kept or appended to for a trusted one, whose _ spellings are dropped too', async (t) => {
  const backend = await startBackend();
  const untrusted = await startTestProxy(routeIni(backend.url));
  const trusted = await startTestProxy(`[server]\ntrusted_proxies = 10.0.0.0/8, 127.0.0.1\n` + routeIni(backend.url));
  t.after(async () => {
    await untrusted.close();
    await trusted.close();
    await backend.close();
  });
  const headers = {
    'X-Forwarded-For': '1.2.3.4', 'X-Forwarded-Host': 'spoof', 'X-Forwarded-Proto': 'https', Forwarded: 'for=1.2.3.4', Host: 'site.test',
    'X-Forwarded-Port': '1', 'X-Forwarded-Prefix': '/admin', 'X-Real-IP': '5.5.5.5', X_Forwarded_For: '6.6.6.6', X_Forwarded_Host: 'evil',
    // the client's address as CDNs and frameworks read it, and the URL a front proxy rewrote (a break test: IIS and Symfony serve X-Original-URL)
    'True-Client-IP': '7.7.7.7', 'X-Client-IP': '7.7.7.7', 'Client-IP': '7.7.7.7', 'X-Cluster-Client-IP': '7.7.7.7', 'CF-Connecting-IP': '7.7.7.7',
    'Fastly-Client-IP': '7.7.7.7', 'X-Originating-IP': '7.7.7.7', 'WL-Proxy-Client-IP': '7.7.7.7', 'X-Forwarded': 'for=7.7.7.7',
    'X-Original-URL': '/admin', 'X-Rewrite-URL': '/admin', 'X-Original-URI': '/admin', 'X-Envoy-Original-Path': '/admin', 'X-Custom': 'kept',
    // the original host and a verified client certificate, as front proxies pass them on
    'X-Original-Forwarded-For': '7.7.7.7', 'X-Azure-ClientIP': '7.7.7.7', 'X-Original-Host': 'evil.test', 'X-Host': 'evil.test', 'X-SSL-Client-Cert': 'forged', 'X-SSL-Client-Verify': 'SUCCESS',
    'Client-Cert': ':Zm9yZ2Vk:', 'X-ARR-ClientCert': 'forged', 'Front-End-Https': 'on', 'Fly-Client-IP': '7.7.7.7',
  };
  const forgeable = [
    'x-forwarded-port', 'x-forwarded-prefix', 'x-real-ip', 'true-client-ip', 'x-client-ip', 'client-ip', 'x-cluster-client-ip', 'cf-connecting-ip', 'fastly-client-ip', 'x-originating-ip', 'wl-proxy-client-ip', 'x-forwarded',
    'x-original-forwarded-for', 'x-azure-clientip', 'x-original-host', 'x-host', 'x-ssl-client-cert', 'x-ssl-client-verify',
    'client-cert', 'x-arr-clientcert', 'front-end-https', 'fly-client-ip',
  ];
  // Dropped from a trusted peer too: a load balancer passes the client's copy on (a review).
  const rewrittenTargets = ['x-original-url', 'x-rewrite-url', 'x-original-uri', 'x-envoy-original-path'];
  // A trusted load balancer appends to X-Forwarded-For but passes X_Forwarded_For on as the client sent it.
  const underscored = ['x_forwarded_for', 'x_forwarded_host'];
  await request(untrusted.port, { path: '/a', headers });
  await request(trusted.port, { path: '/a', headers });
  const [fromUntrusted, fromTrusted] = backend.requests.map((r) => r.rawHeaders);
  assert.deepEqual(headerValues(fromUntrusted!, 'x-forwarded-for'), ['127.0.0.1']);
  assert.deepEqual(headerValues(fromUntrusted!, 'x-forwarded-host'), ['site.test']);
  assert.deepEqual(headerValues(fromUntrusted!, 'x-forwarded-proto'), ['http']);
  assert.deepEqual(headerValues(fromUntrusted!, 'forwarded'), []);
  for (const name of [...forgeable, ...underscored, ...rewrittenTargets]) assert.deepEqual(headerValues(fromUntrusted!, name), [], `${name} from an untrusted peer reached the upstream`);
  for (const name of rewrittenTargets) assert.deepEqual(headerValues(fromTrusted!, name), [], `${name} from a trusted peer reached the upstream`);
  for (const name of forgeable) assert.equal(headerValues(fromTrusted!, name).length, 1, `${name} from a trusted peer: want it kept`);
  assert.deepEqual(headerValues(fromUntrusted!, 'x-custom'), ['kept'], 'other X- headers pass');
  for (const name of underscored) assert.deepEqual(headerValues(fromTrusted!, name), [], `${name} from a trusted peer reached the upstream`);
  assert.deepEqual(headerValues(fromTrusted!, 'x-forwarded-for'), ['1.2.3.4, 127.0.0.1']);
  assert.deepEqual(headerValues(fromTrusted!, 'x-forwarded-host'), ['spoof']);
  assert.deepEqual(headerValues(fromTrusted!, 'x-forwarded-proto'), ['https']);
  assert.deepEqual(headerValues(fromTrusted!, 'forwarded'), ['for=1.2.3.4']);
});

test('framing and hop-by-hop names spelt with _ (Transfer_Encoding, Content_Length, Keep_Alive, Proxy_Connection) do not reach the upstream; other names with _ do', async (t) => {
  const backend = await startBackend();
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  await request(proxy.port, {
    path: '/a',
    headers: { Transfer_Encoding: 'chunked', Content_Length: '5', Keep_Alive: 'timeout=5', Proxy_Connection: 'keep-alive', HTTP2_Settings: 'AAMA', X_Custom_Id: '7' },
  });
  const received = backend.requests[0]!.rawHeaders;
  for (const name of ['transfer_encoding', 'content_length', 'keep_alive', 'proxy_connection', 'http2_settings']) {
    assert.deepEqual(headerValues(received, name), [], `${name} reached the upstream`);
  }
  assert.deepEqual(headerValues(received, 'x_custom_id'), ['7'], 'a name with _ that the proxy does not judge passes');
});

test('the query string arrives byte for byte and pass with a path replaces the route prefix', async (t) => {
  const backend = await startBackend();
  const plain = await startTestProxy(routeIni(backend.url));
  const stripped = await startTestProxy(routeIni(`${backend.url}/`));
  const rewritten = await startTestProxy(routeIni(`${backend.url}/v2`, '', '/api'));
  t.after(async () => {
    await Promise.all([plain.close(), stripped.close(), rewritten.close()]);
    await backend.close();
  });
  await rawRequest(plain.port, 'GET /a/x?a=1;b=%2F&c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  await rawRequest(stripped.port, 'GET /a/x/y?q=%20 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  await rawRequest(stripped.port, 'GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  await rawRequest(rewritten.port, 'GET /api/users?id=7 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
  assert.deepEqual(
    backend.requests.map((r) => r.url),
    ['/a/x?a=1;b=%2F&c', '/x/y?q=%20', '/', '/v2/users?id=7'],
  );
});

test('preserve_host = off sends the upstream host:port', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url, 'preserve_host = off\n'));
  await request(proxy.port, { path: '/a', headers: { Host: 'client.test' } });
  assert.deepEqual(headerValues(backend.requests[0]!.rawHeaders, 'host'), [`127.0.0.1:${backend.port}`]);
  assert.deepEqual(headerValues(backend.requests[0]!.rawHeaders, 'x-forwarded-host'), ['client.test']);
});

test('two Set-Cookie reach the client as two; a 401 with a UTF-8 realm passes unchanged', async (t) => {
  const realm = Buffer.from('Basic realm="Zoë’s café"', 'utf8').toString('latin1'); // the bytes, as node passes them
  const backend = await startBackend((req, res) => {
    if (req.url === '/a/cookies') {
      res.writeHead(200, [['Set-Cookie', 'a=1; Path=/'], ['Set-Cookie', 'b=2; HttpOnly'], ['Content-Length', '2']].flat());
      res.end('ok');
    } else {
      res.writeHead(401, ['WWW-Authenticate', realm, 'Content-Length', '0']);
      res.end();
    }
  });
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const cookies = await request(proxy.port, { path: '/a/cookies' });
  assert.deepEqual(headerValues(cookies.rawHeaders, 'set-cookie'), ['a=1; Path=/', 'b=2; HttpOnly']);
  const raw = await rawRequest(proxy.port, 'GET /a/secret HTTP/1.1\r\nHost: h\r\nAuthorization: Basic dG9tOjEyMw==\r\nConnection: close\r\n\r\n');
  assert.match(raw.text, /^HTTP\/1\.1 401 Unauthorized\r\n/);
  assert.ok(raw.data.includes(Buffer.from('WWW-Authenticate: Basic realm="Zoë’s café"\r\n', 'utf8')), `got ${raw.text}, want the realm's UTF-8 bytes unchanged`);
  assert.deepEqual(headerValues(backend.requests[1]!.rawHeaders, 'authorization'), ['Basic dG9tOjEyMw==']);
});

test('HEAD, 204 and 304 responses carry no body', async (t) => {
  const backend = await startBackend((req, res) => {
    if (req.url === '/a/204') res.writeHead(204).end();
    else if (req.url === '/a/304') res.writeHead(304, { ETag: '"x"' }).end();
    else res.writeHead(200, { 'Content-Length': '5' }).end(req.method === 'HEAD' ? undefined : 'hello');
  });
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  // Three requests on one connection: any stray body byte would corrupt the next response.
  const res = await rawRequest(
    proxy.port,
    'HEAD /a/x HTTP/1.1\r\nHost: h\r\n\r\nGET /a/204 HTTP/1.1\r\nHost: h\r\n\r\nGET /a/304 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n',
  );
  const responses = res.text.split(/(?=HTTP\/1\.1 )/);
  assert.equal(responses.length, 3, `got ${JSON.stringify(res.text)}`);
  assert.match(responses[0]!, /^HTTP\/1\.1 200 OK\r\n[\s\S]*Content-Length: 5\r\n[\s\S]*\r\n\r\n$/);
  assert.match(responses[1]!, /^HTTP\/1\.1 204 No Content\r\n[\s\S]*\r\n\r\n$/);
  assert.match(responses[2]!, /^HTTP\/1\.1 304 Not Modified\r\n[\s\S]*\r\n\r\n$/);
});

test('a HEAD response that announced a body ends its upstream connection: body bytes a careless backend sends late never become the next client\'s response (a break test)', async (t) => {
  // The backend owes the HEAD's announced body and sends it only when the next request comes on the
  // same connection: the body is itself a whole response, which a reused connection would hand to
  // that request's client.
  const poison = 'HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npoison';
  let connections = 0;
  const backend = net.createServer((socket) => {
    connections++;
    let buffered = '';
    let owesBody = false;
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      for (let end = buffered.indexOf('\r\n\r\n'); end !== -1; end = buffered.indexOf('\r\n\r\n')) {
        const [method = '', target = ''] = buffered.slice(0, end).split(' ');
        buffered = buffered.slice(end + 4);
        if (owesBody) socket.write(poison);
        owesBody = method === 'HEAD';
        socket.write(method === 'HEAD' ? `HTTP/1.1 200 OK\r\nContent-Length: ${poison.length}\r\n\r\n` : `HTTP/1.1 200 OK\r\nContent-Length: ${target.length}\r\n\r\n${target}`);
      }
    });
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const proxy = await startTestProxy(routeIni(`http://127.0.0.1:${(backend.address() as net.AddressInfo).port}`));
  t.after(async () => {
    await proxy.close();
    await new Promise((resolve) => backend.close(resolve));
  });
  const head = await request(proxy.port, { path: '/a/head', method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.headers['content-length'], String(poison.length), 'the HEAD\'s Content-Length is relayed');
  const victim = await request(proxy.port, { path: '/a/victim' });
  assert.equal(victim.body.toString(), '/a/victim', `the next client got ${JSON.stringify(victim.body.toString())}`);
  assert.equal(connections, 2, 'the HEAD\'s connection was not reused');
  const again = await request(proxy.port, { path: '/a/again' });
  assert.equal(again.body.toString(), '/a/again');
  assert.equal(connections, 2, 'a GET\'s connection is reused as before');
});

test('trailers are forwarded, framing and routing fields among them dropped; Expect: 100-continue gets a 100 before the body is sent', async (t) => {
  const backend = await startBackend((req, res, body) => {
    res.writeHead(200, { 'Content-Type': 'text/plain', Trailer: 'X-Checksum, Content-Length' });
    res.write(`got ${body.length} bytes`);
    res.addTrailers([['X-Checksum', 'abc'], ['Content-Length', '99'], ['Host', 'evil']]); // framing and routing fields may not be trailers
    res.end();
  });
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const res = await request(proxy.port, { path: '/a', method: 'POST', body: 'x'.repeat(100) });
  assert.equal(res.body.toString(), 'got 100 bytes');
  assert.deepEqual(res.rawTrailers, ['X-Checksum', 'abc'], 'X-Checksum forwarded; Content-Length and Host dropped (RFC 9110 §6.5.1)');
  assert.equal(res.headers.trailer, 'X-Checksum', 'a trailer that is dropped is not announced either');

  const socket = net.connect(proxy.port, '127.0.0.1');
  const received: Buffer[] = [];
  socket.on('data', (c: Buffer) => received.push(c));
  socket.write('POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n');
  await new Promise((r) => socket.once('data', r));
  assert.match(Buffer.concat(received).toString(), /^HTTP\/1\.1 100 Continue\r\n\r\n$/);
  socket.write('abcd');
  await new Promise((r) => socket.once('close', r));
  assert.match(Buffer.concat(received).toString(), /got 4 bytes/);
});

test('request trailers are forwarded to the upstream, framing, routing, hop-by-hop (the head\'s Connection names too) and forwarding fields among them dropped, whether the body came whole or in pieces', async (t) => {
  const seen: { body: string; trailers: string[] }[] = [];
  const backend = await startBackend((req, res, body) => {
    seen.push({ body: body.toString('latin1'), trailers: req.rawTrailers });
    res.end('ok');
  });
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const trailers = 'X-Checksum: abc\r\nContent-Length: 99\r\nHost: evil\r\nX-Forwarded-For: 6.6.6.6\r\nX_Forwarded_For: 7.7.7.7\r\nX-Real-IP: 1.2.3.4\r\nUpgrade: websocket\r\nX-Secret: t\r\nSet_Cookie: s=1\r\nX-Note: two words\r\n\r\n';
  const whole = await rawRequest(proxy.port, `POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close, X-Secret\r\n\r\n5\r\nhello\r\n0\r\n${trailers}`);
  assert.match(whole.text, /^HTTP\/1\.1 200 /);

  const socket = net.connect(proxy.port, '127.0.0.1');
  t.after(() => socket.destroy());
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  socket.write('POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: X-Secret\r\n\r\n3\r\nabc\r\n'); // X-Secret: hop-by-hop, as a trailer too
  await waitFor(() => proxy.proxy.serverStats.requests === 2, 3000, 'the second head read'); // it goes upstream without the rest, which streams
  socket.write(`2\r\nde\r\n0\r\n${trailers}`);
  await waitFor(() => answer.endsWith('ok'), 3000, 'the streamed request answered');

  const want = ['X-Checksum', 'abc', 'X-Note', 'two words'];
  assert.deepEqual(seen, [
    { body: 'hello', trailers: want },
    { body: 'abcde', trailers: want },
  ]);
});

test('upstream connections are kept alive and reused', async (t) => {
  const backend = await startBackend();
  let connections = 0;
  backend.server.on('connection', () => connections++);
  const proxy = await startTestProxy(routeIni(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  for (let i = 0; i < 10; i++) await request(proxy.port, { path: '/a' });
  assert.equal(backend.requests.length, 10);
  assert.equal(connections, 1, `got ${connections} upstream connections for 10 sequential requests, want 1`);
});

test('no route → 404 with a one-line body; the access log records route, upstream and status', async (t) => {
  const { backend, proxy } = await startProxiedBackend(t, (url) => routeIni(url));
  const missing = await request(proxy.port, { path: '/ab' });
  assert.equal(missing.status, 404);
  assert.equal(missing.body.toString(), 'no route for this request\n');
  await request(proxy.port, { path: '/a/b?c' });
  const record = proxy.logs.find((r) => r.target === '/a/b?c');
  assert.ok(record, 'want an access log record for /a/b?c');
  assert.equal(record.status, 200);
  assert.equal(record.route, 'a');
  assert.deepEqual(record.attempts, [{ upstream: `127.0.0.1:${backend.port}`, status: 200 }]);
});
