/**
 * `round-robin` (SPEC 3, the default): upstreams take turns in list order, the first pick being the
 * first upstream. Weights are ignored (see weighted-round-robin and smooth-weighted-round-robin).
 *
 * Steps. State: a cursor, the index of the next upstream to try (starts at 0). Per pick:
 *   1. From the cursor, walk the list (wrapping around) to the first available upstream.
 *   2. Pick it; move the cursor just past it.
 *
 * Worked example: a b c, all up.
 *   | pick | cursor before | picked | cursor after |
 *   | 1    | 0 (a)         | a      | 1            |
 *   | 2    | 1 (b)         | b      | 2            |
 *   | 3    | 2 (c)         | c      | 0            |
 *   | 4    | 0 (a)         | a      | 1            |   → a b c a b c
 *   With b DOWN the walk skips it: a c a c; when b is back it rejoins at its place in the cycle.
 *
 * A changing set (DNS discovery, the registry): the new balancer continues right after the
 * upstream `previous` picked last, if it stayed; if it left, with the upstream that was due next in
 * the old order, or the first one after it that stayed. A new upstream placed right after the last
 * pick therefore gets the next turn; none of the staying ones loses or repeats a turn.
 *
 * Properties: perfectly even over every full cycle; O(1) per pick in the steady state, O(n) when it
 * must walk over unavailable upstreams; one integer of state. The cursor moves past the upstream it
 * returned, not merely by one, so an unavailable upstream's turn goes to the next one only once.
 *
 * References: the tutorials' first balancer; nginx without weights; Caddy's `round_robin` policy.
 */
import type { Balancer, PickContext, StrategyOptions } from './balancer.js';
import { availableFor } from './balancer.js';
import type { Upstream } from '../upstream.js';
import { firstStayingPlace, placesOf } from './carried-position.js';

export class RoundRobinBalancer implements Balancer {
  readonly name = 'round-robin';
  readonly #upstreams: readonly Upstream[];
  readonly #now: () => number;
  /** Index of the next upstream to try. */
  #cursor = 0;
  /** The upstream picked last, undefined before the first pick (what a changed set continues after). */
  #lastPicked: Upstream | undefined = undefined;

  /** @param previous the strategy this one replaces: its position carries over (see the file comment) */
  constructor(upstreams: readonly Upstream[], options: StrategyOptions, previous?: Balancer) {
    this.#upstreams = upstreams;
    this.#now = options.now;
    if (previous instanceof RoundRobinBalancer) this.#adopt(previous);
  }

  #adopt(previous: RoundRobinBalancer): void {
    const places = placesOf(this.#upstreams);
    const lastPlace = previous.#lastPicked === undefined ? undefined : places.get(previous.#lastPicked);
    if (lastPlace !== undefined) {
      this.#lastPicked = previous.#lastPicked;
      this.#cursor = (lastPlace + 1) % this.#upstreams.length;
    } else {
      this.#cursor = firstStayingPlace(previous.#upstreams, previous.#cursor, places) ?? 0;
    }
  }

  pick(context: PickContext): Upstream | undefined {
    const isAvailable = availableFor(context, this.#now());
    const count = this.#upstreams.length;
    for (let step = 0; step < count; step++) {
      const index = (this.#cursor + step) % count;
      const upstream = this.#upstreams[index]!;
      if (isAvailable(upstream)) {
        this.#cursor = (index + 1) % count;
        this.#lastPicked = upstream;
        return upstream;
      }
    }
    return undefined;
  }

  /** `{ next: 'yes' }` on the upstream the cursor points at, `{ next: 'no' }` on the others. */
  describeState(): readonly Readonly<Record<string, number | string>>[] {
    return this.#upstreams.map((_, i) => ({ next: i === this.#cursor ? 'yes' : 'no' }));
  }
}
