/**
 * The Discovery manager (SPEC 7) on a fake clock and a fake DnsLookup: what it pushes to its target
 * and when, what it keeps across reload, what it logs and counts, and the one-shot lookup of `simulate`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Config, ServerConfig } from '../../src/config/config.js';
import { parseConfig } from '../../src/config/load-config.js';
import type { DiscoveredLine, DiscoveryTarget } from '../../src/discovery/discovered-line.js';
import { Discovery, lookupLineOnce } from '../../src/discovery/discovery.js';
import type { AddressAnswer, DnsLookup, ServiceAnswer } from '../../src/discovery/dns-lookup.js';
import { advanceSettled } from '../helpers/discovery-fakes.js';
import { FakeTimers } from '../helpers/health-fakes.js';

const config = (text: string): Config => parseConfig(text, 'env.ini');

const BASE = `[server]\nresolver = 127.0.0.1:5353\n[proxy.a]\npath=/a\npass = http://api.test:8080 resolve\npass = http://web.test service=http\n[proxy.b]\npath=/b\npass = http://api.test:8080 resolve\n`;

/** A DnsLookup answering from mutable tables, counting questions per name. */
class TableLookup implements DnsLookup {
  readonly addresses = new Map<string, AddressAnswer>();
  readonly services = new Map<string, ServiceAnswer>();
  readonly asked: string[] = [];
  isClosed = false;
  setA(name: string, ttl: number, ...hosts: string[]): void {
    this.addresses.set(name, { v4: { result: 'ok', records: hosts.map((address) => ({ address, ttlSeconds: ttl })) }, v6: { result: 'empty', reason: 'no AAAA' } });
  }
  async resolveAddresses(name: string): Promise<AddressAnswer> {
    this.asked.push(name);
    return this.addresses.get(name) ?? { v4: { result: 'nxdomain', reason: 'NXDOMAIN' }, v6: { result: 'nxdomain', reason: 'NXDOMAIN' } };
  }
  async resolveService(name: string): Promise<ServiceAnswer> {
    this.asked.push(name);
    return this.services.get(name) ?? { result: 'nxdomain', reason: 'NXDOMAIN' };
  }
  close(): void {
    this.isClosed = true;
  }
}

function harness(text = BASE) {
  const timers = new FakeTimers();
  const lookup = new TableLookup();
  const pushes: { routeName: string; lines: { lineOrigin: string; upstreams: string[] }[] }[] = [];
  const target: DiscoveryTarget = {
    setDiscoveredUpstreams: (routeName: string, lines: readonly DiscoveredLine[]) =>
      pushes.push({ routeName, lines: lines.map((line) => ({ lineOrigin: line.lineOrigin, upstreams: line.upstreams.map((u) => `${u.origin} w${u.weight}${u.isBackup ? ' backup' : ''}`) })) }),
  };
  const logs: string[] = [];
  const servers: ServerConfig[] = [];
  const discovery = new Discovery(config(text), {
    target,
    lookup: (server) => {
      servers.push(server);
      return lookup;
    },
    timers,
    now: timers.now,
    epochNow: () => 1_700_000_000_000 + timers.nowMs,
    log: (line) => logs.push(line),
  });
  lookup.setA('api.test', 5, '127.0.0.3', '127.0.0.2');
  lookup.setA('w1.test', 10, '127.0.0.5');
  lookup.services.set('_http._tcp.web.test', { result: 'ok', records: [{ priority: 10, weight: 3, port: 9001, target: 'w1.test', addresses: lookup.addresses.get('w1.test') }] });
  return { timers, lookup, pushes, logs, servers, discovery, advance: (ms: number) => advanceSettled(timers, ms) };
}

describe('Discovery', () => {
  it('looks every line up at start and pushes each route with all its discovery lines', async () => {
    const h = harness();
    h.discovery.start();
    h.discovery.start();
    await h.advance(0);
    assert.deepEqual(h.lookup.asked.sort(), ['_http._tcp.web.test', 'api.test', 'api.test'], 'one lookup per line, start() idempotent');
    const lastA = h.pushes.filter((p) => p.routeName === 'a').at(-1)!;
    assert.deepEqual(lastA.lines, [
      { lineOrigin: 'http://api.test:8080', upstreams: ['http://127.0.0.2:8080 w1', 'http://127.0.0.3:8080 w1'] },
      { lineOrigin: 'http://web.test:80', upstreams: ['http://127.0.0.5:9001 w3'] },
    ]);
    assert.deepEqual(h.pushes.filter((p) => p.routeName === 'b').at(-1)!.lines, [{ lineOrigin: 'http://api.test:8080', upstreams: ['http://127.0.0.2:8080 w1', 'http://127.0.0.3:8080 w1'] }]);
    assert.ok(h.logs.includes('discovery: route a, api.test: 2 addresses (+127.0.0.2 +127.0.0.3), next lookup in 5s'), `got logs ${JSON.stringify(h.logs)}`);
    h.discovery.stop();
  });

  it('pushes nothing when a TTL refresh gives the same set, and logs the change when it differs', async () => {
    const h = harness();
    h.discovery.start();
    await h.advance(0);
    const pushesAfterStart = h.pushes.length;
    await h.advance(5_000); // api.test refreshed, same answer
    assert.equal(h.pushes.length, pushesAfterStart, `got ${h.pushes.length - pushesAfterStart} pushes for an unchanged answer, want 0`);
    h.lookup.setA('api.test', 1, '127.0.0.4', '127.0.0.3');
    await h.advance(5_000);
    assert.ok(h.logs.includes('discovery: route a, api.test: 2 addresses (+127.0.0.4 \u2212127.0.0.2), next lookup in 1s'), `got logs ${JSON.stringify(h.logs)}`);
    assert.deepEqual(h.pushes.at(-1)!.lines[0]!.upstreams, ['http://127.0.0.3:8080 w1', 'http://127.0.0.4:8080 w1']);
    h.discovery.stop();
  });

  it('names every entry of an SRV line by address and port in the change log (break test: +127.0.0.1 +127.0.0.3:21002 +127.0.0.3:22007)', async () => {
    const h = harness(`[server]\nresolver = 127.0.0.1:5353\n[proxy.a]\npath=/a\npass = http://web.test service=http\n`);
    h.lookup.setA('one.test', 10, '127.0.0.1');
    h.lookup.setA('three.test', 10, '127.0.0.3');
    h.lookup.addresses.set('six.test', { v4: { result: 'empty', reason: 'no A' }, v6: { result: 'ok', records: [{ address: 'fd00::6', ttlSeconds: 10 }] } });
    const record = (port: number, target: string) => ({ priority: 10, weight: 1, port, target, addresses: h.lookup.addresses.get(target) });
    h.lookup.services.set('_http._tcp.web.test', { result: 'ok', records: [record(22007, 'one.test'), record(21002, 'three.test'), record(22007, 'three.test'), record(22008, 'six.test')] });
    h.discovery.start();
    await h.advance(0);
    const changeLog = h.logs.find((line) => line.startsWith('discovery: route a, _http._tcp.web.test: 4 addresses'));
    assert.equal(changeLog, 'discovery: route a, _http._tcp.web.test: 4 addresses (+127.0.0.1:22007 +127.0.0.3:21002 +127.0.0.3:22007 +[fd00::6]:22008), next lookup in 10s', `got logs ${JSON.stringify(h.logs)}`);
    h.discovery.stop();
  });

  it("a set of one is logged as '1 address', not '1 addresses' (break test), also when a failure keeps it", async () => {
    const h = harness(`[server]\nresolver = 127.0.0.1:5353\n[proxy.a]\npath=/a\npass = http://api.test:8080 resolve\n`);
    h.lookup.setA('api.test', 5, '127.0.0.2');
    h.discovery.start();
    await h.advance(0);
    h.lookup.addresses.set('api.test', { v4: { result: 'servfail', reason: 'SERVFAIL' }, v6: { result: 'servfail', reason: 'x' } });
    await h.advance(5_000);
    h.lookup.setA('api.test', 5, '127.0.0.2');
    await h.advance(1_000);
    assert.deepEqual(h.logs, [
      'discovery: route a, api.test: 1 address (+127.0.0.2), next lookup in 5s',
      'discovery: route a, api.test: servfail: SERVFAIL; keeping 1 address, next lookup in 1s',
      'discovery: route a, api.test: answered again, 1 address as before, next lookup in 5s',
    ]);
    h.discovery.stop();
  });

  it('logs one line per failure episode, keeps the set, and counts lookups by result', async () => {
    const h = harness(`[server]\nresolver = 127.0.0.1:5353\n[proxy.a]\npath=/a\npass = http://api.test:8080 resolve\n`);
    h.discovery.start();
    await h.advance(0);
    h.lookup.addresses.set('api.test', { v4: { result: 'servfail', reason: 'SERVFAIL for api.test A from 127.0.0.1:5353' }, v6: { result: 'servfail', reason: 'x' } });
    await h.advance(5_000 + 1_000 + 2_000 + 4_000); // fails at 5, 6, 8, 12 s
    const failureLogs = h.logs.filter((line) => line.includes('servfail'));
    assert.deepEqual(failureLogs, ['discovery: route a, api.test: servfail: SERVFAIL for api.test A from 127.0.0.1:5353; keeping 2 addresses, next lookup in 1s']);
    assert.deepEqual(h.discovery.lookupCounts, [
      { routeName: 'a', name: 'api.test', result: 'ok', count: 1 },
      { routeName: 'a', name: 'api.test', result: 'servfail', count: 4 },
    ]);
    const [status] = h.discovery.lines;
    assert.deepEqual(status, {
      routeName: 'a',
      lineOrigin: 'http://api.test:8080',
      kind: 'resolve',
      name: 'api.test',
      place: { file: 'env.ini', line: 5, column: 8 },
      upstreamCount: 2,
      lastAnswerAtMs: 1_700_000_000_000,
      lastResult: 'servfail',
      lastError: 'SERVFAIL for api.test A from 127.0.0.1:5353',
    });
    h.discovery.stop();
  });

  it('logs the end of a failure episode once, and a name that never answered as having no addresses yet', async () => {
    const h = harness(`[server]\nresolver = 127.0.0.1:5353\n[proxy.a]\npath=/a\npass = http://api.test:8080 resolve\npass = http://localhost:8080 resolve\n`);
    h.discovery.start();
    await h.advance(0);
    const good = h.lookup.addresses.get('api.test')!;
    h.lookup.addresses.set('api.test', { v4: { result: 'timeout', reason: 'no answer within 2000ms for api.test A from 127.0.0.1:5353' }, v6: { result: 'timeout', reason: 'x' } });
    await h.advance(5_000 + 1_000);
    h.lookup.addresses.set('api.test', good);
    await h.advance(2_000 + 5_000);
    const apiLogs = h.logs.filter((line) => line.includes('api.test'));
    assert.deepEqual(apiLogs.slice(1), [
      'discovery: route a, api.test: timeout: no answer within 2000ms for api.test A from 127.0.0.1:5353; keeping 2 addresses, next lookup in 1s',
      'discovery: route a, api.test: answered again, 2 addresses as before, next lookup in 5s',
    ]);
    assert.ok(
      h.logs.some((line) => line.startsWith('discovery: route a, localhost: nxdomain: ') && line.endsWith(' (resolve lines ask the resolver, never /etc/hosts); no addresses yet, next lookup in 1s')),
      `got logs ${JSON.stringify(h.logs)}`,
    );
    h.discovery.stop();
  });

  it('empties a line after 30 s of NXDOMAIN, with one log line', async () => {
    const h = harness(`[proxy.a]\npath=/a\npass = http://api.test:8080 resolve\n`);
    h.discovery.start();
    await h.advance(0);
    h.lookup.addresses.delete('api.test');
    await h.advance(5_000 + 30_000);
    assert.deepEqual(h.pushes.at(-1)!.lines, [{ lineOrigin: 'http://api.test:8080', upstreams: [] }]);
    assert.equal(h.logs.filter((line) => line.includes(': 0 addresses')).length, 0, 'the emptying is one log line, not two');
    assert.ok(h.logs.includes('discovery: route a, api.test: nxdomain: NXDOMAIN; keeping for up to 30s 2 addresses, next lookup in 1s'), `got logs ${JSON.stringify(h.logs)}`);
    assert.equal(h.logs.filter((line) => line.includes('nxdomain for 30s, line emptied (\u2212127.0.0.2 \u2212127.0.0.3), next lookup in 5s')).length, 1, `got logs ${JSON.stringify(h.logs)}`);
    h.discovery.stop();
  });

  it('reload: unchanged lines keep their schedule (no extra query), a flag change is re-pushed at once, new lines start, removed lines stop', async () => {
    const h = harness();
    h.discovery.start();
    await h.advance(0);
    const asked = h.lookup.asked.length;
    const pushes = h.pushes.length;
    // Same lines: nothing asked, nothing pushed.
    h.discovery.reload(config(BASE));
    await h.advance(0);
    assert.equal(h.lookup.asked.length, asked, 'no query at reload for unchanged lines');
    assert.equal(h.pushes.length, pushes, 'no push at reload when nothing changed');
    assert.equal(h.servers.length, 1, 'the same resolver settings keep the lookup');
    // Route a: api.test gets weight=4 backup; web.test removed; route b: new line new.test.
    h.lookup.setA('new.test', 5, '127.0.0.9');
    h.discovery.reload(config(`[server]\nresolver = 127.0.0.1:5353\n[proxy.a]\npath=/a\npass = http://api.test:8080 resolve weight=4 backup\n[proxy.b]\npath=/b\npass = http://api.test:8080 resolve\npass = http://new.test:8080 resolve\n`));
    assert.deepEqual(
      h.pushes.slice(pushes).find((push) => push.routeName === 'a'),
      { routeName: 'a', lines: [{ lineOrigin: 'http://api.test:8080', upstreams: ['http://127.0.0.2:8080 w4 backup', 'http://127.0.0.3:8080 w4 backup'] }] },
      'a flag change is pushed at once from the last answer',
    );
    assert.equal(h.servers.length, 1, 'the same resolver settings keep the lookup');
    await h.advance(0);
    assert.deepEqual(h.lookup.asked.slice(asked), ['new.test'], 'only the new line is looked up at reload');
    assert.deepEqual(h.pushes.at(-1)!.lines.map((line) => line.lineOrigin), ['http://api.test:8080', 'http://new.test:8080']);
    assert.deepEqual(h.discovery.lines.map((line) => `${line.routeName} ${line.name}`), ['a api.test', 'b api.test', 'b new.test']);
    // The removed SRV line is never asked again; the kept lines keep their 5 s TTL schedule.
    await h.advance(60_000);
    assert.equal(h.lookup.asked.filter((name) => name === '_http._tcp.web.test').length, 1, 'the removed line stopped');
    assert.equal(h.lookup.asked.filter((name) => name === 'api.test').length, 2 + 2 * 12, 'api.test every 5 s on both routes');
    h.discovery.stop();
    assert.equal(h.timers.pending.size, 0, 'stop() clears every timer');
    assert.equal(h.lookup.isClosed, true, 'stop() closes the lookup: no query in flight keeps the process alive');
  });

  it('reload: new resolver settings make a new lookup and every kept line is asked again at once, not at its TTL', async () => {
    const h = harness();
    h.discovery.start();
    await h.advance(0);
    const asked = h.lookup.asked.length;
    h.discovery.reload(config(BASE.replace('resolver = 127.0.0.1:5353', 'resolver = 127.0.0.1:5354\nresolver_timeout = 500ms')));
    assert.deepEqual(h.servers.map((server) => [server.resolvers[0]?.port, server.resolverTimeoutMs]), [[5353, 2_000], [5354, 500]]);
    await h.advance(0);
    assert.deepEqual(h.lookup.asked.slice(asked).sort(), ['_http._tcp.web.test', 'api.test', 'api.test'], 'every kept line is asked again at the reload');
    assert.ok(h.logs.includes('discovery: new resolver settings, every line is looked up again now'), `got logs ${JSON.stringify(h.logs)}`);
    await h.advance(4_999);
    assert.equal(h.lookup.asked.length, asked + 3, 'then each line follows its TTL again (5 s), no extra query');
    h.discovery.stop();
  });

  it('reload: a line that only moved in the file is re-pushed with its new place, without a query', async () => {
    const text = `[proxy.a]\npath=/a\npass = http://api.test:8080 resolve\n`;
    const h = harness(text);
    h.discovery.start();
    await h.advance(0);
    const asked = h.lookup.asked.length;
    const pushes = h.pushes.length;
    h.discovery.reload(config(`# a comment\n${text}`));
    assert.equal(h.pushes.length, pushes + 1, 'got no push for a moved line, want one');
    assert.deepEqual(h.discovery.lines.map((line) => line.place.line), [4]);
    assert.equal(h.lookup.asked.length, asked, 'no query for a moved line');
    h.discovery.stop();
  });

  it('a removed line whose lookup was running is ignored when it ends', async () => {
    const h = harness(`[proxy.a]\npath=/a\npass = http://slow.test:8080 resolve\n`);
    let answer: (value: AddressAnswer) => void = () => {};
    h.lookup.resolveAddresses = (name: string) => {
      h.lookup.asked.push(name);
      return new Promise<AddressAnswer>((resolve) => (answer = resolve));
    };
    h.discovery.start();
    h.discovery.reload(config(`[proxy.a]\npath=/a\npass = http://other.test:8080\n`));
    answer({ v4: { result: 'ok', records: [{ address: '127.0.0.2', ttlSeconds: 5 }] }, v6: { result: 'empty', reason: '' } });
    await h.advance(10_000);
    assert.deepEqual(h.pushes, [], 'no push from a removed line');
    assert.deepEqual(h.discovery.lookupCounts, []);
  });
});

describe('lookupLineOnce', () => {
  it('gives the member upstreams of a line now, or why there are none', async () => {
    const h = harness();
    const cfg = config(BASE);
    const line = cfg.routes[0]!.upstreams[0]!;
    const got = await lookupLineOnce(line, cfg.server, h.lookup);
    assert.deepEqual('upstreams' in got ? got.upstreams.map((u) => u.origin) : got, ['http://127.0.0.2:8080', 'http://127.0.0.3:8080']);
    h.lookup.addresses.delete('api.test');
    assert.deepEqual(await lookupLineOnce(line, cfg.server, h.lookup), { error: 'nxdomain: NXDOMAIN' });
  });
});
