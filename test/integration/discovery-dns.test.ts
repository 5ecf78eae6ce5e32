/**
 * DNS discovery end to end (issue 14 "Must show", SPEC 7), through real DNS: the proxy's node:dns
 * `Resolver` asks the test responder (test/helpers/dns-responder.ts) on loopback, the answers go
 * through `Discovery` (wired by `DiscoveryRunner`, as `src/cli/run-proxy.ts` wires it) into a real
 * `ProxyServer`, and real backends on 127.0.0.2 .. 127.0.0.5 with one port answer their address.
 * It shows round robin over three A records and one lookup per TTL (not per request); an answer
 * that replaces an address moving traffic within 2 TTLs while a request in flight on the leaving
 * address finishes; an ejected address staying ejected across a new answer that still holds it;
 * SERVFAIL, silence and a short NXDOMAIN keeping the last good set (HAProxy `hold nx`); SRV weights
 * and priorities (nginx `service=`); and 503 with Retry-After until a name resolves, in one process.
 * The tests are independent (each has its own responder, backends and proxy) and run concurrently.
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { DiscoveryRunner } from '../../src/cli/discovery-runner.js';
import type { Upstream } from '../../src/upstream/upstream.js';
import { startDnsResponder, type DnsResponder } from '../helpers/dns-responder.js';
import { request, startTestProxy, type TestProxy } from '../helpers/proxy-harness.js';

const ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'] as const;
type Address = (typeof ADDRESSES)[number];

/** One backend on `address`: counts its GETs (health probes are HEAD) with their arrival time. */
interface AddressBackend {
  readonly address: Address;
  server: http.Server;
  /** Arrival times (performance.now) of GET requests other than `/slow`. */
  readonly gets: number[];
  /** `/slow` requests received and not yet released. */
  slowInFlight: number;
}

interface Backends {
  readonly port: number;
  readonly byAddress: Record<Address, AddressBackend>;
  /** Answers every `/slow` request held so far. */
  releaseSlow(): void;
  /** Closes the backend's listener and its connections: connects to it are refused. */
  stop(address: Address): Promise<void>;
  /** Listens again on the same address and port. */
  restart(address: Address): Promise<void>;
  close(): Promise<void>;
}

/**
 * A backend on each of ADDRESSES, all on one port (the first one's port 0 pick, retried if another
 * address has it taken). Each answers its address; `/slow` waits for `releaseSlow()`.
 */
async function startBackends(): Promise<Backends> {
  let releases: (() => void)[] = [];
  const makeServer = (backend: AddressBackend): http.Server =>
    http.createServer((req, res) => {
      if (req.method === 'GET' && req.url === '/slow') {
        backend.slowInFlight++;
        releases.push(() => {
          backend.slowInFlight--;
          res.end(backend.address);
        });
        return;
      }
      if (req.method === 'GET') backend.gets.push(performance.now());
      res.end(backend.address);
    });
  const listen = async (server: http.Server, port: number, address: string): Promise<number> => {
    server.listen(port, address);
    await Promise.race([once(server, 'listening'), once(server, 'error').then(([error]) => Promise.reject(error as Error))]);
    return (server.address() as net.AddressInfo).port;
  };
  for (let attempt = 0; ; attempt++) {
    const byAddress = {} as Record<Address, AddressBackend>;
    let port = 0;
    try {
      for (const address of ADDRESSES) {
        const backend: AddressBackend = { address, server: undefined as unknown as http.Server, gets: [], slowInFlight: 0 };
        backend.server = makeServer(backend);
        byAddress[address] = backend;
        port = await listen(backend.server, port, address);
      }
    } catch (error) {
      for (const backend of Object.values(byAddress)) backend.server.close();
      if (attempt >= 5) throw error;
      continue;
    }
    const stop = async (address: Address): Promise<void> => {
      const { server } = byAddress[address];
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    };
    return {
      port,
      byAddress,
      releaseSlow: () => {
        for (const release of releases) release();
        releases = [];
      },
      stop,
      restart: async (address) => {
        const backend = byAddress[address];
        backend.server = makeServer(backend);
        await listen(backend.server, port, address);
      },
      close: async () => {
        for (const release of releases) release();
        await Promise.all(ADDRESSES.map((address) => (byAddress[address].server.listening ? stop(address) : undefined)));
      },
    };
  }
}

interface Setup {
  readonly dns: DnsResponder;
  readonly backends: Backends;
  readonly proxy: TestProxy;
  readonly discovery: DiscoveryRunner;
  /** The route's upstreams now (what the last pushed answer made). */
  upstreams(): readonly Upstream[];
  upstream(address: Address): Upstream | undefined;
}

/**
 * A responder (answered as `answer` sets it up before the first lookup), backends, a proxy whose
 * route `api` has `routeKeys` and one pass line made by `passLine(port)`, and discovery following
 * it through `resolver = 127.0.0.1:PORT`; all stopped in t.after.
 */
async function setUp(
  t: TestContext,
  options: { routeKeys?: string; passLine: (port: number) => string; resolverTimeout?: string; answer: (dns: DnsResponder, port: number) => void },
): Promise<Setup> {
  const dns = await startDnsResponder();
  t.after(() => dns.close());
  const backends = await startBackends();
  t.after(() => backends.close());
  options.answer(dns, backends.port);
  const ini = [
    '[server]',
    `resolver = 127.0.0.1:${dns.port}`,
    `resolver_timeout = ${options.resolverTimeout ?? '500ms'}`,
    '[proxy.api]',
    'path = /',
    options.routeKeys ?? '',
    `pass = ${options.passLine(backends.port)}`,
    '',
  ].join('\n');
  const proxy = await startTestProxy(ini, { deps: { log: () => {} } });
  const discovery = new DiscoveryRunner({ target: proxy.proxy, log: () => {} });
  t.after(async () => {
    discovery.stop();
    await proxy.close();
  });
  discovery.apply(proxy.proxy.config);
  const upstreams = (): readonly Upstream[] => proxy.proxy.routes[0]!.upstreams;
  return { dns, backends, proxy, discovery, upstreams, upstream: (address) => upstreams().find((u) => u.config.host === address) };
}

const hostsOf = (upstreams: readonly Upstream[]): string[] => upstreams.map((u) => u.config.host).sort();

async function until<T>(what: string, probe: () => T | undefined | false, deadlineMs = 4000): Promise<T> {
  const end = performance.now() + deadlineMs;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > end) assert.fail(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** `count` GETs of `/`, one after the other, each asserted 200; the bodies (the backends' addresses). */
async function bodies(port: number, count: number): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < count; i++) {
    const response = await request(port, { path: '/' });
    assert.equal(response.status, 200, `request ${i}: got ${response.status} ${response.body}, want 200`);
    seen.push(response.body.toString());
  }
  return seen;
}

function tally(seen: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const address of [...seen].sort()) counts[address] = (counts[address] ?? 0) + 1;
  return counts;
}

/** Each test's limit: a hang fails it instead of the run. */
const TEST_TIMEOUT_MS = 12_000;

const a = (...addresses: Address[]) => addresses.map((address) => ({ address, ttl: 1 }));

/** api.test: A records for 127.0.0.2, .3 and .4 (TTL 1), no AAAA. */
function threeARecords(dns: DnsResponder): void {
  dns.set('api.test', 'A', a('127.0.0.2', '127.0.0.3', '127.0.0.4'));
  dns.set('api.test', 'AAAA', 'nodata');
}

describe('discovery through real DNS', { concurrency: true }, () => {
  test('three A records (TTL 1) spread round-robin 10/10/10, and steady traffic over 5 s costs about 5 A queries, not one per request', { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const s = await setUp(t, {
      passLine: (port) => `http://api.test:${port} resolve`,
      answer: threeARecords,
    });
    await until('three members', () => s.upstreams().length === 3);
    const spread = tally(await bodies(s.proxy.port, 30));
    assert.deepEqual(spread, { '127.0.0.2': 10, '127.0.0.3': 10, '127.0.0.4': 10 }, `got ${JSON.stringify(spread)}, want 10/10/10`);

    // ~20 requests a second for 5 s.
    const queriesBefore = s.dns.count('api.test', 'A');
    const startedAt = performance.now();
    let requests = 0;
    while (performance.now() - startedAt < 5000) {
      const response = await request(s.proxy.port, { path: '/' });
      assert.equal(response.status, 200, `got ${response.status} under steady traffic, want 200`);
      requests++;
      await sleep(40);
    }
    const queries = s.dns.count('api.test', 'A') - queriesBefore;
    t.diagnostic(`${requests} requests and ${queries} A queries in ${Math.round(performance.now() - startedAt)} ms`);
    assert.ok(queries >= 4 && queries <= 7, `got ${queries} A queries over 5 s at TTL 1, want 4..7 (one per TTL)`);
    assert.ok(requests >= 40, `got only ${requests} requests in 5 s, want at least 40 for the comparison to mean something`);
    assert.ok(queries * 5 < requests, `got ${queries} queries for ${requests} requests, want far fewer queries than requests`);
  });

  test('an answer that drops .2 and adds .5 moves traffic within 2 TTLs, while a request in flight on .2 finishes with 200', { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const s = await setUp(t, {
      passLine: (port) => `http://api.test:${port} resolve`,
      answer: threeARecords,
    });
    await until('three members', () => s.upstreams().length === 3);
    // Three slow requests at once: round robin puts one on each address, so one is in flight on .2.
    const slow = [0, 1, 2].map(() => request(s.proxy.port, { path: '/slow' }));
    const leaving = s.backends.byAddress['127.0.0.2'];
    await until('the slow request on 127.0.0.2', () => leaving.slowInFlight === 1);

    const changedAt = performance.now();
    s.dns.set('api.test', 'A', a('127.0.0.5', '127.0.0.3', '127.0.0.4'));
    const seen: { body: string; atMs: number }[] = [];
    while (performance.now() - changedAt < 2500) {
      const response = await request(s.proxy.port, { path: '/' });
      assert.equal(response.status, 200, `got ${response.status} across the change, want 200`);
      seen.push({ body: response.body.toString(), atMs: performance.now() - changedAt });
      await sleep(20);
    }
    const firstNew = seen.find((r) => r.body === '127.0.0.5');
    assert.ok(firstNew !== undefined, `got no answer from 127.0.0.5 within 2.5 s of the change; bodies ${JSON.stringify(tally(seen.map((r) => r.body)))}`);
    assert.ok(firstNew.atMs <= 2000, `got the first answer from 127.0.0.5 ${Math.round(firstNew.atMs)} ms after the change, want within 2 TTLs (2000 ms)`);
    const lateOnLeaving = leaving.gets.filter((atMs) => atMs - changedAt > 2000);
    assert.equal(lateOnLeaving.length, 0, `got ${lateOnLeaving.length} new requests on 127.0.0.2 later than 2 s after the change, want 0`);
    const lastOnLeaving = Math.max(0, ...leaving.gets.map((atMs) => atMs - changedAt));
    t.diagnostic(`first 127.0.0.5 answer ${Math.round(firstNew.atMs)} ms after the change, last new request on 127.0.0.2 at ${Math.round(lastOnLeaving)} ms`);
    assert.deepEqual(hostsOf(s.upstreams()), ['127.0.0.3', '127.0.0.4', '127.0.0.5'], 'the route holds the new answer');

    // The slow request on .2 was in flight all along (its address has left the route) and finishes.
    assert.equal(leaving.slowInFlight, 1, 'the slow request on 127.0.0.2 is still in flight after the switch');
    s.backends.releaseSlow();
    const answers = await Promise.all(slow);
    assert.deepEqual(
      answers.map((r) => `${r.status} ${r.body}`).sort(),
      ['200 127.0.0.2', '200 127.0.0.3', '200 127.0.0.4'],
      'the slow requests, the one on the dropped 127.0.0.2 included, finish with 200',
    );
  });

  test('an ejected address stays ejected across a new answer that still contains it', { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const s = await setUp(t, {
      routeKeys: 'max_fails = 1\nfail_timeout = 60s',
      passLine: (port) => `http://api.test:${port} resolve`,
      answer: threeARecords,
    });
    await until('three members', () => s.upstreams().length === 3);
    // .4 refuses connections: its turn fails, is retried on another address, and ejects it.
    await s.backends.stop('127.0.0.4');
    assert.deepEqual(tally(await bodies(s.proxy.port, 3)), { '127.0.0.2': 2, '127.0.0.3': 1 }, 'the failed turn of .4 is retried on the next address');
    const ejected = s.upstream('127.0.0.4')!;
    assert.ok(ejected.ejectedUntilMs > 0 && ejected.failuresTotal === 1, `got ejectedUntilMs ${ejected.ejectedUntilMs}, failures ${ejected.failuresTotal}: want .4 ejected after one failure`);
    const failedAttempts = s.proxy.logs.flatMap((record) => record.attempts).filter((attempt) => attempt.upstream === `127.0.0.4:${s.backends.port}`);
    assert.equal(failedAttempts.length, 1, `got ${failedAttempts.length} attempts on .4 in the access log, want the 1 that failed`);

    // .4 answers again, and a new answer (which adds .5) still holds it: it must stay out until fail_timeout.
    await s.backends.restart('127.0.0.4');
    s.dns.set('api.test', 'A', a('127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'));
    await until('the new answer with 127.0.0.5', () => s.upstream('127.0.0.5') !== undefined);
    assert.equal(s.upstream('127.0.0.4'), ejected, 'the address that stays keeps its runtime object');
    const logsBefore = s.proxy.logs.length;
    const spread = tally(await bodies(s.proxy.port, 21));
    assert.deepEqual(spread, { '127.0.0.2': 7, '127.0.0.3': 7, '127.0.0.5': 7 }, `got ${JSON.stringify(spread)}, want 7/7/7 with .4 still ejected`);
    assert.equal(s.backends.byAddress['127.0.0.4'].gets.length, 0, 'got a request on the ejected 127.0.0.4 after the new answer, want none');
    const laterAttempts = s.proxy.logs.slice(logsBefore).flatMap((record) => record.attempts).filter((attempt) => attempt.upstream.startsWith('127.0.0.4:'));
    assert.equal(laterAttempts.length, 0, `got ${laterAttempts.length} access-log attempts on .4 after the new answer, want 0`);
  });

  test('SERVFAIL, then silence longer than resolver_timeout, then a short NXDOMAIN keep every request on the last good set', { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const s = await setUp(t, {
      resolverTimeout: '200ms',
      passLine: (port) => `http://api.test:${port} resolve`,
      answer: (dns) => {
        dns.set('api.test', 'A', a('127.0.0.2', '127.0.0.3'));
        dns.set('api.test', 'AAAA', 'nodata');
      },
    });
    await until('two members', () => s.upstreams().length === 2);
    const statuses: string[] = [];
    let isTrafficOn = true;
    const traffic = (async () => {
      while (isTrafficOn) {
        const response = await request(s.proxy.port, { path: '/' });
        statuses.push(`${response.status} ${response.body}`);
        await sleep(25);
      }
    })();
    t.after(() => {
      isTrafficOn = false;
    });
    const phases: [string, 'servfail' | 'silence' | 'nxdomain', string][] = [
      ['SERVFAIL', 'servfail', 'servfail'],
      ['silence', 'silence', 'timeout'],
      ['NXDOMAIN', 'nxdomain', 'nxdomain'],
    ];
    const startedAt = performance.now();
    for (const [label, behaviour, result] of phases) {
      s.dns.set('api.test', 'A', behaviour);
      s.dns.set('api.test', 'AAAA', behaviour);
      // The retries back off 1 s, 2 s, … so each phase lasts until the proxy has seen it once.
      await until(`a lookup that ended ${result}`, () => s.discovery.lines[0]!.lastResult === result, 5000);
      t.diagnostic(`${label} seen by the proxy ${Math.round(performance.now() - startedAt)} ms into the failures`);
    }
    await sleep(1000); // NXDOMAIN ~1 s longer: still far inside the 30 s hold
    isTrafficOn = false;
    await traffic;
    const lookups = s.discovery.lookupCounts.map((count) => `${count.result} ${count.count}`);
    t.diagnostic(`${statuses.length} requests; lookups by result: ${lookups.join(', ')}`);
    for (const [, , result] of phases) assert.ok(lookups.some((entry) => entry.startsWith(`${result} `)), `got lookups ${lookups.join(', ')}, want a ${result} among them`);
    const counts = tally(statuses);
    assert.deepEqual(Object.keys(counts), ['200 127.0.0.2', '200 127.0.0.3'], `got ${JSON.stringify(counts)}, want every request 200 from the last good set`);
    assert.ok(statuses.length >= 50, `got ${statuses.length} requests during the failures, want at least 50`);
    assert.deepEqual(hostsOf(s.upstreams()), ['127.0.0.2', '127.0.0.3'], 'the route still holds the last good set');
  });

  test('SRV weights 3:1 under weighted round robin; the priority-20 record serves only while both priority-10 targets are down', { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const s = await setUp(t, {
      routeKeys: ['strategy = weighted-round-robin', 'health_check = on', 'health_interval = 100ms', 'health_timeout = 1s', 'health_fall = 1', 'health_rise = 1'].join('\n'),
      passLine: () => 'http://api.test service=http',
      answer: (dns, port) => {
        dns.set('_http._tcp.api.test', 'SRV', [
          { priority: 10, weight: 3, port, target: 'a.test', ttl: 1 },
          { priority: 10, weight: 1, port, target: 'b.test', ttl: 1 },
          { priority: 20, weight: 1, port, target: 'c.test', ttl: 1 },
        ]);
        for (const [name, address] of [['a.test', '127.0.0.2'], ['b.test', '127.0.0.3'], ['c.test', '127.0.0.4']] as const) {
          dns.set(name, 'A', a(address));
          dns.set(name, 'AAAA', 'nodata');
        }
      },
    });
    await until('three members', () => s.upstreams().length === 3);
    assert.deepEqual(
      s.upstreams().map((u) => `${u.config.host} weight=${u.config.weight}${u.config.isBackup ? ' backup' : ''}`).sort(),
      ['127.0.0.2 weight=3', '127.0.0.3 weight=1', '127.0.0.4 weight=1 backup'],
      'the SRV records as members',
    );
    const shares = tally(await bodies(s.proxy.port, 40));
    assert.deepEqual(shares, { '127.0.0.2': 30, '127.0.0.3': 10 }, `got ${JSON.stringify(shares)}, want 30/10 and nothing on the priority-20 target`);

    const downAndSeen = (address: Address, state: 'up' | 'down') => until(`${address} ${state}`, () => s.upstream(address)!.healthState === state);
    await s.backends.stop('127.0.0.2');
    await downAndSeen('127.0.0.2', 'down');
    assert.deepEqual(tally(await bodies(s.proxy.port, 10)), { '127.0.0.3': 10 }, 'one priority-10 target up: it alone serves, the priority-20 one does not');

    await s.backends.stop('127.0.0.3');
    await downAndSeen('127.0.0.3', 'down');
    assert.deepEqual(tally(await bodies(s.proxy.port, 10)), { '127.0.0.4': 10 }, 'both priority-10 targets down: the priority-20 one serves');

    await s.backends.restart('127.0.0.3');
    await downAndSeen('127.0.0.3', 'up');
    assert.deepEqual(tally(await bodies(s.proxy.port, 10)), { '127.0.0.3': 10 }, 'a priority-10 target back up: the priority-20 one stops serving');
  });

  test('a name that does not resolve at start-up answers 503 with Retry-After, then 200 once DNS answers, without a reload', { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const s = await setUp(t, {
      passLine: (port) => `http://api.test:${port} resolve`,
      answer: (dns) => {
        dns.set('api.test', 'A', 'nxdomain');
        dns.set('api.test', 'AAAA', 'nxdomain');
      },
    });
    const config = s.proxy.proxy.config;
    await until('the first NXDOMAIN', () => s.discovery.lines[0]!.lastResult === 'nxdomain');
    const early = await request(s.proxy.port, { path: '/' });
    assert.equal(early.status, 503, `got ${early.status} while the name does not resolve, want 503`);
    assert.equal(early.headers['retry-after'], '10', `got Retry-After ${early.headers['retry-after']}, want 10 (fail_timeout, health checks off)`);

    s.dns.set('api.test', 'A', a('127.0.0.2'));
    s.dns.set('api.test', 'AAAA', 'nodata');
    await until('the address in the route once the name resolves', () => s.upstreams().length === 1);
    const response = await request(s.proxy.port, { path: '/' });
    assert.equal(`${response.status} ${response.body}`, '200 127.0.0.2', 'served by the address DNS gave');
    assert.equal(s.proxy.proxy.config, config, 'the same config object: no reload happened');
  });
});
