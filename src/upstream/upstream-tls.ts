/**
 * A route's TLS client settings for its `https://` upstreams, built from its `tls_*` keys (SPEC 1.2):
 * the files are read and checked here, at start-up, by `--check` and at every reload (SIGHUP builds
 * new routes; a file that does not load rejects the reload like any config error), and each
 * distinct setting gets one `tls.SecureContext`, shared by every connection and every route with the
 * same setting, never one per connection.
 *
 * - `tls_verify` (default on): chain and name are checked, as Caddy, HAProxy and Traefik do (nginx's
 *   `proxy_ssl_verify` is off by default). `off` is reported by `--check` and at start-up.
 * - `tls_ca`: the PEM CAs trusted *instead of* the system store (node's `ca` option replaces the
 *   Mozilla roots it ships, as HAProxy's `ca-file` and Caddy's `tls_trusted_ca_certs` do).
 * - `tls_server_name`: SNI and the verified name (src/wire/tls-client.ts has the rules).
 * - `tls_client_cert = CERT KEY`: presented for mutual TLS (RFC 8446 section 4.4.2); the key must
 *   match the certificate.
 *
 * Errors name the key's place, as every config error does: `env.ini:7:10: tls_ca 'ca.pem' cannot be
 * read: ENOENT`.
 *
 * Validity, with the rules and words of a `tls_cert` pair (src/tls/certificate-pair.ts): a client
 * certificate out of date (expired, not yet valid), or a `tls_ca` file none of whose certificates is
 * valid now, is an error for `--check` and for a SIGHUP that would put it in place of another file's
 * contents; at start-up, and by a reload that keeps it, it is used with a warning (refusing it would
 * stop every route change until it is renewed, while the upstream refuses it either way). A client
 * certificate, or any certificate of a `tls_ca` file, that expires within 14 days is a warning, and
 * so is a certificate out of date in a `tls_ca` file whose other certificates keep it working.
 */
import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readRegularFile } from '../config/regular-file.js';
import tls from 'node:tls';
import type { Config, RouteConfig, UpstreamTlsConfig } from '../config/config.js';
import { ConfigValueError, formatPlace, type SourcePlace } from '../errors.js';
import { ENCRYPTED_KEY_PROBLEM, isEncryptedPemKey, expiresSoon, validityOf, validityProblem } from '../tls/certificate-pair.js';
import type { TlsClientSettings } from '../wire/tls-client.js';

/** What the routes' TLS files are judged against (see the file comment). */
export interface RouteTlsOptions {
  /** Wall clock, ms since the epoch, for the validity checks. */
  readonly nowMs: number;
  /**
   * Whether a file out of date (its text: the `tls_client_cert` certificate file, or the `tls_ca`
   * file) is used with a warning instead of being an error. Default: never (`--check`).
   */
  readonly usesOutOfDate?: (pem: string) => boolean;
}

/** The routes' TLS settings, the warnings of their files, and the texts read (for the next reload). */
export interface RouteTls {
  /** By route name; routes with equal settings and files share one object. */
  readonly settings: ReadonlyMap<string, TlsClientSettings>;
  /** One line each, without the `warning: ` prefix, in route order: `env.ini:7:10: tls_ca 'ca.pem' expires in 3 days, on …`. */
  readonly warnings: readonly string[];
  /** The text of every `tls_ca` and `tls_client_cert` certificate file read. */
  readonly texts: ReadonlySet<string>;
}

/**
 * Builds the TLS client settings of every route; routes with equal settings and files share one
 * object (and so one SecureContext and one pool of connections).
 * @throws ConfigValueError at the `tls_ca` or `tls_client_cert` value: a file that cannot be read,
 *   holds no PEM certificate or private key, a key that does not match its certificate, or a file
 *   out of date that `options.usesOutOfDate` does not accept.
 */
export function buildRouteTls(routes: readonly RouteConfig[], options: RouteTlsOptions): RouteTls {
  const settings = new Map<string, TlsClientSettings>();
  const cache = new UpstreamTlsCache(options);
  for (const route of routes) settings.set(route.name, cache.settingsFor(route.tls));
  return { settings, warnings: [...cache.warnings], texts: cache.texts };
}

/**
 * The settings of one route alone (a route built outside a RouteTable, e.g. in tests), judged as at
 * start-up, its warnings dropped.
 * @throws ConfigValueError as `buildRouteTls`
 */
export function buildUpstreamTls(config: UpstreamTlsConfig): TlsClientSettings {
  return new UpstreamTlsCache({ nowMs: Date.now(), usesOutOfDate: () => true }).settingsFor(config);
}

/**
 * What `--check`, start-up and a reload warn about (one line each, without the `warning: ` prefix):
 * every route with `https://` upstreams whose `tls_verify` is off, at the `tls_verify` value (the
 * route's own, or the `[proxy]` one it inherits); then the `tls_*` lines no upstream reads
 * (`unusedTlsKeyWarnings`).
 */
export function upstreamTlsWarnings(config: Config): string[] {
  const unverified = config.routes
    .filter((route) => !route.tls.isVerified && route.upstreams.some((upstream) => upstream.scheme === 'https'))
    .map(
      (route) =>
        `${formatPlace(route.tls.verifyPlace ?? route.place)}: [proxy.${route.name}] tls_verify = off: the certificates of its https:// upstreams are not verified, so anyone on the path can pose as them`,
    );
  return [...unverified, ...unusedTlsKeyWarnings(config)];
}

/** The route keys only `https://` upstreams read, each with where a route's value is written. */
const HTTPS_ONLY_KEYS: readonly (readonly [string, (tls: UpstreamTlsConfig) => SourcePlace | undefined])[] = [
  ['tls_verify', (tls) => tls.verifyPlace],
  ['tls_ca', (tls) => tls.caPlace],
  ['tls_server_name', (tls) => tls.serverNamePlace],
  ['tls_client_cert', (tls) => tls.clientCertificate?.place],
];

/**
 * The `tls_*` lines that have no effect, in file order: a `tls_verify`, `tls_ca`, `tls_server_name`
 * or `tls_client_cert` line that no `https://` upstream reads, because every `pass` line of every
 * route that has it (its own, or the `[proxy]` one it inherits) is `http://`: `env.ini:5:10: tls_ca has no effect: every pass of [proxy.a] is http://`.
 * A `[proxy]` line that some route with an `https://` upstream inherits is not warned about. A
 * discovery line (`resolve`, `service=`) keeps its URL's scheme, so it counts like any `pass` line.
 * With an `[admin] token` nothing is warned: the registry may add `https://` upstreams to any route.
 * nginx takes `proxy_ssl_*` in a location that proxies to `http://` silently; Caddy refuses TLS
 * transport settings for an `http://` upstream (an error, where this is a warning: the route works).
 */
function unusedTlsKeyWarnings(config: Config): string[] {
  if (config.admin?.token !== undefined) return [];
  const warnings: { readonly place: SourcePlace; readonly text: string }[] = [];
  for (const [key, placeOf] of HTTPS_ONLY_KEYS) {
    const routesByPlace = new Map<string, { readonly place: SourcePlace; readonly names: string[]; isRead: boolean }>();
    for (const route of config.routes) {
      const place = placeOf(route.tls);
      if (place === undefined) continue;
      const where = formatPlace(place);
      const entry = routesByPlace.get(where) ?? { place, names: [], isRead: false };
      routesByPlace.set(where, entry);
      entry.names.push(route.name);
      entry.isRead ||= route.upstreams.some((upstream) => upstream.scheme === 'https');
    }
    for (const { place, names, isRead } of routesByPlace.values()) {
      if (isRead) continue;
      const routes = names.length === 1 ? `[proxy.${names[0]}]` : `the routes that inherit it (${names.join(', ')})`;
      warnings.push({ place, text: `${formatPlace(place)}: ${key} has no effect: every pass of ${routes} is http:// (the tls_* keys apply to https:// upstreams only)` });
    }
  }
  return warnings
    .sort((a, b) => a.place.line - b.place.line || a.place.column - b.place.column)
    .map(({ text }) => text);
}

/**
 * What a certificate file's validity says, apart from the line that names it: the reason it is out
 * of date (the first words after `tls_ca 'FILE'`), and the reasons of its warnings (a certificate
 * that expires soon; in a `tls_ca` bundle that still works, one out of date).
 */
interface FileValidity {
  readonly keyName: 'tls_ca' | 'tls_client_cert';
  readonly file: string;
  readonly text: string;
  readonly outOfDate: string | undefined;
  readonly warningReasons: readonly string[];
}

/** One build's contexts and settings, so equal settings share one object. */
class UpstreamTlsCache {
  /** By the file paths: one SecureContext per distinct `tls_ca` and `tls_client_cert`. */
  readonly #contexts = new Map<string, { readonly context: tls.SecureContext; readonly filesHash: string; readonly validity: readonly FileValidity[] }>();
  /** By the identity. */
  readonly #settings = new Map<string, TlsClientSettings>();
  readonly #options: RouteTlsOptions;
  /** Each line once: a `[proxy]` line inherited by several routes is one warning. */
  readonly warnings = new Set<string>();
  readonly texts = new Set<string>();

  constructor(options: RouteTlsOptions) {
    this.#options = options;
  }

  settingsFor(config: UpstreamTlsConfig): TlsClientSettings {
    const { context, filesHash, validity } = this.#contextFor(config);
    for (const file of validity) this.#judge(file, file.keyName === 'tls_ca' ? (config.caPlace as SourcePlace) : config.clientCertificate!.place);
    const identity = createHash('sha256')
      .update(JSON.stringify([config.isVerified, config.serverName ?? null, filesHash]))
      .digest('base64url')
      .slice(0, 16);
    let settings = this.#settings.get(identity);
    if (settings === undefined) {
      settings = Object.freeze({ identity, secureContext: context, serverName: config.serverName, isVerified: config.isVerified });
      this.#settings.set(identity, settings);
    }
    return settings;
  }

  /** Throws or warns about `file` at `place`, the line that names it (see the file comment). */
  #judge(file: FileValidity, place: SourcePlace): void {
    this.texts.add(file.text);
    const where = `${formatPlace(place)}: ${file.keyName} '${file.file}'`;
    if (file.outOfDate !== undefined) {
      if (this.#options.usesOutOfDate?.(file.text) !== true) throw new ConfigValueError(place, `${file.keyName} '${file.file}' ${file.outOfDate}`);
      const effect = file.keyName === 'tls_ca' ? 'no upstream certificate will verify' : 'upstreams asking for it will refuse it';
      this.warnings.add(`${where} ${file.outOfDate}: used until it is replaced, and ${effect}`);
    }
    for (const reason of file.warningReasons) this.warnings.add(`${where} ${reason}`);
  }

  #contextFor(config: UpstreamTlsConfig): { readonly context: tls.SecureContext; readonly filesHash: string; readonly validity: readonly FileValidity[] } {
    const client = config.clientCertificate;
    const key = JSON.stringify([config.caFile ?? null, client?.certFile ?? null, client?.keyFile ?? null]);
    let entry = this.#contexts.get(key);
    if (entry !== undefined) return entry;
    const hash = createHash('sha256');
    const options: tls.SecureContextOptions = {};
    const validity: FileValidity[] = [];
    const { nowMs } = this.#options;
    if (config.caFile !== undefined) {
      const place = config.caPlace as SourcePlace;
      const ca = readPem(config.caFile, place, 'tls_ca');
      validity.push({ keyName: 'tls_ca', file: config.caFile, text: ca, ...caValidity(certificatesIn(ca, config.caFile, place, 'tls_ca'), nowMs) });
      options.ca = ca;
      hash.update(`ca\0${ca}\0`);
    }
    if (client !== undefined) {
      const cert = readPem(client.certFile, client.place, 'tls_client_cert');
      const [leaf] = certificatesIn(cert, client.certFile, client.place, 'tls_client_cert');
      const keyText = readPem(client.keyFile, client.keyPlace, 'tls_client_cert');
      const privateKey = parsePrivateKey(keyText, client.keyFile, client.keyPlace);
      if (!leaf!.checkPrivateKey(privateKey)) {
        throw new ConfigValueError(client.keyPlace, `tls_client_cert key '${client.keyFile}' does not match the certificate in '${client.certFile}'`);
      }
      const period = validityOf(leaf!);
      const soon = expiresSoon(period, nowMs);
      validity.push({ keyName: 'tls_client_cert', file: client.certFile, text: cert, outOfDate: validityProblem(period, nowMs), warningReasons: soon === undefined ? [] : [soon] });
      options.cert = cert;
      options.key = keyText;
      hash.update(`cert\0${cert}\0key\0${keyText}\0`);
    }
    let context: tls.SecureContext;
    try {
      context = tls.createSecureContext(options);
    } catch (error) {
      const place = client?.place ?? (config.caPlace as SourcePlace);
      throw new ConfigValueError(place, `TLS settings cannot be used: ${(error as Error).message}`);
    }
    entry = { context, filesHash: hash.digest('base64url'), validity };
    this.#contexts.set(key, entry);
    return entry;
  }
}

/**
 * A `tls_ca` file's validity: out of date when none of its certificates is valid now. Otherwise each
 * certificate out of date is a warning (`certificate 2 of 2 (CN=old CA) expired on …: it verifies
 * nothing now`; verification skips it and the bundle works through the others), and so is each valid
 * one that expires within 14 days: the same certificate warned about before and after its expiry.
 * A certificate is named by its place in the file and its subject's CN when there are several.
 */
function caValidity(certificates: readonly X509Certificate[], nowMs: number): Pick<FileValidity, 'outOfDate' | 'warningReasons'> {
  const periods = certificates.map(validityOf);
  const isSingle = certificates.length === 1;
  const named = (index: number): string => {
    if (isSingle) return '';
    const commonName = /^CN=(.*)$/m.exec(certificates[index]!.subject)?.[1];
    return `certificate ${index + 1} of ${certificates.length}${commonName === undefined ? '' : ` (CN=${commonName})`} `;
  };
  const hasValid = periods.some((period) => validityProblem(period, nowMs) === undefined);
  const warningReasons = periods.flatMap((period, index) => {
    const problem = validityProblem(period, nowMs);
    if (problem !== undefined) return hasValid ? [`${named(index)}${problem}: it verifies nothing now`] : [];
    const soon = expiresSoon(period, nowMs);
    return soon === undefined ? [] : [`${named(index)}${soon}`];
  });
  if (hasValid) return { outOfDate: undefined, warningReasons };
  if (isSingle) return { outOfDate: validityProblem(periods[0]!, nowMs), warningReasons };
  const longest = periods.reduce((a, b) => (b.notAfterMs > a.notAfterMs ? b : a));
  return { outOfDate: `has no certificate valid now: all ${periods.length} are out of date, the longest-lived ${validityProblem(longest, nowMs)}`, warningReasons };
}

/** A file's text. @throws ConfigValueError at `place` naming the key, the path and the errno code. */
function readPem(file: string, place: SourcePlace, keyName: string): string {
  try {
    return readRegularFile(file).toString('latin1');
  } catch (error) {
    throw new ConfigValueError(place, `${keyName} '${file}' cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]*-----END CERTIFICATE-----/g;

/**
 * The certificates of a PEM text, in order (node's `ca` option silently skips what is not one).
 * @throws ConfigValueError at `place` when there is none, or one does not parse.
 */
function certificatesIn(text: string, file: string, place: SourcePlace, keyName: string): X509Certificate[] {
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new ConfigValueError(place, `${keyName} '${file}' holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)`);
  return blocks.map((block, index) => {
    try {
      return new X509Certificate(block);
    } catch (error) {
      throw new ConfigValueError(place, `${keyName} '${file}': certificate ${index + 1} is not a valid PEM certificate (${(error as Error).message})`);
    }
  });
}

/** @throws ConfigValueError at `place` when the text is no (unencrypted) PEM private key. */
function parsePrivateKey(text: string, file: string, place: SourcePlace): KeyObject {
  if (isEncryptedPemKey(text)) throw new ConfigValueError(place, `tls_client_cert key '${file}' ${ENCRYPTED_KEY_PROBLEM}`);
  try {
    return createPrivateKey(text);
  } catch (error) {
    throw new ConfigValueError(place, `tls_client_cert key '${file}' is not a PEM private key (${(error as Error).message})`);
  }
}
