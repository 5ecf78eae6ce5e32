/**
 * Automatic certificates for `[acme]` (SPEC 1.2): the lifecycle around the ACME client
 * (acme-client.ts), the way Caddy's certmagic and certbot's renewal timer run it.
 *
 *   load      read the storage (acme-storage.ts): the account key (made the first time), and the
 *             stored certificate. One that parses, matches its key, covers every domain and has
 *             not expired is handed over at once (`onCertificate`) — no new order. This happens
 *             before the listeners accept, so the first handshake gets it.
 *   start     once the plain listener answers challenges: the first check is scheduled.
 *   schedule  the next check is when a third of the lifetime is left:
 *               renewAt = notAfter − (notAfter − notBefore) × renewalFraction
 *             e.g. a 90-day certificate is renewed 60 days after its notBefore, 30 days before
 *             it expires (Let's Encrypt's advice, and certbot's and Caddy's default). No usable
 *             certificate: order now.
 *   obtain    a new P-256 certificate key, a CSR for the domains (csr.ts), the ACME conversation
 *             with HTTP-01 tokens published through `onChallenge`; then the chain and key are
 *             stored (atomically, key 0600) and handed over (`onCertificate`), which swaps the
 *             served certificate without touching open connections.
 *   back off  a failed attempt is logged once, with the reason, and retried after 1 min,
 *             doubling up to 1 h (certmagic waits 1 min doubling too); the old certificate, if
 *             any, keeps being served meanwhile.
 *
 * The clock, the timers and the renewal fraction are injected, so a test can force a renewal
 * window without waiting (and never sleeps).
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { readRegularFile } from '../../config/regular-file.js';
import { join } from 'node:path';
import tls from 'node:tls';
import type { AcmeConfig } from '../../config/config.js';
import { AcmeError, formatPlace, type SourcePlace } from '../../errors.js';
import { unrefTimers, type Timers } from '../../timers.js';
import { AcmeClient, type ChallengePublisher } from './acme-client.js';
import { httpsTransport, type AcmeTransport } from './acme-transport.js';
import { AcmeStorage, generateP256KeyPem, type StoredCertificate, type StoredCertificateFiles } from './acme-storage.js';
import { createCsr } from './csr.js';

/** The share of a certificate's lifetime left when it is renewed: a third (SPEC 1.2). */
export const DEFAULT_RENEWAL_FRACTION = 1 / 3;
/** The first retry delay after a failed attempt (1 min), doubled per failure up to BACKOFF_MAX_MS (1 h). */
export const BACKOFF_FIRST_MS = 60_000;
export const BACKOFF_MAX_MS = 3_600_000;
/** node's timers hold at most 2^31 − 1 ms (24.8 days); a later check is reached in steps of this. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Where the manager's results go: a ProxyServer in a single process (its plain listener answers
 * the challenges, its TLS listener serves the certificate), or a cluster primary that hands both
 * to its workers.
 */
export interface AcmeTarget {
  setAcmeChallenge(token: string, keyAuthorization: string | undefined): void;
  setAcmeCertificate(certPem: string, keyPem: string): void;
}

export interface AcmeManagerOptions {
  readonly config: AcmeConfig;
  /** Called with every usable certificate: the stored one at start, then each new one. */
  readonly onCertificate: (certPem: string, keyPem: string) => void;
  /** Publishes (or, with undefined, withdraws) an HTTP-01 token's key authorization on the plain listener. */
  readonly onChallenge: ChallengePublisher;
  /** One line per event (issued, reused, failed attempt). */
  readonly log: (line: string) => void;
  /** Wall clock, ms since the epoch. Default Date.now. */
  readonly now?: () => number;
  /** Default node's, unref'd (a pending renewal never keeps the process alive). */
  readonly timers?: Timers;
  /** Default 1/3. */
  readonly renewalFraction?: number;
  /** Default: node:https trusting `directory_ca` when set (acme-transport.ts). */
  readonly transport?: AcmeTransport;
}

/** A certificate the manager serves: its PEMs and the validity it was judged by. */
interface ServedCertificate extends StoredCertificate {
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
}

export class AcmeManager {
  readonly #options: AcmeManagerOptions;
  readonly #storage: AcmeStorage;
  readonly #now: () => number;
  readonly #timers: Timers;
  readonly #renewalFraction: number;
  #client: AcmeClient | undefined;
  #current: ServedCertificate | undefined;
  #timer: unknown;
  #failures = 0;
  #isStopped = false;
  /** The check in flight, if any (tests await it through `settled`). */
  #running: Promise<void> | undefined;

  constructor(options: AcmeManagerOptions) {
    this.#options = options;
    this.#storage = new AcmeStorage(options.config.storageDir);
    this.#now = options.now ?? Date.now;
    this.#timers = options.timers ?? unrefTimers;
    this.#renewalFraction = options.renewalFraction ?? DEFAULT_RENEWAL_FRACTION;
  }

  /**
   * Reads the storage and hands over a usable stored certificate (`onCertificate`), before the
   * listeners accept anything, so the first handshake already gets it. Call once, before `start`.
   * @throws AcmeError `FILE:LINE:COL: [acme] storage 'DIR' is not usable: EACCES…` (the directory
   *   cannot be made or read, the account key is not a key), or `… directory_ca 'F' cannot be read: …`
   */
  async load(): Promise<void> {
    const { config } = this.#options;
    const failAt = (place: SourcePlace | undefined, what: string, error: unknown): AcmeError =>
      new AcmeError(`${formatPlace(place ?? config.place)}: [acme] ${what}: ${(error as Error)?.message ?? String(error)}`);
    // directory_ca first: a start that fails on it leaves the storage as it was (no account key made).
    let transport = this.#options.transport;
    if (transport === undefined) {
      let ca: string | undefined;
      try {
        ca = config.directoryCaFile === undefined ? undefined : readRegularFile(config.directoryCaFile).toString('utf8');
      } catch (error) {
        // The code, as --check words it (checkAcmeFiles): `cannot be read: ENOTREG`.
        throw new AcmeError(`${formatPlace(config.directoryCaPlace ?? config.place)}: [acme] directory_ca '${config.directoryCaFile}' cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
      }
      transport = httpsTransport(ca);
    }
    let accountKey: KeyObject;
    let stored: StoredCertificateFiles | undefined;
    try {
      accountKey = await this.#storage.loadAccountKey();
      stored = await this.#storage.readCertificate();
    } catch (error) {
      throw failAt(config.storagePlace, `storage '${config.storageDir}' is not usable`, error);
    }
    this.#client = new AcmeClient({ directoryUrl: config.directoryUrl, accountKey, email: config.email, transport, timers: this.#timers, now: this.#now });
    if (stored !== undefined && stored.directoryUrl !== config.directoryUrl) {
      const issuedThrough = stored.directoryUrl === undefined ? 'an unrecorded directory' : stored.directoryUrl;
      this.#options.log(`acme: the stored certificate was issued through ${issuedThrough}, not ${config.directoryUrl}: ordering a new one`);
      return;
    }
    const usable = stored === undefined ? undefined : this.#judge(stored);
    if (usable !== undefined) {
      this.#current = usable;
      this.#options.onCertificate(usable.certPem, usable.keyPem);
      this.#options.log(`acme: serving the stored certificate for ${config.domains.join(', ')}, valid until ${new Date(usable.notAfterMs).toISOString()}`);
    } else if (stored !== undefined) {
      this.#options.log(`acme: the stored certificate is not usable for ${config.domains.join(', ')} (expired, other names, or not its key): ordering a new one`);
    }
  }

  /**
   * Schedules the first check: at once without a usable certificate, else at its renewal time.
   * Call once the plain listener answers challenges (an order needs it).
   * @throws Error before `load`
   */
  start(): void {
    if (this.#client === undefined) throw new Error('AcmeManager.start: load() first');
    this.#schedule(this.#msUntilRenewal());
  }

  /** Stops scheduling; an attempt in flight finishes, but its certificate is neither stored nor handed over. */
  stop(): void {
    this.#isStopped = true;
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
  }

  /** Settles when no check is in flight (tests). */
  get settled(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  /** The served certificate's validity (ms since the epoch), or undefined before the first one. */
  get validity(): { readonly notBeforeMs: number; readonly notAfterMs: number } | undefined {
    return this.#current === undefined ? undefined : { notBeforeMs: this.#current.notBeforeMs, notAfterMs: this.#current.notAfterMs };
  }

  /** ms until the served certificate is due for renewal: 0 without one. */
  #msUntilRenewal(): number {
    const current = this.#current;
    if (current === undefined) return 0;
    const renewAt = current.notAfterMs - (current.notAfterMs - current.notBeforeMs) * this.#renewalFraction;
    return Math.max(0, renewAt - this.#now());
  }

  #schedule(delayMs: number): void {
    if (this.#isStopped) return;
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = this.#timers.setTimeout(() => {
      this.#running = this.#check().finally(() => (this.#running = undefined));
    }, Math.min(delayMs, MAX_TIMER_MS));
  }

  /** A timer fired: renew when due (a long wait arrives in steps), then schedule the next check. */
  async #check(): Promise<void> {
    const waitMs = this.#msUntilRenewal();
    if (waitMs > 0) return this.#schedule(waitMs);
    const domains = this.#options.config.domains;
    try {
      const certificate = await this.#obtain();
      if (this.#isStopped) return;
      await this.#storage.writeCertificate(certificate, this.#options.config.directoryUrl);
      this.#current = certificate;
      this.#failures = 0;
      this.#options.onCertificate(certificate.certPem, certificate.keyPem);
      this.#options.log(`acme: new certificate for ${domains.join(', ')}, valid until ${new Date(certificate.notAfterMs).toISOString()}`);
      this.#schedule(this.#msUntilRenewal());
    } catch (error) {
      if (this.#isStopped) return;
      this.#failures++;
      const delayMs = Math.min(BACKOFF_FIRST_MS * 2 ** (this.#failures - 1), BACKOFF_MAX_MS);
      const reason = escapeControlCharacters((error as Error)?.message ?? String(error));
      this.#options.log(`acme: attempt ${this.#failures} to get a certificate for ${domains.join(', ')} failed: ${reason}; next attempt in ${delayMs / 1000} s`);
      this.#schedule(delayMs);
    }
  }

  /** One ACME order with a fresh certificate key; the result is judged like a stored one. */
  async #obtain(): Promise<ServedCertificate> {
    const { domains } = this.#options.config;
    const keyPem = generateP256KeyPem();
    const csr = createCsr(domains, createPrivateKey(keyPem));
    // Only the CERTIFICATE blocks of what the CA sent are kept: text or any other block around them
    // is nobody's to store or serve.
    const certPem = certificateBlocks(await this.#client!.obtainCertificate(domains, csr, this.#options.onChallenge));
    const served = this.#judge({ certPem, keyPem });
    if (served === undefined) throw new AcmeError('ACME: the certificate chain sent cannot be served (a block that does not parse), does not cover the domains, has expired, or does not match the key');
    return served;
  }

  /**
   * The certificate with its validity when it is usable: it parses, matches its key, covers every
   * domain, has not expired, and the whole chain makes a TLS context (what the listener will build:
   * a chain with a broken block must be refused before it is stored, not at the next start).
   */
  #judge(certificate: StoredCertificate): ServedCertificate | undefined {
    try {
      tls.createSecureContext({ cert: certificate.certPem, key: certificate.keyPem });
      const leaf = new X509Certificate(certificate.certPem);
      const notBeforeMs = Date.parse(leaf.validFrom);
      const notAfterMs = Date.parse(leaf.validTo);
      const isCovering = this.#options.config.domains.every((domain) => leaf.checkHost(domain, { wildcards: false }) !== undefined);
      const isUsable = leaf.checkPrivateKey(createPrivateKey(certificate.keyPem)) && isCovering && this.#now() < notAfterMs && notBeforeMs < notAfterMs;
      return isUsable ? { ...certificate, notBeforeMs, notAfterMs } : undefined;
    } catch {
      return undefined;
    }
  }
}

/**
 * `--check` of `[acme]` (as nginx -t reads the files it names), without writing or asking anything:
 * `directory_ca` can be read and holds a PEM certificate; `storage`, when it exists, is a directory,
 * and the keys already in it are PEM private keys. What `load` would refuse at start-up.
 * @returns the problems, each at the `[acme]` place (empty when there is none)
 */
export function checkAcmeFiles(config: AcmeConfig): AcmeError[] {
  const problems: AcmeError[] = [];
  const fail = (place: SourcePlace | undefined, what: string): number => problems.push(new AcmeError(`${formatPlace(place ?? config.place)}: [acme] ${what}`));
  if (config.directoryCaFile !== undefined) {
    try {
      if (!readRegularFile(config.directoryCaFile).toString('utf8').includes('-----BEGIN CERTIFICATE-----')) fail(config.directoryCaPlace, `directory_ca '${config.directoryCaFile}' holds no PEM certificate`);
    } catch (error) {
      fail(config.directoryCaPlace, `directory_ca '${config.directoryCaFile}' cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  }
  let isDirectory: boolean;
  try {
    isDirectory = statSync(config.storageDir).isDirectory();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return problems; // made at the first start
    fail(config.storagePlace, `storage '${config.storageDir}' is not usable: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    return problems;
  }
  if (!isDirectory) {
    fail(config.storagePlace, `storage '${config.storageDir}' is not a directory`);
    return problems;
  }
  for (const name of ['account.key', 'certificate.key']) {
    const file = join(config.storageDir, name);
    try {
      createPrivateKey(readFileSync(file, 'utf8'));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') continue;
      fail(config.storagePlace, `storage file '${file}' ${code === 'EACCES' || code === 'EISDIR' ? `cannot be read: ${code}` : 'is not a PEM private key'}`);
    }
  }
  return problems;
}

/** The `-----BEGIN CERTIFICATE-----` … `-----END CERTIFICATE-----` blocks of `pem`, one a line, in order. */
function certificateBlocks(pem: string): string {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) => `${block}\n`).join('');
}

/** The longest reason logged, characters: a CA's problem detail is its text, not ours to print at any length. */
const MAX_REASON_CHARACTERS = 500;

/**
 * `text` on one short line: control characters and the Unicode line and paragraph separators as
 * `\xHH` / `\uHHHH`, cut after MAX_REASON_CHARACTERS. A failure's reason may quote the ACME server
 * (a problem document's `detail`), which must not be able to forge a line of the log.
 */
function escapeControlCharacters(text: string): string {
  const escaped = text.replace(/[\x00-\x1f\x7f\u2028\u2029]/g, (c) => {
    const code = c.charCodeAt(0);
    return code > 0xff ? `\\u${code.toString(16).toUpperCase()}` : `\\x${code.toString(16).toUpperCase().padStart(2, '0')}`;
  });
  return escaped.length <= MAX_REASON_CHARACTERS ? escaped : `${escaped.slice(0, MAX_REASON_CHARACTERS)}… (cut)`;
}
