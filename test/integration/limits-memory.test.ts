/**
 * A flood of distinct client IPs against a `rate_limit` (SPEC 8: memory stays bounded): the built
 * proxy in its own process, so the RSS read from /proc/PID/status is the proxy's alone; 50 000
 * requests, each from another client IP named by X-Forwarded-For from the trusted peer 127.0.0.1,
 * pipelined on a few keep-alive connections. `rate_limit = 1/m burst=10`: after one request a
 * bucket needs a minute to be full again, so none is forgotten during the flood and the limiter holds
 * all 50 000 of them (the worst case below its cap of 100 000). Meanwhile a client outside the
 * flood (127.0.0.2, an untrusted peer, so its own address) keeps getting 200.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { startRawBackend } from '../helpers/proxy-harness.js';
import { killAll, spawnCli, writeConfig } from '../helpers/cli-process.js';

const FLOOD_REQUESTS = 50_000;
const CONNECTIONS = 8;
/** Requests written at once on a connection before waiting for their responses. */
const BATCH = 250;
const RSS_GROWTH_LIMIT_MIB = 50;

/** VmRSS of `pid`, MiB (Linux /proc). */
function rssMiB(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]) / 1024;
}

/** The client IP of flood request `i`: 10.a.b.c, a distinct one for each i < 2^24. */
function floodIp(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

/**
 * Sends requests `from` … `to - 1` pipelined in batches of BATCH on one keep-alive connection from
 * 127.0.0.1; resolves with the count of each status.
 */
function pipeline(port: number, from: number, to: number): Promise<Map<string, number>> {
  return new Promise((resolve, reject) => {
    const statuses = new Map<string, number>();
    const socket = net.connect({ host: '127.0.0.1', port });
    let next = from;
    let awaited = 0;
    let carry = '';
    const send = (): void => {
      const end = Math.min(to, next + BATCH);
      awaited = end - next;
      let text = '';
      for (; next < end; next++) text += `GET /flood HTTP/1.1\r\nHost: proxy\r\nX-Forwarded-For: ${floodIp(next)}\r\n\r\n`;
      socket.write(text);
    };
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      // Status lines; the backend's body ("ok") cannot contain one, and a line cut by the chunk's end is carried over.
      const text = carry + chunk;
      const pattern = /HTTP\/1\.1 (\d{3})/g;
      let lastEnd = 0;
      for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
        statuses.set(match[1]!, (statuses.get(match[1]!) ?? 0) + 1);
        awaited--;
        lastEnd = pattern.lastIndex;
      }
      carry = text.slice(Math.max(lastEnd, text.length - 11));
      if (awaited > 0) return;
      if (next < to) send();
      else {
        socket.end();
        resolve(statuses);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => (next < to || awaited > 0 ? reject(new Error(`connection closed with ${to - next + awaited} requests unanswered`)) : undefined));
    socket.on('connect', send);
  });
}

/** One GET from 127.0.0.2 on a fresh connection; resolves with the status. */
function bystanderGet(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/flood', localAddress: '127.0.0.2', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

test(`50 000 distinct client IPs through a rate_limit: the proxy's RSS grows by less than ${RSS_GROWTH_LIMIT_MIB} MiB, and a client outside the flood gets 200 during and after it`, { timeout: 120_000 } /* about 20 s alone; a busy 2-core CI box needed more than 30 */, async (t) => {
  // A backend that costs little (the test process also drives the flood): each request head is a GET without a body, answered with `ok`.
  const backend = await startRawBackend((socket) => {
    let carry = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      const heads = (carry + chunk).split('\r\n\r\n');
      carry = heads.pop()!;
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'.repeat(heads.length));
    });
  });
  t.after(() => backend.close());
  const configFile = writeConfig(
    ['[server]', 'listen = 127.0.0.1:0', 'trusted_proxies = 127.0.0.1', '', '[proxy.flood]', 'path = /flood', `pass = http://127.0.0.1:${backend.port}`, 'rate_limit = 1/m burst=10', ''].join('\n'),
  );
  const cli = await spawnCli(configFile);
  t.after(() => killAll([cli.pid]));
  const port = Number((await cli.line(/proxy listening on \S+:(\d+)/))[1]);

  // Warm-up from a handful of addresses outside the flood's range (code compiled, pools and buffers filled), then the baseline.
  for (let i = 0; i < 4; i++) await pipeline(port, FLOOD_REQUESTS + 1_000 * i, FLOOD_REQUESTS + 1_000 * i + 8);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const rssBefore = rssMiB(cli.pid);

  const startedAt = Date.now();
  const share = Math.ceil(FLOOD_REQUESTS / CONNECTIONS);
  const flood = Promise.all(Array.from({ length: CONNECTIONS }, (_, c) => pipeline(port, c * share, Math.min(FLOOD_REQUESTS, (c + 1) * share))));
  let isFlooding = true;
  void flood.finally(() => (isFlooding = false)).catch(() => {});
  const duringFlood: number[] = [];
  while (isFlooding && duringFlood.length < 5) {
    duringFlood.push(await bystanderGet(port));
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const statuses = new Map<string, number>();
  for (const counts of await flood) for (const [status, count] of counts) statuses.set(status, (statuses.get(status) ?? 0) + count);
  const floodMs = Date.now() - startedAt;
  await new Promise((resolve) => setTimeout(resolve, 500)); // settle
  const rssAfter = rssMiB(cli.pid);
  const afterFlood = await bystanderGet(port);

  assert.deepEqual([...statuses], [['200', FLOOD_REQUESTS]], `flood statuses: got ${JSON.stringify([...statuses])}, want all ${FLOOD_REQUESTS} × 200 (one request per client)`);
  assert.ok(duringFlood.length > 0, 'the bystander got no request in during the flood');
  assert.deepEqual(duringFlood, duringFlood.map(() => 200), `bystander during the flood: got ${duringFlood.join(', ')}, want 200 each`);
  assert.equal(afterFlood, 200, `bystander after the flood: got ${afterFlood}, want 200`);
  const growth = rssAfter - rssBefore;
  t.diagnostic(`flood of ${FLOOD_REQUESTS} in ${floodMs} ms; RSS ${rssBefore.toFixed(1)} → ${rssAfter.toFixed(1)} MiB (+${growth.toFixed(1)} MiB)`);
  assert.ok(growth < RSS_GROWTH_LIMIT_MIB, `RSS growth: got ${growth.toFixed(1)} MiB, want under ${RSS_GROWTH_LIMIT_MIB} MiB`);
});
