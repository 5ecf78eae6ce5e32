/**
 * `ip-hash` (SPEC 3): the same client IP always lands on the same upstream (session affinity without
 * cookies), as long as the group does not change.
 *
 * Steps, per pick:
 *   1. h = hash(client IP) — crc32 by default, fnv1a with `hash = fnv1a` — over the IP's text without
 *      the port (so a client's many connections from different source ports agree), `::ffff:` removed.
 *   2. i = h mod n. If upstreams[i] is available, pick it.
 *   3. Otherwise rehash to the next one: i + 1, i + 2, … (mod n), the first available wins.
 *
 * Worked example: crc32("127.0.0.1") = 3619153832 (0xD7B7E7A8).
 *   | n | 3619153832 mod n | upstream              |
 *   | 2 | 0                | a (of a b)            |
 *   | 3 | 2                | c (of a b c)          |
 *   With c DOWN and n = 3: index 2 is skipped, 2 + 1 = 3 mod 3 = 0 → a.
 *
 * Properties: stateless and deterministic, so every worker process and every proxy instance agrees;
 * O(1) per pick while the hashed upstream is available. Weights are ignored (as the tutorial's
 * version). When the group changes size, h mod n changes for almost every client: going from n to
 * n + 1 upstreams keeps only about 1/(n + 1) of clients in place. That remapping is the naive way's
 * flaw that consistent hashing (consistent-hash.ts) fixes; use it when the group changes often.
 * While one upstream is unavailable only its own clients move (to the next one), and they come back
 * when it does.
 *
 * References: the tutorial's `crc32.ChecksumIEEE(ip) % len(servers)`; nginx's ip_hash
 * (ngx_http_upstream_ip_hash_module.c), which hashes the first three octets of an IPv4 address and
 * rehashes on failure with `hash * 113 + octet` — we hash the whole address and probe linearly, as
 * the SPEC's "rehash to the next" says.
 */
import type { Balancer, PickContext, StrategyOptions } from './balancer.js';
import { availableFor } from './balancer.js';
import type { HashFunction } from './hash.js';
import type { Upstream } from '../upstream.js';

export class IpHashBalancer implements Balancer {
  readonly name = 'ip-hash';
  readonly #upstreams: readonly Upstream[];
  readonly #now: () => number;
  readonly #hash: HashFunction;
  /** The hashed index of the last pick, for describeState. */
  #lastHashedIndex = -1;

  constructor(upstreams: readonly Upstream[], options: StrategyOptions) {
    this.#upstreams = upstreams;
    this.#now = options.now;
    this.#hash = options.hash;
  }

  pick(context: PickContext): Upstream | undefined {
    const count = this.#upstreams.length;
    if (count === 0) return undefined;
    const isAvailable = availableFor(context, this.#now());
    const hashedIndex = this.#hash(context.clientIp) % count;
    this.#lastHashedIndex = hashedIndex;
    for (let step = 0; step < count; step++) {
      const upstream = this.#upstreams[(hashedIndex + step) % count]!;
      if (isAvailable(upstream)) return upstream;
    }
    return undefined;
  }

  /** `{ hashed: 'yes' }` on the upstream the last client IP hashed to (before any rehash), else `'no'`. */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    return this.#upstreams.map((_, i) => ({ hashed: i === this.#lastHashedIndex ? 'yes' : 'no' }));
  }
}
