/**
 * The rise/fall state machine of active health checks (SPEC 4; HAProxy's `rise`/`fall`, nginx Plus's
 * `passes`/`fails`): an upstream goes DOWN after `fall` consecutive failed probes and back UP after
 * `rise` consecutive successful ones. One probe never flips a state, so a single lost packet or one
 * slow answer does not take a backend out, and a backend that answers once between crashes does not
 * come back.
 *
 * It is a pure function (state + probe result → new state + whether it changed), so it is tested
 * as a data table and the scheduler around it (`health-checker.ts`) only has to deal with time.
 *
 * Upstreams start UP, as in nginx Plus (without `mandatory`) and HAProxy's default `init-state`: the
 * proxy serves at once after start-up instead of waiting `rise` intervals, and the first probe, sent
 * at start-up, takes a dead upstream out after `fall` probes (passive health covers it meanwhile).
 */
import type { HealthState } from '../upstream.js';

/** Where one upstream stands. */
export interface RiseFallState {
  readonly health: HealthState;
  /** Consecutive successful probes up to now (0 after a failure). */
  readonly successes: number;
  /** Consecutive failed probes up to now (0 after a success). */
  readonly failures: number;
}

/** The thresholds, `health_rise` and `health_fall` (both at least 1; defaults 2 and 3). */
export interface RiseFall {
  readonly rise: number;
  readonly fall: number;
}

/** The state of an upstream nothing is known about yet: UP, no streaks. */
export function initialHealth(health: HealthState = 'up'): RiseFallState {
  return { health, successes: 0, failures: 0 };
}

/**
 * Advances the state machine by one probe result.
 *
 * - A success adds to the success streak and ends the failure streak; a failure does the opposite.
 * - UP with `failures` reaching `fall` → DOWN. DOWN with `successes` reaching `rise` → UP.
 * - The streaks keep counting past the threshold (a status page can show "DOWN, 7 failed checks").
 *
 * Worked example, fall = 3, rise = 2, from UP: fail, fail, ok (resets), fail, fail, fail → DOWN on
 * that 3rd consecutive failure (`changed` true once); fail → still DOWN (`changed` false); ok, ok →
 * UP on the 2nd consecutive success.
 *
 * @returns the new state (a new object; the input is not changed) and `changed`, true exactly when
 *   `health` differs from the input's.
 */
export function nextHealth(state: RiseFallState, probeOk: boolean, { rise, fall }: RiseFall): {
  state: RiseFallState;
  changed: boolean;
} {
  const successes = probeOk ? state.successes + 1 : 0;
  const failures = probeOk ? 0 : state.failures + 1;
  let health = state.health;
  if (health === 'up' && failures >= fall) health = 'down';
  else if (health === 'down' && successes >= rise) health = 'up';
  return { state: { health, successes, failures }, changed: health !== state.health };
}
