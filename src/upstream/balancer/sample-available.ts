/**
 * Drawing uniformly among the *available* upstreams without building a list on every pick: the
 * rejection method (von Neumann, 1951). Draw an index uniformly over all upstreams; if that one is
 * not available, draw again. Each accepted draw is uniform over the available ones, because every
 * available upstream had the same chance on every try. After a bounded number of misses (most of the
 * group is unavailable) fall back to one linear scan, which is exact too, so the mixture is exact.
 *
 * Steady state (everything up): one draw, O(1). With a fraction f available the chance of reaching
 * the O(n) fallback is (1 − f)^REJECTION_TRIES, e.g. 0.4% when half the group is down.
 */
import type { AvailabilityPredicate } from './balancer.js';
import type { Upstream } from '../upstream.js';

/** Draws before the linear-scan fallback. */
export const REJECTION_TRIES = 8;

/**
 * A uniformly random available upstream of `upstreams` other than `excluded`, or undefined if none.
 * `random` is uniform in [0, 1).
 */
export function sampleAvailable(
  upstreams: readonly Upstream[],
  isAvailable: AvailabilityPredicate,
  random: () => number,
  excluded?: Upstream,
): Upstream | undefined {
  const count = upstreams.length;
  if (count === 0) return undefined;
  for (let attempt = 0; attempt < REJECTION_TRIES; attempt++) {
    const upstream = upstreams[Math.floor(random() * count)]!;
    if (upstream !== excluded && isAvailable(upstream)) return upstream;
  }
  const available = upstreams.filter((upstream) => upstream !== excluded && isAvailable(upstream));
  if (available.length === 0) return undefined;
  return available[Math.floor(random() * available.length)];
}
