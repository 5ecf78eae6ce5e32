/** ip-hash (SPEC 3): crc32 of the client IP mod n, rehash to the next when unavailable, fnv1a option. */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBalancer } from '../../../src/upstream/balancer/strategies.js';
import { crc32, fnv1a } from '../../../src/upstream/balancer/hash.js';
import type { HashName } from '../../../src/config/config.js';
import { contextFor, routeConfig, upstreamsOf, weights } from './helpers.js';

function ipHash(count: number, hash: HashName = 'crc32') {
  const route = routeConfig({ strategy: 'ip-hash', upstreams: weights(...Array.from({ length: count }, () => 1)), hash });
  const upstreams = upstreamsOf(route);
  return { upstreams, balancer: createBalancer(route, upstreams) };
}

describe('ip-hash', () => {
  const SPEC_CASES = [
    { count: 2, want: 0 },
    { count: 3, want: 2 },
  ];
  for (const { count, want } of SPEC_CASES) {
    test(`crc32("127.0.0.1") = 3619153832 → index ${want} of ${count}`, () => {
      assert.equal(crc32('127.0.0.1'), 3619153832);
      const { upstreams, balancer } = ipHash(count);
      for (let i = 0; i < 5; i++) {
        const got = upstreams.indexOf(balancer.pick(contextFor({ clientIp: '127.0.0.1' }))!);
        assert.equal(got, want, `pick ${i}: got index ${got}, want ${want}`);
      }
    });
  }

  test('the hashed upstream unavailable → the next one (index 2 of 3 → 0), and back when it returns', () => {
    const { upstreams, balancer } = ipHash(3);
    upstreams[2]!.healthState = 'down';
    assert.equal(balancer.pick(contextFor({ clientIp: '127.0.0.1' })), upstreams[0], 'c down: got another, want a');
    upstreams[0]!.isDraining = true;
    assert.equal(balancer.pick(contextFor({ clientIp: '127.0.0.1' })), upstreams[1], 'c down, a draining: got another, want b');
    upstreams[2]!.healthState = 'up';
    assert.equal(balancer.pick(contextFor({ clientIp: '127.0.0.1' })), upstreams[2], 'c back: got another, want c');
  });

  test('a retry of the same request skips the tried upstream the same way', () => {
    const { upstreams, balancer } = ipHash(3);
    const picked = balancer.pick(contextFor({ clientIp: '127.0.0.1', tried: new Set([upstreams[2]!]) }));
    assert.equal(picked, upstreams[0], `got ${picked?.origin}, want a`);
  });

  test('only the unavailable upstream\'s clients move', () => {
    const { upstreams, balancer } = ipHash(4);
    const ips = Array.from({ length: 1000 }, (_, i) => `192.168.${i >> 8}.${i & 255}`);
    const before = ips.map((clientIp) => balancer.pick(contextFor({ clientIp })));
    upstreams[1]!.healthState = 'down';
    const after = ips.map((clientIp) => balancer.pick(contextFor({ clientIp })));
    ips.forEach((ip, i) => {
      const want = before[i] === upstreams[1] ? upstreams[2] : before[i];
      assert.equal(after[i], want, `${ip}: got ${after[i]?.origin}, want ${want?.origin}`);
    });
  });

  test('hash = fnv1a: fnv1a(IP) mod n, and it differs from crc32 for some IPs', () => {
    const crc = ipHash(3, 'crc32');
    const fnv = ipHash(3, 'fnv1a');
    let differing = 0;
    for (let i = 0; i < 100; i++) {
      const clientIp = `10.1.2.${i}`;
      const got = fnv.upstreams.indexOf(fnv.balancer.pick(contextFor({ clientIp }))!);
      const want = fnv1a(clientIp) % 3;
      assert.equal(got, want, `${clientIp}: got index ${got}, want ${want}`);
      if (crc.upstreams.indexOf(crc.balancer.pick(contextFor({ clientIp }))!) !== got) differing++;
    }
    assert.ok(differing > 0, 'crc32 and fnv1a agreed on all 100 IPs: got 0 differences, want some');
  });

  test('the same client IP from different source ports lands on the same upstream (real sockets)', async () => {
    const { upstreams, balancer } = ipHash(5);
    const seen: { port: number; origin: string | undefined }[] = [];
    const server = http.createServer((req, res) => {
      const clientIp = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
      seen.push({ port: req.socket.remotePort ?? 0, origin: balancer.pick(contextFor({ clientIp }))?.origin });
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      for (let i = 0; i < 4; i++) {
        await new Promise<void>((resolve, reject) => {
          http.get({ host: '127.0.0.1', port, agent: false }, (res) => res.resume().on('end', resolve)).on('error', reject);
        });
      }
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    const ports = new Set(seen.map((entry) => entry.port));
    assert.equal(ports.size, 4, `distinct source ports: got ${ports.size}, want 4`);
    const want = upstreams[crc32('127.0.0.1') % 5]!.origin;
    for (const entry of seen) assert.equal(entry.origin, want, `from port ${entry.port}: got ${entry.origin}, want ${want}`);
  });
});
