/**
 * `--check` warns when a route's strategy reads no weight but a `pass` line sets one
 * (src/upstream/balancer/strategies.ts `weightWarnings`): nginx's round robin is weighted, so a
 * `weight=5` there would otherwise be 1:1 without a word. A table over every strategy, then the
 * whole check on a file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../../src/config/load-config.js';
import { STRATEGIES, WEIGHTED_STRATEGIES, weightWarnings } from '../../../src/upstream/balancer/strategies.js';
import { runCheck } from '../../../src/cli/check-config.js';
import type { StrategyName } from '../../../src/config/config.js';
import { writeConfig } from '../../helpers/cli-process.js';

const route = (strategy: string, weight: string): string =>
  `[proxy.a]\npath = /\nstrategy = ${strategy}\npass = http://127.0.0.1:9001\npass = http://127.0.0.1:9002${weight}\n`;

test('every strategy that reads no weight gets the warning at the first weighted pass line; the weighted ones, and weight=1, get none', () => {
  const unweighted: StrategyName[] = ['random', 'round-robin', 'ip-hash', 'power-of-two-choices'];
  assert.deepEqual(Object.keys(STRATEGIES).filter((name) => !WEIGHTED_STRATEGIES.has(name as StrategyName)).sort(), [...unweighted].sort(), 'the strategies said to read no weight');
  for (const strategy of Object.keys(STRATEGIES)) {
    const warnings = weightWarnings(parseConfig(route(strategy, ' weight=5'), 'env.ini').routes);
    if (WEIGHTED_STRATEGIES.has(strategy as StrategyName)) {
      assert.deepEqual(warnings, [], `${strategy} reads the weight: got ${JSON.stringify(warnings)}`);
    } else {
      assert.equal(warnings.length, 1, `${strategy}: got ${JSON.stringify(warnings)}, want one warning`);
      assert.match(warnings[0]!, new RegExp(`^env\\.ini:5:8: \\[proxy\\.a\\] weight=5 has no effect with strategy ${strategy}, which gives every available upstream the same share \\(weights count with `));
    }
    assert.deepEqual(weightWarnings(parseConfig(route(strategy, ' weight=1'), 'env.ini').routes), [], `${strategy} with weight=1: no warning`);
  }
});

test('--check prints it and still exits 0', () => {
  const file = writeConfig(route('round-robin', ' weight=3'));
  const result = runCheck(file, Date.now());
  assert.equal(result.exitCode, 0);
  assert.deepEqual(result.messages.filter((line) => line.includes('weight=')), [
    `warning: ${file}:5:8: [proxy.a] weight=3 has no effect with strategy round-robin, which gives every available upstream the same share (weights count with weighted-random, weighted-round-robin, smooth-weighted-round-robin, least-connections, consistent-hash)`,
  ]);
});
