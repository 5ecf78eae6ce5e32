/**
 * How a strategy's position carries over when its upstream set changes under traffic (DNS
 * discovery, the admin registry): the members that stay are the same `Upstream` objects
 * (src/upstream/route-table.ts keeps them by route and origin), so a strategy finds where each of
 * them now sits and continues from there instead of starting again at the first upstream. nginx
 * keeps a surviving peer's state in its shared `zone` the same way when `resolve` changes a group;
 * Envoy's load balancers are rebuilt on a host set update but keep per-host state on the host.
 */
import type { Upstream } from '../upstream.js';

/** Each upstream's index in `upstreams`. */
export function placesOf(upstreams: readonly Upstream[]): Map<Upstream, number> {
  const places = new Map<Upstream, number>();
  upstreams.forEach((upstream, index) => places.set(upstream, index));
  return places;
}

/**
 * Walking `previous` from index `from` (wrapping), the index in the new list (`places`) of the
 * first upstream that stayed, or undefined when none did: where a turn that was due to an upstream
 * that left goes instead — to the next one in the old order that is still there.
 */
export function firstStayingPlace(previous: readonly Upstream[], from: number, places: ReadonlyMap<Upstream, number>): number | undefined {
  for (let step = 0; step < previous.length; step++) {
    const place = places.get(previous[(from + step) % previous.length]!);
    if (place !== undefined) return place;
  }
  return undefined;
}
