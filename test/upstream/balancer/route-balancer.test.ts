/** The route wrapper: backups, effective-weight regain on every pick (SPEC 4), state in config order. */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createBalancer, STRATEGIES } from '../../../src/upstream/balancer/strategies.js';
import { STRATEGY_NAMES } from '../../../src/config/config.js';
import { contextFor, pickSequence, routeConfig, upstreamsOf, weights } from './helpers.js';

describe('createBalancer', () => {
  test('the registry has exactly the SPEC 3 strategy names, each building a balancer of that name', () => {
    assert.deepEqual(Object.keys(STRATEGIES).sort(), [...STRATEGY_NAMES].sort());
    for (const name of STRATEGY_NAMES) {
      const route = routeConfig({ strategy: name, upstreams: weights(1) });
      assert.equal(createBalancer(route, upstreamsOf(route)).name, name);
    }
  });

  test('every candidate upstream regains 1 effective weight per pick, up to its weight, even unpicked and backup ones; a DOWN one does not (nginx skips it)', () => {
    const route = routeConfig({ strategy: 'round-robin', upstreams: [{ weight: 3 }, { weight: 3 }, { weight: 2, isBackup: true }] });
    const upstreams = upstreamsOf(route);
    const balancer = createBalancer(route, upstreams);
    for (const upstream of upstreams) upstream.effectiveWeight = 0;
    upstreams[1]!.healthState = 'down';
    const history = [0, 1, 2, 3].map(() => {
      balancer.pick(contextFor());
      return upstreams.map((upstream) => upstream.effectiveWeight).join(',');
    });
    assert.deepEqual(history, ['1,0,1', '2,0,2', '3,0,2', '3,0,2']);
  });

  test('an upstream already tried by the request regains nothing on the retry pick', () => {
    const route = routeConfig({ strategy: 'smooth-weighted-round-robin', upstreams: weights(5, 1) });
    const upstreams = upstreamsOf(route);
    const balancer = createBalancer(route, upstreams);
    upstreams[0]!.effectiveWeight = 4; // a just failed (fail_factor 5)
    const retry = { ...contextFor(), tried: new Set([upstreams[0]!]) };
    assert.equal(balancer.pick(retry), upstreams[1]);
    assert.equal(upstreams[0]!.effectiveWeight, 4, `got the failed upstream's weight back on its own retry, want it kept at 4`);
    balancer.pick(contextFor());
    assert.equal(upstreams[0]!.effectiveWeight, 5, 'the next ordinary pick gives 1 back');
  });

  test('the pick uses the effective weight as it was; the regain comes after (nginx order)', () => {
    const route = routeConfig({ strategy: 'smooth-weighted-round-robin', upstreams: weights(1, 1) });
    const upstreams = upstreamsOf(route);
    const balancer = createBalancer(route, upstreams);
    upstreams[0]!.effectiveWeight = 0;
    assert.equal(balancer.pick(contextFor()), upstreams[1], 'a at ew 0 was picked; want b');
  });

  test('backups interleaved in the config: state is reported in config order', () => {
    const route = routeConfig({ strategy: 'round-robin', upstreams: [{ isBackup: true }, {}, { isBackup: true }, {}] });
    const upstreams = upstreamsOf(route);
    const balancer = createBalancer(route, upstreams);
    assert.equal(pickSequence(balancer, upstreams, 4), 'b d b d');
    upstreams[1]!.healthState = 'down';
    upstreams[3]!.healthState = 'down';
    assert.equal(pickSequence(balancer, upstreams, 3), 'a c a');
    // Primaries' cursor is at b (index 0 of [b, d]); backups' cursor at c (index 1 of [a, c]).
    assert.deepEqual(balancer.describeState(), [{ next: 'no' }, { next: 'yes' }, { next: 'yes' }, { next: 'no' }]);
    assert.deepEqual(balancer.upstreams, upstreams);
  });

  test('defaults: Math.random and Date.now are used when nothing is injected', () => {
    const route = routeConfig({ strategy: 'random', upstreams: weights(1, 1) });
    const upstreams = upstreamsOf(route);
    upstreams[0]!.ejectedUntilMs = Date.now() + 60_000;
    const balancer = createBalancer(route, upstreams);
    for (let i = 0; i < 20; i++) assert.equal(balancer.pick(contextFor()), upstreams[1]);
  });
});
