/**
 * The real lookup (node's dns.promises.Resolver) against the test DNS responder on loopback (RFC
 * 1035 over node:dgram): A and AAAA with TTLs, SRV with targets, and each failure classified —
 * NXDOMAIN, NODATA, SERVFAIL, REFUSED, silence (a timeout within resolver_timeout), a garbage answer.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { classifyDnsError, NodeDnsLookup } from '../../src/discovery/dns-lookup.js';
import { startDnsResponder, type DnsResponder } from '../helpers/dns-responder.js';

const TIMEOUT_MS = 200;

describe('NodeDnsLookup against a DNS server on loopback', () => {
  let dns: DnsResponder;
  let lookup: NodeDnsLookup;
  let server: ConstructorParameters<typeof NodeDnsLookup>[0];
  before(async () => {
    dns = await startDnsResponder();
    server = { resolvers: [{ host: '127.0.0.1', port: dns.port }], resolverTimeoutMs: TIMEOUT_MS };
    lookup = new NodeDnsLookup(server);
  });
  after(() => dns.close());

  it('answers A and AAAA with their TTLs', async () => {
    dns.set('api.test', 'A', [
      { address: '127.0.0.2', ttl: 7 },
      { address: '127.0.0.3', ttl: 0 },
    ]);
    dns.set('api.test', 'AAAA', [{ address: 'fd00::2', ttl: 30 }]);
    const got = await lookup.resolveAddresses('api.test');
    assert.deepEqual(got, {
      v4: { result: 'ok', records: [{ address: '127.0.0.2', ttlSeconds: 7 }, { address: '127.0.0.3', ttlSeconds: 0 }] },
      v6: { result: 'ok', records: [{ address: 'fd00::2', ttlSeconds: 30 }] },
    });
  });

  it('gives every record of a large answer a TTL: node gives the first 256 only, the rest get the lowest given', async () => {
    const records = Array.from({ length: 300 }, (_, i) => ({ address: `127.0.${Math.floor(i / 250) + 1}.${(i % 250) + 1}`, ttl: i === 7 ? 9 : 30 }));
    dns.set('big.test', 'A', records);
    dns.set('big.test', 'AAAA', 'nodata');
    const got = await lookup.resolveAddresses('big.test');
    assert.equal(got.v4.result, 'ok');
    if (got.v4.result !== 'ok') return;
    assert.equal(got.v4.records.length, 300);
    const ttls = new Set(got.v4.records.map((record) => record.ttlSeconds));
    assert.deepEqual([...ttls].sort(), [30, 9], `got TTLs ${[...ttls].join(', ')}, want 30 and 9 only (no undefined)`);
    assert.equal(got.v4.records[299]!.ttlSeconds, 9, 'a record past the 256th gets the lowest TTL given');
  });

  it('answers SRV with each target looked up once (an IP-literal target is not)', async () => {
    dns.set('_http._tcp.web.test', 'SRV', [
      { priority: 10, weight: 3, port: 9001, target: 'w1.test', ttl: 30 },
      { priority: 20, weight: 0, port: 9002, target: 'w1.test', ttl: 30 },
    ]);
    dns.set('w1.test', 'A', [{ address: '127.0.0.5', ttl: 4 }]);
    dns.set('w1.test', 'AAAA', 'nodata');
    const got = await lookup.resolveService('_http._tcp.web.test');
    assert.equal(got.result, 'ok');
    if (got.result !== 'ok') return;
    const w1 = { v4: { result: 'ok', records: [{ address: '127.0.0.5', ttlSeconds: 4 }] }, v6: got.records[0]!.addresses!.v6 };
    assert.equal(w1.v6.result, 'empty');
    assert.deepEqual(
      got.records.map((r) => ({ ...r })),
      [
        { priority: 10, weight: 3, port: 9001, target: 'w1.test', addresses: w1 },
        { priority: 20, weight: 0, port: 9002, target: 'w1.test', addresses: w1 },
      ],
    );
    assert.equal(dns.count('w1.test', 'A'), 1, `got ${dns.count('w1.test', 'A')} A questions for w1.test, want 1`);
  });

  const failures: [string, Parameters<DnsResponder['set']>[2], string][] = [
    ['NXDOMAIN', 'nxdomain', 'nxdomain'],
    ['NODATA', 'nodata', 'empty'],
    ['SERVFAIL', 'servfail', 'servfail'],
    ['REFUSED', 'refused', 'refused'],
    ['a garbage answer', 'garbage', 'error'],
  ];
  for (const [what, behaviour, want] of failures) {
    it(`classifies ${what} as ${want}, naming the server`, async () => {
      const name = `${behaviour}.test`;
      dns.set(name, 'A', behaviour);
      dns.set(name, 'AAAA', behaviour);
      const got = await lookup.resolveAddresses(name);
      assert.equal(got.v4.result, want, `got ${got.v4.result} (${'reason' in got.v4 ? got.v4.reason : ''}), want ${want}`);
      assert.ok('reason' in got.v4 && got.v4.reason.includes(`${name} A from 127.0.0.1:${dns.port}`), `got reason ${JSON.stringify(got.v4)}`);
    });
  }

  it('a garbage answer for one name fails only that name: lookups running beside it get their answers', async () => {
    dns.set('junk.test', 'A', 'noise');
    dns.set('junk.test', 'AAAA', 'noise');
    for (const name of ['good1.test', 'good2.test', 'good3.test']) {
      dns.set(name, 'A', [{ address: '127.0.0.9', ttl: 5 }]);
      dns.set(name, 'AAAA', 'nodata');
      dns.delay(name, 30); // still outstanding when the noise arrives
    }
    const fresh = new NodeDnsLookup(server); // no channel state left by the tests before
    const [junk, ...goods] = await Promise.all(['junk.test', 'good1.test', 'good2.test', 'good3.test'].map((name) => fresh.resolveAddresses(name)));
    assert.equal(junk!.v4.result, 'error');
    assert.deepEqual(goods.map((answer) => answer.v4.result), ['ok', 'ok', 'ok'], `got ${goods.map((answer) => JSON.stringify(answer.v4)).join(' ')}`);
  });

  it('a silent server is a timeout within resolver_timeout (+ a small margin)', async () => {
    dns.set('silent.test', 'A', 'silence');
    dns.set('silent.test', 'AAAA', 'silence');
    dns.set('_http._tcp.silent.test', 'SRV', 'silence');
    const started = performance.now();
    const [addresses, service] = await Promise.all([lookup.resolveAddresses('silent.test'), lookup.resolveService('_http._tcp.silent.test')]);
    const elapsedMs = performance.now() - started;
    assert.equal(addresses.v4.result, 'timeout');
    assert.equal(addresses.v6.result, 'timeout');
    assert.equal(service.result, 'timeout');
    assert.ok(elapsedMs < TIMEOUT_MS + 100, `got ${Math.round(elapsedMs)} ms, want < ${TIMEOUT_MS + 100}`);
    assert.ok(elapsedMs >= TIMEOUT_MS - 20, `got ${Math.round(elapsedMs)} ms, want about ${TIMEOUT_MS}`);
  });

  it('close() ends the lookups to a silent server at once, and answers later ones at once (shutdown)', async () => {
    dns.set('closing.test', 'A', 'silence');
    dns.set('closing.test', 'AAAA', 'silence');
    dns.set('_http._tcp.closing.test', 'SRV', 'silence');
    const closing = new NodeDnsLookup({ resolvers: server.resolvers, resolverTimeoutMs: 5000 });
    const started = performance.now();
    const pending = Promise.all([closing.resolveAddresses('closing.test'), closing.resolveService('_http._tcp.closing.test')]);
    setImmediate(() => closing.close());
    const [addresses, service] = await pending;
    const elapsedMs = performance.now() - started;
    assert.deepEqual([addresses.v4.result, addresses.v6.result, service.result], ['error', 'error', 'error']);
    assert.ok(elapsedMs < 500, `got ${Math.round(elapsedMs)} ms, want the lookups ended at close(), not at resolver_timeout (5000 ms)`);
    const later = await closing.resolveAddresses('closing.test');
    assert.deepEqual([later.v4.result, later.v6.result], ['error', 'error'], `got ${JSON.stringify(later)}, want a lookup after close() to fail at once`);
  });

  it('two silent servers still end within resolver_timeout', async () => {
    const second = await startDnsResponder({ address: '127.0.0.2' });
    try {
      second.set('silent.test', 'A', 'silence');
      const two = new NodeDnsLookup({ resolvers: [...server.resolvers, { host: '127.0.0.2', port: second.port }], resolverTimeoutMs: TIMEOUT_MS });
      const started = performance.now();
      const got = await two.resolveAddresses('silent.test');
      const elapsedMs = performance.now() - started;
      assert.equal(got.v4.result, 'timeout');
      assert.ok(elapsedMs < TIMEOUT_MS + 100, `got ${Math.round(elapsedMs)} ms, want < ${TIMEOUT_MS + 100}`);
    } finally {
      await second.close();
    }
  });

  it('the responder survives garbage queries', async () => {
    const { createSocket } = await import('node:dgram');
    const socket = createSocket('udp4');
    for (const junk of [Buffer.alloc(0), Buffer.from([1, 2, 3]), Buffer.alloc(40, 0xff), Buffer.from('000000010000000000000000ffc0', 'hex')]) {
      await new Promise<void>((resolve) => socket.send(junk, dns.port, '127.0.0.1', () => resolve()));
    }
    socket.close();
    dns.set('after.test', 'A', [{ address: '127.0.0.9', ttl: 1 }]);
    const got = await lookup.resolveAddresses('after.test');
    assert.equal(got.v4.result, 'ok', `got ${JSON.stringify(got.v4)}, want ok after garbage`);
  });
});

describe('classifyDnsError', () => {
  it('maps node error codes to results', () => {
    const table: [string, string][] = [
      ['ENOTFOUND', 'nxdomain'],
      ['ENODATA', 'empty'],
      ['ESERVFAIL', 'servfail'],
      ['EREFUSED', 'refused'],
      ['ETIMEOUT', 'timeout'],
      ['EBADRESP', 'error'],
      ['ECONNREFUSED', 'error'],
    ];
    for (const [code, want] of table) assert.equal(classifyDnsError(code), want, `${code}: got ${classifyDnsError(code)}, want ${want}`);
  });
});
