/**
 * Retry safety through the real proxy (SPEC 4, issue 4 "Retry safety"): a failed attempt goes to
 * another upstream only when the request can be replayed. Connect failures always (the upstream never
 * saw a byte, and the proxy holds the body back until the connection is up); after the request was
 * sent only idempotent methods without a streamed body (RFC 9110 §9.2.2, nginx ≥ 1.9.13). Each test
 * checks both sides: what the client got and which upstreams saw the request.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { request, startBackend, startRawBackend, startTestProxy, waitFor } from '../helpers/proxy-harness.js';
import { closedPort, onWholeRequest, type RawRequest } from './upstream-control.js';

/** A route `r` on `/` over the given upstream URLs, in order (round-robin: the first pick is the first). */
function routeIni(urls: readonly string[], extra = ''): string {
  return `[proxy.r]\npath = /\n${urls.map((url) => `pass = ${url}\n`).join('')}${extra}`;
}

/** Passive-health transition lines are not what these tests are about. */
const QUIET = { deps: { log: () => {} } };

/**
 * A route `r` over `primary` (answered by `handler`) and a backup that answers `backup <path>`,
 * ejecting at the first counted failure (`max_fails = 1`), with one GET sent so that a pooled
 * keep-alive connection to the primary waits for the next request. Stopped after the test.
 */
async function startPrimaryWithBackup(t: TestContext, handler: Parameters<typeof startBackend>[0]) {
  const primary = await startBackend(handler);
  const backup = await startBackend((req, res) => res.end(`backup ${req.url}`));
  const proxy = await startTestProxy(`[proxy.r]\npath = /\npass = ${primary.url}\npass = ${backup.url} backup\nmax_fails = 1\nfail_timeout = 60s\n`, QUIET);
  t.after(async () => {
    await proxy.close();
    await primary.close();
    await backup.close();
  });
  assert.equal((await request(proxy.port, { path: '/warm' })).status, 200);
  return { primary, backup, proxy };
}

/** A raw upstream that reads each whole request, then resets the connection (RST) without answering. */
async function startResettingBackend() {
  const seen: RawRequest[] = [];
  const backend = await startRawBackend((socket) =>
    onWholeRequest(socket, (raw) => {
      seen.push(raw);
      socket.resetAndDestroy();
    }),
  );
  return { ...backend, seen };
}

test('a POST whose body reached an upstream that then resets is not retried: one upstream saw it, the client gets 502', async (t) => {
  const resetting = await startResettingBackend();
  const spare = await startBackend();
  const proxy = await startTestProxy(routeIni([resetting.url, spare.url]), QUIET);
  t.after(async () => {
    await proxy.close();
    await resetting.close();
    await spare.close();
  });
  const body = Buffer.alloc(64 * 1024, 'p');

  const res = await request(proxy.port, { method: 'POST', path: '/orders', body, headers: { 'Content-Type': 'text/plain' } });

  assert.equal(res.status, 502, `got ${res.status}, want 502`);
  assert.equal(resetting.seen.length, 1, `got ${resetting.seen.length} requests at the resetting upstream, want 1`);
  assert.equal(resetting.seen[0]!.body.length, body.length, `got ${resetting.seen[0]!.body.length} body bytes there, want ${body.length}`);
  assert.equal(spare.requests.length, 0, `got ${spare.requests.length} requests at the second upstream, want 0 (no retry)`);
  const attempts = proxy.logs[0]!.attempts;
  assert.deepEqual(attempts.map((a) => a.error ?? a.status), ['PRX_UPSTREAM_RESET: reset the connection (ECONNRESET)'], `got attempts ${JSON.stringify(attempts)}`);
});

test('a POST that failed at connect is retried and its whole body arrives at the second upstream', async (t) => {
  const refusedPort = await closedPort();
  const second = await startBackend((_req, res) => res.end('stored'));
  const proxy = await startTestProxy(routeIni([`http://127.0.0.1:${refusedPort}`, second.url]), QUIET);
  t.after(async () => {
    await proxy.close();
    await second.close();
  });
  // 256 KiB with a pattern, more than socket buffers hold: the body must be held back, not consumed.
  const body = Buffer.alloc(256 * 1024);
  for (let i = 0; i < body.length; i++) body[i] = (i * 7) % 251;

  const res = await request(proxy.port, { method: 'POST', path: '/orders', body });

  assert.equal(res.status, 200, `got ${res.status}, want 200`);
  assert.equal(res.body.toString(), 'stored');
  assert.equal(second.requests.length, 1, `got ${second.requests.length} requests at the second upstream, want 1`);
  assert.equal(second.requests[0]!.method, 'POST');
  assert.ok(second.requests[0]!.body.equals(body), `got ${second.requests[0]!.body.length} body bytes (or different ones), want the ${body.length} sent`);
  const attempts = proxy.logs[0]!.attempts;
  assert.deepEqual(
    attempts.map((a) => [a.upstream, a.error ?? a.status]),
    [
      [`127.0.0.1:${refusedPort}`, 'PRX_UPSTREAM_CONNECT'],
      [`127.0.0.1:${second.port}`, 200],
    ],
  );
});

test('a GET reset before any response byte is retried on the next upstream and succeeds', async (t) => {
  const resetting = await startResettingBackend();
  const second = await startBackend((_req, res) => res.end('from second'));
  const proxy = await startTestProxy(routeIni([resetting.url, second.url]), QUIET);
  t.after(async () => {
    await proxy.close();
    await resetting.close();
    await second.close();
  });

  const res = await request(proxy.port, { path: '/items' });

  assert.equal(res.status, 200, `got ${res.status}, want 200`);
  assert.equal(res.body.toString(), 'from second');
  assert.equal(resetting.seen.length, 1, `got ${resetting.seen.length} requests at the resetting upstream, want 1`);
  assert.match(resetting.seen[0]!.head, /^GET \/items HTTP\/1\.1/);
  assert.equal(second.requests.length, 1, `got ${second.requests.length} requests at the second upstream, want 1`);
  const attempts = proxy.logs[0]!.attempts;
  assert.deepEqual(attempts.map((a) => a.error ?? a.status), ['PRX_UPSTREAM_RESET: reset the connection (ECONNRESET)', 200]);
});

test('a bodiless POST reset on a reused keep-alive connection after the upstream read it is not sent again', async (t) => {
  // Regression: the same-upstream resend meant for stale pooled connections replayed the POST, so a
  // lone upstream that had read it (and maybe acted on it) saw it twice.
  const backend = await startBackend((req, res) => {
    if (req.method === 'POST') req.socket.destroy();
    else res.end('ok');
  });
  const proxy = await startTestProxy(routeIni([backend.url]), QUIET);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const warm = await request(proxy.port, { path: '/' }); // leaves a pooled connection to the upstream
  assert.equal(warm.status, 200);

  const res = await request(proxy.port, { method: 'POST', path: '/charge', headers: { 'Content-Length': '0' } });

  assert.equal(res.status, 502, `got ${res.status}, want 502`);
  const posts = backend.requests.filter((r) => r.method === 'POST').length;
  assert.equal(posts, 1, `got ${posts} POSTs at the upstream, want 1`);
});

test('a GET reset on a reused keep-alive connection to a lone upstream is sent once more on a fresh one', async (t) => {
  // The stale pooled connection race (the upstream closed it as the proxy wrote): with no other
  // upstream to go to, an idempotent request gets one more try on the same upstream (Go's transport,
  // nginx's extra try for a cached connection to its `single` peer).
  let flakyCount = 0;
  const backend = await startBackend((req, res) => {
    if (req.url === '/flaky' && ++flakyCount === 1) req.socket.destroy();
    else res.end(`ok ${req.url}`);
  });
  const proxy = await startTestProxy(routeIni([backend.url]), QUIET);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  assert.equal((await request(proxy.port, { path: '/warm' })).status, 200);

  const res = await request(proxy.port, { path: '/flaky' });

  assert.equal(res.status, 200, `got ${res.status}, want 200`);
  assert.equal(res.body.toString(), 'ok /flaky');
  assert.equal(flakyCount, 2, `got ${flakyCount} GET /flaky at the upstream, want 2`);
});

test('a GET reset on a reused keep-alive connection is sent once more on a fresh one on a route with a backup, and the primary is not counted as failed', async (t) => {
  // A break test: the same-upstream resend applied only to a route of one `pass` line, so behind
  // an upstream that closes keep-alive connections after a few requests a route with a `down` or
  // `backup` line answered 3% of GETs with 502, and the first stale reset ejected a healthy primary
  // (max_fails = 1) for its backup. The race is the pool's, not the upstream's (Go's transport).
  let flakyCount = 0;
  const { primary, backup, proxy } = await startPrimaryWithBackup(t, (req, res) => {
    if (req.url === '/flaky' && ++flakyCount === 1) req.socket.destroy();
    else res.end(`primary ${req.url}`);
  });

  const res = await request(proxy.port, { path: '/flaky' });

  assert.equal(res.status, 200, `got ${res.status}, want 200`);
  assert.equal(res.body.toString(), 'primary /flaky');
  assert.equal(flakyCount, 2, `got ${flakyCount} GET /flaky at the primary, want 2 (the reset one and the resend)`);
  const flakyLog = proxy.logs.find((record) => record.target === '/flaky')!;
  assert.deepEqual(
    flakyLog.attempts.map((x) => [x.upstream, x.error ?? x.status]),
    [
      [`127.0.0.1:${primary.port}`, 'PRX_UPSTREAM_RESET: closed the connection before sending a response (a reused keep-alive connection: sent again on a new one)'],
      [`127.0.0.1:${primary.port}`, 200],
    ],
    'the log tells the stale send and the resend apart',
  );
  const after = await request(proxy.port, { path: '/after' });
  assert.equal(after.body.toString(), 'primary /after', 'the primary was ejected for the stale connection: the next request went to the backup');
  assert.equal(backup.requests.length, 0, `got ${backup.requests.length} requests at the backup, want 0`);
});

test('a resend that fails too is logged after the stale send, counted, and retried on the next upstream', async (t) => {
  // A break test: the log kept one record for the two sends to the same upstream, the resend's
  // error written over the stale one's.
  let flakyCount = 0;
  const first = await startBackend((req, res) => {
    if (req.url === '/flaky') {
      flakyCount++;
      req.socket.destroy(); // on the pooled connection and on the new one
    } else res.end(`first ${req.url}`);
  });
  const second = await startBackend((req, res) => res.end(`second ${req.url}`));
  const proxy = await startTestProxy(routeIni([first.url, second.url], 'max_fails = 5\n'), QUIET);
  t.after(async () => {
    await proxy.close();
    await first.close();
    await second.close();
  });
  assert.equal((await request(proxy.port, { path: '/warm-1' })).body.toString(), 'first /warm-1'); // a pooled connection to each
  assert.equal((await request(proxy.port, { path: '/warm-2' })).body.toString(), 'second /warm-2');

  const res = await request(proxy.port, { path: '/flaky' });

  assert.equal(res.status, 200, `got ${res.status}, want 200`);
  assert.equal(res.body.toString(), 'second /flaky');
  assert.equal(flakyCount, 2, `got ${flakyCount} GET /flaky at the first upstream, want 2 (the stale send and the resend)`);
  const attempts = proxy.logs.find((record) => record.target === '/flaky')!.attempts;
  assert.deepEqual(attempts.map((x) => [x.upstream, x.error ?? x.status]), [
    [`127.0.0.1:${first.port}`, 'PRX_UPSTREAM_RESET: closed the connection before sending a response (a reused keep-alive connection: sent again on a new one)'],
    [`127.0.0.1:${first.port}`, 'PRX_UPSTREAM_RESET: closed the connection before sending a response'],
    [`127.0.0.1:${second.port}`, 200],
  ]);
  const upstreamFirst = proxy.proxy.routes[0]!.upstreams[0]!;
  assert.equal(upstreamFirst.failuresTotal, 1, `got ${upstreamFirst.failuresTotal} failures on the first upstream, want 1 (the resend's, not the stale send's)`);
});

test('a client that leaves during the resend is logged as gone (499, PRX_CLIENT_ABORT), after the stale send', async (t) => {
  // A break test: the stale send's marker filled the record that the client's leaving writes to.
  let abortCount = 0;
  const backend = await startBackend((req, res) => {
    if (req.url !== '/abort') res.end('ok');
    else if (++abortCount === 1) req.socket.destroy(); // the pooled connection: reset
    // the resend, on a new connection: never answered
  });
  const proxy = await startTestProxy(routeIni([backend.url]), QUIET);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  assert.equal((await request(proxy.port, { path: '/warm' })).status, 200);

  const client = net.connect(proxy.port, '127.0.0.1');
  client.on('error', () => {});
  client.write('GET /abort HTTP/1.1\r\nHost: t\r\n\r\n');
  await waitFor(() => abortCount === 2, 3000, 'the resend at the upstream');
  client.destroy();
  await waitFor(() => proxy.logs.some((record) => record.target === '/abort'), 3000, 'the access log record');

  const record = proxy.logs.find((r) => r.target === '/abort')!;
  assert.equal(record.status, 499);
  assert.deepEqual(record.attempts.map((x) => x.error ?? x.status), [
    'PRX_UPSTREAM_RESET: closed the connection before sending a response (a reused keep-alive connection: sent again on a new one)',
    'PRX_CLIENT_ABORT',
  ]);
});

test('a POST reset on a reused keep-alive connection is a 502, sent once, and does not count against the upstream for passive health', async (t) => {
  // A break test: the pool's race on a POST (which is not sent again) ejected a healthy primary
  // (max_fails = 1) for its backup.
  const { primary, backup, proxy } = await startPrimaryWithBackup(t, (req, res) => {
    if (req.method === 'POST') req.socket.destroy();
    else res.end(`primary ${req.url}`);
  });

  const res = await request(proxy.port, { method: 'POST', path: '/charge', body: Buffer.from('hello') });

  assert.equal(res.status, 502, `got ${res.status}, want 502`);
  assert.equal(primary.requests.filter((r) => r.method === 'POST').length, 1, 'the POST was sent more than once');
  assert.equal(proxy.proxy.routes[0]!.upstreams[0]!.failuresTotal, 0, 'the reset on the reused connection was counted against the primary');
  const after = await request(proxy.port, { path: '/after' });
  assert.equal(after.body.toString(), 'primary /after', 'the primary was ejected: the next request went to the backup');
  assert.equal(backup.requests.length, 0, `got ${backup.requests.length} requests at the backup, want 0`);
});
