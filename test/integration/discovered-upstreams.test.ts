/**
 * Discovered upstreams under traffic (issue 14 item 2), on real sockets: backends on 127.0.0.2,
 * 127.0.0.3, 127.0.0.4 and 127.0.0.5 with one port, as the addresses of one DNS name, and the new
 * sets handed to `ProxyServer.setDiscoveredUpstreams` directly (no DNS here; src/discovery does the
 * lookups). Round robin over three addresses, a change that moves traffic at once while a slow
 * request on the leaving address finishes and its pooled connection then closes, SRV-like backups
 * that serve only when the primaries are down, SRV weights 3:1 under weighted round robin, and an
 * `https://` address verified under its line's name.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type tls from 'node:tls';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { discoveredUpstreamConfig, type DiscoveredLine } from '../../src/discovery/discovered-line.js';
import type { ProxyServer } from '../../src/gateway/proxy-server.js';
import { request, startTestProxy } from '../helpers/proxy-harness.js';

const ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'] as const;

interface AddressBackend {
  readonly address: string;
  readonly server: http.Server;
  /** Server-side sockets, in accept order. */
  readonly sockets: net.Socket[];
  /** Requests answered, by path. */
  served: number;
}

/**
 * One backend per address, all on one port (the first one's port 0 pick, retried if another
 * address has it taken). Each answers its address; `/slow` waits for `releaseSlow()`.
 */
async function startBackends(): Promise<{ port: number; backends: AddressBackend[]; releaseSlow(): void; close(): Promise<void> }> {
  let releases: (() => void)[] = [];
  for (let attempt = 0; ; attempt++) {
    const backends: AddressBackend[] = [];
    let port = 0;
    try {
      for (const address of ADDRESSES) {
        const backend: AddressBackend = { address, server: undefined as unknown as http.Server, sockets: [], served: 0 };
        const server = http.createServer((req, res) => {
          backend.served++;
          if (req.url === '/slow') releases.push(() => res.end(address));
          else res.end(address);
        });
        server.keepAliveTimeout = 60_000;
        server.on('connection', (socket: net.Socket) => backend.sockets.push(socket));
        (backend as { server: http.Server }).server = server;
        backends.push(backend);
        server.listen(port, address);
        await once(server, 'listening');
        port = (server.address() as net.AddressInfo).port;
      }
      return {
        port,
        backends,
        releaseSlow: () => {
          for (const release of releases) release();
          releases = [];
        },
        close: async () => {
          for (const { server } of backends) server.closeAllConnections();
          await Promise.all(backends.map(({ server }) => new Promise((resolve) => server.close(resolve))));
        },
      };
    } catch (error) {
      for (const { server } of backends) server.close();
      if (attempt >= 5) throw error;
    }
  }
}

/** The members of the route's discovery line for `hosts`, with SRV-like weights and priorities. */
function line(proxy: ProxyServer, port: number, hosts: readonly { address: string; srvWeight?: number; isBackupByPriority?: boolean }[]): DiscoveredLine[] {
  const passLine = proxy.config.routes[0]!.upstreams[0]!;
  return [{ lineOrigin: passLine.origin, upstreams: hosts.map((host) => discoveredUpstreamConfig(passLine, { port, ...host })) }];
}

/** `count` GETs of `path`, one after the other; the body of each (the backend's address). */
async function bodies(port: number, count: number, path = '/'): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < count; i++) {
    const response = await request(port, { path });
    assert.equal(response.status, 200, `request ${i}: got ${response.status}, want 200`);
    seen.push(response.body.toString());
  }
  return seen;
}

function tally(seen: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const address of seen) counts[address] = (counts[address] ?? 0) + 1;
  return counts;
}

async function until(condition: () => boolean, what: string, deadlineMs = 3000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Backends and a proxy whose route `api` has one discovery line: `resolve` (default) or an SRV one. */
async function setUp(t: import('node:test').TestContext, route: string, kind: 'resolve' | 'service' = 'resolve') {
  const backends = await startBackends();
  t.after(() => backends.close());
  const passLine = kind === 'resolve' ? `http://api.test:${backends.port} resolve` : 'http://api.test service=http';
  const proxy = await startTestProxy(`[server]\naccess_log = off\n[proxy.api]\npath = /\n${route}pass = ${passLine}\n`, { deps: { log: () => {} } });
  t.after(() => proxy.close());
  return { ...backends, proxy: proxy.proxy, proxyPort: proxy.port };
}

test('three addresses round-robin 10/10/10; a new set moves traffic at once while a slow request on the leaving one finishes, then its pooled connection closes', async (t) => {
  const s = await setUp(t, '');
  s.proxy.setDiscoveredUpstreams('api', line(s.proxy, s.port, [{ address: '127.0.0.2' }, { address: '127.0.0.3' }, { address: '127.0.0.4' }]));
  const spread = tally(await bodies(s.proxyPort, 30));
  assert.deepEqual(spread, { '127.0.0.2': 10, '127.0.0.3': 10, '127.0.0.4': 10 }, `got ${JSON.stringify(spread)}`);

  // The next turn is .2's: a slow request goes there and stays in flight.
  const slow = request(s.proxyPort, { path: '/slow' });
  const leaving = s.backends[0]!;
  await until(() => leaving.served === 11, 'the slow request to reach 127.0.0.2');
  const socketsBefore = leaving.sockets.length;
  s.proxy.setDiscoveredUpstreams('api', line(s.proxy, s.port, [{ address: '127.0.0.5' }, { address: '127.0.0.3' }, { address: '127.0.0.4' }]));

  const after = tally(await bodies(s.proxyPort, 9));
  assert.deepEqual(after, { '127.0.0.3': 3, '127.0.0.4': 3, '127.0.0.5': 3 }, `got ${JSON.stringify(after)}, want .2 out of rotation at once`);
  assert.equal(leaving.served, 11, 'got a new request on the leaving address');
  const open = leaving.sockets.filter((socket) => !socket.destroyed);
  assert.equal(open.length, 1, `got ${open.length} open connections on .2 while its slow request runs, want 1: the one carrying the slow request`);
  assert.deepEqual(
    s.proxy.leavingUpstreams('api').map((upstream) => [upstream.address, upstream.activeRequests, upstream.hasLeft]),
    [[`127.0.0.2:${s.port}`, 1, true]],
    'the leaving address is listed (for /status) while its request runs',
  );

  s.releaseSlow();
  const slowResponse = await slow;
  assert.equal(slowResponse.status, 200, 'the request in flight on the leaving address finishes');
  assert.equal(slowResponse.body.toString(), '127.0.0.2');
  await until(() => open[0]!.destroyed, 'the leaving address\'s pooled connection to close after its exchange');
  assert.equal(leaving.sockets.length, socketsBefore, 'no new connection to the leaving address');
  assert.deepEqual(s.proxy.leavingUpstreams('api'), [], 'no longer listed once its request ended');
});

test('SRV-like backups serve only while every primary is down', async (t) => {
  const s = await setUp(t, '', 'service');
  s.proxy.setDiscoveredUpstreams('api', line(s.proxy, s.port, [{ address: '127.0.0.2' }, { address: '127.0.0.3' }, { address: '127.0.0.4', isBackupByPriority: true }]));
  assert.deepEqual(tally(await bodies(s.proxyPort, 4)), { '127.0.0.2': 2, '127.0.0.3': 2 }, 'the backup serves while primaries are up');
  const [two, three] = s.proxy.routes[0]!.upstreams;
  two!.healthState = 'down';
  assert.deepEqual(tally(await bodies(s.proxyPort, 3)), { '127.0.0.3': 3 }, 'one primary left: still no backup');
  three!.healthState = 'down';
  assert.deepEqual(tally(await bodies(s.proxyPort, 3)), { '127.0.0.4': 3 }, 'every primary down: the backup serves');
  // A new answer that keeps the same records keeps DOWN, so the backup goes on serving.
  s.proxy.setDiscoveredUpstreams('api', line(s.proxy, s.port, [{ address: '127.0.0.3' }, { address: '127.0.0.2' }, { address: '127.0.0.4', isBackupByPriority: true }]));
  assert.deepEqual(tally(await bodies(s.proxyPort, 2)), { '127.0.0.4': 2 });
});

test('SRV weights 3:1 under weighted round robin over discovered members', async (t) => {
  const s = await setUp(t, 'strategy = weighted-round-robin\n', 'service');
  s.proxy.setDiscoveredUpstreams('api', line(s.proxy, s.port, [{ address: '127.0.0.2', srvWeight: 3 }, { address: '127.0.0.3', srvWeight: 1 }]));
  const spread = tally(await bodies(s.proxyPort, 40));
  assert.deepEqual(spread, { '127.0.0.2': 30, '127.0.0.3': 10 }, `got ${JSON.stringify(spread)}, want 30/10`);
});

test('an https:// discovered address is reached with SNI and verification under its line name, not the address', async (t) => {
  const fixtures = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
  const names: (string | false)[] = [];
  const server = https.createServer({ cert: readFileSync(`${fixtures}wildcard.pem`), key: readFileSync(`${fixtures}wildcard.key`) }, (_req, res) => res.end('wild'));
  server.on('secureConnection', (socket: tls.TLSSocket & { servername?: string | false }) => names.push(socket.servername ?? false));
  server.on('tlsClientError', () => {});
  server.listen(0, '127.0.0.2');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const port = (server.address() as net.AddressInfo).port;
  const running = await startTestProxy(`[server]\naccess_log = off\n[proxy.api]\npath = /\ntls_ca = ${fixtures}ca.pem\npass = https://api.wild.test:${port} resolve\n`, { deps: { log: () => {} } });
  t.after(() => running.close());
  running.proxy.setDiscoveredUpstreams('api', line(running.proxy, port, [{ address: '127.0.0.2' }]));
  const response = await request(running.port, { path: '/' });
  assert.equal(response.status, 200, `got ${response.status} ${response.body}, want 200 (the wildcard certificate names api.wild.test, not 127.0.0.2)`);
  assert.deepEqual(names, ['api.wild.test'], `got SNI ${names.join(', ')}`);
});
