/**
 * A small bounded memory of successful password checks, so a busy route protected by `auth_basic`
 * does not spend ~50 ms of scrypt (password-hash.ts) on every request of a browser that sends the
 * same credentials each time. Caddy's `basic_auth` offers the same for its bcrypt hashes
 * (`hash_cache`), and Tyk added one for the same reason.
 *
 * Only successes are remembered, so a guesser still pays full scrypt for every wrong guess. Entries
 * are keyed by HMAC-SHA-256(per-process random key, [user, password, hash]): the password itself is
 * not kept, and the hash text is part of the key, so changing a user's hash in env.ini makes the old
 * entries unreachable. With a random HMAC key, a memory dump does not hold a fast-to-brute-force
 * SHA-256 of each password either.
 *
 * Eviction is least-recently-used, using the insertion order of a JavaScript Map: a hit moves its
 * entry to the end, and when full the first (oldest) entry goes.
 */
import { createHmac, randomBytes } from 'node:crypto';

/** Default capacity: 1 000 entries (about 100 KiB). */
export const DEFAULT_VERIFICATION_CACHE_SIZE = 1000;

export class VerificationCache {
  readonly maxEntries: number;
  readonly #hmacKey = randomBytes(32);
  readonly #entries = new Map<string, true>();

  /** @param maxEntries - capacity, ≥ 0 (0 disables the cache). Default 1 000. */
  constructor(maxEntries: number = DEFAULT_VERIFICATION_CACHE_SIZE) {
    this.maxEntries = Math.max(0, Math.floor(maxEntries));
  }

  /** Number of entries held, ≤ maxEntries. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * The entry key of (user, password, hash text): HMAC-SHA-256 under this cache's random key, base64.
   * Also usable to recognise identical checks that are running at the same time.
   */
  keyOf(user: string, password: string, hashText: string): string {
    // JSON of an array is unambiguous whatever the strings contain (":" and NUL included).
    return createHmac('sha256', this.#hmacKey).update(JSON.stringify([user, password, hashText])).digest('base64');
  }

  /** True when the check with this `keyOf` succeeded and is still remembered; refreshes its recency. */
  has(key: string): boolean {
    if (!this.#entries.has(key)) return false;
    this.#entries.delete(key);
    this.#entries.set(key, true);
    return true;
  }

  /** Remembers a successful verification, evicting the least recently used entry when full. */
  remember(key: string): void {
    if (this.maxEntries === 0) return;
    this.#entries.delete(key);
    this.#entries.set(key, true);
    while (this.#entries.size > this.maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
    }
  }

  /** Forgets everything (e.g. on config reload). */
  clear(): void {
    this.#entries.clear();
  }
}
