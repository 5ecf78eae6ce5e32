/**
 * One certificate and its private key, read and checked before they are served: what nginx's
 * `ssl_certificate` / `ssl_certificate_key` and HAProxy's `crt` load. It teaches what a server
 * reads out of a certificate (RFC 5280 §4.1.2.5 validity, §4.2.1.6 subjectAltName) and which names
 * it serves:
 *
 * - every `DNS:` entry of the subjectAltName, lower-cased, wildcards (`*.example.com`) included,
 *   and every `IP Address:` entry (SNI never carries an address, RFC 6066 §3, so those are shown,
 *   not selected by);
 * - the subject's CN only when there is no `DNS:` entry: the legacy fallback of node's
 *   `tls.checkServerIdentity` and of Go before 1.15 (RFC 6125 §6.4.4; browsers no longer accept
 *   a CN at all, so a certificate without SAN works only for clients that still do).
 *
 * Checked, in this order, each problem a `CertificateProblem` that names the file it is about: the
 * certificate file can be read and holds a PEM certificate; the key file can be read and holds a
 * PEM private key; the key belongs to the certificate (`X509Certificate.checkPrivateKey`); the
 * certificate is valid now (not after notAfter, not before notBefore). A certificate that expires
 * within `EXPIRY_WARNING_DAYS` is served with a warning (Let's Encrypt mails its users at 20 and
 * 10 days; 14 is between).
 *
 * A certificate outside its validity period is an error for `--check`, and for a SIGHUP that would
 * put it in place of another. It is served with a warning at start-up, and by a reload that keeps
 * it (it expired while being served): refusing those would change nothing for the clients, but it
 * would stop every route change and restart until the certificate is renewed, plain-HTTP routes
 * included. nginx, HAProxy and Caddy start and reload with an expired certificate too.
 *
 * Key types across pairs. Node switches to an SNI pair's certificate by adding it to the handshake
 * that began with the listener's default pair, so a default certificate of another key type stays
 * in it, and the handshake may pick that one: TLS 1.3 prefers an ECDSA key, TLS 1.2 the first
 * suite of the server's order. With `TLS_SERVER_CIPHERS` (ECDSA suites first) the right certificate
 * is served when every pair has the default's key type, or when the default is RSA and the others
 * are ECDSA; an RSA pair after a default of another type would never be served, so it is refused
 * (`checkKeyTypes`).
 */
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { readRegularFile } from '../config/regular-file.js';
import tls from 'node:tls';
import type { CertificateFiles, TlsVersion } from '../config/config.js';
import { ConfigValueError, TlsCertificateError, formatPlace } from '../errors.js';
import { plural } from '../log/plural.js';

/**
 * The HTTPS listener's cipher suites, in the server's order of preference (`honorCipherOrder`):
 * TLS 1.3's three, then TLS 1.2's forward-secret AEAD suites, ECDSA before RSA (Mozilla's
 * "intermediate" profile, which nginx and Caddy configurations follow; node's default list would
 * also accept static-RSA suites without forward secrecy, such as AES128-SHA).
 */
export const TLS_SERVER_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** A certificate expiring within this many days gets a warning (`--check`, start-up, reload). */
export const EXPIRY_WARNING_DAYS = 14;
const DAY_MS = 24 * 60 * 60 * 1000;
/** The start of a PEM private key: its label's words before `PRIVATE KEY`, and a traditional key's `Proc-Type` header. */
const PEM_KEY_START = /-----BEGIN ((?:[A-Z]+ )*)PRIVATE KEY-----\r?\n(Proc-Type:[^\r\n]*)?/;

/**
 * True when the first PEM private key of `pem`, the one node reads, is under a passphrase: PKCS #8
 * `ENCRYPTED PRIVATE KEY`, or a traditional key with a `Proc-Type: 4,ENCRYPTED` header.
 */
export function isEncryptedPemKey(pem: string): boolean {
  const first = PEM_KEY_START.exec(pem);
  return first !== null && (first[1] === 'ENCRYPTED ' || /ENCRYPTED/.test(first[2] ?? ''));
}

/**
 * What is wrong with such a key, after its file's name. A passphrase would have to sit in the
 * config or be typed at every start (nginx's `ssl_password_file`); this proxy reads unencrypted
 * keys only.
 */
export const ENCRYPTED_KEY_PROBLEM = 'is encrypted with a passphrase; give an unencrypted key (openssl pkey -in KEY -out PLAIN_KEY)';

/** A certificate ready to serve: what it is, the names it serves, and its TLS context. */
export interface CertificatePair {
  /** Where it came from: `tls_cert` (with `certFile`) or `acme`. */
  readonly source: 'tls_cert' | 'acme';
  /** The certificate file as written in `tls_cert`; undefined for `acme`. */
  readonly certFile: string | undefined;
  /** DNS names served, lower-cased, in the certificate's order; wildcards as `*.example.com`. */
  readonly dnsNames: readonly string[];
  /** IP addresses in the subjectAltName (shown; SNI cannot select by them). */
  readonly ipAddresses: readonly string[];
  /** The certificate's serial number, hex, as node prints it. */
  readonly serialNumber: string;
  /** notBefore and notAfter, ms since the epoch. */
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
  /** The private key's type as node names it: `rsa`, `ec`, `ed25519`… (see `checkKeyTypes`). */
  readonly keyType: string;
  /** The PEM texts, kept to build the listener's default context (`tls.Server.setSecureContext`). */
  readonly certPem: string;
  readonly keyPem: string;
  /** One `tls.createSecureContext` for this pair, chosen by the SNI callback. */
  readonly context: tls.SecureContext;
}

/** What a pair's certificate must satisfy besides its form. */
export interface PairOptions {
  /** `tls_min_version`, set on the pair's context. */
  readonly minVersion: TlsVersion;
  /** Wall clock, ms since the epoch, for the validity check. */
  readonly nowMs: number;
  /**
   * Whether a `tls_cert` certificate (its PEM text) outside its validity period is served with a
   * warning instead of being an error (see the file comment). Default: never (`--check`).
   */
  readonly servesOutOfDate?: (certPem: string) => boolean;
}

/** The texts of one `tls_cert` pair, as read from its files. */
export interface CertificateText {
  readonly certPem: string;
  readonly keyPem: string;
}

/**
 * Builds a pair from PEM texts (an ACME certificate, or the contents of a `tls_cert` pair).
 * @throws TlsCertificateError with `subject` 'cert' or 'key' saying which text is wrong: no PEM
 *   certificate, no PEM private key, a key that does not match, expired, not yet valid
 */
export function parseCertificatePair(certPem: string, keyPem: string, source: 'tls_cert' | 'acme', certFile: string | undefined, options: PairOptions): CertificatePair {
  const pair = buildPair(certPem, keyPem, source, certFile, options);
  const problem = validityProblem(pair, options.nowMs);
  if (problem !== undefined) throw new TlsCertificateError('cert', problem);
  return pair;
}

/** A certificate's validity period (RFC 5280 §4.1.2.5), ms since the epoch: a CertificatePair fits. */
export interface Validity {
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
}

/** The validity period of `certificate`. */
export function validityOf(certificate: X509Certificate): Validity {
  return { notBeforeMs: Date.parse(certificate.validFrom), notAfterMs: Date.parse(certificate.validTo) };
}

/**
 * `expired on …` or `is not valid before …` when `nowMs` is outside the validity period (see the
 * file comment for when that is an error); undefined inside it. Also for the route keys `tls_ca`
 * and `tls_client_cert` (src/upstream/upstream-tls.ts).
 */
export function validityProblem(validity: Validity, nowMs: number): string | undefined {
  if (nowMs > validity.notAfterMs) return `expired on ${formatDate(validity.notAfterMs)}`;
  if (nowMs < validity.notBeforeMs) return `is not valid before ${formatDate(validity.notBeforeMs)}`;
  return undefined;
}

/**
 * `expires in 10 days, on 2026-12-11 00:00:00 UTC` (`in 1 day`, `within a day` under one) when a
 * certificate valid at `nowMs` expires within EXPIRY_WARNING_DAYS; undefined otherwise (out of date
 * included: that is `validityProblem`'s): the reason of a warning.
 */
export function expiresSoon(validity: Validity, nowMs: number): string | undefined {
  const daysLeft = (validity.notAfterMs - nowMs) / DAY_MS;
  if (daysLeft < 0 || daysLeft >= EXPIRY_WARNING_DAYS || nowMs < validity.notBeforeMs) return undefined;
  return `expires ${daysLeft < 1 ? 'within a day' : `in ${plural(Math.floor(daysLeft), 'day')}`}, on ${formatDate(validity.notAfterMs)}`;
}

/** parseCertificatePair without the validity check. */
function buildPair(certPem: string, keyPem: string, source: 'tls_cert' | 'acme', certFile: string | undefined, options: PairOptions): CertificatePair {
  let certificate: X509Certificate;
  try {
    if (!certPem.includes('-----BEGIN CERTIFICATE-----')) throw new Error('no PEM certificate');
    certificate = new X509Certificate(certPem);
  } catch {
    throw new TlsCertificateError('cert', 'holds no PEM certificate');
  }
  if (isEncryptedPemKey(keyPem)) throw new TlsCertificateError('key', ENCRYPTED_KEY_PROBLEM);
  let key: KeyObject;
  try {
    if (!/-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/.test(keyPem)) throw new Error('no PEM key');
    key = createPrivateKey(keyPem);
  } catch {
    throw new TlsCertificateError('key', 'holds no PEM private key');
  }
  if (!certificate.checkPrivateKey(key)) throw new TlsCertificateError('key', 'does not match the certificate');
  const { notBeforeMs, notAfterMs } = validityOf(certificate);
  let context: tls.SecureContext;
  try {
    context = tls.createSecureContext({ cert: certPem, key: keyPem, minVersion: options.minVersion, ciphers: TLS_SERVER_CIPHERS, honorCipherOrder: true });
  } catch (error) {
    throw new TlsCertificateError('cert', `cannot be served: ${(error as Error).message}`);
  }
  const { dnsNames, ipAddresses } = servedNames(certificate);
  const keyType = key.asymmetricKeyType ?? 'unknown';
  return { source, certFile, dnsNames, ipAddresses, serialNumber: certificate.serialNumber, notBeforeMs, notAfterMs, keyType, certPem, keyPem, context };
}

/**
 * The names a certificate serves (see the file comment): SAN `DNS:` entries, else the CN; and the
 * SAN `IP Address:` entries. Names are lower-cased.
 */
export function servedNames(certificate: X509Certificate): { dnsNames: string[]; ipAddresses: string[] } {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  // node writes `DNS:a.test, IP Address:127.0.0.1`, quoting (as JSON) an entry that holds a `,` or a quote.
  for (const entry of (certificate.subjectAltName ?? '').split(', ')) {
    const text = entry.includes('"') ? unquote(entry) : entry;
    if (text.startsWith('DNS:')) dnsNames.push(text.slice(4).toLowerCase());
    else if (text.startsWith('IP Address:')) ipAddresses.push(text.slice(11).toLowerCase());
  }
  if (dnsNames.length === 0) {
    const commonName = /^CN=(.*)$/m.exec(certificate.subject)?.[1];
    if (commonName !== undefined && commonName !== '') dnsNames.push(commonName.toLowerCase());
  }
  return { dnsNames, ipAddresses };
}

/** `DNS:"a,b"` → `DNS:a,b`; an entry that is not valid JSON is kept as it is. */
function unquote(entry: string): string {
  const colon = entry.indexOf(':');
  try {
    return entry.slice(0, colon + 1) + (JSON.parse(entry.slice(colon + 1)) as string);
  } catch {
    return entry;
  }
}

/** A checked `tls_cert` line: the pair, or the errors; and the warnings. */
export interface CertificateCheck {
  readonly files: CertificateFiles;
  readonly pair: CertificatePair | undefined;
  /** At the cert path's place for certificate problems, the key path's for key problems. */
  readonly errors: readonly ConfigValueError[];
  /** `env.ini:4:12: tls_cert 'a.pem' expires in 10 days, on 2026-12-11 00:00:00 UTC` (`within a day` under one). */
  readonly warnings: readonly string[];
}

/**
 * Reads and checks one `tls_cert` pair (see the file comment), or checks `text` instead of reading
 * the files. Both files are read before either is judged, so a missing certificate and a missing
 * key are both reported.
 */
export function checkCertificateFiles(files: CertificateFiles, options: PairOptions, text?: CertificateText): CertificateCheck {
  const certProblem = (reason: string): ConfigValueError => new ConfigValueError(files.place, `tls_cert '${files.certFile}' ${reason}`);
  const keyProblem = (reason: string): ConfigValueError => new ConfigValueError(files.keyPlace, `tls_cert key '${files.keyFile}' ${reason}`);
  const certPem = text?.certPem ?? readText(files.certFile);
  const keyPem = text?.keyPem ?? readText(files.keyFile);
  const errors: ConfigValueError[] = [];
  if (typeof certPem !== 'string') errors.push(certProblem(`cannot be read: ${certPem.code}`));
  if (typeof keyPem !== 'string') errors.push(keyProblem(`cannot be read: ${keyPem.code}`));
  if (typeof certPem !== 'string' || typeof keyPem !== 'string') return { files, pair: undefined, errors, warnings: [] };
  let pair: CertificatePair;
  try {
    pair = buildPair(certPem, keyPem, 'tls_cert', files.certFile, options);
  } catch (error) {
    if (!(error instanceof TlsCertificateError)) throw error;
    return { files, pair: undefined, errors: [error.subject === 'cert' ? certProblem(error.reason) : keyProblem(error.reason)], warnings: [] };
  }
  const problem = validityProblem(pair, options.nowMs);
  if (problem !== undefined) {
    if (options.servesOutOfDate?.(certPem) !== true) return { files, pair: undefined, errors: [certProblem(problem)], warnings: [] };
    return { files, pair, errors: [], warnings: [`${formatPlace(files.place)}: tls_cert '${files.certFile}' ${problem}: served until it is replaced, and clients will refuse it`] };
  }
  const soon = expiresSoon(pair, options.nowMs);
  return { files, pair, errors: [], warnings: soon === undefined ? [] : [`${formatPlace(files.place)}: tls_cert '${files.certFile}' ${soon}`] };
}

/**
 * Reads every `tls_cert` pair, in file order, for the listener: start-up and SIGHUP; or, given
 * `texts` (one per pair, in the same order), checks those instead of reading the files.
 * @returns the pairs and the warnings (expiring soon, or served out of date)
 * @throws ConfigValueError: the first problem of the first broken pair (start-up exits 1, a reload is rejected)
 */
export function readCertificatePairs(certificates: readonly CertificateFiles[], options: PairOptions, texts?: readonly CertificateText[]): { pairs: CertificatePair[]; warnings: string[] } {
  const checks = checkCertificates(certificates, options, texts);
  const [firstError] = checks.flatMap((check) => check.errors);
  if (firstError !== undefined) throw firstError;
  return { pairs: checks.map((check) => check.pair!), warnings: checks.flatMap((check) => check.warnings) };
}

/**
 * The key-type rule of the file comment: a pair whose key type differs from the default's (the
 * first pair's) is served only when the default is RSA and it is ECDSA. Returns an error at each
 * pair that breaks it (checks that failed on their own are skipped).
 */
export function checkKeyTypes(checks: readonly CertificateCheck[]): ConfigValueError[] {
  const [first, ...rest] = checks;
  const defaultType = first?.pair?.keyType;
  if (first === undefined || defaultType === undefined) return [];
  return rest.flatMap(({ files, pair }) =>
    pair === undefined || pair.keyType === defaultType || (defaultType === 'rsa' && pair.keyType === 'ec')
      ? []
      : [
          new ConfigValueError(
            files.place,
            `tls_cert '${files.certFile}' has ${describeKeyType(pair.keyType)} key, the default pair '${first.files.certFile}' ${describeKeyType(defaultType)} one: node would keep serving the default's certificate for its names; ${pair.keyType === 'rsa' ? 'put the RSA pair first, or use one key type for every pair' : 'use one key type for every pair (or an RSA default with ECDSA pairs after it)'}`,
          ),
        ],
  );
}

function describeKeyType(keyType: string): string {
  const names: Readonly<Record<string, string>> = { rsa: 'an RSA', 'rsa-pss': 'an RSA-PSS', ec: 'an ECDSA', ed25519: 'an Ed25519', ed448: 'an Ed448', dsa: 'a DSA' };
  return names[keyType] ?? `a ${keyType}`;
}

/**
 * `--check`: every `tls_cert` pair checked, in file order, each with all of its errors (a missing
 * certificate and a missing key are both reported) and its warnings. `texts`: as readCertificatePairs.
 * @throws Error when `texts` are not one per pair (a bug of the caller)
 */
export function checkCertificates(certificates: readonly CertificateFiles[], options: PairOptions, texts?: readonly CertificateText[]): CertificateCheck[] {
  if (texts !== undefined && texts.length !== certificates.length) throw new Error(`checkCertificates: ${texts.length} certificate texts for ${certificates.length} tls_cert pairs`);
  const checks = certificates.map((files, index) => checkCertificateFiles(files, options, texts?.[index]));
  const conflicts = checkKeyTypes(checks);
  return checks.map((check) => {
    const conflict = conflicts.find((error) => error.place === check.files.place);
    return conflict === undefined ? check : { ...check, pair: undefined, errors: [...check.errors, conflict] };
  });
}

function readText(file: string): string | { code: string } {
  try {
    return readRegularFile(file).toString('utf8');
  } catch (error) {
    return { code: (error as NodeJS.ErrnoException).code ?? (error as Error).message };
  }
}

/** `2026-12-11 00:00:00 UTC`. */
export function formatDate(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}
