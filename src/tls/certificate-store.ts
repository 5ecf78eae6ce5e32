/**
 * Which certificate a TLS handshake gets: server name indication (RFC 6066 §3) over a set of
 * certificate pairs. The rule is HAProxy's for `crt` (a directory of certificates) and nginx's for
 * `server_name`: an exact name first, then a wildcard, then the default.
 *
 *   1. exact: a pair that lists the name itself (`exact.test`);
 *   2. wildcard: a pair that lists `*.` + the name without its first label; a wildcard covers
 *      exactly one label (RFC 6125 §6.4.3): `*.wild.test` serves `a.wild.test`, not `wild.test`
 *      nor `a.b.wild.test`;
 *   3. the default: the first `tls_cert` pair in file order; with none, the ACME certificate.
 *
 * When two pairs list the same name, the earlier one wins: `tls_cert` pairs in file order, then
 * the ACME certificate (`tls_cert` takes precedence for the names it serves, SPEC 1.2 `[acme]`).
 *
 * Worked example (the test fixtures): pairs default.test, exact.test, *.wild.test + wild.test.
 *
 *   SNI            exact map    wildcard map (by suffix)   served
 *   exact.test     exact.test   —                          exact.test
 *   a.wild.test    —            wild.test → *.wild.test    *.wild.test
 *   wild.test      wild.test    —                          *.wild.test (its second SAN entry)
 *   a.b.wild.test  —            b.wild.test: none          default.test
 *   (none)         —            —                          default.test
 *
 * A store never changes: a reload or a new ACME certificate builds another, and the listener swaps
 * it in (connections keep the context they were handshaken with). The lookup runs on every
 * handshake: a Map lookup, then (for a miss) one `slice` and a second Map lookup.
 */
import type { CertificatePair } from './certificate-pair.js';

export class CertificateStore {
  /** Every pair, `tls_cert` ones in file order, then the ACME one. */
  readonly pairs: readonly CertificatePair[];
  /** What a handshake without SNI, or with a name no pair serves, gets; undefined when there is no pair yet. */
  readonly defaultPair: CertificatePair | undefined;
  readonly #exact = new Map<string, CertificatePair>();
  /** Keyed by what follows `*.`. */
  readonly #wildcard = new Map<string, CertificatePair>();

  /**
   * @param configured the `tls_cert` pairs in file order (the first is the default)
   * @param acme the ACME certificate, if one was issued: it serves the names no `tls_cert` pair
   *   serves, and is the default when there is no `tls_cert` pair
   */
  constructor(configured: readonly CertificatePair[], acme: CertificatePair | undefined) {
    this.pairs = acme === undefined ? configured : [...configured, acme];
    this.defaultPair = this.pairs[0];
    for (const pair of this.pairs) {
      for (const name of pair.dnsNames) {
        const [map, key] = name.startsWith('*.') ? [this.#wildcard, name.slice(2)] : [this.#exact, name];
        if (!map.has(key)) map.set(key, pair); // the earlier pair wins
      }
    }
  }

  /**
   * The pair for `serverName` (the SNI, any case, a trailing dot ignored as for Host: `exact.test.`
   * is `exact.test`), by the rule of the file comment; undefined when the store is empty.
   */
  select(serverName: string): CertificatePair | undefined {
    const lowered = serverName.toLowerCase();
    const name = lowered.endsWith('.') ? lowered.slice(0, -1) : lowered;
    const exact = this.#exact.get(name);
    if (exact !== undefined) return exact;
    const dot = name.indexOf('.');
    return (dot > 0 ? this.#wildcard.get(name.slice(dot + 1)) : undefined) ?? this.defaultPair;
  }
}
