/**
 * `conn_limit = N` (SPEC 8): how many requests each client IP has in flight on one route, an open
 * WebSocket tunnel counting as one until it closes — nginx's `limit_conn` (which counts
 * connections; HAProxy's `conn_cur` in a stick table). A client with N in flight gets 429 with
 * `Retry-After: 1`.
 *
 * The count is a fact about requests running now, not a setting: an entry exists only while its
 * client has a request in flight (it is dropped when it goes back to 0), so the map never holds
 * more entries than there are requests in flight, and needs no cap or sweep of its own. Every
 * operation is O(1).
 */

export class ConnLimiter {
  /** Client IP → requests in flight (always ≥ 1: an entry at 0 is dropped). */
  readonly #inFlight = new Map<string, number>();

  /** Clients with at least one request in flight. */
  get size(): number {
    return this.#inFlight.size;
  }

  /** Requests `clientIp` has in flight. */
  inFlightOf(clientIp: string): number {
    return this.#inFlight.get(clientIp) ?? 0;
  }

  /**
   * Takes one slot of `clientIp` when it has fewer than `maxInFlight` in flight.
   * @returns the function that gives the slot back (calling it again does nothing), or undefined
   *   when the client is at its limit
   */
  acquire(clientIp: string, maxInFlight: number): (() => void) | undefined {
    const count = this.#inFlight.get(clientIp) ?? 0;
    if (count >= maxInFlight) return undefined;
    this.#inFlight.set(clientIp, count + 1);
    let isReleased = false;
    return () => {
      if (isReleased) return;
      isReleased = true;
      const left = (this.#inFlight.get(clientIp) ?? 1) - 1;
      if (left <= 0) this.#inFlight.delete(clientIp);
      else this.#inFlight.set(clientIp, left);
    };
  }
}
