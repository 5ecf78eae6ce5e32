/**
 * The rise/fall state machine as a data table (SPEC 4): each row is a probe sequence (`F` failed,
 * `S` successful), the health after each probe (`u`/`d`) and where `changed` is true (`^`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { initialHealth, nextHealth } from '../../../src/upstream/health/rise-fall.js';
import type { HealthState } from '../../../src/upstream/upstream.js';

interface Row {
  readonly name: string;
  readonly fall: number;
  readonly rise: number;
  readonly start: HealthState;
  readonly probes: string;
  readonly health: string;
  readonly changed: string;
}

const table: readonly Row[] = [
  { name: 'fall=3: DOWN on the 3rd consecutive failure, not before', fall: 3, rise: 2, start: 'up', probes: 'FFF', health: 'uud', changed: '..^' },
  { name: 'fall=3: a success in between resets the count', fall: 3, rise: 2, start: 'up', probes: 'FFSFFF', health: 'uuuuud', changed: '.....^' },
  { name: 'more failures after DOWN: no further change', fall: 3, rise: 2, start: 'up', probes: 'FFFFF', health: 'uuddd', changed: '..^..' },
  { name: 'rise=2: UP on the 2nd consecutive success', fall: 3, rise: 2, start: 'down', probes: 'SS', health: 'du', changed: '.^' },
  { name: 'rise=2: a failure in between resets the count', fall: 3, rise: 2, start: 'down', probes: 'SFSS', health: 'dddu', changed: '...^' },
  { name: 'successes while UP change nothing', fall: 3, rise: 2, start: 'up', probes: 'SSSS', health: 'uuuu', changed: '....' },
  { name: 'down and back: FFF then SS', fall: 3, rise: 2, start: 'up', probes: 'FFFSS', health: 'uuddu', changed: '..^.^' },
  { name: 'fall=1, rise=1 flip on every change of result', fall: 1, rise: 1, start: 'up', probes: 'FFSSF', health: 'dduud', changed: '^.^.^' },
  { name: 'fall=2 (the issue): DOWN on the 2nd failure', fall: 2, rise: 2, start: 'up', probes: 'SFSFF', health: 'uuuud', changed: '....^' },
];

describe('nextHealth (rise/fall)', () => {
  for (const row of table) {
    it(row.name, () => {
      let state = initialHealth(row.start);
      let health = '';
      let changed = '';
      for (const probe of row.probes) {
        const next = nextHealth(state, probe === 'S', { rise: row.rise, fall: row.fall });
        state = next.state;
        health += state.health === 'up' ? 'u' : 'd';
        changed += next.changed ? '^' : '.';
      }
      assert.equal(health, row.health, `probes ${row.probes}: got health ${health}, want ${row.health}`);
      assert.equal(changed, row.changed, `probes ${row.probes}: got changed ${changed}, want ${row.changed}`);
    });
  }

  it('starts UP with no streaks (nginx Plus, HAProxy)', () => {
    assert.deepEqual(initialHealth(), { health: 'up', successes: 0, failures: 0 });
  });

  it('does not change its input and keeps counting the streak', () => {
    const input = { health: 'down' as const, successes: 0, failures: 4 };
    const { state } = nextHealth(input, false, { rise: 2, fall: 3 });
    assert.deepEqual(input, { health: 'down', successes: 0, failures: 4 }, 'got the input mutated');
    assert.deepEqual(state, { health: 'down', successes: 0, failures: 5 }, `got ${JSON.stringify(state)}`);
  });
});
