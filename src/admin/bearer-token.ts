/**
 * Who may use the admin listener: bearer tokens (RFC 6750 section 2.1, `Authorization: Bearer
 * TOKEN`) compared in constant time, and the loopback rule that leaves read-only pages open to the
 * box itself (the way nginx's `stub_status` is usually limited with `allow 127.0.0.1`).
 *
 * The comparison hashes both sides with SHA-256 first and compares the digests with
 * `crypto.timingSafeEqual`: the digests have equal length whatever the token lengths, so neither the
 * length nor the first differing byte leaks through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIPv4 } from 'node:net';

/**
 * The token of an `Authorization: Bearer TOKEN` header value, or undefined when the header is absent
 * or uses another scheme. The scheme name is case-insensitive (RFC 9110 section 11.1).
 */
export function readBearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const match = /^bearer[ ]+(\S+)\s*$/i.exec(authorization);
  return match?.[1];
}

/** True when `given` equals `expected`, in time independent of where (and whether) they differ. */
export function isTokenEqual(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/**
 * True for a listen host only this box can reach: `localhost`, `127.0.0.0/8`, `::1`
 * (and `::ffff:127.x.x.x`). Everything else (`0.0.0.0`, `::`, a LAN address) is not loopback, and the
 * admin listener then demands the token for read-only pages too.
 */
export function isLoopbackHost(host: string): boolean {
  const lower = host.toLowerCase();
  if (lower === 'localhost' || lower === '::1' || lower === '0:0:0:0:0:0:0:1') return true;
  const v4 = lower.startsWith('::ffff:') ? lower.slice('::ffff:'.length) : lower;
  return isIPv4(v4) && v4.startsWith('127.');
}
