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
 */
import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import type { Config, RouteConfig, UpstreamTlsConfig } from '../config/config.js';
import { ConfigValueError, formatPlace, type SourcePlace } from '../errors.js';
import type { TlsClientSettings } from '../wire/tls-client.js';

/**
 * Builds the TLS client settings of every route, by route name; routes with equal settings and
 * files share one object (and so one SecureContext and one pool of connections).
 * @throws ConfigValueError at the `tls_ca` or `tls_client_cert` value: a file that cannot be read,
 *   holds no PEM certificate or private key, or a key that does not match its certificate.
 */
export function buildRouteTls(routes: readonly RouteConfig[]): ReadonlyMap<string, TlsClientSettings> {
  const built = new Map<string, TlsClientSettings>();
  const cache = new UpstreamTlsCache();
  for (const route of routes) built.set(route.name, cache.settingsFor(route.tls));
  return built;
}

/**
 * The settings of one route alone (a route built outside a RouteTable, e.g. in tests).
 * @throws ConfigValueError as `buildRouteTls`
 */
export function buildUpstreamTls(config: UpstreamTlsConfig): TlsClientSettings {
  return new UpstreamTlsCache().settingsFor(config);
}

/**
 * What `--check`, start-up and a reload warn about (one line each, without the `warning: ` prefix):
 * every route with `https://` upstreams whose `tls_verify` is off, at the `tls_verify` line (the
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

/** One build's contexts and settings, so equal settings share one object. */
class UpstreamTlsCache {
  /** By the file paths: one SecureContext per distinct `tls_ca` and `tls_client_cert`. */
  readonly #contexts = new Map<string, { readonly context: tls.SecureContext; readonly filesHash: string }>();
  /** By the identity. */
  readonly #settings = new Map<string, TlsClientSettings>();

  settingsFor(config: UpstreamTlsConfig): TlsClientSettings {
    const { context, filesHash } = this.#contextFor(config);
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

  #contextFor(config: UpstreamTlsConfig): { readonly context: tls.SecureContext; readonly filesHash: string } {
    const client = config.clientCertificate;
    const key = JSON.stringify([config.caFile ?? null, client?.certFile ?? null, client?.keyFile ?? null]);
    let entry = this.#contexts.get(key);
    if (entry !== undefined) return entry;
    const hash = createHash('sha256');
    const options: tls.SecureContextOptions = {};
    if (config.caFile !== undefined) {
      const place = config.caPlace as SourcePlace;
      const ca = readPem(config.caFile, place, 'tls_ca');
      certificatesIn(ca, config.caFile, place, 'tls_ca');
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
    entry = { context, filesHash: hash.digest('base64url') };
    this.#contexts.set(key, entry);
    return entry;
  }
}

/** A file's text. @throws ConfigValueError at `place` naming the key, the path and the errno code. */
function readPem(file: string, place: SourcePlace, keyName: string): string {
  try {
    return readFileSync(file, 'latin1');
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
  try {
    return createPrivateKey(text);
  } catch (error) {
    throw new ConfigValueError(place, `tls_client_cert key '${file}' is not a PEM private key (${(error as Error).message})`);
  }
}
