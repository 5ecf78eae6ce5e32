/**
 * least-connections through the real proxy (issue 3): a request held open on one upstream sends the
 * next ones to the other; with no load, requests split evenly; the counters return to zero.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { listenBackend, request, startTestProxy, waitFor, type RecordedRequest } from '../helpers/proxy-harness.js';

/** A backend that answers `/slow` only when `release()` is called, everything else at once. */
async function holdingBackend(name: string) {
  const requests: RecordedRequest[] = [];
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders, body: Buffer.alloc(0) });
    req.resume();
    if (req.url === '/slow') held.push(res);
    else res.end(name);
  });
  const backend = await listenBackend(server, requests);
  return { ...backend, release: () => held.splice(0).forEach((res) => res.end(`${name} slow`)) };
}

test('least-connections: with one long request on a, the next 10 go to b; with no load 10 split 5/5', async (t) => {
  const a = await holdingBackend('a');
  const b = await holdingBackend('b');
  const proxy = await startTestProxy(`[proxy.lc]\npath = /\nstrategy = least-connections\npass = ${a.url}\npass = ${b.url}\n`);
  t.after(async () => {
    a.release();
    await proxy.close();
    await a.close();
    await b.close();
  });
  const [upstreamA, upstreamB] = proxy.proxy.routes[0]!.upstreams;

  // No load: ties go in round-robin order.
  const idle: string[] = [];
  for (let i = 0; i < 10; i++) idle.push((await request(proxy.port, { path: '/fast' })).body.toString());
  assert.equal(idle.filter((n) => n === 'a').length, 5, `got ${idle.join(' ')}, want 5 a and 5 b`);

  // One long request: it lands on a (the tie-break's turn), and holds a's counter at 1.
  const slow = request(proxy.port, { path: '/slow' });
  await waitFor(() => a.requests.some((r) => r.url === '/slow') || b.requests.some((r) => r.url === '/slow'), 3000, 'the slow request to arrive');
  const holder = a.requests.some((r) => r.url === '/slow') ? 'a' : 'b';
  const other = holder === 'a' ? 'b' : 'a';
  const busy: string[] = [];
  for (let i = 0; i < 10; i++) busy.push((await request(proxy.port, { path: '/fast' })).body.toString());
  assert.deepEqual(busy, new Array(10).fill(other), `got ${busy.join(' ')}, want all 10 on ${other} while ${holder} holds a long request`);

  (holder === 'a' ? a : b).release();
  assert.equal((await slow).body.toString(), `${holder} slow`);
  await waitFor(() => upstreamA!.activeRequests === 0 && upstreamB!.activeRequests === 0, 2000, 'active requests back to 0');
});
