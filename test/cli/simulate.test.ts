/** `simulate ROUTE -n N` (SPEC 2): the decision table with states, the sequence, the distribution. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runSimulate } from '../../src/cli/simulate.js';
import type { Config, RouteConfig } from '../../src/config/config.js';
import { UsageError } from '../../src/errors.js';
import { routeConfig, seededRandom, weights } from '../upstream/balancer/helpers.js';

function configOf(...routes: RouteConfig[]): Config {
  return { file: 'env.ini', server: {} as Config['server'], admin: undefined, acme: undefined, routes };
}

test("-n 1: the header says '1 pick', not '1 picks'", () => {
  const route = routeConfig({ name: 'a', strategy: 'smooth-weighted-round-robin', upstreams: weights(5, 1, 1) });
  const header = runSimulate(configOf(route), 'a', { n: 1 }).split('\n')[0];
  assert.equal(header, 'route a: smooth-weighted-round-robin, 1 pick, client IP 127.0.0.1, key 127.0.0.1');
});

test("smooth weighted round robin {5,1,1}: the SPEC's sequence a a b a c a a with its current weights", () => {
  const route = routeConfig({ name: 'a', strategy: 'smooth-weighted-round-robin', upstreams: weights(5, 1, 1) });
  const got = runSimulate(configOf(route), 'a', { n: 7 });
  const want = [
    'route a: smooth-weighted-round-robin, 7 picks, client IP 127.0.0.1, key 127.0.0.1',
    '  a  http://127.0.0.1:9001  weight=5',
    '  b  http://127.0.0.1:9002  weight=1',
    '  c  http://127.0.0.1:9003  weight=1',
    '',
    'step  state before                              pick  state after',
    '   1  a{cw=0,ew=5} b{cw=0,ew=1} c{cw=0,ew=1}    a     a{cw=-2,ew=5} b{cw=1,ew=1} c{cw=1,ew=1}',
    '   2  a{cw=-2,ew=5} b{cw=1,ew=1} c{cw=1,ew=1}   a     a{cw=-4,ew=5} b{cw=2,ew=1} c{cw=2,ew=1}',
    '   3  a{cw=-4,ew=5} b{cw=2,ew=1} c{cw=2,ew=1}   b     a{cw=1,ew=5} b{cw=-4,ew=1} c{cw=3,ew=1}',
    '   4  a{cw=1,ew=5} b{cw=-4,ew=1} c{cw=3,ew=1}   a     a{cw=-1,ew=5} b{cw=-3,ew=1} c{cw=4,ew=1}',
    '   5  a{cw=-1,ew=5} b{cw=-3,ew=1} c{cw=4,ew=1}  c     a{cw=4,ew=5} b{cw=-2,ew=1} c{cw=-2,ew=1}',
    '   6  a{cw=4,ew=5} b{cw=-2,ew=1} c{cw=-2,ew=1}  a     a{cw=2,ew=5} b{cw=-1,ew=1} c{cw=-1,ew=1}',
    '   7  a{cw=2,ew=5} b{cw=-1,ew=1} c{cw=-1,ew=1}  a     a{cw=0,ew=5} b{cw=0,ew=1} c{cw=0,ew=1}',
    '',
    'sequence: a a b a c a a',
    '',
    'distribution:',
    '  a  http://127.0.0.1:9001  5  71.43%',
    '  b  http://127.0.0.1:9002  1  14.29%',
    '  c  http://127.0.0.1:9003  1  14.29%',
    '',
  ].join('\n');
  assert.equal(got, want);
});

test('ip-hash with --client-ip, backups and down upstreams are labelled, and nothing available shows as -', () => {
  const route = routeConfig({ name: 'sticky', strategy: 'ip-hash', upstreams: [{}, {}, { isBackup: true }, { isDown: true }] });
  const got = runSimulate(configOf(route), 'sticky', { n: 3, clientIp: '127.0.0.1' });
  assert.match(got, /^ {2}c {2}http:\/\/127\.0\.0\.1:9003 {2}weight=1 backup$/m);
  assert.match(got, /^ {2}d {2}http:\/\/127\.0\.0\.1:9004 {2}weight=1 down$/m);
  assert.match(got, /^sequence: a a a$/m, 'crc32("127.0.0.1") mod 2 = 0 → a every time');
  const none = routeConfig({ name: 'none', strategy: 'round-robin', upstreams: [{ isDown: true }] });
  const gotNone = runSimulate(configOf(none), 'none', { n: 2 });
  assert.match(gotNone, /^sequence: - -$/m);
  assert.match(gotNone, /^ {2}- {2}\(none available\) +2 {2}100\.00%$/m);
});

test('random strategies use the injected random: the distribution adds up to n', () => {
  const route = routeConfig({ name: 'r', strategy: 'weighted-random', upstreams: weights(1, 3) });
  const got = runSimulate(configOf(route), 'r', { n: 400, random: seededRandom(5) });
  const counts = [...got.matchAll(/^ {2}[ab] {2}\S+ +(\d+) +[\d.]+%$/gm)].map((match) => Number(match[1]));
  assert.equal(counts.length, 2, `distribution rows: got ${counts.length}, want 2`);
  assert.equal(counts[0]! + counts[1]!, 400);
  assert.ok(counts[1]! > counts[0]! * 2, `b (weight 3) vs a (weight 1): got ${counts[1]} vs ${counts[0]}`);
  assert.equal(got, runSimulate(configOf(route), 'r', { n: 400, random: seededRandom(5) }), 'same seed, same output');
});

test('consistent-hash with --key: the same key lands on the same upstream every step', () => {
  const route = routeConfig({ name: 'c', strategy: 'consistent-hash', upstreams: weights(1, 1, 1) });
  const got = runSimulate(configOf(route), 'c', { n: 5, key: '/cart' });
  assert.match(got, /^route c: consistent-hash, 5 picks, client IP 127\.0\.0\.1, key \/cart$/m);
  assert.match(got, /^sequence: ([abc])( \1){4}$/m);
  assert.match(got, /a\{points=160,arc=[\d.]+%\}/);
});

test('an unknown route is a UsageError listing the route names', () => {
  const config = configOf(
    routeConfig({ name: 'a', strategy: 'round-robin', upstreams: weights(1) }),
    routeConfig({ name: 'b', strategy: 'round-robin', upstreams: weights(1) }),
  );
  assert.throws(() => runSimulate(config, 'nope', { n: 1 }), (error: unknown) => {
    assert.ok(error instanceof UsageError, `got ${String(error)}, want a UsageError`);
    assert.equal(error.message, "unknown route 'nope' (routes: a, b)");
    return true;
  });
  assert.throws(() => runSimulate(config, 'a', { n: -1 }), UsageError);
});

test('--client-ip is read as the proxy reads a client address: IPv4-mapped unmapped, IPv6 canonical, so ip-hash and consistent-hash pick what the proxy would (found by a break test)', () => {
  const cases: [written: string, proxyReads: string][] = [
    ['::FFFF:0606:0606', '6.6.6.6'],
    ['::ffff:6.6.6.6', '6.6.6.6'],
    ['2001:DB8:0::1', '2001:db8::1'],
    ['6.6.6.6', '6.6.6.6'],
  ];
  for (const strategy of ['ip-hash', 'consistent-hash'] as const) {
    const route = routeConfig({ name: 'h', strategy, upstreams: weights(1, 1, 1, 1, 1) });
    for (const [written, proxyReads] of cases) {
      const got = runSimulate(configOf(route), 'h', { n: 2, clientIp: written });
      const want = runSimulate(configOf(route), 'h', { n: 2, clientIp: proxyReads });
      assert.equal(got.split('\n')[0], `route h: ${strategy}, 2 picks, client IP ${proxyReads}, key ${proxyReads}`, `${strategy}, --client-ip ${written}`);
      assert.equal(got, want, `${strategy}, --client-ip ${written}: got\n${got}want the output for ${proxyReads}:\n${want}`);
    }
  }
});
