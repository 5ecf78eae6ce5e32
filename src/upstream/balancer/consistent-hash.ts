/**
 * `consistent-hash` (SPEC 3): a hash ring with virtual nodes. The same key (client IP, URI, header or
 * cookie, from `hash_key`) lands on the same upstream, and when an upstream leaves or joins the
 * group only the keys on its arcs of the ring move.
 *
 * Steps. Once, when built: each upstream gets `virtual_nodes × weight` points on a ring of 2^32
 * positions, point j of upstream u at position(`${u.origin}#${j}`); the points are sorted (points
 * of two upstreams at one position by origin). A point depends only on its upstream's origin and
 * weight, never on its index in the list, so a changed set (DNS discovery, the registry) builds a
 * ring in which every point of an upstream that stayed is where it was. Here
 * position(text) = mix32(hash(text)): the route's `hash` (crc32 or fnv1a) spread by MurmurHash3's
 * finalizer, because raw CRC-32 of similar texts clusters (see mix32 in hash.ts). Per pick:
 *   1. h = position(key).
 *   2. Binary-search the first point at or after h, wrapping past 2^32 − 1 to the first point.
 *   3. If that point's upstream is available, pick it. Otherwise go on to the next point clockwise,
 *      skipping upstreams already seen, until an available one (or every upstream was seen).
 *
 * Worked example (checked by test/upstream/balancer/consistent-hash.test.ts): a, b, c = http://127.0.0.1:9001,
 * :9002, :9003, `virtual_nodes = 2`, crc32; position = mix32(crc32(text)). The ring, sorted:
 *   | position      | point                      |
 *   |   322 854 714 | b  http://127.0.0.1:9002#1 |
 *   | 2 369 699 709 | a  http://127.0.0.1:9001#1 |
 *   | 2 854 970 875 | a  http://127.0.0.1:9001#0 |
 *   | 3 740 231 198 | b  http://127.0.0.1:9002#0 |
 *   | 3 868 306 068 | c  http://127.0.0.1:9003#0 |
 *   | 4 172 410 155 | c  http://127.0.0.1:9003#1 |   (then around to 322 854 714)
 *   | key     | position      | first point at or after | upstream | with b DOWN        |
 *   | /       |   643 127 036 | a#1                      | a        | a                  |
 *   | /b      | 2 886 408 228 | b#0                      | b        | c (next point c#0) |
 *   | bob     | 3 720 824 560 | b#0                      | b        | c                  |
 *   | /cart   | 3 923 168 388 | c#1                      | c        | c                  |
 *   Only b's keys moved. With two points each the arcs are lopsided (a 59%, b 31%, c 10% of the
 *   ring); with the default 160 they are within a few percent of a third each.
 *
 * Properties:
 * - Removing one of N upstreams moves only the keys whose point belonged to it (about 1/N of them),
 *   each to the next point clockwise; adding an upstream N + 1 takes about 1/(N + 1) of the keys and
 *   moves no key between the old upstreams. Karger et al. call this monotonicity.
 * - Virtual nodes even out the arcs: with one point per upstream the arcs (and so the loads) differ by
 *   factors of several; with 160 points the spread is a few percent. Weight multiplies the points.
 * - O(log P) per pick for P points; O(P) memory: two 32-bit numbers per point. P is capped at
 *   MAX_RING_POINTS (about 8 MiB), scaling every upstream's points down in proportion, so weights up
 *   to 1 000 000 do not blow up memory; every upstream keeps at least one point.
 * - The ring uses the *configured* weights: rebuilding it whenever an effective weight dipped would
 *   move keys around on every failure, which is what consistent hashing is there to avoid.
 *
 * Why not the naive way: `hash(key) mod n` (ip-hash.ts) remaps almost every key when n changes —
 * from 5 to 6 upstreams only about 1/6 of keys stay where they were, so caches behind the proxy go
 * cold all at once.
 *
 * References: D. Karger, E. Lehman, T. Leighton, R. Panigrahy, M. Levine, D. Lewin, "Consistent
 * Hashing and Random Trees", STOC 1997; libketama (160 points per server, the default of
 * `virtual_nodes`); nginx's `hash … consistent` (ngx_http_upstream_hash_module.c, 160 points per unit
 * of weight, crc32).
 */
import type { Balancer, PickContext, StrategyOptions } from './balancer.js';
import { availableFor } from './balancer.js';
import { mix32 } from './hash.js';
import type { Upstream } from '../upstream.js';

/** Upper bound on ring points for one group (2^20; 8 bytes each). */
export const MAX_RING_POINTS = 1 << 20;

/** Owner indexes are packed below the 32-bit hash in one float64 for sorting: 32 + 21 bits ≤ 53. */
const OWNER_BITS = 2 ** 21;

export class ConsistentHashBalancer implements Balancer {
  readonly name = 'consistent-hash';
  readonly #upstreams: readonly Upstream[];
  readonly #now: () => number;
  readonly #hash: (text: string) => number;
  /** Ring positions, ascending. */
  readonly #positions: Uint32Array;
  /** #owners[k] = index of the upstream point k belongs to. */
  readonly #owners: Uint32Array;
  /** Points per upstream, for describeState. */
  readonly #pointCounts: Uint32Array;
  /** Share of the ring (0..1) each upstream owns: the arcs ending at its points. */
  readonly #arcShares: Float64Array;
  /** For the clockwise walk: #seenStamp[i] === #walk means upstream i was seen in this walk. */
  readonly #seenStamp: Uint32Array;
  #walk = 0;

  constructor(upstreams: readonly Upstream[], options: StrategyOptions) {
    if (upstreams.length >= OWNER_BITS) throw new RangeError(`consistent-hash: at most ${OWNER_BITS - 1} upstreams`);
    this.#upstreams = upstreams;
    this.#now = options.now;
    this.#hash = options.hash;
    this.#pointCounts = ringPointCounts(upstreams, options.virtualNodes);
    const total = this.#pointCounts.reduce((sum, count) => sum + count, 0);
    const packed = new Float64Array(total);
    let k = 0;
    upstreams.forEach((upstream, i) => {
      for (let j = 0; j < this.#pointCounts[i]!; j++) {
        packed[k++] = this.#position(`${upstream.origin}#${j}`) * OWNER_BITS + i;
      }
    });
    packed.sort();
    this.#positions = new Uint32Array(total);
    this.#owners = new Uint32Array(total);
    for (let p = 0; p < total; p++) {
      const value = packed[p]!;
      const owner = value % OWNER_BITS;
      this.#owners[p] = owner;
      this.#positions[p] = (value - owner) / OWNER_BITS;
    }
    this.#orderCollisionsByOrigin();
    this.#arcShares = new Float64Array(upstreams.length);
    for (let p = 0; p < total; p++) {
      // The arc (previous point, this point] belongs to this point's owner; point 0's arc wraps.
      const previous = p === 0 ? this.#positions[total - 1]! - 2 ** 32 : this.#positions[p - 1]!;
      this.#arcShares[this.#owners[p]!]! += (this.#positions[p]! - previous) / 2 ** 32;
    }
    this.#seenStamp = new Uint32Array(upstreams.length);
  }

  pick(context: PickContext): Upstream | undefined {
    const total = this.#positions.length;
    if (total === 0) return undefined;
    const isAvailable = availableFor(context, this.#now());
    const start = this.#firstPointAtOrAfter(this.#position(context.hashKey));
    const first = this.#upstreams[this.#owners[start]!]!;
    if (isAvailable(first)) return first;
    // Clockwise walk, skipping upstreams already seen (their other points would fail the same way).
    this.#walk = (this.#walk + 1) >>> 0 || 1;
    const walk = this.#walk;
    this.#seenStamp[this.#owners[start]!] = walk;
    let seen = 1;
    for (let step = 1; step < total && seen < this.#upstreams.length; step++) {
      const owner = this.#owners[(start + step) % total]!;
      if (this.#seenStamp[owner] === walk) continue;
      this.#seenStamp[owner] = walk;
      seen++;
      const upstream = this.#upstreams[owner]!;
      if (isAvailable(upstream)) return upstream;
    }
    return undefined;
  }

  /**
   * Points of different upstreams at the very same position (a 32-bit collision) are ordered by
   * origin, not by list index, so which one owns the position does not depend on the order of the
   * list (a DNS answer's order changes from one lookup to the next). Runs are rare and short.
   */
  #orderCollisionsByOrigin(): void {
    const positions = this.#positions;
    for (let start = 0; start < positions.length; ) {
      let end = start + 1;
      while (end < positions.length && positions[end] === positions[start]) end++;
      if (end - start > 1) {
        const run = [...this.#owners.subarray(start, end)].sort((a, b) => compareText(this.#upstreams[a]!.origin, this.#upstreams[b]!.origin));
        this.#owners.set(run, start);
      }
      start = end;
    }
  }

  /** Ring position of a point name or key: the route's hash, spread by mix32. */
  #position(text: string): number {
    return mix32(this.#hash(text));
  }

  /** Index of the first ring point with position ≥ `position`, wrapping to 0: binary search. */
  #firstPointAtOrAfter(position: number): number {
    let low = 0;
    let high = this.#positions.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#positions[middle]! < position) low = middle + 1;
      else high = middle;
    }
    return low === this.#positions.length ? 0 : low;
  }

  /** `{ points, arc }`: ring points of each upstream and the share of the ring its arcs cover. */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    return this.#upstreams.map((_, i) => ({
      points: this.#pointCounts[i]!,
      arc: `${(100 * this.#arcShares[i]!).toFixed(2)}%`,
    }));
  }
}

/**
 * Points per upstream: `virtualNodes × weight`, scaled down in proportion when the group would exceed
 * MAX_RING_POINTS, at least 1 each.
 */
export function ringPointCounts(upstreams: readonly Upstream[], virtualNodes: number): Uint32Array {
  const wanted = upstreams.reduce((sum, upstream) => sum + virtualNodes * upstream.config.weight, 0);
  const scale = wanted > MAX_RING_POINTS ? MAX_RING_POINTS / wanted : 1;
  const counts = new Uint32Array(upstreams.length);
  upstreams.forEach((upstream, i) => {
    counts[i] = Math.max(1, Math.floor(virtualNodes * upstream.config.weight * scale));
  });
  return counts;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
