/**
 * INI document → validated, frozen `Config`: the middle of the config's three layers (SPEC 1.2).
 * It knows every section and key, applies the defaults, lets each `[proxy.NAME]` route inherit what
 * `[proxy]` says (as nginx's `http` → `server` → `location` inheritance: a value written nearer wins,
 * and a list written nearer replaces the inherited list), and checks what one key cannot check alone
 * (every route has a path and an upstream; no two routes shadow each other; auth has its users).
 *
 * Each section's keys live in one visible table, key → reader. A reader parses one entry with the
 * value parsers of `values.ts`; their `InvalidValueError` becomes a `ConfigValueError` at the value's
 * column that names the key, e.g. `env.ini:4:17: invalid duration '5x' for 'connect_timeout'
 * (expected e.g. 500ms, 3s, 1m)`. Nothing is read lazily later: a config that loads is complete.
 */
import { MAX_CONFIGURED_FILE_BYTES, readBoundedFile, readRegularFile } from './regular-file.js';
import { isIPv4, isIPv6 } from 'node:net';
import { ConfigFileError, ConfigSyntaxError, ConfigValueError, type SourcePlace } from '../errors.js';
import {
  LETS_ENCRYPT_DIRECTORY,
  STRATEGY_NAMES,
  type AccessLogFormat,
  type AccessRule,
  type ConnLimitConfig,
  type RateLimitConfig,
  type AcmeConfig,
  type AdminConfig,
  type CertificateFiles,
  type AuthUser,
  type Config,
  type HashKey,
  type HashName,
  type HostMatcher,
  type ListenAddress,
  type PathMatcher,
  type RouteConfig,
  type ServerConfig,
  type StatusRange,
  type StrategyName,
  type TlsVersion,
  type UpstreamConfig,
  type UpstreamTlsConfig,
} from './config.js';
import { suggest } from './did-you-mean.js';
import { parseIni, placeInValue, type IniEntry, type IniSection } from './ini-parser.js';
import { parsePassLine } from './pass-line.js';
import { compileRouteRegex } from './route-regex.js';
import {
  InvalidValueError,
  isHostName,
  parseBoolean,
  parseChoice,
  parseCidrList,
  parseDuration,
  parseInteger,
  parseAccessRule,
  parseListenAddress,
  parseRateLimit,
  parseResolverList,
  parseSize,
  parseStatusRanges,
} from './values.js';

export interface LoadConfigOptions {
  /**
   * Checks the HASH of an `auth_user` line (the format is src/auth's business). Returns an error
   * message, or undefined when the hash is acceptable. Without it only `name:HASH` is checked.
   */
  readonly validateAuthHash?: (hash: string) => string | undefined;
  /** Checks the name of an `auth_user` line likewise (src/auth's `checkUserName`). */
  readonly validateAuthUserName?: (name: string) => string | undefined;
  /**
   * Reads the file only when it is a regular file (src/config/regular-file.ts): a reload in the
   * serving process, where a FIFO or a device would block every listener. At start-up any
   * readable file does (`--config <(generate-config)`). Either way at most 4 MiB
   * (MAX_CONFIGURED_FILE_BYTES). Default false.
   */
  readonly isRegularFileRequired?: boolean;
}

/** Keys that may repeat in a section, each line adding one item (SPEC 1.1). */
export const LIST_KEYS = ['pass', 'auth_user', 'tls_cert', 'access'] as const;

/** `[server]` defaults (SPEC 1.2). */
export const SERVER_DEFAULTS: ServerConfig = deepFreeze({
  listen: { host: '0.0.0.0', port: 8080 },
  accessLog: 'stdout',
  accessLogFormat: 'combined',
  trustedProxies: [],
  headerTimeoutMs: 10_000,
  bodyTimeoutMs: 60_000,
  requestTimeoutMs: 0,
  keepaliveTimeoutMs: 5_000,
  maxHeaderSize: 16 * 1024,
  maxBodySize: 0,
  shutdownTimeoutMs: 10_000,
  workers: 1,
  tlsListen: undefined,
  tlsCertificates: [],
  tlsMinVersion: 'TLSv1.2',
  redirectHttps: false,
  hstsMaxAgeSeconds: undefined,
  resolvers: [],
  resolverTimeoutMs: 2_000,
});

/** Route defaults (SPEC 1.2), for every key that has one; `retries` defaults to upstreams − 1. */
export const ROUTE_DEFAULTS: Omit<
  RouteConfig,
  'name' | 'path' | 'host' | 'upstreams' | 'passPath' | 'retries' | 'isRetriesDefault' | 'place'
> = deepFreeze({
  strategy: 'round-robin',
  hash: 'crc32',
  hashKey: { kind: 'client_ip' },
  virtualNodes: 160,
  preserveHost: true,
  connectTimeoutMs: 5_000,
  readTimeoutMs: 60_000,
  maxFails: 1,
  failTimeoutMs: 10_000,
  failFactor: 5,
  health: {
    isEnabled: false,
    method: 'HEAD',
    path: '/',
    intervalMs: 3_000,
    timeoutMs: 2_000,
    fall: 3,
    rise: 2,
    statuses: [{ from: 200, to: 399 }],
  },
  authBasic: undefined,
  authUsers: [],
  authForward: false,
  trace: false,
  tls: { isVerified: true, verifyPlace: undefined, caFile: undefined, caPlace: undefined, serverName: undefined, serverNamePlace: undefined, clientCertificate: undefined },
  access: [],
  rateLimit: undefined,
  connLimit: undefined,
});

/** Upper bounds for whole-number keys, far beyond any sane use but keeping arithmetic exact. */
const MAX_WORKERS = 1024;
const MAX_VIRTUAL_NODES = 10_000;
const MAX_RETRIES = 1000;
const MAX_COUNT = 1_000_000;
/** Names in one ACME certificate: Let's Encrypt issues at most 100. */
const MAX_ACME_DOMAINS = 100;
/** `hsts` up to 10 years (browsers cap max-age lower; preload lists ask for at least one year). */
const MAX_HSTS_MS = 3650 * 86_400_000;
/**
 * `max_header_size` up to 1 MiB: every connection may buffer that much of a head before the 431, so
 * `99g` would let one client grow the process by gigabytes (a break test: 1.29 GB from one
 * connection). nginx's default `large_client_header_buffers` is 4 × 8 KiB.
 */
const MAX_HEADER_SIZE_BYTES = 1024 * 1024;
/** `resolver_timeout` up to one minute: a lookup slower than that is a dead resolver. */
const MAX_RESOLVER_TIMEOUT_MS = 60_000;

/**
 * Reads and validates a config file (SPEC 1).
 *
 * @param file path as given on the command line (default `./env.ini` is the CLI's business); used
 *   as-is in error places.
 * @throws ConfigFileError when the file cannot be read (missing, a directory, no permission, over
 *   4 MiB, or not a regular file when `options.isRegularFileRequired`).
 * @throws ConfigSyntaxError for invalid UTF-8 (at the first bad byte) or bad INI syntax.
 * @throws ConfigValueError for unknown sections or keys, bad values, missing or conflicting settings.
 */
export function loadConfig(file: string, options: LoadConfigOptions = {}): Config {
  let bytes: Buffer;
  try {
    bytes = options.isRegularFileRequired === true ? readRegularFile(file) : readBoundedFile(file);
  } catch (error) {
    throw new ConfigFileError(describeReadError(file, error));
  }
  return parseConfig(decodeUtf8(bytes, file), file, options);
}

/**
 * Validates config text (SPEC 1): parses the INI, then every section and key, applies defaults and
 * `[proxy]` inheritance, and returns the config deeply frozen (RegExp and byte arrays excepted, which
 * `Object.freeze` cannot or need not freeze).
 *
 * @param text the file's content; `file` names it in error places.
 * @returns routes in file order (the router sorts them for matching).
 * @throws ConfigSyntaxError from the INI parser; ConfigValueError for everything SPEC 1.2 forbids.
 */
export function parseConfig(text: string, file: string, options: LoadConfigOptions = {}): Config {
  const document = parseIni(text, file, { listKeys: LIST_KEYS });
  const [strayEntry] = document.root.entries;
  if (strayEntry !== undefined) {
    fail(strayEntry.place, `key '${strayEntry.key}' is outside any section (put it under [server], [admin], [proxy] or a [proxy.NAME] route)`);
  }

  let server = SERVER_DEFAULTS;
  let admin: AdminConfig | undefined;
  let acme: AcmeConfig | undefined;
  let inherited: RouteFields = {};
  const routeSections: { readonly name: string; readonly section: IniSection }[] = [];
  for (const section of document.sections) {
    const name = section.name;
    if (name === 'server') server = readServerSection(section);
    else if (name === 'admin') admin = readAdminSection(section);
    else if (name === 'acme') acme = readAcmeSection(section);
    else if (name === 'proxy') inherited = readRouteFields(section, options);
    else if (name.startsWith('proxy.')) routeSections.push({ name: readRouteName(section), section });
    else rejectSection(section);
  }

  if (routeSections.length === 0) {
    fail({ file, line: 1, column: 1 }, 'the config has no routes (add a [proxy.NAME] section with path and pass)');
  }
  const routes = routeSections.map(({ name, section }) => buildRoute(name, section, inherited, options));
  rejectShadowedRoutes(routes);
  checkListeners(server, acme, document.sections, file);
  if (admin !== undefined) rejectListenCollision(admin, server, document.sections);

  return deepFreeze({ file, server, admin, acme, routes });
}

// ---- sections ------------------------------------------------------------------------------------

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type KeyReader<T> = (target: T, entry: IniEntry) => void;

const SERVER_KEYS: Readonly<Record<string, KeyReader<Mutable<ServerConfig>>>> = {
  listen: (s, e) => (s.listen = read(e, (t) => (t === 'off' ? undefined : parseListenAddress(t)))),
  access_log: (s, e) => {
    s.accessLog = read(e, parseAccessLog);
    s.accessLogPlace = e.valuePlace;
  },
  access_log_format: (s, e) =>
    (s.accessLogFormat = read(e, (t) => parseChoice<AccessLogFormat>(t, ['combined', 'json'], 'access log format'))),
  trusted_proxies: (s, e) =>
    (s.trustedProxies = read(e, parseCidrList).map(({ offset, ...network }) => ({ ...network, place: placeInValue(e, offset) }))),
  header_timeout: (s, e) => (s.headerTimeoutMs = read(e, (t) => parseDuration(t, 1))),
  body_timeout: (s, e) => (s.bodyTimeoutMs = read(e, (t) => parseDuration(t, 0))), // 0 = no limit
  request_timeout: (s, e) => (s.requestTimeoutMs = read(e, (t) => parseDuration(t, 0))), // 0 = no limit
  keepalive_timeout: (s, e) => (s.keepaliveTimeoutMs = read(e, (t) => parseDuration(t, 0))), // 0 = no keep-alive
  max_header_size: (s, e) => (s.maxHeaderSize = read(e, (t) => parseSize(t, 1024, MAX_HEADER_SIZE_BYTES))),
  max_body_size: (s, e) => (s.maxBodySize = read(e, (t) => parseSize(t, 0))), // 0 = no limit
  shutdown_timeout: (s, e) => (s.shutdownTimeoutMs = read(e, (t) => parseDuration(t, 0))),
  workers: (s, e) => (s.workers = read(e, (t) => (t === 'auto' ? 'auto' : parseInteger(t, 1, MAX_WORKERS)))),
  tls_listen: (s, e) => (s.tlsListen = read(e, (t) => (t === 'off' ? undefined : parseListenAddress(t)))),
  tls_cert: (s, e) => (s.tlsCertificates = [...s.tlsCertificates, readCertificateFiles(e)]),
  tls_min_version: (s, e) =>
    (s.tlsMinVersion = read(e, (t) => parseChoice<TlsVersion>(t, ['TLSv1.2', 'TLSv1.3'], 'TLS version'))),
  redirect_https: (s, e) => (s.redirectHttps = read(e, parseBoolean)),
  resolver: (s, e) =>
    (s.resolvers = read(e, (t) => (t === 'system' || t === '' ? [] : parseResolverList(t))).map(({ offset, ...server }) => ({ ...server, place: placeInValue(e, offset) }))),
  resolver_timeout: (s, e) => (s.resolverTimeoutMs = read(e, (t) => parseDuration(t, 1, MAX_RESOLVER_TIMEOUT_MS))),
  hsts: (s, e) => (s.hstsMaxAgeSeconds = read(e, (t) => (t === 'off' ? undefined : Math.floor(parseDuration(t, 0, MAX_HSTS_MS) / 1000)))),
};

function readServerSection(section: IniSection): ServerConfig {
  const server: Mutable<ServerConfig> = { ...SERVER_DEFAULTS };
  for (const entry of section.entries) readKey(SERVER_KEYS, server, entry, section);
  return server;
}

const ADMIN_KEYS: Readonly<Record<string, KeyReader<{ listen?: AdminConfig['listen']; token?: string }>>> = {
  listen: (a, e) => (a.listen = read(e, parseListenAddress)),
  token: (a, e) => (a.token = read(e, parseToken)),
};

/** `[admin]`: undefined unless `listen` is set; a `token` without `listen` is an error. */
function readAdminSection(section: IniSection): AdminConfig | undefined {
  const admin: { listen?: AdminConfig['listen']; token?: string } = {};
  for (const entry of section.entries) readKey(ADMIN_KEYS, admin, entry, section);
  if (admin.listen === undefined) {
    const tokenEntry = section.entries.find((entry) => entry.key === 'token');
    if (tokenEntry !== undefined) fail(tokenEntry.place, "'token' needs 'listen' in [admin] (the admin server is off without it)");
    return undefined;
  }
  return { listen: admin.listen, token: admin.token };
}

const ACME_KEYS: Readonly<Record<string, KeyReader<Partial<Mutable<AcmeConfig>>>>> = {
  domains: (a, e) => {
    a.domains = read(e, parseDomainList);
    a.place = e.valuePlace;
  },
  email: (a, e) => (a.email = read(e, parseEmail)),
  directory: (a, e) => (a.directoryUrl = read(e, parseDirectoryUrl)),
  directory_ca: (a, e) => {
    a.directoryCaFile = read(e, (t) => parseFilePath(t, 'PEM file'));
    a.directoryCaPlace = e.valuePlace;
  },
  storage: (a, e) => {
    a.storageDir = read(e, (t) => parseFilePath(t, 'directory'));
    a.storagePlace = e.valuePlace;
  },
};

/** `[acme]`: undefined unless `domains` is set; other keys without `domains` are an error. */
function readAcmeSection(section: IniSection): AcmeConfig | undefined {
  const acme: Partial<Mutable<AcmeConfig>> = {};
  for (const entry of section.entries) readKey(ACME_KEYS, acme, entry, section);
  if (acme.domains === undefined || acme.place === undefined) {
    const [first] = section.entries;
    if (first !== undefined) fail(first.place, `'${first.key}' needs 'domains' in [acme] (ACME is off without it)`);
    return undefined;
  }
  return {
    domains: acme.domains,
    email: acme.email,
    directoryUrl: acme.directoryUrl ?? LETS_ENCRYPT_DIRECTORY,
    directoryCaFile: acme.directoryCaFile,
    directoryCaPlace: acme.directoryCaPlace,
    storageDir: acme.storageDir ?? './acme',
    storagePlace: acme.storagePlace,
    place: acme.place,
  };
}

/** `[proxy.NAME]` → NAME, which may not contain a further dot. */
function readRouteName(section: IniSection): string {
  const name = section.name.slice('proxy.'.length);
  const dot = name.indexOf('.');
  if (dot >= 0) {
    const column = section.place.column + 1 + 'proxy.'.length + dot;
    fail({ ...section.place, column }, `route names cannot contain '.': [${section.name}] (use e.g. [proxy.${name.replaceAll('.', '-')}])`);
  }
  return name;
}

const TOP_SECTIONS = ['server', 'admin', 'acme', 'proxy'];

function rejectSection(section: IniSection): never {
  const [head = '', ...rest] = section.name.split('.');
  const nameColumn = { ...section.place, column: section.place.column + 1 };
  if (TOP_SECTIONS.includes(head)) {
    fail(nameColumn, `unknown section [${section.name}] ([${head}] has no children; only [proxy.NAME] names a route)`);
  }
  const suggestion = suggest(head, TOP_SECTIONS);
  const wanted = suggestion === undefined ? undefined : [suggestion, ...rest].join('.');
  const note =
    wanted === undefined ? 'expected [server], [admin], [acme], [proxy] or [proxy.NAME]' : `did you mean [${wanted}]?`;
  fail(nameColumn, `unknown section [${section.name}] (${note})`);
}

/** Runs the reader of `entry.key`, or fails with a did-you-mean among the keys of this section. */
function readKey<T>(keys: Readonly<Record<string, KeyReader<T>>>, target: T, entry: IniEntry, section: IniSection): void {
  const reader = Object.hasOwn(keys, entry.key) ? keys[entry.key] : undefined; // not `constructor` of Object.prototype
  if (reader !== undefined) {
    reader(target, entry);
    return;
  }
  const suggestion = suggest(entry.key, Object.keys(keys));
  const homes = [
    ...(Object.hasOwn(SERVER_KEYS, entry.key) ? ['[server]'] : []),
    ...(Object.hasOwn(ADMIN_KEYS, entry.key) ? ['[admin]'] : []),
    ...(Object.hasOwn(ACME_KEYS, entry.key) ? ['[acme]'] : []),
    ...(Object.hasOwn(ROUTE_KEYS, entry.key) ? ['[proxy] or a [proxy.NAME] route'] : []),
  ];
  const note =
    suggestion !== undefined
      ? ` (did you mean '${suggestion}'?)`
      : homes.length > 0
        ? ` (it belongs in ${homes.join(' or ')})`
        : '';
  fail(entry.place, `unknown key '${entry.key}' in [${section.name}]${note}`);
}

// ---- routes ----------------------------------------------------------------------------------------

/**
 * What one section (`[proxy]` or `[proxy.NAME]`) says about a route. A missing field was not written
 * there; `null` means written as "none" (`host = *`, `auth_basic = off`), overriding an inherited value.
 */
interface RouteFields {
  path?: PathMatcher;
  pathPlace?: SourcePlace;
  host?: HostMatcher | null;
  upstreams?: UpstreamConfig[];
  strategy?: StrategyName;
  hash?: HashName;
  hashKey?: HashKey;
  virtualNodes?: number;
  preserveHost?: boolean;
  connectTimeoutMs?: number;
  readTimeoutMs?: number;
  retries?: number;
  maxFails?: number;
  failTimeoutMs?: number;
  failFactor?: number;
  healthCheck?: boolean;
  healthMethod?: string;
  healthPath?: string;
  healthIntervalMs?: number;
  healthTimeoutMs?: number;
  healthFall?: number;
  healthRise?: number;
  healthStatuses?: StatusRange[];
  authBasic?: string | null;
  authUsers?: AuthUser[];
  authForward?: boolean;
  trace?: boolean;
  tlsVerify?: { readonly isVerified: boolean; readonly place: SourcePlace };
  tlsCa?: { readonly file: string; readonly place: SourcePlace };
  tlsServerName?: { readonly name: string; readonly place: SourcePlace };
  tlsClientCertificate?: CertificateFiles | null;
  access?: AccessRule[];
  rateLimit?: RateLimitConfig | null;
  connLimit?: ConnLimitConfig | null;
}

const ROUTE_KEYS: Readonly<Record<string, KeyReader<RouteFields>>> = {
  path: (r, e) => {
    r.path = read(e, parsePathMatcher);
    r.pathPlace = e.valuePlace;
  },
  host: (r, e) => (r.host = read(e, parseHostMatcher)),
  pass: (r, e) => (r.upstreams ??= []).push(parsePassLine(e)),
  strategy: (r, e) => (r.strategy = read(e, (t) => parseChoice(t, STRATEGY_NAMES, 'strategy'))),
  hash: (r, e) => (r.hash = read(e, (t) => parseChoice<HashName>(t, ['crc32', 'fnv1a'], 'hash'))),
  hash_key: (r, e) => (r.hashKey = read(e, parseHashKey)),
  virtual_nodes: (r, e) => (r.virtualNodes = read(e, (t) => parseInteger(t, 1, MAX_VIRTUAL_NODES))),
  preserve_host: (r, e) => (r.preserveHost = read(e, parseBoolean)),
  connect_timeout: (r, e) => (r.connectTimeoutMs = read(e, (t) => parseDuration(t, 1))),
  read_timeout: (r, e) => (r.readTimeoutMs = read(e, (t) => parseDuration(t, 1))),
  retries: (r, e) => (r.retries = read(e, (t) => parseInteger(t, 0, MAX_RETRIES))),
  max_fails: (r, e) => (r.maxFails = read(e, (t) => parseInteger(t, 0, MAX_COUNT))), // 0 = passive health off
  fail_timeout: (r, e) => (r.failTimeoutMs = read(e, (t) => parseDuration(t, 1))),
  fail_factor: (r, e) => (r.failFactor = read(e, (t) => parseInteger(t, 1, MAX_COUNT))),
  health_check: (r, e) => (r.healthCheck = read(e, parseBoolean)),
  health_method: (r, e) => (r.healthMethod = read(e, parseMethod)),
  health_path: (r, e) => (r.healthPath = read(e, parseRequestTarget)),
  health_interval: (r, e) => (r.healthIntervalMs = read(e, (t) => parseDuration(t, 1))),
  health_timeout: (r, e) => (r.healthTimeoutMs = read(e, (t) => parseDuration(t, 1))),
  health_fall: (r, e) => (r.healthFall = read(e, (t) => parseInteger(t, 1, MAX_COUNT))),
  health_rise: (r, e) => (r.healthRise = read(e, (t) => parseInteger(t, 1, MAX_COUNT))),
  health_status: (r, e) => (r.healthStatuses = read(e, parseStatusRanges)),
  auth_basic: (r, e) => (r.authBasic = read(e, parseRealm)),
  auth_user: (r, e) => (r.authUsers ??= []).push(readAuthUser(e)),
  auth_forward: (r, e) => (r.authForward = read(e, parseBoolean)),
  trace: (r, e) => (r.trace = read(e, parseBoolean)),
  tls_verify: (r, e) => (r.tlsVerify = { isVerified: read(e, parseBoolean), place: e.valuePlace }),
  tls_ca: (r, e) => (r.tlsCa = { file: read(e, (t) => parseFilePath(t, 'PEM file')), place: e.valuePlace }),
  tls_server_name: (r, e) => (r.tlsServerName = { name: read(e, parseServerName), place: e.valuePlace }),
  tls_client_cert: (r, e) => (r.tlsClientCertificate = e.value === 'off' ? null : readCertificateFiles(e)),
  access: (r, e) => (r.access ??= []).push({ ...read(e, parseAccessRule), place: e.valuePlace }),
  rate_limit: (r, e) => (r.rateLimit = e.value === 'off' ? null : { ...read(e, parseRateLimit), place: e.valuePlace }),
  conn_limit: (r, e) =>
    (r.connLimit = e.value === 'off' ? null : { maxInFlight: read(e, (t) => parseInteger(t, 1, MAX_COUNT)), place: e.valuePlace }),
};

/** Reads the route keys of `[proxy]` or `[proxy.NAME]`, checking each list where it is written. */
function readRouteFields(section: IniSection, options: LoadConfigOptions): RouteFields {
  const fields: RouteFields = {};
  for (const entry of section.entries) readKey(ROUTE_KEYS, fields, entry, section);
  if (fields.upstreams !== undefined) checkUpstreamList(fields.upstreams);
  if (fields.authUsers !== undefined) checkAuthUsers(fields.authUsers, section, options);
  return fields;
}

/** One route: its own fields over `[proxy]`'s over the defaults, then the checks across keys. */
function buildRoute(name: string, section: IniSection, inherited: RouteFields, options: LoadConfigOptions): RouteConfig {
  const own = readRouteFields(section, options);
  const fields: RouteFields = { ...inherited, ...own };

  const { path, upstreams } = fields;
  if (path === undefined) fail(section.place, `route [${section.name}] has no 'path' (e.g. path = /${name})`);
  if (upstreams === undefined) {
    fail(section.place, `route [${section.name}] has no 'pass' (e.g. pass = http://127.0.0.1:9001)`);
  }

  const firstWithPath = upstreams.find((upstream) => upstream.path !== undefined);
  if (path.kind === 'regex' && firstWithPath !== undefined) {
    fail(
      firstWithPath.place,
      `a pass URL with a path ('${firstWithPath.path}') cannot be used with a regex path in [${section.name}] (nginx refuses it too): drop the path, or use a prefix path`,
    );
  }

  const authBasic = fields.authBasic ?? undefined;
  const authUsers = fields.authUsers ?? ROUTE_DEFAULTS.authUsers;
  const ownAuthUser = section.entries.find((entry) => entry.key === 'auth_user');
  if (authBasic === undefined && ownAuthUser !== undefined) {
    fail(ownAuthUser.place, `'auth_user' needs 'auth_basic' (the realm) in [${section.name}] or [proxy]`);
  }
  if (authBasic !== undefined && authUsers.length === 0) {
    fail(section.place, `route [${section.name}] has 'auth_basic' but no 'auth_user' lines (make one with: node dist/main.js passwd NAME)`);
  }

  const defaults = ROUTE_DEFAULTS;
  return {
    name,
    path,
    ...(fields.pathPlace !== undefined ? { pathPlace: fields.pathPlace } : {}),
    host: fields.host ?? undefined,
    upstreams,
    passPath: upstreams[0]?.path,
    strategy: fields.strategy ?? defaults.strategy,
    hash: fields.hash ?? defaults.hash,
    hashKey: fields.hashKey ?? defaults.hashKey,
    virtualNodes: fields.virtualNodes ?? defaults.virtualNodes,
    preserveHost: fields.preserveHost ?? defaults.preserveHost,
    connectTimeoutMs: fields.connectTimeoutMs ?? defaults.connectTimeoutMs,
    readTimeoutMs: fields.readTimeoutMs ?? defaults.readTimeoutMs,
    retries: fields.retries ?? upstreams.length - 1,
    isRetriesDefault: fields.retries === undefined,
    maxFails: fields.maxFails ?? defaults.maxFails,
    failTimeoutMs: fields.failTimeoutMs ?? defaults.failTimeoutMs,
    failFactor: fields.failFactor ?? defaults.failFactor,
    health: {
      isEnabled: fields.healthCheck ?? defaults.health.isEnabled,
      method: fields.healthMethod ?? defaults.health.method,
      path: fields.healthPath ?? defaults.health.path,
      intervalMs: fields.healthIntervalMs ?? defaults.health.intervalMs,
      timeoutMs: fields.healthTimeoutMs ?? defaults.health.timeoutMs,
      fall: fields.healthFall ?? defaults.health.fall,
      rise: fields.healthRise ?? defaults.health.rise,
      statuses: fields.healthStatuses ?? defaults.health.statuses,
    },
    authBasic,
    authUsers,
    authForward: fields.authForward ?? defaults.authForward,
    trace: fields.trace ?? defaults.trace,
    tls: buildUpstreamTls(fields),
    access: fields.access ?? defaults.access,
    rateLimit: fields.rateLimit ?? defaults.rateLimit,
    connLimit: fields.connLimit ?? defaults.connLimit,
    place: section.place,
  };
}

function buildUpstreamTls(fields: RouteFields): UpstreamTlsConfig {
  const defaults = ROUTE_DEFAULTS.tls;
  return {
    isVerified: fields.tlsVerify?.isVerified ?? defaults.isVerified,
    verifyPlace: fields.tlsVerify?.place ?? defaults.verifyPlace,
    caFile: fields.tlsCa?.file ?? defaults.caFile,
    caPlace: fields.tlsCa?.place ?? defaults.caPlace,
    serverName: fields.tlsServerName?.name ?? defaults.serverName,
    serverNamePlace: fields.tlsServerName?.place ?? defaults.serverNamePlace,
    clientCertificate: fields.tlsClientCertificate ?? defaults.clientCertificate,
  };
}

/** All `pass` URLs of a route agree on the path (SPEC 1.2), and no upstream is listed twice. */
function checkUpstreamList(upstreams: readonly UpstreamConfig[]): void {
  const [first] = upstreams;
  const seen = new Map<string, UpstreamConfig>();
  for (const upstream of upstreams) {
    const earlier = seen.get(upstream.origin);
    if (earlier !== undefined) {
      fail(upstream.place, `upstream ${upstream.origin} is listed twice (first on line ${earlier.place.line}; use weight=N to give it more turns)`);
    }
    seen.set(upstream.origin, upstream);
    if (first !== undefined && upstream.path !== first.path) {
      const pathOffset = upstream.path === undefined ? upstream.url.length : upstream.url.length - upstream.path.length;
      fail(
        { ...upstream.place, column: upstream.place.column + pathOffset },
        `pass URL path ${showPath(upstream.path)} differs from ${showPath(first.path)} on line ${first.place.line} (all pass URLs of a route must agree on the path)`,
      );
    }
  }
}

function showPath(path: string | undefined): string {
  return path === undefined ? '(none)' : `'${path}'`;
}

/** `name:HASH` with a non-empty name; the hash is checked by `options.validateAuthHash` (src/auth). */
function readAuthUser(entry: IniEntry): AuthUser {
  const colon = entry.value.indexOf(':');
  if (colon <= 0) {
    fail(placeInValue(entry, Math.max(colon, 0)), `invalid auth_user '${entry.value}' (expected name:HASH, from: node dist/main.js passwd NAME)`);
  }
  return { name: entry.value.slice(0, colon), hash: entry.value.slice(colon + 1), place: entry.valuePlace };
}

function checkAuthUsers(users: readonly AuthUser[], section: IniSection, options: LoadConfigOptions): void {
  const seen = new Map<string, AuthUser>();
  for (const user of users) {
    const hashPlace = { ...user.place, column: user.place.column + Array.from(user.name).length + 1 };
    const badName = options.validateAuthUserName?.(user.name);
    if (badName !== undefined) fail(user.place, `invalid auth_user in [${section.name}]: ${badName}`);
    const problem = user.hash === '' ? 'is empty' : options.validateAuthHash?.(user.hash);
    if (problem !== undefined) fail(hashPlace, `invalid hash for user '${user.name}' in [${section.name}]: ${problem}`);
    const earlier = seen.get(user.name);
    if (earlier !== undefined) fail(user.place, `user '${user.name}' is listed twice (first on line ${earlier.place.line})`);
    seen.set(user.name, user);
  }
}

/** Two routes with the same path match and the same host: the second could never be chosen. */
function rejectShadowedRoutes(routes: readonly RouteConfig[]): void {
  const seen = new Map<string, RouteConfig>();
  for (const route of routes) {
    const path = route.path.kind === 'prefix' ? `prefix ${route.path.prefix}` : `regex ${route.path.isCaseInsensitive ? "~*" : "~"} ${route.path.source}`;
    const host = route.host === undefined ? 'any' : route.host.kind === 'exact' ? route.host.host : `*${route.host.suffix}`;
    const key = `${path}\n${host}`;
    const earlier = seen.get(key);
    if (earlier !== undefined) {
      fail(route.place, `route [proxy.${route.name}] has the same path and host as [proxy.${earlier.name}] on line ${earlier.place.line} (it could never be chosen)`);
    }
    seen.set(key, route);
  }
}

/**
 * The listeners and what needs them: at least one listener; `tls_listen` has certificates (`tls_cert`
 * or `[acme]`) and `tls_cert` has a `tls_listen`; `redirect_https` needs both listeners; `hsts` needs
 * `tls_listen`; `[acme]` needs both (the HTTP-01 challenge is answered on the plain listener, RFC 8555
 * section 8.3, and the certificate is served on the TLS one); the two listeners do not collide.
 */
function checkListeners(server: ServerConfig, acme: AcmeConfig | undefined, sections: readonly IniSection[], file: string): void {
  const serverSection = sections.find((section) => section.name === 'server');
  const entryOf = (key: string): IniEntry | undefined => serverSection?.entries.find((entry) => entry.key === key);
  const placeOf = (key: string): SourcePlace => entryOf(key)?.place ?? serverSection?.place ?? { file, line: 1, column: 1 };
  if (server.listen === undefined && server.tlsListen === undefined) {
    fail(placeOf('listen'), "'listen = off' needs 'tls_listen' in [server] (the proxy would have no listener)");
  }
  const [firstCertificate] = server.tlsCertificates;
  if (server.tlsListen === undefined) {
    if (firstCertificate !== undefined) fail(placeOf('tls_cert'), "'tls_cert' needs 'tls_listen' in [server] (the HTTPS listener)");
    if (server.redirectHttps) fail(placeOf('redirect_https'), "'redirect_https' needs 'tls_listen' in [server] (there is no HTTPS listener to redirect to)");
    if (server.hstsMaxAgeSeconds !== undefined) fail(placeOf('hsts'), "'hsts' needs 'tls_listen' in [server] (HSTS is sent on HTTPS responses only)");
    if (acme !== undefined) fail(acme.place, "[acme] needs 'tls_listen' in [server] (where its certificate is served)");
    return;
  }
  if (firstCertificate === undefined && acme === undefined) {
    fail(placeOf('tls_listen'), "'tls_listen' needs certificates: 'tls_cert = CERT.pem KEY.pem' lines in [server], or an [acme] section");
  }
  if (server.listen === undefined) {
    if (server.redirectHttps) fail(placeOf('redirect_https'), "'redirect_https' needs the plain 'listen' in [server] (it is 'off')");
    if (acme !== undefined) fail(acme.place, "[acme] needs the plain 'listen' in [server]: the HTTP-01 challenge is answered there (port 80 for a public ACME server)");
    return;
  }
  if (collides(server.listen, server.tlsListen)) {
    fail(entryOf('tls_listen')?.valuePlace ?? placeOf('tls_listen'), `'tls_listen' collides with 'listen' on port ${server.tlsListen.port}`);
  }
}

/** Two listen addresses that cannot both be bound: the same non-zero port on an overlapping host. */
function collides(a: ListenAddress, b: ListenAddress): boolean {
  const isWildcard = (host: string): boolean => host === '0.0.0.0' || host === '::';
  return a.port !== 0 && a.port === b.port && (a.host === b.host || isWildcard(a.host) || isWildcard(b.host));
}

/** The admin server cannot bind where the proxy listens (plain or TLS). */
function rejectListenCollision(admin: AdminConfig, server: ServerConfig, sections: readonly IniSection[]): void {
  const listener = [server.listen, server.tlsListen].find((address) => address !== undefined && collides(admin.listen, address));
  if (listener === undefined) return;
  const which = listener === server.listen ? 'listen' : 'tls_listen';
  const entry = sections.find((section) => section.name === 'admin')?.entries.find((e) => e.key === 'listen');
  if (entry !== undefined) fail(entry.valuePlace, `admin 'listen' collides with [server] ${which} on port ${listener.port}`);
}

// ---- route value parsers (each throws InvalidValueError, like values.ts) -------------------------------

const PATH_HINT = "expected a prefix starting with '/', or ~ REGEX, or ~* REGEX";

/** `/prefix`, `~ REGEX` (case-sensitive) or `~* REGEX` (case-insensitive), as nginx `location`. */
function parsePathMatcher(text: string): PathMatcher {
  if (text.startsWith('~')) {
    const isCaseInsensitive = text.startsWith('~*');
    const operatorLength = isCaseInsensitive ? 2 : 1;
    const source = text.slice(operatorLength).trimStart();
    const sourceOffset = text.length - source.length;
    if (source === '') throw new InvalidValueError(`missing regular expression after '${text}'`, 'expected e.g. ~ ^/api/v[0-9]+/', sourceOffset);
    try {
      return { kind: 'regex', regex: compileRouteRegex(source, isCaseInsensitive), source, isCaseInsensitive };
    } catch (error) {
      throw new InvalidValueError(`invalid regular expression '${source}'`, (error as Error).message, sourceOffset);
    }
  }
  if (!text.startsWith('/')) throw new InvalidValueError(`invalid path '${text}'`, PATH_HINT);
  const bad = text.search(/[^\x21-\x7e]|[?#]/);
  if (bad >= 0) {
    throw new InvalidValueError(`invalid character in path '${text}'`, 'a prefix is ASCII without ? or #; percent-encode other characters', bad);
  }
  return { kind: 'prefix', prefix: text };
}

const HOST_HINT = 'expected a host name like example.com, *.example.com, or * for any host';

/** `example.com`, `10.0.0.1`, `[::1]` (exact, lowercased), `*.example.com` (wildcard), or `*` (any: null). */
function parseHostMatcher(text: string): HostMatcher | null {
  const host = text.toLowerCase();
  if (host === '*') return null;
  if (host.startsWith('*.')) {
    if (!isHostName(host.slice(2))) throw new InvalidValueError(`invalid host '${text}'`, HOST_HINT);
    return { kind: 'wildcard', suffix: host.slice(1) };
  }
  const isBracketedIPv6 = host.startsWith('[') && host.endsWith(']') && isIPv6(host.slice(1, -1));
  if (!isBracketedIPv6 && !isIPv4(host) && !isHostName(host)) {
    throw new InvalidValueError(`invalid host '${text}'`, `${HOST_HINT}; no port`);
  }
  return { kind: 'exact', host };
}

/** `client_ip`, `uri`, `header:NAME` (lowercased) or `cookie:NAME`. */
function parseHashKey(text: string): HashKey {
  if (text === 'client_ip' || text === 'uri') return { kind: text };
  const colon = text.indexOf(':');
  const kind = colon < 0 ? text : text.slice(0, colon);
  const name = text.slice(colon + 1);
  if (colon >= 0 && (kind === 'header' || kind === 'cookie')) {
    if (!TOKEN.test(name)) throw new InvalidValueError(`invalid ${kind} name '${name}'`, 'expected a token, e.g. header:x-user-id', colon + 1);
    return kind === 'header' ? { kind, name: name.toLowerCase() } : { kind, name };
  }
  const suggestion = suggest(kind, ['client_ip', 'uri', 'header', 'cookie']);
  const note =
    suggestion === undefined
      ? 'expected client_ip, uri, header:NAME or cookie:NAME'
      : `did you mean '${suggestion === 'header' || suggestion === 'cookie' ? `${suggestion}:NAME` : suggestion}'?`;
  throw new InvalidValueError(`unknown hash key '${text}'`, note);
}

/** RFC 9110 section 5.6.2 `token`: what a method or a header name is made of. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** An HTTP method (a token, RFC 9110 section 9.1), kept as written: methods are case-sensitive. */
function parseMethod(text: string): string {
  if (!TOKEN.test(text)) throw new InvalidValueError(`invalid method '${text}'`, 'expected e.g. HEAD or GET');
  return text;
}

/** A request target in origin form (`/health?full=1`): starts with `/`, visible ASCII only. */
function parseRequestTarget(text: string): string {
  if (!text.startsWith('/') || /[^\x21-\x7e]/.test(text)) {
    throw new InvalidValueError(`invalid path '${text}'`, "expected a path starting with '/', ASCII without spaces");
  }
  return text;
}

/** The `auth_basic` realm, or null for `off`. Printable ASCII: it goes into WWW-Authenticate. */
function parseRealm(text: string): string | null {
  if (text === 'off') return null;
  if (text === '' || /[^\x20-\x7e]/.test(text)) {
    throw new InvalidValueError(`invalid realm '${text}'`, 'expected printable ASCII text, or off');
  }
  return text;
}

/** The admin bearer token: visible ASCII, no spaces (RFC 6750 section 2.1 allows less; this is enough). */
function parseToken(text: string): string {
  if (text === '' || /[^\x21-\x7e]/.test(text)) {
    throw new InvalidValueError('invalid token', 'expected visible ASCII characters without spaces');
  }
  return text;
}

/** `CERT.pem KEY.pem` (`tls_cert`, `tls_client_cert`): two paths separated by blanks. */
function readCertificateFiles(entry: IniEntry): CertificateFiles {
  const paths = Array.from(entry.value.matchAll(/[^ \t]+/g));
  const [cert, key, extra] = paths;
  if (cert === undefined || key === undefined || extra !== undefined) {
    const offset = extra?.index ?? entry.value.length;
    fail(placeInValue(entry, offset), `invalid '${entry.key}' (expected two paths: CERT.pem KEY.pem)`);
  }
  return {
    certFile: cert[0],
    keyFile: key[0],
    place: placeInValue(entry, cert.index ?? 0),
    keyPlace: placeInValue(entry, key.index ?? 0),
  };
}

/** A file or directory path: not empty. The file itself is read where it is used. */
function parseFilePath(text: string, what: string): string {
  if (text === '') throw new InvalidValueError(`empty ${what} path`, `expected the path of a ${what}`);
  return text;
}

/** `tls_server_name`: a DNS name or an IP address (lowercased); the name the upstream's certificate must show. */
function parseServerName(text: string): string {
  const name = text.toLowerCase();
  if (!isHostName(name) && !isIPv4(name) && !isIPv6(name)) {
    throw new InvalidValueError(`invalid server name '${text}'`, 'expected a DNS name like api.example.com, or an IP address');
  }
  return name;
}

/** `[acme] domains`: comma-separated DNS names, lowercased, no duplicates, no wildcards. */
function parseDomainList(text: string): string[] {
  const domains: string[] = [];
  let offset = 0;
  for (const item of text.split(',')) {
    const name = item.trim().toLowerCase();
    const at = offset + item.length - item.trimStart().length;
    offset += item.length + 1;
    if (name.startsWith('*.')) {
      throw new InvalidValueError(`wildcard domain '${name}'`, 'the HTTP-01 challenge cannot prove a wildcard name (RFC 8555 section 8.3); list each name', at);
    }
    if (!isHostName(name) || !name.includes('.')) {
      throw new InvalidValueError(`invalid domain '${item.trim()}'`, 'expected DNS names separated by commas, e.g. example.com, www.example.com', at);
    }
    if (name.includes('_')) {
      // A host name has no `_` (RFC 1123 §2.1); CAs may not put one in a certificate, and Let's Encrypt refuses the order.
      throw new InvalidValueError(`invalid domain '${item.trim()}'`, "a certificate's DNS name cannot contain '_'", at);
    }
    if (domains.includes(name)) throw new InvalidValueError(`domain '${name}' is listed twice`, undefined, at);
    domains.push(name);
  }
  if (domains.length > MAX_ACME_DOMAINS) {
    throw new InvalidValueError(`${domains.length} domains`, `one certificate names at most ${MAX_ACME_DOMAINS} (Let's Encrypt's limit); split them over several proxies or use tls_cert`);
  }
  return domains;
}

/** `[acme] email`: one address, `local@domain`, no spaces or commas. */
function parseEmail(text: string): string {
  if (!/^[^\s@,<>]+@[^\s@,<>]+\.[^\s@,<>]+$/.test(text)) {
    throw new InvalidValueError(`invalid email '${text}'`, 'expected an address like admin@example.com');
  }
  return text;
}

/** `[acme] directory`: an https:// URL (RFC 8555 section 6.1: ACME runs over HTTPS only). */
function parseDirectoryUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidValueError(`invalid directory URL '${text}'`, 'expected e.g. https://acme-v02.api.letsencrypt.org/directory');
  }
  if (url.protocol !== 'https:') throw new InvalidValueError(`invalid directory URL '${text}'`, 'ACME directories are https:// URLs (RFC 8555 section 6.1)');
  return text;
}

/** `stdout`, `stderr`, `off`, or a file path (appended). */
function parseAccessLog(text: string): string {
  if (text === '') throw new InvalidValueError('empty access log', 'expected stdout, stderr, off or a file path');
  return text;
}

// ---- plumbing --------------------------------------------------------------------------------------

/** Parses `entry.value`; an InvalidValueError becomes a ConfigValueError at the value, naming the key. */
function read<T>(entry: IniEntry, parse: (text: string) => T): T {
  try {
    return parse(entry.value);
  } catch (error) {
    if (!(error instanceof InvalidValueError)) throw error;
    const note = error.note === undefined ? '' : ` (${error.note})`;
    throw new ConfigValueError(placeInValue(entry, error.offset), `${error.problem} for '${entry.key}'${note}`);
  }
}

function fail(place: SourcePlace, reason: string): never {
  throw new ConfigValueError(place, reason);
}

function describeReadError(file: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return `config file '${file}' not found (use --config PATH to name another)`;
  if (code === 'EISDIR') return `config file '${file}' is a directory`;
  if (code === 'ENOTREG') return `config file '${file}' is not a regular file (a FIFO or a device is read at start-up only)`;
  if (code === 'EFBIG') return `config file '${file}' is over ${MAX_CONFIGURED_FILE_BYTES} bytes (4 MiB), the largest config file read`;
  if (code === 'EACCES' || code === 'EPERM') return `cannot read config file '${file}': permission denied`;
  return `cannot read config file '${file}': ${(error as Error).message}`;
}

/** Decodes strict UTF-8; an invalid byte is a ConfigSyntaxError at its line and column. */
function decodeUtf8(bytes: Uint8Array, file: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    // The lenient decoding re-encodes identically up to the first invalid byte.
    const reencoded = Buffer.from(new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes), 'utf8');
    let offset = 0;
    while (offset < bytes.length && bytes[offset] === reencoded[offset]) offset++;
    const before = Buffer.from(bytes.subarray(0, offset)).toString('utf8');
    const lines = before.split('\n');
    const lastLine = lines[lines.length - 1] ?? '';
    const bomWidth = lines.length === 1 && lastLine.startsWith('\uFEFF') ? 1 : 0;
    const place = { file, line: lines.length, column: Array.from(lastLine).length - bomWidth + 1 };
    const byte = (bytes[offset] ?? 0).toString(16).toUpperCase().padStart(2, '0');
    throw new ConfigSyntaxError(place, `invalid UTF-8 byte 0x${byte} (the config file must be UTF-8)`);
  }
}

/** Freezes plain objects and arrays all the way down; RegExp and typed arrays are left as they are. */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  if (value instanceof RegExp || ArrayBuffer.isView(value)) return value;
  for (const child of Object.values(value)) deepFreeze(child);
  return Object.freeze(value);
}
