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
import { readFileSync } from 'node:fs';
import { isIPv4, isIPv6 } from 'node:net';
import { ConfigFileError, ConfigSyntaxError, ConfigValueError, type SourcePlace } from '../errors.js';
import {
  STRATEGY_NAMES,
  type AccessLogFormat,
  type AdminConfig,
  type AuthUser,
  type Config,
  type HashKey,
  type HashName,
  type HostMatcher,
  type PathMatcher,
  type RouteConfig,
  type ServerConfig,
  type StatusRange,
  type StrategyName,
  type UpstreamConfig,
} from './config.js';
import { suggest } from './did-you-mean.js';
import { parseIni, placeInValue, type IniEntry, type IniSection } from './ini-parser.js';
import { parsePassLine } from './pass-line.js';
import {
  InvalidValueError,
  isHostName,
  parseBoolean,
  parseChoice,
  parseCidrList,
  parseDuration,
  parseInteger,
  parseListenAddress,
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
}

/** Keys that may repeat in a section, each line adding one item (SPEC 1.1). */
export const LIST_KEYS = ['pass', 'auth_user'] as const;

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
});

/** Route defaults (SPEC 1.2), for every key that has one; `retries` defaults to upstreams − 1. */
export const ROUTE_DEFAULTS: Omit<
  RouteConfig,
  'name' | 'path' | 'host' | 'upstreams' | 'passPath' | 'retries' | 'place'
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
});

/** Upper bounds for whole-number keys, far beyond any sane use but keeping arithmetic exact. */
const MAX_WORKERS = 1024;
const MAX_VIRTUAL_NODES = 10_000;
const MAX_RETRIES = 1000;
const MAX_COUNT = 1_000_000;

/**
 * Reads and validates a config file (SPEC 1).
 *
 * @param file path as given on the command line (default `./env.ini` is the CLI's business); used
 *   as-is in error places.
 * @throws ConfigFileError when the file cannot be read (missing, a directory, no permission).
 * @throws ConfigSyntaxError for invalid UTF-8 (at the first bad byte) or bad INI syntax.
 * @throws ConfigValueError for unknown sections or keys, bad values, missing or conflicting settings.
 */
export function loadConfig(file: string, options: LoadConfigOptions = {}): Config {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
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
  let inherited: RouteFields = {};
  const routeSections: { readonly name: string; readonly section: IniSection }[] = [];
  for (const section of document.sections) {
    const name = section.name;
    if (name === 'server') server = readServerSection(section);
    else if (name === 'admin') admin = readAdminSection(section);
    else if (name === 'proxy') inherited = readRouteFields(section, options);
    else if (name.startsWith('proxy.')) routeSections.push({ name: readRouteName(section), section });
    else rejectSection(section);
  }

  if (routeSections.length === 0) {
    fail({ file, line: 1, column: 1 }, 'the config has no routes (add a [proxy.NAME] section with path and pass)');
  }
  const routes = routeSections.map(({ name, section }) => buildRoute(name, section, inherited, options));
  rejectShadowedRoutes(routes);
  if (admin !== undefined) rejectListenCollision(admin, server, document.sections);

  return deepFreeze({ file, server, admin, routes });
}

// ---- sections ------------------------------------------------------------------------------------

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type KeyReader<T> = (target: T, entry: IniEntry) => void;

const SERVER_KEYS: Readonly<Record<string, KeyReader<Mutable<ServerConfig>>>> = {
  listen: (s, e) => (s.listen = read(e, parseListenAddress)),
  access_log: (s, e) => {
    s.accessLog = read(e, parseAccessLog);
    s.accessLogPlace = e.valuePlace;
  },
  access_log_format: (s, e) =>
    (s.accessLogFormat = read(e, (t) => parseChoice<AccessLogFormat>(t, ['combined', 'json'], 'access log format'))),
  trusted_proxies: (s, e) => (s.trustedProxies = read(e, parseCidrList)),
  header_timeout: (s, e) => (s.headerTimeoutMs = read(e, (t) => parseDuration(t, 1))),
  body_timeout: (s, e) => (s.bodyTimeoutMs = read(e, (t) => parseDuration(t, 0))), // 0 = no limit
  request_timeout: (s, e) => (s.requestTimeoutMs = read(e, (t) => parseDuration(t, 0))), // 0 = no limit
  keepalive_timeout: (s, e) => (s.keepaliveTimeoutMs = read(e, (t) => parseDuration(t, 0))), // 0 = no keep-alive
  max_header_size: (s, e) => (s.maxHeaderSize = read(e, (t) => parseSize(t, 1024))),
  max_body_size: (s, e) => (s.maxBodySize = read(e, (t) => parseSize(t, 0))), // 0 = no limit
  shutdown_timeout: (s, e) => (s.shutdownTimeoutMs = read(e, (t) => parseDuration(t, 0))),
  workers: (s, e) => (s.workers = read(e, (t) => (t === 'auto' ? 'auto' : parseInteger(t, 1, MAX_WORKERS)))),
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

const TOP_SECTIONS = ['server', 'admin', 'proxy'];

function rejectSection(section: IniSection): never {
  const [head = '', ...rest] = section.name.split('.');
  const nameColumn = { ...section.place, column: section.place.column + 1 };
  if (TOP_SECTIONS.includes(head)) {
    fail(nameColumn, `unknown section [${section.name}] ([${head}] has no children; only [proxy.NAME] names a route)`);
  }
  const suggestion = suggest(head, TOP_SECTIONS);
  const wanted = suggestion === undefined ? undefined : [suggestion, ...rest].join('.');
  const note =
    wanted === undefined ? 'expected [server], [admin], [proxy] or [proxy.NAME]' : `did you mean [${wanted}]?`;
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
}

const ROUTE_KEYS: Readonly<Record<string, KeyReader<RouteFields>>> = {
  path: (r, e) => (r.path = read(e, parsePathMatcher)),
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
    place: section.place,
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
    const path = route.path.kind === 'prefix' ? `prefix ${route.path.prefix}` : `regex ${route.path.regex.flags} ${route.path.source}`;
    const host = route.host === undefined ? 'any' : route.host.kind === 'exact' ? route.host.host : `*${route.host.suffix}`;
    const key = `${path}\n${host}`;
    const earlier = seen.get(key);
    if (earlier !== undefined) {
      fail(route.place, `route [proxy.${route.name}] has the same path and host as [proxy.${earlier.name}] on line ${earlier.place.line} (it could never be chosen)`);
    }
    seen.set(key, route);
  }
}

/** The admin server cannot bind where the proxy listens (a non-zero port on an overlapping host). */
function rejectListenCollision(admin: AdminConfig, server: ServerConfig, sections: readonly IniSection[]): void {
  const a = admin.listen;
  const s = server.listen;
  const isWildcard = (host: string): boolean => host === '0.0.0.0' || host === '::';
  if (a.port === 0 || a.port !== s.port || !(a.host === s.host || isWildcard(a.host) || isWildcard(s.host))) return;
  const entry = sections.find((section) => section.name === 'admin')?.entries.find((e) => e.key === 'listen');
  if (entry !== undefined) fail(entry.valuePlace, `admin 'listen' collides with [server] listen on port ${a.port}`);
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
      return { kind: 'regex', regex: new RegExp(source, isCaseInsensitive ? 'i' : ''), source };
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
