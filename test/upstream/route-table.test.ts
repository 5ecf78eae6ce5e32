/**
 * RouteTable: the one keyed store of runtime upstreams that a reload and the admin registry share.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { RouteTable } from '../../src/upstream/route-table.js';
import type { UpstreamConfig } from '../../src/config/config.js';
import { discoveredUpstreamConfig } from '../../src/discovery/discovered-line.js';
import { ConfigValueError } from '../../src/errors.js';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const deps = { now: () => 0, random: () => 0, log: () => {} };
const ini =
  '[server]\naccess_log = off\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\n' +
  '[proxy.b]\npath = /b\npass = http://127.0.0.1:9002\n';

test('a registry change rebuilds only its route; the other keeps its Route object and balancer', () => {
  const table = new RouteTable(parseConfig(ini, 'env.ini'), deps);
  const [routeA, routeB] = table.routes;
  const extra: UpstreamConfig = { ...routeA!.upstreams[0]!.config, origin: 'http://127.0.0.1:9003', port: 9003, hostHeader: '127.0.0.1:9003' };
  assert.equal(table.setRegistered('a', [extra]), true);
  assert.notEqual(table.routes[0], routeA, 'route a is rebuilt');
  assert.equal(table.routes[1], routeB, `got a new Route for b, want the old one (its balancer state)`);
  assert.deepEqual(table.routes[0]!.upstreams.map((u) => u.origin), ['http://127.0.0.1:9001', 'http://127.0.0.1:9003']);
  assert.equal(table.routes[0]!.upstreams[0], routeA!.upstreams[0], 'the configured upstream keeps its object');
  assert.equal(table.setRegistered('nope', [extra]), false, 'a route not in force: remembered, nothing rebuilt');
});

test('a reload keeps registered upstreams and counts kept / added / removed by route and origin', () => {
  const table = new RouteTable(parseConfig(ini, 'env.ini'), deps);
  const extra: UpstreamConfig = { ...table.routes[0]!.upstreams[0]!.config, origin: 'http://127.0.0.1:9003', port: 9003, hostHeader: '127.0.0.1:9003' };
  table.setRegistered('a', [extra]);
  const registered = table.routes[0]!.upstreams[1];
  // b's upstream moves to route a's address: same origin, other route → a new object.
  const change = table.reload(parseConfig(ini.replace('9002', '9001'), 'env.ini'));
  assert.deepEqual(change, { kept: 2, added: 1, removed: 1 });
  assert.equal(table.routes[0]!.upstreams[1], registered, 'the registered upstream survives the reload with its object');
  assert.notEqual(table.routes[1]!.upstreams[0], table.routes[0]!.upstreams[0], 'route b gets its own object for the same origin');
});

test('an upstream the operator removed comes back undrained: a registry entry deleted and registered again, a pass line reloaded away and back', () => {
  const table = new RouteTable(parseConfig(ini, 'env.ini'), deps);
  const extra: UpstreamConfig = { ...table.routes[0]!.upstreams[0]!.config, origin: 'http://127.0.0.1:9003', port: 9003, hostHeader: '127.0.0.1:9003' };
  table.setRegistered('a', [extra]);
  table.routes[0]!.upstreams[1]!.isDraining = true; // admin POST /routes/a/upstreams/drain
  table.setRegistered('a', []); // DELETE, or its ttl lapsed
  table.setRegistered('a', [extra]); // registered again
  assert.deepEqual([table.routes[0]!.upstreams[1]!.origin, table.routes[0]!.upstreams[1]!.isDraining], ['http://127.0.0.1:9003', false], 'the registered again upstream is a new one');

  table.routes[1]!.upstreams[0]!.isDraining = true; // route b's pass line, drained
  table.reload(parseConfig(ini.replace(/\[proxy\.b\][\s\S]*$/, '[proxy.b]\npath = /b\npass = http://127.0.0.1:9009\n'), 'env.ini'));
  table.reload(parseConfig(ini, 'env.ini'));
  assert.deepEqual([table.routes[1]!.upstreams[0]!.origin, table.routes[1]!.upstreams[0]!.isDraining], ['http://127.0.0.1:9002', false], 'a pass line back after a reload without it is a new upstream');
});

// ---- discovered upstreams (issue 14 item 2) ------------------------------------------------------

const discoveryIni =
  '[server]\naccess_log = off\n[proxy.api]\npath = /api\nstrategy = round-robin\n' +
  'pass = http://127.0.0.9:8080\npass = http://api.test:8080 resolve\npass = http://web.test service=http backup\n' +
  '[proxy.other]\npath = /other\npass = http://127.0.0.2:8080\n';

/** The members a discovery line of route `api` stands for, one per address (SRV: address:port). */
function membersOf(table: RouteTable, lineOrigin: string, addresses: readonly string[]): UpstreamConfig[] {
  const line = table.config.routes[0]!.upstreams.find((upstream) => upstream.origin === lineOrigin)!;
  return addresses.map((text) => {
    const [address, port] = text.split(' ') as [string, string | undefined];
    return discoveredUpstreamConfig(line, { address, port: port === undefined ? line.port : Number(port), srvWeight: 1 });
  });
}

const API = 'http://api.test:8080';
const WEB = 'http://web.test:80';

test('a discovery line is replaced by its addresses, in file order, then the registered ones; the line itself is never an upstream', () => {
  const table = new RouteTable(parseConfig(discoveryIni, 'env.ini'), deps);
  assert.deepEqual(table.routes[0]!.upstreams.map((u) => u.origin), ['http://127.0.0.9:8080'], 'before any answer only the plain line');
  assert.equal(table.routes[0]!.config.retries, 0, 'got retries counting the discovery lines, want upstreams − 1 = 0');
  assert.equal(table.setDiscovered('api', [
    { lineOrigin: WEB, upstreams: membersOf(table, WEB, ['127.0.0.5 9000']) },
    { lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.3', '127.0.0.4']) },
  ]), true);
  const registered = { ...membersOf(table, API, ['127.0.0.6'])[0]!, discoveredFrom: undefined, tlsName: undefined };
  table.setRegistered('api', [registered]);
  const route = table.routes[0]!;
  assert.deepEqual(route.upstreams.map((u) => u.origin), [
    'http://127.0.0.9:8080', 'http://127.0.0.3:8080', 'http://127.0.0.4:8080', 'http://127.0.0.5:9000', 'http://127.0.0.6:8080',
  ]);
  assert.equal(route.config.retries, 4, `got retries ${route.config.retries}, want 5 upstreams − 1 (registered ones counted too)`);
  assert.equal(route.upstreams[3]!.config.isBackup, true, 'the service= line is a backup line');
  assert.deepEqual(table.discoveredLines('api').map((line) => line.lineOrigin), [API, WEB], 'in pass-line order');
});

test('duplicates merge by origin: a plain pass line wins wherever it is written, else the first occurrence', () => {
  const table = new RouteTable(parseConfig(discoveryIni, 'env.ini'), deps);
  table.setDiscovered('api', [
    { lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.9', '127.0.0.3']) },
    { lineOrigin: WEB, upstreams: membersOf(table, WEB, ['127.0.0.3 8080']) },
  ]);
  const route = table.routes[0]!;
  assert.deepEqual(route.upstreams.map((u) => u.origin), ['http://127.0.0.9:8080', 'http://127.0.0.3:8080']);
  assert.equal(route.upstreams[0]!.config.discoveredFrom, undefined, 'got the discovered copy of 127.0.0.9, want the plain line');
  assert.equal(route.upstreams[1]!.config.discoveredFrom?.lineOrigin, API, 'got the later line for 127.0.0.3, want the first');
});

test('setDiscovered ignores lines that are not discovery lines of the route, members of another line, and members that are no address of the line; unknown route → false', () => {
  const table = new RouteTable(parseConfig(discoveryIni, 'env.ini'), deps);
  const before = table.routes[0]!.upstreams.map((u) => u.origin);
  table.setDiscovered('api', [
    { lineOrigin: 'http://127.0.0.9:8080', upstreams: membersOf(table, API, ['127.0.0.3']) },
    { lineOrigin: WEB, upstreams: membersOf(table, API, ['127.0.0.4']) },
  ]);
  const [member] = membersOf(table, API, ['127.0.0.4']);
  table.setDiscovered('api', [{
    lineOrigin: API,
    upstreams: [
      { ...member!, host: 'evil.test', origin: 'http://evil.test:8080' },
      { ...member!, scheme: 'https', origin: 'https://127.0.0.4:8080' },
      { ...member!, port: 0, origin: 'http://127.0.0.4:0' },
    ],
  }]);
  const after = table.routes[0]!.upstreams.map((u) => u.origin);
  assert.deepEqual(after, before, `got ${after.join(', ')}, want only the plain line`);
  assert.equal(table.setDiscovered('nope', []), false);
});

test('an address that stays keeps its object (health, ejection, counters) and its place; new ones follow; one that left is drained', () => {
  const table = new RouteTable(parseConfig(discoveryIni, 'env.ini'), deps);
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.2', '127.0.0.3', '127.0.0.4']) }]);
  const [, two, three, four] = table.routes[0]!.upstreams;
  three!.ejectedUntilMs = 10_000;
  three!.requestsTotal = 7;
  four!.healthState = 'down';
  // The next answer drops .2, adds .5 and lists the others rotated (DNS servers rotate answers).
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.5', '127.0.0.4', '127.0.0.3']) }]);
  const route = table.routes[0]!;
  assert.deepEqual(route.upstreams.map((u) => u.origin), ['http://127.0.0.9:8080', 'http://127.0.0.3:8080', 'http://127.0.0.4:8080', 'http://127.0.0.5:8080']);
  assert.equal(route.upstreams[1], three, 'got a new object for .3, want the one that stayed');
  assert.equal(route.upstreams[1]!.isEjected(5_000), true, 'an ejected address stays ejected across a new answer');
  assert.equal(route.upstreams[1]!.requestsTotal, 7);
  assert.equal(route.upstreams[2]!.healthState, 'down', 'DOWN is kept');
  assert.equal(route.upstreams[3]!.healthState, 'up', 'a new address starts UP');
  assert.equal(two!.hasLeft, true, 'got the leaving object still pickable by requests in flight, want it marked as left');
  assert.equal(two!.isAvailable(0), false);
  assert.equal(two!.isDraining, false, 'leaving is not an operator drain');
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.2']) }]);
  const back = table.routes[0]!.upstreams[1]!;
  assert.notEqual(back, two, 'an address that comes back later starts fresh');
  assert.deepEqual([back.isDraining, back.hasLeft], [false, false]);
});

test('an operator drain survives the address leaving the answer and coming back; leaving addresses with requests in flight are listed', () => {
  const table = new RouteTable(parseConfig(discoveryIni, 'env.ini'), deps);
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.2', '127.0.0.3']) }]);
  const [, two, three] = table.routes[0]!.upstreams;
  two!.isDraining = true; // admin POST /routes/api/upstreams/drain
  const endRequest = three!.beginRequest();
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.4']) }]);
  assert.deepEqual(table.leavingUpstreams('api').map((u) => u.origin), ['http://127.0.0.3:8080'], 'got the wrong leaving list: .3 has a request in flight, .2 none');
  endRequest();
  assert.deepEqual(table.leavingUpstreams('api'), [], 'listed only while requests are in flight');
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.2', '127.0.0.3', '127.0.0.4']) }]);
  const [, , backTwo, backThree] = table.routes[0]!.upstreams;
  assert.deepEqual([backTwo!.origin, backTwo!.isDraining], ['http://127.0.0.2:8080', true], 'the drained address comes back drained');
  assert.deepEqual([backThree!.origin, backThree!.isDraining], ['http://127.0.0.3:8080', false]);
});

test('an answer without addresses leaves a route with no upstream: retries 0 and nothing to pick', () => {
  const ini = '[server]\naccess_log = off\n[proxy.api]\npath = /api\npass = http://api.test:8080 resolve\n';
  const table = new RouteTable(parseConfig(ini, 'env.ini'), deps);
  assert.equal(table.routes[0]!.upstreams.length, 0);
  assert.equal(table.routes[0]!.pick({ clientIp: '127.0.0.1', hashKey: '', tried: new Set() }), undefined);
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.2', '127.0.0.3']) }]);
  assert.equal(table.routes[0]!.config.retries, 1);
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: [] }]);
  assert.equal(table.routes[0]!.upstreams.length, 0, 'an empty line empties the route');
});

test('a written retries is not recounted', () => {
  const ini = '[server]\naccess_log = off\n[proxy.api]\npath = /api\nretries = 5\npass = http://api.test:8080 resolve\n';
  const table = new RouteTable(parseConfig(ini, 'env.ini'), deps);
  table.setDiscovered('api', [{ lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.2']) }]);
  assert.equal(table.routes[0]!.config.retries, 5);
});

test('a reload keeps the discovered lines that are still discovery lines and drops the others', () => {
  const table = new RouteTable(parseConfig(discoveryIni, 'env.ini'), deps);
  table.setDiscovered('api', [
    { lineOrigin: API, upstreams: membersOf(table, API, ['127.0.0.3']) },
    { lineOrigin: WEB, upstreams: membersOf(table, WEB, ['127.0.0.5 9000']) },
  ]);
  const kept = table.routes[0]!.upstreams[1];
  table.reload(parseConfig(discoveryIni.replace(' service=http backup', ''), 'env.ini'));
  assert.deepEqual(table.routes[0]!.upstreams.map((u) => u.origin), ['http://127.0.0.9:8080', 'http://127.0.0.3:8080', 'http://web.test:80']);
  assert.equal(table.routes[0]!.upstreams[1], kept, 'the discovered address keeps its object across the reload');
  assert.deepEqual(table.discoveredLines('api').map((line) => line.lineOrigin), [API]);
});

test('route TLS files out of date: used with a warning at the start and by a reload that keeps them; a reload that brings a new one is refused', (t) => {
  const fixtures = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'route-table-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const certFile = join(dir, 'client.pem');
  const keyFile = join(dir, 'client.key');
  const use = (name: string): void => {
    copyFileSync(`${fixtures}${name}.pem`, certFile);
    copyFileSync(`${fixtures}${name}.key`, keyFile);
  };
  const tlsIni = `[proxy.a]\npath = /a\npass = https://127.0.0.1:8443\ntls_client_cert = ${certFile} ${keyFile}\n`;
  const expired = `env.ini:4:19: tls_client_cert '${certFile}' expired on 2020-06-01 00:00:00 UTC`;
  const epochNow = (): number => Date.parse('2030-01-01T00:00:00Z');
  use('expired');
  const table = new RouteTable(parseConfig(tlsIni, 'env.ini'), deps, undefined, epochNow);
  assert.deepEqual(table.tlsWarnings, [`${expired}: used until it is replaced, and upstreams asking for it will refuse it`]);
  table.reload(parseConfig(`${tlsIni}retries = 0\n`, 'env.ini'));
  assert.equal(table.config.routes[0]!.retries, 0, 'got the old config, want a reload that keeps the expired certificate applied');
  assert.equal(table.tlsWarnings.length, 1, 'want the warning again');

  use('client');
  table.reload(parseConfig(tlsIni, 'env.ini'));
  assert.deepEqual(table.tlsWarnings, [], 'a valid certificate in its place: no warning');
  use('expired');
  assert.throws(() => table.reload(parseConfig(`${tlsIni}retries = 0\n`, 'env.ini')), (error: unknown) => {
    assert.ok(error instanceof ConfigValueError && error.message === expired, `got ${String(error)}, want ${expired}`);
    return true;
  });
  assert.equal(table.config.routes[0]!.isRetriesDefault, true, 'got the refused config applied, want the previous one');
});
