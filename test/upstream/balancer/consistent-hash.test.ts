/**
 * consistent-hash (SPEC 3): the ring's worked example, minimal movement when the pool changes
 * (Karger et al. 1997), unavailable → next point clockwise, keys from `hash_key`, point capping.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { HashKey, HashName } from '../../../src/config/config.js';
import { createBalancer, hashKeyFor } from '../../../src/upstream/balancer/strategies.js';
import { MAX_RING_POINTS, ringPointCounts } from '../../../src/upstream/balancer/consistent-hash.js';
import type { Upstream } from '../../../src/upstream/upstream.js';
import { contextFor, routeConfig, upstreamsOf, weights } from './helpers.js';

function ring(count: number, options: { hash?: HashName; virtualNodes?: number; hashKey?: HashKey } = {}) {
  const route = routeConfig({ strategy: 'consistent-hash', upstreams: weights(...Array.from({ length: count }, () => 1)), ...options });
  const upstreams = upstreamsOf(route);
  return { route, upstreams, balancer: createBalancer(route, upstreams) };
}

const KEYS = Array.from({ length: 10_000 }, (_, i) => `/item/${i}?v=${i % 7}`);

/** The origin each key lands on. */
function assignments(balancer: { pick: (c: ReturnType<typeof contextFor>) => Upstream | undefined }): (string | undefined)[] {
  return KEYS.map((hashKey) => balancer.pick(contextFor({ hashKey }))?.origin);
}

describe('consistent-hash', () => {
  test('the worked example of the doc comment', () => {
    const { upstreams, balancer } = ring(3, { virtualNodes: 2 });
    const [a, b, c] = upstreams as [Upstream, Upstream, Upstream];
    const CASES = [
      { key: '/', want: a, wantWithBDown: a },
      { key: '/b', want: b, wantWithBDown: c },
      { key: 'bob', want: b, wantWithBDown: c },
      { key: '/cart', want: c, wantWithBDown: c },
    ];
    for (const { key, want } of CASES) {
      const got = balancer.pick(contextFor({ hashKey: key }));
      assert.equal(got, want, `${key}: got ${got?.origin}, want ${want.origin}`);
    }
    b.healthState = 'down';
    for (const { key, wantWithBDown } of CASES) {
      const got = balancer.pick(contextFor({ hashKey: key }));
      assert.equal(got, wantWithBDown, `${key} with b down: got ${got?.origin}, want ${wantWithBDown.origin}`);
    }
    const arcs = balancer.describeState().map((state) => state['arc']);
    assert.deepEqual(arcs, ['58.96%', '30.98%', '10.06%'], `arcs: got ${arcs}`);
  });

  for (const hash of ['crc32', 'fnv1a'] as const) {
    test(`${hash}: 10 000 keys over 5 upstreams, each gets a fair share (20% ± 5%)`, () => {
      const { upstreams, balancer } = ring(5, { hash });
      const got = assignments(balancer);
      for (const upstream of upstreams) {
        const share = got.filter((origin) => origin === upstream.origin).length / KEYS.length;
        assert.ok(Math.abs(share - 0.2) <= 0.05, `${upstream.origin}: got share ${share}, want 0.2 ± 0.05`);
      }
    });

    test(`${hash}: removing one of 5 upstreams moves only that upstream's keys`, () => {
      const five = ring(5, { hash });
      const before = assignments(five.balancer);
      const removed = five.upstreams[2]!.origin;
      // The same pool without upstream 3: its config and the others' are identical, so the ring is
      // the old ring minus that upstream's points.
      const route = { ...five.route, upstreams: five.route.upstreams.filter((u) => u.origin !== removed) };
      const fourUpstreams = upstreamsOf(route);
      const after = assignments(createBalancer(route, fourUpstreams));
      let moved = 0;
      KEYS.forEach((key, i) => {
        if (before[i] === removed) {
          moved++;
          assert.notEqual(after[i], removed);
        } else {
          assert.equal(after[i], before[i], `${key}: got ${after[i]}, want it to stay on ${before[i]}`);
        }
      });
      assert.ok(moved > 0, 'the removed upstream had no keys: got 0 moved, want about 2000');
    });

    test(`${hash}: an unavailable upstream's keys go exactly where removing it would send them`, () => {
      const five = ring(5, { hash });
      const removed = five.upstreams[2]!;
      const route = { ...five.route, upstreams: five.route.upstreams.filter((u) => u !== removed.config) };
      const withoutIt = assignments(createBalancer(route, upstreamsOf(route)));
      removed.healthState = 'down';
      const withItDown = assignments(five.balancer);
      assert.deepEqual(withItDown, withoutIt);
    });

    test(`${hash}: adding a 6th upstream moves at most about 1/6 of the keys, all to the new one`, () => {
      const before = assignments(ring(5, { hash }).balancer);
      const six = ring(6, { hash });
      const after = assignments(six.balancer);
      const added = six.upstreams[5]!.origin;
      let moved = 0;
      KEYS.forEach((key, i) => {
        if (after[i] === before[i]) return;
        moved++;
        assert.equal(after[i], added, `${key} moved from ${before[i]} to ${after[i]}, want only moves to the new upstream`);
      });
      const share = moved / KEYS.length;
      assert.ok(share > 0 && share <= 1 / 6 + 0.04, `moved: got ${share}, want ≤ 1/6 + 0.04`);
    });
  }

  test('a key walks clockwise past every unavailable upstream, and nothing is left → undefined', () => {
    const { upstreams, balancer } = ring(4);
    const tried = new Set<Upstream>();
    const context = contextFor({ hashKey: '/x', tried });
    for (let i = 0; i < 4; i++) {
      const picked = balancer.pick(context);
      assert.ok(picked !== undefined && !tried.has(picked), `attempt ${i + 1}: got ${picked?.origin}, want an untried upstream`);
      tried.add(picked);
    }
    assert.equal(tried.size, upstreams.length);
    assert.equal(balancer.pick(context), undefined);
  });

  test('virtual nodes scale with weight; the ring is capped for huge weights', () => {
    const small = routeConfig({ strategy: 'consistent-hash', upstreams: weights(1, 3) });
    assert.deepEqual([...ringPointCounts(upstreamsOf(small), 160)], [160, 480]);
    const huge = routeConfig({ strategy: 'consistent-hash', upstreams: weights(1_000_000, 1_000_000, 1) });
    const counts = [...ringPointCounts(upstreamsOf(huge), 160)];
    const total = counts.reduce((sum, count) => sum + count, 0);
    assert.ok(total <= MAX_RING_POINTS + counts.length, `points: got ${total}, want ≤ ${MAX_RING_POINTS + counts.length}`);
    assert.equal(counts[0], counts[1], 'equal weights: got unequal points');
    assert.equal(counts[2], 1, `weight 1 next to 10^6: got ${counts[2]} points, want the minimum 1`);
    const balancer = createBalancer(huge, upstreamsOf(huge));
    assert.notEqual(balancer.pick(contextFor()), undefined);
  });
});

describe('hashKeyFor (hash_key)', () => {
  const CLIENT_IP = '10.9.8.7';
  const CASES: { name: string; hashKey: HashKey; path: string; headers: Record<string, string | string[]>; want: string }[] = [
    { name: 'client_ip', hashKey: { kind: 'client_ip' }, path: '/a?b=1', headers: {}, want: CLIENT_IP },
    { name: 'uri keeps the query', hashKey: { kind: 'uri' }, path: '/a/b?c=1&d=2', headers: {}, want: '/a/b?c=1&d=2' },
    { name: 'header:x-user', hashKey: { kind: 'header', name: 'x-user' }, path: '/', headers: { 'x-user': 'alice' }, want: 'alice' },
    { name: 'header repeated → joined', hashKey: { kind: 'header', name: 'x-user' }, path: '/', headers: { 'x-user': ['a', 'b'] }, want: 'a, b' },
    { name: 'header missing → client IP', hashKey: { kind: 'header', name: 'x-user' }, path: '/', headers: {}, want: CLIENT_IP },
    { name: 'header empty → client IP', hashKey: { kind: 'header', name: 'x-user' }, path: '/', headers: { 'x-user': '' }, want: CLIENT_IP },
    { name: 'cookie:session', hashKey: { kind: 'cookie', name: 'session' }, path: '/', headers: { cookie: 'theme=dark; session=abc123; x=1' }, want: 'abc123' },
    { name: 'cookie quoted', hashKey: { kind: 'cookie', name: 'session' }, path: '/', headers: { cookie: 'session="q v"' }, want: 'q v' },
    { name: 'cookie name is exact, not a suffix', hashKey: { kind: 'cookie', name: 'session' }, path: '/', headers: { cookie: 'xsession=no; session=yes' }, want: 'yes' },
    { name: 'cookie missing → client IP', hashKey: { kind: 'cookie', name: 'session' }, path: '/', headers: { cookie: 'theme=dark' }, want: CLIENT_IP },
    { name: 'no Cookie header → client IP', hashKey: { kind: 'cookie', name: 'session' }, path: '/', headers: {}, want: CLIENT_IP },
  ];
  for (const { name, hashKey, path, headers, want } of CASES) {
    test(name, () => {
      const route = routeConfig({ strategy: 'consistent-hash', upstreams: weights(1), hashKey });
      const got = hashKeyFor(route, CLIENT_IP, path, headers);
      assert.equal(got, want, `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    });
  }

  test('requests with the same cookie stick to one upstream whatever their IP; without it, per IP', () => {
    const { route, upstreams, balancer } = ring(5, { hashKey: { kind: 'cookie', name: 'session' } });
    const pickFor = (clientIp: string, cookie?: string) => {
      const hashKey = hashKeyFor(route, clientIp, '/', cookie === undefined ? {} : { cookie: `session=${cookie}` });
      return balancer.pick(contextFor({ clientIp, hashKey }));
    };
    const sticky = pickFor('10.0.0.1', 'abc');
    for (let i = 2; i < 50; i++) assert.equal(pickFor(`10.0.0.${i}`, 'abc'), sticky, `10.0.0.${i} with session=abc moved`);
    const byIp = new Set(Array.from({ length: 50 }, (_, i) => pickFor(`10.0.1.${i}`)));
    assert.ok(byIp.size > 1, `without the cookie 50 IPs all landed on one of ${upstreams.length}: want them spread by IP`);
    assert.equal(pickFor('10.0.1.3'), pickFor('10.0.1.3'));
  });
});
