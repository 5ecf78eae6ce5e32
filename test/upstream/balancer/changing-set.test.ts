/**
 * Strategies over a changing upstream set (DNS discovery, the registry; issue 14 item 2): a new
 * balancer built with `previous` takes over its state for the upstreams that stay, so every
 * strategy keeps its rules across the change. Exact sequences for the stateful ones, and the
 * consistent-hash movement rule (only the keys of members that came or went move).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { StrategyName } from '../../../src/config/config.js';
import { createBalancer } from '../../../src/upstream/balancer/strategies.js';
import type { RouteBalancer } from '../../../src/upstream/balancer/route-balancer.js';
import { Upstream } from '../../../src/upstream/upstream.js';
import { contextFor, routeConfig, upstreamConfig } from './helpers.js';

/** Upstreams named by letter: a = :9001, b = :9002, … with the given weights. */
function members(spec: Record<string, number>): Map<string, Upstream> {
  return new Map(
    Object.entries(spec).map(([name, weight]) => [name, new Upstream(upstreamConfig(9001 + name.charCodeAt(0) - 97, { weight }), 'r')]),
  );
}

function balancerOver(strategy: StrategyName, list: readonly Upstream[], previous?: RouteBalancer): RouteBalancer {
  const route = routeConfig({ strategy, upstreams: [] });
  return createBalancer({ ...route, upstreams: list.map((upstream) => upstream.config) }, list, {}, previous);
}

/** `count` picks as letters. */
function picks(balancer: RouteBalancer, all: Map<string, Upstream>, count: number): string {
  const names = new Map([...all].map(([name, upstream]) => [upstream, name]));
  return Array.from({ length: count }, () => names.get(balancer.pick(contextFor())!) ?? '?').join(' ');
}

describe('a balancer takes over its predecessor state for the members that stay', () => {
  test('smooth weighted round robin keeps the current weights of members that stay; a new one starts at 0', () => {
    const all = members({ a: 3, b: 1, c: 1, d: 1 });
    const [a, b, c, d] = [...all.values()] as [Upstream, Upstream, Upstream, Upstream];
    const before = balancerOver('smooth-weighted-round-robin', [a, b, c]);
    assert.equal(picks(before, all, 2), 'a b');
    // cw after two picks: a 1, b −3, c 2 (the doc comment's table, row 2). c leaves, d comes:
    //   | pick | cw before (a, b, d) | cw + ew  | picked | cw after |
    //   | 3    | 1, −3, 0            | 4, −2, 1 | a      | −1, −2, 1 |
    //   | 4    | −1, −2, 1           | 2, −1, 2 | a      | −3, −1, 2 |   (tie → earlier)
    //   | 5    | −3, −1, 2           | 0, 0, 3  | d      | 0, 0, −2  |
    //   | 6    | 0, 0, −2            | 3, 1, −1 | a      | −2, 1, −1 |
    //   | 7    | −2, 1, −1           | 1, 2, 0  | b      | 1, −3, 0  |   → back to row 3: a a d a b per cycle
    const after = balancerOver('smooth-weighted-round-robin', [a, b, d], before);
    assert.deepEqual(after.describeState().map((state) => state['cw']), [1, -3, 0], 'got other current weights after the change');
    const got = picks(after, all, 10);
    assert.equal(got, 'a a d a b a a d a b', `got ${got}, want a a d a b twice (shares 3:1:1 per cycle)`);
    const fresh = picks(balancerOver('smooth-weighted-round-robin', [a, b, d]), all, 5);
    assert.equal(fresh, 'a b a d a', `without previous the sequence starts afresh: got ${fresh}`);
  });

  test('round robin continues right after the last-picked member when it stays', () => {
    const all = members({ a: 1, b: 1, c: 1, d: 1 });
    const [a, b, c, d] = [...all.values()] as [Upstream, Upstream, Upstream, Upstream];
    const before = balancerOver('round-robin', [a, b, c]);
    assert.equal(picks(before, all, 2), 'a b');
    const got = picks(balancerOver('round-robin', [a, b, d], before), all, 6);
    assert.equal(got, 'd a b d a b', `c left, d came after b: got ${got}, want d a b d a b`);
  });

  test('round robin whose last-picked member left continues with the one that was due next', () => {
    const all = members({ a: 1, b: 1, c: 1, d: 1 });
    const [a, b, c, d] = [...all.values()] as [Upstream, Upstream, Upstream, Upstream];
    const before = balancerOver('round-robin', [a, b, c]);
    assert.equal(picks(before, all, 2), 'a b');
    const got = picks(balancerOver('round-robin', [a, c, d], before), all, 6);
    assert.equal(got, 'c d a c d a', `b left: got ${got}, want c d a c d a`);
  });

  test('weighted round robin goes on with the running interval when its member stays', () => {
    const all = members({ a: 3, b: 1, c: 2 });
    const [a, b, c] = [...all.values()] as [Upstream, Upstream, Upstream];
    const before = balancerOver('weighted-round-robin', [a, b]);
    assert.equal(picks(before, all, 2), 'a a');
    const got = picks(balancerOver('weighted-round-robin', [a, b, c], before), all, 7);
    assert.equal(got, 'a b c c a a a', `got ${got}, want a's interval finished (one more a), then b c c a a a`);
  });

  test('weighted round robin whose running member left starts the next staying one', () => {
    const all = members({ a: 3, b: 1, c: 2 });
    const [a, b, c] = [...all.values()] as [Upstream, Upstream, Upstream];
    const before = balancerOver('weighted-round-robin', [a, b, c]);
    assert.equal(picks(before, all, 4), 'a a a b');
    const got = picks(balancerOver('weighted-round-robin', [a, c], before), all, 6);
    assert.equal(got, 'c c a a a c', `b left mid-cycle: got ${got}, want c c a a a c`);
  });

  test('a previous balancer of another strategy is ignored (a fresh start)', () => {
    const all = members({ a: 1, b: 1 });
    const list = [...all.values()];
    const before = balancerOver('round-robin', list);
    picks(before, all, 1);
    assert.equal(picks(balancerOver('smooth-weighted-round-robin', list, before), all, 2), 'a b');
  });
});

describe('consistent hash over a changing set: only the keys of members that came or went move', () => {
  const KEYS = Array.from({ length: 5_000 }, (_, i) => `/item/${i}`);
  const all = members({ a: 1, b: 1, c: 1, d: 1, e: 1, f: 1 });
  const [a, b, c, d, e, f] = [...all.values()] as Upstream[];
  const owners = (list: Upstream[]): (string | undefined)[] => {
    const balancer = balancerOver('consistent-hash', list);
    return KEYS.map((hashKey) => balancer.pick(contextFor({ hashKey }))?.origin);
  };

  test('removing one member moves exactly the keys that were on it (the list also reordered)', () => {
    const before = owners([a!, b!, c!, d!, e!]);
    const after = owners([e!, d!, b!, a!]); // c left; a DNS answer's order is not kept
    let moved = 0;
    KEYS.forEach((key, i) => {
      if (before[i] === after[i]) return;
      moved++;
      assert.equal(before[i], c!.origin, `${key} moved from ${before[i]}, which stayed`);
    });
    const onC = before.filter((origin) => origin === c!.origin).length;
    assert.equal(moved, onC, `got ${moved} keys moved, want exactly the ${onC} that were on c`);
  });

  test('adding one member moves keys only to it', () => {
    const before = owners([a!, b!, c!, d!, e!]);
    const after = owners([f!, c!, a!, e!, b!, d!]);
    let moved = 0;
    KEYS.forEach((key, i) => {
      if (before[i] === after[i]) return;
      moved++;
      assert.equal(after[i], f!.origin, `${key} moved to ${after[i]}, want only moves to f`);
    });
    assert.ok(moved > 0 && moved < KEYS.length / 3, `got ${moved} keys moved to f, want about 1/6 of ${KEYS.length}`);
  });
});
