/**
 * The rules from DNS answers to a line's addresses (SPEC 7), with a fake DnsLookup: the A/AAAA
 * combination (a failed family keeps its last good addresses), SRV priorities, targets and TTLs,
 * and the garbage that is dropped.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UpstreamDiscovery } from '../../src/config/config.js';
import type { AddressAnswer, DnsLookup, FamilyAnswer, ServiceAnswer } from '../../src/discovery/dns-lookup.js';
import { lookupLineAnswer, MAX_LINE_ADDRESSES, type FamilyMemory, type LineAnswer } from '../../src/discovery/line-answer.js';

const resolveLine: UpstreamDiscovery = { kind: 'resolve', name: 'api.test' };
const serviceLine: UpstreamDiscovery = { kind: 'service', service: 'http', name: '_http._tcp.web.test', weight: undefined };

const a = (ttlSeconds: number, ...addresses: string[]): FamilyAnswer => ({ result: 'ok', records: addresses.map((address) => ({ address, ttlSeconds })) });
const no = (result: 'nxdomain' | 'empty' | 'timeout' | 'servfail'): FamilyAnswer => ({ result, reason: `${result} reason` });

/** A fake lookup answering from tables; `addresses` by name, `services` by name. */
function fakeLookup(addresses: Record<string, AddressAnswer>, services: Record<string, ServiceAnswer> = {}): DnsLookup {
  return {
    resolveAddresses: async (name) => addresses[name] ?? { v4: no('nxdomain'), v6: no('nxdomain') },
    resolveService: async (name) => services[name] ?? { result: 'nxdomain', reason: 'NXDOMAIN' },
    close: () => {},
  };
}

const summary = (answer: LineAnswer) =>
  answer.result === 'ok'
    ? { result: 'ok', addresses: answer.addresses.map((x) => `${x.address}:${x.port}${x.isBackupByPriority === true ? ' backup' : ''}${x.srvWeight === undefined ? '' : ` w${x.srvWeight}`}`), ttl: answer.ttlSeconds }
    : { result: answer.result };

describe('lookupLineAnswer: resolve (A + AAAA)', () => {
  const table: { name: string; first?: AddressAnswer; answer: AddressAnswer; want: ReturnType<typeof summary> }[] = [
    { name: 'both families, lowest TTL, sorted', answer: { v4: a(30, '10.0.0.3', '10.0.0.1'), v6: a(10, 'fd00::1') }, want: { result: 'ok', addresses: ['10.0.0.1:8080', '10.0.0.3:8080', 'fd00::1:8080'], ttl: 10 } },
    { name: 'AAAA empty: the IPv4 set', answer: { v4: a(5, '10.0.0.1'), v6: no('empty') }, want: { result: 'ok', addresses: ['10.0.0.1:8080'], ttl: 5 } },
    { name: 'AAAA SERVFAIL keeps its last good addresses beside the fresh IPv4 set', first: { v4: a(5, '10.0.0.1'), v6: a(5, 'fd00::1') }, answer: { v4: a(7, '10.0.0.2'), v6: no('servfail') }, want: { result: 'ok', addresses: ['10.0.0.2:8080', 'fd00::1:8080'], ttl: 7 } },
    { name: 'A timed out keeps the IPv4 set beside the fresh IPv6 one', first: { v4: a(5, '10.0.0.1'), v6: no('empty') }, answer: { v4: no('timeout'), v6: a(9, 'fd00::2') }, want: { result: 'ok', addresses: ['10.0.0.1:8080', 'fd00::2:8080'], ttl: 9 } },
    { name: 'AAAA NXDOMAIN drops its earlier addresses (an answer, not a failure)', first: { v4: a(5, '10.0.0.1'), v6: a(5, 'fd00::1') }, answer: { v4: a(5, '10.0.0.1'), v6: no('empty') }, want: { result: 'ok', addresses: ['10.0.0.1:8080'], ttl: 5 } },
    { name: 'both NXDOMAIN → nxdomain', answer: { v4: no('nxdomain'), v6: no('nxdomain') }, want: { result: 'nxdomain' } },
    { name: 'one NXDOMAIN, one NODATA → empty', answer: { v4: no('empty'), v6: no('nxdomain') }, want: { result: 'empty' } },
    { name: 'no addresses and a failure → the failure', answer: { v4: no('timeout'), v6: no('empty') }, want: { result: 'timeout' } },
    { name: 'both failed → the A failure', answer: { v4: no('servfail'), v6: no('timeout') }, want: { result: 'servfail' } },
    { name: 'duplicates dropped', answer: { v4: a(5, '10.0.0.1', '10.0.0.1'), v6: no('empty') }, want: { result: 'ok', addresses: ['10.0.0.1:8080'], ttl: 5 } },
  ];
  for (const row of table) {
    it(row.name, async () => {
      const memory: FamilyMemory = new Map();
      if (row.first !== undefined) await lookupLineAnswer(resolveLine, 8080, fakeLookup({ 'api.test': row.first }), memory);
      const got = summary(await lookupLineAnswer(resolveLine, 8080, fakeLookup({ 'api.test': row.answer }), memory));
      assert.deepEqual(got, row.want);
    });
  }

  it('the same addresses in another order give the same list', async () => {
    const one = await lookupLineAnswer(resolveLine, 80, fakeLookup({ 'api.test': { v4: a(5, '10.0.0.2', '10.0.0.10', '10.0.0.1'), v6: no('empty') } }), new Map());
    const two = await lookupLineAnswer(resolveLine, 80, fakeLookup({ 'api.test': { v4: a(5, '10.0.0.10', '10.0.0.1', '10.0.0.2'), v6: no('empty') } }), new Map());
    assert.deepEqual(one, two);
    assert.deepEqual(summary(one).addresses, ['10.0.0.1:80', '10.0.0.2:80', '10.0.0.10:80']);
  });

  it(`caps a line at ${MAX_LINE_ADDRESSES} addresses, with a note`, async () => {
    const many = Array.from({ length: 600 }, (_, i) => `10.0.${i >> 8}.${i & 255}`);
    const got = await lookupLineAnswer(resolveLine, 80, fakeLookup({ 'api.test': { v4: a(5, ...many), v6: no('empty') } }), new Map());
    assert.equal(got.result, 'ok');
    if (got.result !== 'ok') return;
    assert.equal(got.addresses.length, MAX_LINE_ADDRESSES);
    assert.deepEqual(got.notes, [`600 addresses, only the first ${MAX_LINE_ADDRESSES} are used`]);
  });

  it('leaves out, with a note, addresses no upstream can have: unspecified, multicast, broadcast (an answer of only those is empty)', async () => {
    const lookup = fakeLookup({
      'api.test': { v4: a(5, '0.0.0.0', '224.0.0.1', '255.255.255.255', '127.0.0.2', '0.1.2.3', '169.254.1.1'), v6: a(5, '::', 'ff02::1', 'fd00::2') },
      'bad.test': { v4: a(5, '0.0.0.0', '239.1.1.1'), v6: a(5, '::') },
    });
    const answer = await lookupLineAnswer(resolveLine, 80, lookup, new Map());
    assert.deepEqual(summary(answer), { result: 'ok', addresses: ['127.0.0.2:80', '169.254.1.1:80', 'fd00::2:80'], ttl: 5 });
    assert.deepEqual(answer.result === 'ok' ? answer.notes : [], [
      'left out 0.0.0.0, 224.0.0.1, 255.255.255.255, 0.1.2.3, ::, ff02::1: not an address an upstream can have (unspecified, multicast or broadcast)',
    ]);
    const onlyBad = await lookupLineAnswer({ kind: 'resolve', name: 'bad.test' }, 80, lookup, new Map());
    assert.equal(onlyBad.result, 'empty', 'an answer of unusable addresses only is empty (held 30 s like NXDOMAIN)');
  });

  it('an IPv4-mapped AAAA record is its IPv4 address: merged with the same A record, one upstream', async () => {
    const lookup = fakeLookup({ 'api.test': { v4: a(5, '127.0.0.2'), v6: a(5, '::ffff:127.0.0.2', '::FFFF:127.0.0.3') } });
    assert.deepEqual(summary(await lookupLineAnswer(resolveLine, 80, lookup, new Map())), { result: 'ok', addresses: ['127.0.0.2:80', '127.0.0.3:80'], ttl: 5 });
  });

  it('a lookup that throws becomes error, not a rejection', async () => {
    const throwing: DnsLookup = { resolveAddresses: () => Promise.reject(new Error('boom')), resolveService: () => Promise.reject(new Error('boom')), close: () => {} };
    assert.equal((await lookupLineAnswer(resolveLine, 80, throwing, new Map())).result, 'error');
  });
});

describe('lookupLineAnswer: service (SRV)', () => {
  const srv = (priority: number, weight: number, port: number, target: string, addresses?: AddressAnswer) => ({ priority, weight, port, target, addresses });
  const v4 = (ttl: number, ...hosts: string[]): AddressAnswer => ({ v4: a(ttl, ...hosts), v6: no('empty') });

  it('lowest priority number = primaries, the others backups; weights kept; refresh = lowest target TTL', async () => {
    const answer: ServiceAnswer = {
      result: 'ok',
      records: [srv(20, 1, 9003, 'c.test', v4(30, '127.0.0.4')), srv(10, 3, 9001, 'a.test', v4(8, '127.0.0.2')), srv(10, 1, 9002, 'b.test', v4(12, '127.0.0.3')), srv(30, 0, 9004, 'd.test', v4(3, '127.0.0.5'))],
    };
    const got = summary(await lookupLineAnswer(serviceLine, 80, fakeLookup({}, { '_http._tcp.web.test': answer }), new Map()));
    assert.deepEqual(got, { result: 'ok', addresses: ['127.0.0.2:9001 w3', '127.0.0.3:9002 w1', '127.0.0.4:9003 backup w1', '127.0.0.5:9004 backup w0'], ttl: 3 });
  });

  it('an IP-literal target is used as it is; no target TTL → 5 s', async () => {
    const answer: ServiceAnswer = { result: 'ok', records: [srv(1, 1, 9001, '127.0.0.2')] };
    const got = summary(await lookupLineAnswer(serviceLine, 80, fakeLookup({}, { '_http._tcp.web.test': answer }), new Map()));
    assert.deepEqual(got, { result: 'ok', addresses: ['127.0.0.2:9001 w1'], ttl: 5 });
  });

  it('drops port 0, target ".", unresolvable targets (with a note) and duplicate address:port (the primary kept)', async () => {
    const answer: ServiceAnswer = {
      result: 'ok',
      records: [srv(10, 1, 0, 'a.test', v4(5, '127.0.0.2')), srv(10, 1, 9001, '.'), srv(10, 1, 9001, 'gone.test', { v4: no('nxdomain'), v6: no('nxdomain') }), srv(20, 7, 9001, 'b.test', v4(5, '127.0.0.3')), srv(10, 2, 9001, 'c.test', v4(9, '127.0.0.3'))],
    };
    const got = await lookupLineAnswer(serviceLine, 80, fakeLookup({}, { '_http._tcp.web.test': answer }), new Map());
    assert.deepEqual(summary(got), { result: 'ok', addresses: ['127.0.0.3:9001 w2'], ttl: 5 });
    assert.equal(got.result === 'ok' && got.notes.some((note) => note.startsWith('SRV target gone.test left out')), true, `got notes ${got.result === 'ok' ? got.notes : ''}`);
    assert.equal(got.result === 'ok' && got.notes.includes('2 SRV record(s) of _http._tcp.web.test left out: port 0 or target "." (RFC 2782: service not offered there)'), true, `got notes ${got.result === 'ok' ? got.notes : ''}`);
  });

  it('the primaries are the lowest priority whose target resolved: an unresolvable priority-5 target does not make the priority-10 ones backups', async () => {
    const answer: ServiceAnswer = {
      result: 'ok',
      records: [srv(5, 1, 9000, 'nx.test', { v4: no('nxdomain'), v6: no('nxdomain') }), srv(10, 3, 9001, 'a.test', v4(5, '127.0.0.2')), srv(20, 1, 9002, 'b.test', v4(5, '127.0.0.3'))],
    };
    const got = summary(await lookupLineAnswer(serviceLine, 80, fakeLookup({}, { '_http._tcp.web.test': answer }), new Map()));
    assert.deepEqual(got, { result: 'ok', addresses: ['127.0.0.2:9001 w3', '127.0.0.3:9002 backup w1'], ttl: 5 });
  });

  it('leaves out, with a note, a target the lookup did not resolve (beyond MAX_SRV_TARGETS)', async () => {
    const answer: ServiceAnswer = { result: 'ok', records: [srv(1, 1, 9001, 'a.test', v4(5, '127.0.0.2')), srv(1, 1, 9002, 'z.test')] };
    const got = await lookupLineAnswer(serviceLine, 80, fakeLookup({}, { '_http._tcp.web.test': answer }), new Map());
    assert.deepEqual(summary(got), { result: 'ok', addresses: ['127.0.0.2:9001 w1'], ttl: 5 });
    assert.deepEqual(got.result === 'ok' ? got.notes : [], ['SRV target z.test left out: more than 128 targets']);
  });

  it('remembers only the targets of the latest SRV answer', async () => {
    const memory: FamilyMemory = new Map();
    const first: ServiceAnswer = { result: 'ok', records: [srv(1, 1, 9001, 'a.test', v4(5, '127.0.0.2')), srv(1, 1, 9001, 'b.test', v4(5, '127.0.0.3'))] };
    const second: ServiceAnswer = { result: 'ok', records: [srv(1, 1, 9001, 'b.test', v4(5, '127.0.0.3'))] };
    await lookupLineAnswer(serviceLine, 80, fakeLookup({}, { '_http._tcp.web.test': first }), memory);
    await lookupLineAnswer(serviceLine, 80, fakeLookup({}, { '_http._tcp.web.test': second }), memory);
    assert.deepEqual([...memory.keys()], ['b.test']);
  });

  it('SRV failures and NXDOMAIN pass through; every target failing is a failure; no usable record is empty', async () => {
    const cases: [ServiceAnswer, string][] = [
      [{ result: 'servfail', reason: 'SERVFAIL' }, 'servfail'],
      [{ result: 'nxdomain', reason: 'NXDOMAIN' }, 'nxdomain'],
      [{ result: 'ok', records: [srv(1, 1, 9001, 'a.test', { v4: no('timeout'), v6: no('timeout') })] }, 'timeout'],
      [{ result: 'ok', records: [srv(1, 1, 0, 'a.test', v4(5, '127.0.0.2'))] }, 'empty'],
    ];
    for (const [answer, want] of cases) {
      const got = await lookupLineAnswer(serviceLine, 80, fakeLookup({}, { '_http._tcp.web.test': answer }), new Map());
      assert.equal(got.result, want, `got ${got.result}, want ${want}`);
    }
  });
});
