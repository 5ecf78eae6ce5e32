/**
 * The config loader (SPEC 1.2): the tutorial's file, every default, [proxy] inheritance, pass lines,
 * the checks across keys, and every kind of value error with its exact place and message.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Config, RouteConfig } from '../../src/config/config.js';
import { ROUTE_DEFAULTS, SERVER_DEFAULTS, loadConfig, parseConfig, type LoadConfigOptions } from '../../src/config/load-config.js';
import { ConfigFileError, ConfigSyntaxError, ConfigValueError } from '../../src/errors.js';

const TUTORIAL = `[proxy]

[proxy.a]
path=/a
pass=http://localhost:9001

[proxy.b]
path=/b
pass=http://localhost:9002
`;

const ROUTE = '[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\n';

function route(config: Config, name: string): RouteConfig {
  const found = config.routes.find((r) => r.name === name);
  assert.ok(found, `got no route ${name}, want one`);
  return found;
}

/** The message of the ConfigValueError (or ConfigSyntaxError) that `text` raises. */
function errorMessage(text: string, options?: LoadConfigOptions): string {
  try {
    parseConfig(text, 'env.ini', options);
  } catch (error) {
    if (error instanceof ConfigValueError || error instanceof ConfigSyntaxError) return error.message;
    throw error;
  }
  assert.fail(`got a config, want an error for:\n${text}`);
}

function assertError(text: string, message: string, options?: LoadConfigOptions): void {
  const got = errorMessage(text, options);
  assert.equal(got, message, `got ${JSON.stringify(got)}, want ${JSON.stringify(message)}`);
}

describe("the tutorial's file", () => {
  it('loads unchanged into two prefix routes with one upstream each', () => {
    const config = parseConfig(TUTORIAL, 'env.ini');
    assert.deepEqual(
      config.routes.map((r) => [r.name, r.path, r.upstreams.map((u) => u.origin), r.passPath, r.retries]),
      [
        ['a', { kind: 'prefix', prefix: '/a' }, ['http://localhost:9001'], undefined, 0],
        ['b', { kind: 'prefix', prefix: '/b' }, ['http://localhost:9002'], undefined, 0],
      ],
    );
    assert.deepEqual(config.server, SERVER_DEFAULTS);
    assert.equal(config.admin, undefined);
    assert.equal(config.file, 'env.ini');
  });

  it('is what /work/main/env.ini holds, and that file loads from disk', () => {
    const file = fileURLToPath(new URL('../../env.ini', import.meta.url));
    const config = loadConfig(file);
    assert.deepEqual(config.routes.map((r) => r.upstreams[0]?.url), ['http://localhost:9001', 'http://localhost:9002']);
    assert.deepEqual(config.server.listen, { host: '0.0.0.0', port: 8080 });
  });

  it('loads the same with a BOM and CRLF line ends', () => {
    const plain = parseConfig(TUTORIAL, 'env.ini');
    const windows = parseConfig('\uFEFF' + TUTORIAL.replaceAll('\n', '\r\n'), 'env.ini');
    assert.deepEqual(windows, plain);
  });

  it('is deeply frozen', () => {
    const config = parseConfig(TUTORIAL, 'env.ini');
    assert.ok(Object.isFrozen(config), 'got a mutable config, want frozen');
    assert.ok(Object.isFrozen(config.routes), 'got mutable routes');
    assert.ok(Object.isFrozen(config.routes[0]?.upstreams[0]), 'got a mutable upstream');
    assert.ok(Object.isFrozen(config.routes[0]?.health.statuses[0]), 'got a mutable status range');
    assert.ok(Object.isFrozen(config.server.listen), 'got a mutable listen address');
  });
});

describe('defaults', () => {
  it('fills every [server] key (SPEC 1.2)', () => {
    assert.deepEqual(parseConfig(ROUTE, 'env.ini').server, {
      listen: { host: '0.0.0.0', port: 8080 },
      accessLog: 'stdout',
      accessLogFormat: 'combined',
      trustedProxies: [],
      headerTimeoutMs: 10_000,
      bodyTimeoutMs: 60_000,
      requestTimeoutMs: 0,
      keepaliveTimeoutMs: 5_000,
      maxHeaderSize: 16_384,
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
  });

  it('fills every route key (SPEC 1.2)', () => {
    const { upstreams, place, ...rest } = route(parseConfig(ROUTE, 'env.ini'), 'a');
    assert.equal(upstreams.length, 1);
    assert.deepEqual(place, { file: 'env.ini', line: 1, column: 1 });
    assert.deepEqual(rest, {
      name: 'a',
      path: { kind: 'prefix', prefix: '/a' },
      pathPlace: { file: 'env.ini', line: 2, column: 8 },
      host: undefined,
      passPath: undefined,
      strategy: 'round-robin',
      hash: 'crc32',
      hashKey: { kind: 'client_ip' },
      virtualNodes: 160,
      preserveHost: true,
      connectTimeoutMs: 5_000,
      readTimeoutMs: 60_000,
      retries: 0,
      isRetriesDefault: true,
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
    assert.equal(ROUTE_DEFAULTS.virtualNodes, 160);
  });

  it('defaults retries to the number of pass lines minus one', () => {
    const config = parseConfig('[proxy.a]\npath=/\npass=http://a\npass=http://b backup\npass=http://c down\n', 'env.ini');
    assert.equal(route(config, 'a').retries, 2, `got ${route(config, 'a').retries}, want 2`);
  });

  it('leaves admin off without [admin] listen', () => {
    assert.equal(parseConfig('[admin]\n' + ROUTE, 'env.ini').admin, undefined);
  });
});

describe('every key, set', () => {
  const FULL = `
[server]
listen = 127.0.0.1:0
access_log = /var/log/proxy.log
access_log_format = json
trusted_proxies = 10.0.0.0/8, ::1
header_timeout = 2s
body_timeout = 30s
request_timeout = 0
keepalive_timeout = 500ms
max_header_size = 8k
max_body_size = 1m
shutdown_timeout = 1m
workers = auto
tls_listen = 127.0.0.1:8443
tls_cert = certs/a.pem certs/a.key
tls_cert = "certs/b.pem	certs/b.key"
tls_min_version = TLSv1.3
redirect_https = on
hsts = 365d
resolver = 127.0.0.53:5353
resolver_timeout = 750ms

[admin]
listen = [::1]:9090
token = s3cret-token

[proxy.api]
path = ~* ^/API/v[0-9]+/
host = *.Example.com
pass = http://[::1]:9001 weight=3
pass = http://10.0.0.2 backup
pass = http://web3.internal:8080 down
strategy = consistent-hash
hash = fnv1a
hash_key = header:X-User-ID
virtual_nodes = 40
preserve_host = off
connect_timeout = 1.5s
read_timeout = 2m
retries = 1
max_fails = 0
fail_timeout = 30s
fail_factor = 2
health_check = on
health_method = GET
health_path = /healthz?full=1
health_interval = 10s
health_timeout = 1s
health_fall = 5
health_rise = 4
health_status = 200,204,300-399
auth_basic = "Staff only"
auth_user = tom:HASH1
auth_user = ann:HASH2
auth_forward = yes
trace = true
tls_verify = off
tls_ca = ca.pem
tls_server_name = API.internal
tls_client_cert = me.pem me.key
access = deny 10.1.2.3/8
access = allow all
rate_limit = 600/m
conn_limit = 4
`;

  it('reads [server] and [admin]', () => {
    const config = parseConfig(FULL, 'env.ini');
    const { trustedProxies, ...server } = config.server;
    assert.deepEqual(server, {
      listen: { host: '127.0.0.1', port: 0 },
      accessLog: '/var/log/proxy.log',
      accessLogPlace: { file: 'env.ini', line: 4, column: 14 },
      accessLogFormat: 'json',
      headerTimeoutMs: 2_000,
      bodyTimeoutMs: 30_000,
      requestTimeoutMs: 0,
      keepaliveTimeoutMs: 500,
      maxHeaderSize: 8_192,
      maxBodySize: 1_048_576,
      shutdownTimeoutMs: 60_000,
      workers: 'auto',
      tlsListen: { host: '127.0.0.1', port: 8443 },
      tlsCertificates: [
        { certFile: 'certs/a.pem', keyFile: 'certs/a.key', place: { file: 'env.ini', line: 16, column: 12 }, keyPlace: { file: 'env.ini', line: 16, column: 24 } },
        { certFile: 'certs/b.pem', keyFile: 'certs/b.key', place: { file: 'env.ini', line: 17, column: 13 }, keyPlace: { file: 'env.ini', line: 17, column: 25 } },
      ],
      tlsMinVersion: 'TLSv1.3',
      redirectHttps: true,
      hstsMaxAgeSeconds: 31_536_000,
      resolvers: [{ host: '127.0.0.53', port: 5353, source: '127.0.0.53:5353', place: { file: 'env.ini', line: 21, column: 12 } }],
      resolverTimeoutMs: 750,
    });
    assert.deepEqual(trustedProxies.map((n) => n.source), ['10.0.0.0/8', '::1']);
    assert.deepEqual(config.admin, { listen: { host: '::1', port: 9090 }, token: 's3cret-token' });
  });

  it('reads every route key', () => {
    const api = route(parseConfig(FULL, 'env.ini'), 'api');
    assert.equal(api.path.kind, 'regex');
    assert.ok(api.path.kind === 'regex' && api.path.regex.test('/api/v2/x') && api.path.source === '^/API/v[0-9]+/');
    assert.deepEqual(api.host, { kind: 'wildcard', suffix: '.example.com' });
    assert.equal(api.passPath, undefined);
    assert.deepEqual(
      api.upstreams.map((u) => [u.origin, u.host, u.port, u.hostHeader, u.path, u.weight, u.isBackup, u.isDown]),
      [
        ['http://[::1]:9001', '::1', 9001, '[::1]:9001', undefined, 3, false, false],
        ['http://10.0.0.2:80', '10.0.0.2', 80, '10.0.0.2', undefined, 1, true, false],
        ['http://web3.internal:8080', 'web3.internal', 8080, 'web3.internal:8080', undefined, 1, false, true],
      ],
    );
    const lineOf = (text: string): number => FULL.split('\n').indexOf(text) + 1;
    const { upstreams, path, pathPlace, host, passPath, place, health, authUsers, ...rest } = api;
    assert.deepEqual(pathPlace, { file: 'env.ini', line: lineOf('path = ~* ^/API/v[0-9]+/'), column: 8 });
    assert.deepEqual(rest, {
      name: 'api',
      strategy: 'consistent-hash',
      hash: 'fnv1a',
      hashKey: { kind: 'header', name: 'x-user-id' },
      virtualNodes: 40,
      preserveHost: false,
      connectTimeoutMs: 1_500,
      readTimeoutMs: 120_000,
      retries: 1,
      isRetriesDefault: false,
      maxFails: 0,
      failTimeoutMs: 30_000,
      failFactor: 2,
      authBasic: 'Staff only',
      authForward: true,
      trace: true,
      tls: {
        isVerified: false,
        verifyPlace: { file: 'env.ini', line: lineOf('tls_verify = off'), column: 14 },
        caFile: 'ca.pem',
        caPlace: { file: 'env.ini', line: lineOf('tls_ca = ca.pem'), column: 10 },
        serverName: 'api.internal',
        serverNamePlace: { file: 'env.ini', line: lineOf('tls_server_name = API.internal'), column: 19 },
        clientCertificate: {
          certFile: 'me.pem',
          keyFile: 'me.key',
          place: { file: 'env.ini', line: lineOf('tls_client_cert = me.pem me.key'), column: 19 },
          keyPlace: { file: 'env.ini', line: lineOf('tls_client_cert = me.pem me.key'), column: 26 },
        },
      },
      access: [
        {
          isAllowed: false,
          network: { family: 4, bytes: new Uint8Array([10, 0, 0, 0]), prefixLength: 8, source: '10.1.2.3/8' },
          place: { file: 'env.ini', line: lineOf('access = deny 10.1.2.3/8'), column: 10 },
        },
        { isAllowed: true, network: undefined, place: { file: 'env.ini', line: lineOf('access = allow all'), column: 10 } },
      ],
      rateLimit: { requests: 600, periodMs: 60_000, burst: 10, source: '600/m burst=10', place: { file: 'env.ini', line: lineOf('rate_limit = 600/m'), column: 14 } },
      connLimit: { maxInFlight: 4, place: { file: 'env.ini', line: lineOf('conn_limit = 4'), column: 14 } },
    });
    assert.deepEqual(health, {
      isEnabled: true,
      method: 'GET',
      path: '/healthz?full=1',
      intervalMs: 10_000,
      timeoutMs: 1_000,
      fall: 5,
      rise: 4,
      statuses: [
        { from: 200, to: 200 },
        { from: 204, to: 204 },
        { from: 300, to: 399 },
      ],
    });
    assert.deepEqual(authUsers.map((u) => [u.name, u.hash, u.place.line, u.place.column]), [
      ['tom', 'HASH1', lineOf('auth_user = tom:HASH1'), 13],
      ['ann', 'HASH2', lineOf('auth_user = ann:HASH2'), 13],
    ]);
  });

  it('reads hash_key cookie:NAME (case kept), uri and exact hosts', () => {
    const config = parseConfig(
      '[proxy.a]\npath=/a\nhost=API.example.com\npass=http://a\nhash_key=cookie:SessionId\n[proxy.b]\npath=/b\nhost=[::1]\npass=http://b\nhash_key=uri\n',
      'env.ini',
    );
    assert.deepEqual(route(config, 'a').hashKey, { kind: 'cookie', name: 'SessionId' });
    assert.deepEqual(route(config, 'a').host, { kind: 'exact', host: 'api.example.com' });
    assert.deepEqual(route(config, 'b').hashKey, { kind: 'uri' });
    assert.deepEqual(route(config, 'b').host, { kind: 'exact', host: '[::1]' });
  });

  it('compiles ~ as case-sensitive and ~* as case-insensitive', () => {
    const config = parseConfig('[proxy.a]\npath=~^/a$\npass=http://a\n[proxy.b]\npath=~* ^/b$\npass=http://b\n', 'env.ini');
    const a = route(config, 'a').path;
    const b = route(config, 'b').path;
    assert.ok(a.kind === 'regex' && a.regex.test('/a') && !a.regex.test('/A'), 'got ~ matching case-insensitively');
    assert.ok(b.kind === 'regex' && b.regex.test('/B'), 'got ~* not matching /B');
  });
});

describe('[proxy] inheritance', () => {
  it('gives [proxy] settings to every route; a route’s own value wins', () => {
    const config = parseConfig(
      '[proxy]\nstrategy = random\nconnect_timeout = 1s\n[proxy.a]\npath=/a\npass=http://a\n[proxy.b]\npath=/b\npass=http://b\nstrategy = ip-hash\n',
      'env.ini',
    );
    assert.deepEqual([route(config, 'a').strategy, route(config, 'b').strategy], ['random', 'ip-hash']);
    assert.deepEqual([route(config, 'a').connectTimeoutMs, route(config, 'b').connectTimeoutMs], [1_000, 1_000]);
  });

  it('inherits the pass list, and a route’s own pass lines replace it entirely', () => {
    const config = parseConfig(
      '[proxy]\npass=http://x1\npass=http://x2\n[proxy.a]\npath=/a\n[proxy.b]\npath=/b\npass=http://own\n',
      'env.ini',
    );
    assert.deepEqual(route(config, 'a').upstreams.map((u) => u.host), ['x1', 'x2']);
    assert.equal(route(config, 'a').retries, 1);
    assert.deepEqual(route(config, 'b').upstreams.map((u) => u.host), ['own']);
    assert.equal(route(config, 'b').retries, 0);
  });

  it('lets a route say host = * and auth_basic = off to drop inherited ones', () => {
    const config = parseConfig(
      '[proxy]\nhost=example.com\nauth_basic=Realm\nauth_user=tom:H\n[proxy.a]\npath=/a\npass=http://a\n[proxy.b]\npath=/a\npass=http://b\nhost=*\nauth_basic=off\n',
      'env.ini',
    );
    assert.deepEqual(route(config, 'a').host, { kind: 'exact', host: 'example.com' });
    assert.equal(route(config, 'a').authBasic, 'Realm');
    assert.deepEqual(route(config, 'a').authUsers.map((u) => u.name), ['tom']);
    assert.equal(route(config, 'b').host, undefined);
    assert.equal(route(config, 'b').authBasic, undefined);
  });

  it('validates [proxy] values even when every route overrides them', () => {
    assertError(
      '[proxy]\nread_timeout = soon\n[proxy.a]\npath=/a\npass=http://a\nread_timeout=1s\n',
      "env.ini:2:16: invalid duration 'soon' for 'read_timeout' (expected e.g. 500ms, 3s, 1m)",
    );
  });
});

describe('pass lines', () => {
  const pass = (line: string) => route(parseConfig(`[proxy.a]\npath=/a\npass = ${line}\n`, 'env.ini'), 'a').upstreams[0];

  it('reads host, port (default 80), path and flags', () => {
    assert.deepEqual(pass('http://LocalHost'), {
      url: 'http://LocalHost',
      scheme: 'http',
      origin: 'http://localhost:80',
      host: 'localhost',
      port: 80,
      hostHeader: 'localhost',
      path: undefined,
      weight: 1,
      isBackup: false,
      isDown: false,
      place: { file: 'env.ini', line: 3, column: 8 },
    });
    assert.equal(pass('http://a:81/')?.path, '/', 'a path of / is kept');
    assert.equal(pass('http://a/x/y')?.path, '/x/y');
    assert.deepEqual(
      [pass('http://[2001:db8::1]:8080 weight=1000000 down backup')].map((u) => [u?.host, u?.port, u?.hostHeader, u?.weight, u?.isBackup, u?.isDown]),
      [['2001:db8::1', 8080, '[2001:db8::1]:8080', 1_000_000, true, true]],
    );
    assert.deepEqual([pass('"http://a\tweight=2"')?.weight], [2], 'tabs separate flags too');
  });

  it('requires all pass URLs of a route to agree on the path', () => {
    assertError(
      '[proxy.a]\npath=/a\npass=http://a/v1\npass=http://b/v1\npass=http://c\n',
      'env.ini:5:14: pass URL path (none) differs from \'/v1\' on line 3 (all pass URLs of a route must agree on the path)',
    );
    assertError(
      '[proxy.a]\npath=/a\npass=http://a\npass=http://b/\n',
      "env.ini:4:14: pass URL path '/' differs from (none) on line 3 (all pass URLs of a route must agree on the path)",
    );
  });

  const bad: [string, string, string][] = [
    ['other scheme', 'ftp://a', "env.ini:3:8: invalid upstream URL 'ftp://a' for 'pass' (expected http://host[:port][/path] or https://host[:port][/path])"],
    ['no scheme', 'localhost:9001', "env.ini:3:8: invalid upstream URL 'localhost:9001' for 'pass' (expected http://host[:port][/path] or https://host[:port][/path])"],
    ['query', 'http://a/x?y=1', "env.ini:3:18: a pass URL cannot have a query or fragment: 'http://a/x?y=1'"],
    ['fragment', 'http://a#top', "env.ini:3:16: a pass URL cannot have a query or fragment: 'http://a#top'"],
    ['user info', 'http://u:p@a', "env.ini:3:15: user info in a pass URL is not supported: 'http://u:p@a'"],
    ['no host', 'http://:80', "env.ini:3:15: missing host in pass URL 'http://:80' (expected http://host[:port][/path] or https://host[:port][/path])"],
    ['bad host', 'http://a_b!c', "env.ini:3:15: invalid host 'a_b!c' in pass URL (expected http://host[:port][/path] or https://host[:port][/path])"],
    ['bad IPv6', 'http://[::g]:80', "env.ini:3:16: invalid IPv6 address in pass URL 'http://[::g]:80' (expected http://host[:port][/path] or https://host[:port][/path])"],
    ['port 0', 'http://a:0', "env.ini:3:17: invalid port '0' in pass URL (expected 1 to 65535)"],
    ['port too big', 'http://a:65536/', "env.ini:3:17: invalid port '65536' in pass URL (expected 1 to 65535)"],
    ['empty port', 'http://[::1]:', "env.ini:3:21: invalid port '' in pass URL (expected 1 to 65535)"],
    ['non-ASCII path', 'http://a/café', 'env.ini:3:20: pass URL paths must be ASCII: percent-encode other characters (RFC 3986 section 2.1)'],
    ['a dot-dot segment in the path', 'http://a/base/../x', "env.ini:3:22: a pass URL path may not have '.' or '..' segments: write the path they resolve to"],
    ['an escaped dot segment in the path', 'http://a/base/%2E', "env.ini:3:22: a pass URL path may not have '.' or '..' segments: write the path they resolve to"],
    ['a bad escape in the path', 'http://a/%zz', 'env.ini:3:17: bad percent-escape in the pass URL path (expected % and two hex digits)'],
    ['weight 0', 'http://a weight=0', "env.ini:3:24: invalid weight '0' for 'pass' (expected a whole number from 1 to 1000000)"],
    ['weight too big', 'http://a weight=1000001', "env.ini:3:24: invalid weight '1000001' for 'pass' (expected a whole number from 1 to 1000000)"],
    ['weight not a number', 'http://a weight=2.5', "env.ini:3:24: invalid weight '2.5' for 'pass' (expected a whole number from 1 to 1000000)"],
    ['misspelt backup', 'http://a bakup', "env.ini:3:17: unknown flag 'bakup' for 'pass' (did you mean 'backup'?)"],
    ['misspelt weight', 'http://a wieght=2', "env.ini:3:17: unknown flag 'wieght=2' for 'pass' (did you mean 'weight=N'?)"],
    ['uppercase down', 'http://a DOWN', "env.ini:3:17: unknown flag 'DOWN' for 'pass' (did you mean 'down'?)"],
    ['unknown flag', 'http://a max_fails=3', "env.ini:3:17: unknown flag 'max_fails=3' for 'pass' (expected weight=N, backup, down, resolve or service=NAME)"],
    ['repeated flag', 'http://a backup backup', "env.ini:3:24: flag 'backup' is repeated in this pass line"],
    ['empty', '', "env.ini:3:8: 'pass' needs an upstream URL (e.g. pass = http://127.0.0.1:9001)"],
    ['unspecified IPv4', 'http://0.0.0.0:9001', 'env.ini:3:15: 0.0.0.0 is the unspecified address and cannot be an upstream (for this host write 127.0.0.1)'],
    ['unspecified IPv6', 'http://[::]:9001', 'env.ini:3:16: :: is the unspecified address and cannot be an upstream (for this host write [::1])'],
    ['multicast', 'http://224.0.0.1', 'env.ini:3:15: 224.0.0.1 is a multicast address and cannot be an upstream'],
    ['hex IPv4 in disguise', 'http://0x0:9001', "env.ini:3:15: '0x0' is the IPv4 address 0.0.0.0 in another notation: write it as 0.0.0.0"],
    ['hex loopback', 'http://0X7F000001.', "env.ini:3:15: '0x7f000001' is the IPv4 address 127.0.0.1 in another notation: write it as 127.0.0.1"],
    ['short IPv4', 'http://127.1', "env.ini:3:15: '127.1' is the IPv4 address 127.0.0.1 in another notation: write it as 127.0.0.1"],
    ['mapped broadcast', 'https://[::ffff:255.255.255.255]', 'env.ini:3:17: 255.255.255.255 is the broadcast address and cannot be an upstream'],
  ];
  for (const [name, line, message] of bad) {
    it(`rejects: ${name}`, () => assertError(`[proxy.a]\npath=/a\npass = ${line}\n`, message));
  }

  it('reads https:// URLs: port 443 by default, omitted from the Host header, and a scheme of their own in the origin', () => {
    assert.deepEqual(
      [pass('https://API.example.com'), pass('https://a:8443/v1'), pass('https://[::1]')].map((u) => [u?.scheme, u?.origin, u?.port, u?.hostHeader, u?.path]),
      [
        ['https', 'https://api.example.com:443', 443, 'api.example.com', undefined],
        ['https', 'https://a:8443', 8443, 'a:8443', '/v1'],
        ['https', 'https://[::1]:443', 443, '[::1]', undefined],
      ],
    );
    const both = parseConfig('[proxy.a]\npath=/a\npass=http://a:443\npass=https://a\n', 'env.ini');
    assert.deepEqual(route(both, 'a').upstreams.map((u) => u.origin), ['http://a:443', 'https://a:443'], 'got one upstream, want two: the scheme is part of the identity');
  });

  it('rejects the same upstream twice in one route', () => {
    assertError(
      '[proxy.a]\npath=/a\npass=http://a:80\npass=http://A\n',
      'env.ini:4:6: upstream http://a:80 is listed twice (first on line 3; use weight=N to give it more turns)',
    );
  });

  it('reads an IPv6 host in its canonical form and an IPv4-mapped one as its IPv4 address: one backend, one upstream', () => {
    assert.deepEqual(
      [pass('http://[::FFFF:127.0.0.2]:9001'), pass('https://[0:0::ffff:7f00:2]'), pass('http://[2001:DB8:0::1]')].map((u) => [u?.origin, u?.host, u?.hostHeader, u?.url]),
      [
        ['http://127.0.0.2:9001', '127.0.0.2', '127.0.0.2:9001', 'http://[::FFFF:127.0.0.2]:9001'],
        ['https://127.0.0.2:443', '127.0.0.2', '127.0.0.2', 'https://[0:0::ffff:7f00:2]'],
        ['http://[2001:db8::1]:80', '2001:db8::1', '[2001:db8::1]', 'http://[2001:DB8:0::1]'],
      ],
    );
    assertError(
      '[proxy.a]\npath=/a\npass=http://127.0.0.2:9001\npass=http://[::ffff:127.0.0.2]:9001\n',
      'env.ini:4:6: upstream http://127.0.0.2:9001 is listed twice (first on line 3; use weight=N to give it more turns)',
    );
  });
});

describe('discovery: resolve and service= pass lines, resolver keys (SPEC 1.2, 7)', () => {
  const pass = (line: string) => route(parseConfig(`[proxy.a]\npath=/a\npass = ${line}\n`, 'env.ini'), 'a').upstreams[0];

  it('reads resolve: the URL host is the name looked up, nothing is resolved while loading', () => {
    const upstream = pass('http://api.internal.test:8080 resolve weight=3 backup');
    assert.deepEqual(upstream?.discovery, { kind: 'resolve', name: 'api.internal.test' });
    assert.deepEqual([upstream?.origin, upstream?.host, upstream?.port, upstream?.weight, upstream?.isBackup], ['http://api.internal.test:8080', 'api.internal.test', 8080, 3, true]);
    assert.equal(pass('http://a')?.discovery, undefined, 'got a discovery on a plain line, want none');
  });

  it('drops the trailing dot of a fully qualified name, on discovery and plain lines', () => {
    const upstream = pass('http://api.svc.cluster.local.:8080 resolve');
    assert.deepEqual([upstream?.host, upstream?.origin, upstream?.hostHeader, upstream?.discovery?.name], ['api.svc.cluster.local', 'http://api.svc.cluster.local:8080', 'api.svc.cluster.local:8080', 'api.svc.cluster.local']);
    assert.equal(pass('https://web.test./v1')?.origin, 'https://web.test:443');
    assertError('[proxy.a]\npath=/a\npass = http://web..:80\n', "env.ini:3:15: invalid host 'web..' in pass URL (expected http://host[:port][/path] or https://host[:port][/path])");
  });

  it('reads service=NAME as an SRV lookup of _NAME._tcp.HOST, with weight= applying to every record', () => {
    assert.deepEqual(pass('http://Web.Service.Consul service=http')?.discovery, {
      kind: 'service',
      service: 'http',
      name: '_http._tcp.web.service.consul',
      weight: undefined,
    });
    assert.deepEqual(pass('https://web.test resolve service=api-v2 weight=5')?.discovery, {
      kind: 'service',
      service: 'api-v2',
      name: '_api-v2._tcp.web.test',
      weight: 5,
    });
  });

  const bad: [string, string, string][] = [
    ['resolve on an IPv4 literal', 'http://10.0.0.2:80 resolve', "env.ini:3:27: 'resolve' needs a host name to look up, and 10.0.0.2 is an address (drop 'resolve')"],
    ['resolve on an IPv6 literal', 'http://[::1]:80 resolve', "env.ini:3:24: 'resolve' needs a host name to look up, and ::1 is an address (drop 'resolve')"],
    ['service on an IP literal', 'http://10.0.0.2 service=http', "env.ini:3:24: 'service=http' needs a host name to look up, and 10.0.0.2 is an address (drop 'service=http')"],
    ['empty service', 'http://web.test service=', "env.ini:3:32: 'service=' needs a service name, e.g. service=http (the lookup is _http._tcp.HOST)"],
    ['service with its underscore', 'http://web.test service=_http._tcp', 'env.ini:3:32: write the service without its underscore: service=http (the lookup adds _ and ._tcp)'],
    ['service too long', 'http://web.test service=abcdefghijklmnop', "env.ini:3:32: invalid service name 'abcdefghijklmnop' (expected 1 to 15 letters, digits and single inner hyphens with at least one letter, RFC 6335 section 5.1)"],
    ['service of digits', 'http://web.test service=8080', "env.ini:3:32: invalid service name '8080' (expected 1 to 15 letters, digits and single inner hyphens with at least one letter, RFC 6335 section 5.1)"],
    ['service with a port', 'http://web.test:8080 service=http', "env.ini:3:24: a pass URL with 'service=' takes its ports from the SRV records: drop ':8080' (nginx refuses it too)"],
    ['repeated resolve', 'http://web.test resolve resolve', "env.ini:3:32: flag 'resolve' is repeated in this pass line"],
    ['misspelt resolve', 'http://web.test reslove', "env.ini:3:24: unknown flag 'reslove' for 'pass' (did you mean 'resolve'?)"],
    ['misspelt service', 'http://web.test servce=http', "env.ini:3:24: unknown flag 'servce=http' for 'pass' (did you mean 'service=NAME'?)"],
  ];
  for (const [name, line, message] of bad) {
    it(`rejects: ${name}`, () => assertError(`[proxy.a]\npath=/a\npass = ${line}\n`, message));
  }

  it('reads resolver and resolver_timeout', () => {
    const { server } = parseConfig(`[server]\nresolver = 127.0.0.53, 10.0.0.1:5353 ,::1, [fd00::2]:54\nresolver_timeout = 500ms\n${ROUTE}`, 'env.ini');
    assert.deepEqual(server.resolvers, [
      { host: '127.0.0.53', port: 53, source: '127.0.0.53', place: { file: 'env.ini', line: 2, column: 12 } },
      { host: '10.0.0.1', port: 5353, source: '10.0.0.1:5353', place: { file: 'env.ini', line: 2, column: 24 } },
      { host: '::1', port: 53, source: '::1', place: { file: 'env.ini', line: 2, column: 39 } },
      { host: 'fd00::2', port: 54, source: '[fd00::2]:54', place: { file: 'env.ini', line: 2, column: 44 } },
    ]);
    assert.equal(server.resolverTimeoutMs, 500);
    const edges = parseConfig(`[server]\nresolver = 1.0.0.1, 223.255.255.254, ::ffff:127.0.0.53, fe00::1\n${ROUTE}`, 'env.ini').server.resolvers;
    assert.deepEqual(edges.map((server) => server.host), ['1.0.0.1', '223.255.255.254', '::ffff:127.0.0.53', 'fe00::1'], 'unicast addresses next to the refused ranges');
    for (const written of ['system', '', '""']) {
      assert.deepEqual(parseConfig(`[server]\nresolver = ${written}\n${ROUTE}`, 'env.ini').server.resolvers, [], `got servers for resolver = ${written}, want the system's (empty)`);
    }
  });

  const badServer: [string, string, string][] = [
    ['a resolver name', 'resolver = dns.google', "env.ini:2:12: invalid resolver 'dns.google' for 'resolver' (a DNS server is given by its IP address, not a name)"],
    ['a resolver with a zone id', 'resolver = fe80::1%lo', "env.ini:2:12: invalid resolver address 'fe80::1%lo' for 'resolver' (a zone id (%eth0) cannot be given: use a DNS server with a global or loopback address)"],
    ['a resolver port 0', 'resolver = 127.0.0.1:0', "env.ini:2:22: invalid port '0' for 'resolver' (expected a number from 1 to 65535)"],
    ['an unspecified resolver', 'resolver = 0.0.0.0', "env.ini:2:12: invalid resolver '0.0.0.0' for 'resolver' (the unspecified address cannot be a DNS server; expected a unicast address)"],
    ['an IPv6 unspecified resolver', 'resolver = 127.0.0.53, [0:0::0]:53', "env.ini:2:24: invalid resolver '0:0::0' for 'resolver' (the unspecified address cannot be a DNS server; expected a unicast address)"],
    ['a resolver in 0.0.0.0/8', 'resolver = 0.1.2.3', "env.ini:2:12: invalid resolver '0.1.2.3' for 'resolver' (an address of 0.0.0.0/8, which names no destination, cannot be a DNS server; expected a unicast address)"],
    ['a multicast resolver', 'resolver = 10.0.0.1, 224.0.0.1:53', "env.ini:2:22: invalid resolver '224.0.0.1' for 'resolver' (a multicast address cannot be a DNS server; expected a unicast address)"],
    ['an IPv6 multicast resolver', 'resolver = FF02::1', "env.ini:2:12: invalid resolver 'ff02::1' for 'resolver' (a multicast address cannot be a DNS server; expected a unicast address)"],
    ['the broadcast address as resolver', 'resolver = 255.255.255.255', "env.ini:2:12: invalid resolver '255.255.255.255' for 'resolver' (the broadcast address cannot be a DNS server; expected a unicast address)"],
    ['a reserved resolver', 'resolver = 240.0.0.1', "env.ini:2:12: invalid resolver '240.0.0.1' for 'resolver' (a reserved address of 240.0.0.0/4 cannot be a DNS server; expected a unicast address)"],
    ['a mapped multicast resolver', 'resolver = ::ffff:239.1.2.3', "env.ini:2:12: invalid resolver '::ffff:239.1.2.3' for 'resolver' (a multicast address cannot be a DNS server; expected a unicast address)"],
    ['an empty resolver item', 'resolver = 127.0.0.1,,10.0.0.1', "env.ini:2:22: empty item in resolver list for 'resolver' (expected IP[:PORT] items separated by commas, e.g. 127.0.0.53, [::1]:5353)"],
    ['an IPv6 resolver with a port and no brackets', 'resolver = [::1:53', "env.ini:2:12: invalid resolver address '[::1:53' for 'resolver' (expected IP[:PORT] items separated by commas, e.g. 127.0.0.53, [::1]:5353)"],
    ['resolver_timeout 0', 'resolver_timeout = 0', "env.ini:2:20: invalid duration '0' for 'resolver_timeout' (expected at least 1ms)"],
    ['resolver_timeout above a minute', 'resolver_timeout = 2m', "env.ini:2:20: invalid duration '2m' for 'resolver_timeout' (expected at most 1m)"],
  ];
  for (const [name, line, message] of badServer) {
    it(`rejects: ${name}`, () => assertError(`[server]\n${line}\n${ROUTE}`, message));
  }

  it('keeps isRetriesDefault apart from a written retries', () => {
    const config = parseConfig('[proxy.a]\npath=/a\npass=http://a resolve\n[proxy.b]\npath=/b\npass=http://b resolve\nretries=0\n', 'env.ini');
    assert.deepEqual([route(config, 'a').isRetriesDefault, route(config, 'b').isRetriesDefault], [true, false]);
  });
});

describe('access, rate_limit and conn_limit (SPEC 1.2, 8)', () => {
  const routeOf = (lines: string) => route(parseConfig(`[proxy.a]\npath=/a\npass=http://a\n${lines}`, 'env.ini'), 'a');

  it('reads access lines in order: IPv4 and IPv6 networks with host bits cleared, and all', () => {
    const { access } = routeOf('access = allow 127.0.0.2\naccess = allow fd00::1/8\naccess=deny all\n');
    assert.deepEqual(
      access.map((rule) => [rule.isAllowed, rule.network?.source ?? 'all', rule.network?.prefixLength, rule.place.line]),
      [
        [true, '127.0.0.2', 32, 4],
        [true, 'fd00::1/8', 8, 5],
        [false, 'all', undefined, 6],
      ],
    );
    assert.deepEqual([...(access[1]!.network!.bytes)], [0xfd, ...new Array(15).fill(0)], 'host bits below /8 are cleared');
  });

  it('defaults burst to the rate per second rounded up, at least 1', () => {
    assert.deepEqual(
      ['10/s', '1/s', '30/m', '90/m', '7/s burst=3'].map((text) => {
        const limit = routeOf(`rate_limit = ${text}\n`).rateLimit;
        return [limit?.requests, limit?.periodMs, limit?.burst, limit?.source];
      }),
      [
        [10, 1_000, 10, '10/s burst=10'],
        [1, 1_000, 1, '1/s burst=1'],
        [30, 60_000, 1, '30/m burst=1'],
        [90, 60_000, 2, '90/m burst=2'],
        [7, 1_000, 3, '7/s burst=3'],
      ],
    );
  });

  it('inherits from [proxy]; own access lines replace the inherited ones (nginx); off drops an inherited limit', () => {
    const config = parseConfig(
      '[proxy]\naccess = deny 10.0.0.0/8\nrate_limit = 5/s\nconn_limit = 2\n[proxy.a]\npath=/a\npass=http://a\n[proxy.b]\npath=/b\npass=http://b\naccess = allow all\nrate_limit = off\nconn_limit = off\n',
      'env.ini',
    );
    const a = route(config, 'a');
    const b = route(config, 'b');
    assert.deepEqual([a.access.length, a.access[0]?.isAllowed, a.rateLimit?.source, a.connLimit?.maxInFlight], [1, false, '5/s burst=5', 2]);
    assert.deepEqual([b.access.length, b.access[0]?.isAllowed, b.rateLimit, b.connLimit], [1, true, undefined, undefined]);
  });

  const bad: [string, string, string][] = [
    ['an access verb', 'access = permit 10.0.0.0/8', "env.ini:4:10: invalid access rule 'permit 10.0.0.0/8' for 'access' (expected allow CIDR, allow all, deny CIDR or deny all, e.g. deny 10.0.0.0/8)"],
    ['an access rule without a network', 'access = deny', "env.ini:4:14: 'deny' needs a network or 'all' for 'access' (expected allow CIDR, allow all, deny CIDR or deny all, e.g. deny 10.0.0.0/8)"],
    ['a bad access network', 'access = deny 10.0.0.0/33', "env.ini:4:23: invalid prefix length '/33' for 'access' (expected /0 to /32 for IPv4)"],
    ['an access prefix length with a leading zero', 'access = allow 10.0.0.0/08', "env.ini:4:24: invalid prefix length '/08' for 'access' (expected /0 to /32 for IPv4, without a leading zero)"],
    ['an IPv4-mapped access network shorter than /96', 'access = deny ::ffff:10.0.0.0/64', "env.ini:4:30: invalid prefix length '/64' for the IPv4-mapped address '::ffff:10.0.0.0' for 'access' (a mapped network is an IPv4 network: expected /96 to /128 (::ffff:10.0.0.0/104 is 10.0.0.0/8), or write the IPv4 network)"],
    ['an access name', 'access = allow example.com', "env.ini:4:16: invalid IP address 'example.com' for 'access' (expected allow CIDR, allow all, deny CIDR or deny all, e.g. deny 10.0.0.0/8)"],
    ['two networks on one access line', 'access = allow 10.0.0.1 10.0.0.2', "env.ini:4:25: one network per access line, '10.0.0.2' is one too many for 'access' (write one line per network)"],
    ['a space before the prefix of an access network', 'access = allow 10.0.0.0 /8', "env.ini:4:24: space inside the network '10.0.0.0 /8' for 'access' (an address/prefix is written without spaces, e.g. 10.0.0.0/8)"],
    ['a space after the slash of an access network', 'access = deny 10.0.0.0/ 8', "env.ini:4:24: space inside the network '10.0.0.0/ 8' for 'access' (an address/prefix is written without spaces, e.g. 10.0.0.0/8)"],
    ['a rate without a unit', 'rate_limit = 10', "env.ini:4:14: invalid rate '10' for 'rate_limit' (expected N/s or N/m, optionally followed by burst=N, e.g. 10/s burst=20)"],
    ['a rate per hour', 'rate_limit = 10/h', "env.ini:4:14: invalid rate '10/h' for 'rate_limit' (expected N/s or N/m, optionally followed by burst=N, e.g. 10/s burst=20)"],
    ['a zero rate', 'rate_limit = 0/s', "env.ini:4:14: invalid rate '0/s' for 'rate_limit' (expected N/s or N/m, optionally followed by burst=N, e.g. 10/s burst=20)"],
    ['a zero burst', 'rate_limit = 10/s burst=0', "env.ini:4:19: invalid burst 'burst=0' for 'rate_limit' (expected burst=N with N from 1 to 1000000)"],
    ['a misspelt burst', 'rate_limit = 10/s brust=5', "env.ini:4:19: invalid burst 'brust=5' for 'rate_limit' (expected burst=N with N from 1 to 1000000)"],
    ['words after the burst', 'rate_limit = 10/s burst=5 nodelay', "env.ini:4:27: unexpected 'nodelay' after the rate for 'rate_limit' (expected N/s or N/m, optionally followed by burst=N, e.g. 10/s burst=20)"],
    ['a zero conn_limit', 'conn_limit = 0', "env.ini:4:14: invalid number '0' for 'conn_limit' (expected a whole number from 1 to 1000000)"],
  ];
  for (const [name, line, message] of bad) {
    it(`rejects: ${name}`, () => assertError(`[proxy.a]\npath=/a\npass=http://a\n${line}\n`, message));
  }
});

describe('sections and keys', () => {
  const cases: [string, string, string][] = [
    ['misspelt key, did you mean', '[proxy.a]\npath=/a\n  pas=http://a\n', "env.ini:3:3: unknown key 'pas' in [proxy.a] (did you mean 'pass'?)"],
    ['misspelt key in [proxy]', '[proxy]\nstratgy=random\n', "env.ini:2:1: unknown key 'stratgy' in [proxy] (did you mean 'strategy'?)"],
    ['misspelt server key', '[server]\nlisen=:80\n', "env.ini:2:1: unknown key 'lisen' in [server] (did you mean 'listen'?)"],
    ['server key in a route', '[proxy.a]\nworkers=2\n', "env.ini:2:1: unknown key 'workers' in [proxy.a] (it belongs in [server])"],
    ['listen in a route', '[proxy.a]\nlisten=:80\n', "env.ini:2:1: unknown key 'listen' in [proxy.a] (it belongs in [server] or [admin])"],
    ['route key in [server]', '[server]\npass=http://a\n', "env.ini:2:1: unknown key 'pass' in [server] (it belongs in [proxy] or a [proxy.NAME] route)"],
    ['unknown key, nothing close', '[admin]\ncolour=red\n', "env.ini:2:1: unknown key 'colour' in [admin]"],
    ['a key named like an Object.prototype member', '[proxy.a]\nconstructor=1\n', "env.ini:2:1: unknown key 'constructor' in [proxy.a]"],
    ['misspelt section', '[sever]\n', 'env.ini:1:2: unknown section [sever] (did you mean [server]?)'],
    ['misspelt route section', '\n[proxi.api]\n', 'env.ini:2:2: unknown section [proxi.api] (did you mean [proxy.api]?)'],
    ['unknown section', '[upstream]\n', 'env.ini:1:2: unknown section [upstream] (expected [server], [admin], [acme], [proxy] or [proxy.NAME])'],
    ['child of [server]', '[server.x]\n', 'env.ini:1:2: unknown section [server.x] ([server] has no children; only [proxy.NAME] names a route)'],
    ['deeper route', '[proxy.a.b]\n', "env.ini:1:9: route names cannot contain '.': [proxy.a.b] (use e.g. [proxy.a-b])"],
    ['key outside any section', 'listen = :80\n[server]\n', "env.ini:1:1: key 'listen' is outside any section (put it under [server], [admin], [proxy] or a [proxy.NAME] route)"],
    ['no routes', '[server]\nlisten=:80\n[proxy]\n', 'env.ini:1:1: the config has no routes (add a [proxy.NAME] section with path and pass)'],
    ['empty file', '', 'env.ini:1:1: the config has no routes (add a [proxy.NAME] section with path and pass)'],
    ['route without path', '[proxy.a]\npath=/a\npass=http://a\n\n[proxy.web]\npass=http://a\n', "env.ini:5:1: route [proxy.web] has no 'path' (e.g. path = /web)"],
    ['route without pass', '[proxy.a]\npath=/a\n', "env.ini:1:1: route [proxy.a] has no 'pass' (e.g. pass = http://127.0.0.1:9001)"],
    ['same prefix and host', `${ROUTE}[proxy.b]\npath=/a\npass=http://b\n`, 'env.ini:4:1: route [proxy.b] has the same path and host as [proxy.a] on line 1 (it could never be chosen)'],
    ['regex path with a pass path (nginx refuses it)', '[proxy.a]\npath=~ ^/x\npass=http://a/v1\n', "env.ini:3:6: a pass URL with a path ('/v1') cannot be used with a regex path in [proxy.a] (nginx refuses it too): drop the path, or use a prefix path"],
    ['same regex', '[proxy.a]\npath=~ ^/x\npass=http://a\n[proxy.b]\npath=~  ^/x\npass=http://b\n', 'env.ini:4:1: route [proxy.b] has the same path and host as [proxy.a] on line 1 (it could never be chosen)'],
    ['token without listen', '[admin]\ntoken=abc\n' + ROUTE, "env.ini:2:1: 'token' needs 'listen' in [admin] (the admin server is off without it)"],
    ['admin on the proxy port', '[server]\nlisten=:8080\n[admin]\nlisten = 127.0.0.1:8080\n' + ROUTE, "env.ini:4:10: admin 'listen' collides with [server] listen on port 8080"],
    ['auth_user without auth_basic', '[proxy.a]\npath=/a\npass=http://a\nauth_user=tom:H\n', "env.ini:4:1: 'auth_user' needs 'auth_basic' (the realm) in [proxy.a] or [proxy]"],
    ['auth_basic without users', '[proxy.a]\npath=/a\npass=http://a\nauth_basic=Realm\n', "env.ini:1:1: route [proxy.a] has 'auth_basic' but no 'auth_user' lines (make one with: node dist/main.js passwd NAME)"],
    ['auth_user without a colon', '[proxy.a]\nauth_user = tom\n', "env.ini:2:13: invalid auth_user 'tom' (expected name:HASH, from: node dist/main.js passwd NAME)"],
    ['auth_user with an empty name', '[proxy.a]\nauth_user = :H\n', "env.ini:2:13: invalid auth_user ':H' (expected name:HASH, from: node dist/main.js passwd NAME)"],
    ['auth_user with an empty hash', '[proxy.a]\nauth_user = tom:\n', "env.ini:2:17: invalid hash for user 'tom' in [proxy.a]: is empty"],
    ['auth_user twice', '[proxy.a]\nauth_user = tom:A\nauth_user = tom:B\n', "env.ini:3:13: user 'tom' is listed twice (first on line 2)"],
  ];
  for (const [name, text, message] of cases) it(name, () => assertError(text, message));

  it('accepts [proxy.NAME] with letters, digits, _ and -', () => {
    const config = parseConfig('[proxy.Web_2-a]\npath=/\npass=http://a\n', 'env.ini');
    assert.deepEqual(config.routes.map((r) => r.name), ['Web_2-a']);
  });

  it('accepts the same prefix on different hosts', () => {
    const config = parseConfig(`${ROUTE}[proxy.b]\npath=/a\nhost=b.example\npass=http://b\n`, 'env.ini');
    assert.equal(config.routes.length, 2);
  });

  it('passes auth_user hashes through the validateAuthHash hook', () => {
    const options: LoadConfigOptions = { validateAuthHash: (hash) => (hash.startsWith('scrypt$') ? undefined : 'not an scrypt hash') };
    const text = '[proxy.a]\npath=/a\npass=http://a\nauth_basic=R\nauth_user = tom:scrypt$ok\nauth_user = ann:plain\n';
    assertError(text, "env.ini:6:17: invalid hash for user 'ann' in [proxy.a]: not an scrypt hash", options);
    assert.equal(route(parseConfig(text.replace('ann:plain', 'ann:scrypt$2'), 'env.ini', options), 'a').authUsers.length, 2);
  });
});

describe('value errors name the key, the value column and what is expected', () => {
  const at = (key: string, value: string): string => `[proxy.a]\npath=/a\npass=http://a\n${key} = ${value}\n`;
  const cases: [string, string][] = [
    [at('connect_timeout', '5x'), "env.ini:4:19: invalid duration '5x' for 'connect_timeout' (expected e.g. 500ms, 3s, 1m)"],
    [at('read_timeout', '0'), "env.ini:4:16: invalid duration '0' for 'read_timeout' (expected at least 1ms)"],
    [at('strategy', 'round_robin'), "env.ini:4:12: unknown strategy 'round_robin' for 'strategy' (did you mean 'round-robin'?)"],
    [at('strategy', 'smooth-weighted-roundrobin'), "env.ini:4:12: unknown strategy 'smooth-weighted-roundrobin' for 'strategy' (did you mean 'smooth-weighted-round-robin'?)"],
    [at('strategy', 'fastest'), "env.ini:4:12: unknown strategy 'fastest' for 'strategy' (expected one of: random, weighted-random, round-robin, weighted-round-robin, smooth-weighted-round-robin, ip-hash, least-connections, consistent-hash, power-of-two-choices)"],
    [at('hash', 'md5'), "env.ini:4:8: unknown hash 'md5' for 'hash' (expected one of: crc32, fnv1a)"],
    [at('hash', 'fnv1'), "env.ini:4:8: unknown hash 'fnv1' for 'hash' (did you mean 'fnv1a'?)"],
    [at('hash_key', 'heder:x'), "env.ini:4:12: unknown hash key 'heder:x' for 'hash_key' (did you mean 'header:NAME'?)"],
    [at('hash_key', 'sticky'), "env.ini:4:12: unknown hash key 'sticky' for 'hash_key' (expected client_ip, uri, header:NAME or cookie:NAME)"],
    [at('hash_key', 'header:'), "env.ini:4:19: invalid header name '' for 'hash_key' (expected a token, e.g. header:x-user-id)"],
    [at('virtual_nodes', '0'), "env.ini:4:17: invalid number '0' for 'virtual_nodes' (expected a whole number from 1 to 10000)"],
    [at('virtual_nodes', '10001'), "env.ini:4:17: invalid number '10001' for 'virtual_nodes' (expected a whole number from 1 to 10000)"],
    [at('preserve_host', 'maybe'), "env.ini:4:17: invalid boolean 'maybe' for 'preserve_host' (expected on/off, true/false, yes/no, 1/0)"],
    [at('retries', '-1'), "env.ini:4:11: invalid number '-1' for 'retries' (expected a whole number from 0 to 1000)"],
    [at('fail_factor', '0'), "env.ini:4:15: invalid number '0' for 'fail_factor' (expected a whole number from 1 to 1000000)"],
    [at('health_fall', '0'), "env.ini:4:15: invalid number '0' for 'health_fall' (expected a whole number from 1 to 1000000)"],
    [at('health_method', '"GET /"'), "env.ini:4:18: invalid method 'GET /' for 'health_method' (expected e.g. HEAD or GET)"],
    [at('health_path', 'health'), "env.ini:4:15: invalid path 'health' for 'health_path' (expected a path starting with '/', ASCII without spaces)"],
    [at('health_status', '200-299,6xx'), "env.ini:4:25: invalid status range '6xx' for 'health_status' (expected statuses or ranges from 100 to 599, e.g. 200-399 or 200,204,300-399)"],
    [at('auth_basic', '"Ré"'), "env.ini:4:15: invalid realm 'Ré' for 'auth_basic' (expected printable ASCII text, or off)"],
    [at('host', 'example.com:8080'), "env.ini:4:8: invalid host 'example.com:8080' for 'host' (expected a host name like example.com, *.example.com, or * for any host; no port)"],
    [at('host', '*.'), "env.ini:4:8: invalid host '*.' for 'host' (expected a host name like example.com, *.example.com, or * for any host)"],
    ['[proxy.a]\npath = a\n', "env.ini:2:8: invalid path 'a' for 'path' (expected a prefix starting with '/', or ~ REGEX, or ~* REGEX)"],
    ['[proxy.a]\npath = /a?b\n', "env.ini:2:10: invalid character in path '/a?b' for 'path' (a prefix is ASCII without ? or #; percent-encode other characters)"],
    ['[proxy.a]\npath = ~* (\n', "env.ini:2:11: invalid regular expression '(' for 'path' (Invalid regular expression: /(/i: Unterminated group)"],
    ['[proxy.a]\npath = ~*\n', "env.ini:2:10: missing regular expression after '~*' for 'path' (expected e.g. ~ ^/api/v[0-9]+/)"],
    ['[server]\nlisten = 1.2.3.4:99999\n', "env.ini:2:18: invalid port '99999' for 'listen' (expected a number from 0 to 65535)"],
    ['[server]\nbody_timeout = 2 minutes\n', "env.ini:2:16: invalid duration '2 minutes' for 'body_timeout' (expected e.g. 500ms, 3s, 1m)"],
    ['[server]\nworkers = 0\n', "env.ini:2:11: invalid number '0' for 'workers' (expected a whole number from 1 to 1024)"],
    ['[server]\nmax_header_size = 100\n', "env.ini:2:19: invalid size '100' for 'max_header_size' (expected at least 1k)"],
    ['[server]\nmax_header_size = 99g\n', "env.ini:2:19: invalid size '99g' for 'max_header_size' (expected at most 1m)"],
    ['[server]\nmax_body_size = 1t\n', "env.ini:2:17: invalid size '1t' for 'max_body_size' (expected e.g. 512, 16k, 1m, 1g)"],
    ['[server]\naccess_log_format = jsonl\n', "env.ini:2:21: unknown access log format 'jsonl' for 'access_log_format' (did you mean 'json'?)"],
    ['[server]\naccess_log =\n', "env.ini:2:13: empty access log for 'access_log' (expected stdout, stderr, off or a file path)"],
    ['[server]\ntrusted_proxies = 10.0.0.0/8, 300.1.1.1\n', "env.ini:2:31: invalid IP address '300.1.1.1' for 'trusted_proxies' (expected IPs or CIDRs separated by commas, e.g. 10.0.0.0/8, ::1)"],
    ['[server]\ntrusted_proxies = 10.0.0.0 /8\n', "env.ini:2:27: space inside the network '10.0.0.0 /8' for 'trusted_proxies' (an address/prefix is written without spaces, e.g. 10.0.0.0/8)"],
    ['[server]\ntrusted_proxies = 10.0.0.1, 10.0.0.0/08\n', "env.ini:2:37: invalid prefix length '/08' for 'trusted_proxies' (expected /0 to /32 for IPv4, without a leading zero)"],
    ['[server]\ntrusted_proxies = 10.0.0.1, ::ffff:10.0.0.0/80\n', "env.ini:2:44: invalid prefix length '/80' for the IPv4-mapped address '::ffff:10.0.0.0' for 'trusted_proxies' (a mapped network is an IPv4 network: expected /96 to /128 (::ffff:10.0.0.0/104 is 10.0.0.0/8), or write the IPv4 network)"],
    ['[admin]\nlisten = :9090\ntoken = "a b"\n', "env.ini:3:10: invalid token for 'token' (expected visible ASCII characters without spaces)"],
  ];
  for (const [text, message] of cases) {
    it(message.split(': ').slice(1).join(': '), () => assertError(text, message));
  }

  it('a value over 80 characters is quoted by its first 60 and its length; the error keeps the whole reason', () => {
    const long = 'x'.repeat(5000);
    const eighty = 'y'.repeat(80);
    assertError(at('read_timeout', long), `env.ini:4:16: invalid duration '${'x'.repeat(60)}…' (5000 characters) for 'read_timeout' (expected e.g. 500ms, 3s, 1m)`);
    assertError(at('read_timeout', eighty), `env.ini:4:16: invalid duration '${eighty}' for 'read_timeout' (expected e.g. 500ms, 3s, 1m)`);
    try {
      parseConfig(at('read_timeout', long), 'env.ini');
      assert.fail('got no error, want a ConfigValueError');
    } catch (error) {
      assert.ok(error instanceof ConfigValueError && error.reason.includes(long), 'got a reason without the whole value, want it kept');
    }
  });
});

describe('loadConfig', () => {
  const directory = mkdtempSync(join(tmpdir(), 'config-test-'));

  it('reads a file with a BOM and CRLF', () => {
    const file = join(directory, 'crlf.ini');
    writeFileSync(file, '\uFEFF' + TUTORIAL.replaceAll('\n', '\r\n'));
    assert.deepEqual(loadConfig(file).routes, parseConfig(TUTORIAL, file).routes);
  });

  it('names a missing file clearly', () => {
    const file = join(directory, 'missing.ini');
    assert.throws(() => loadConfig(file), (error: unknown) => {
      assert.ok(error instanceof ConfigFileError, `got ${String(error)}, want a ConfigFileError`);
      assert.equal(error.message, `config file '${file}' not found (use --config PATH to name another)`);
      return true;
    });
  });

  it('refuses a directory', () => {
    assert.throws(() => loadConfig(directory), (error: unknown) => {
      assert.ok(error instanceof ConfigFileError, `got ${String(error)}, want a ConfigFileError`);
      assert.equal(error.message, `config file '${directory}' is a directory`);
      return true;
    });
  });

  it('points at the first byte that is not UTF-8', () => {
    const file = join(directory, 'latin1.ini');
    writeFileSync(file, Buffer.concat([Buffer.from('\uFEFF[proxy.a]\npath=/é'), Buffer.from([0xe9]), Buffer.from('\n')]));
    assert.throws(() => loadConfig(file), (error: unknown) => {
      assert.ok(error instanceof ConfigSyntaxError, `got ${String(error)}, want a ConfigSyntaxError`);
      assert.equal(error.message, `${file}:2:8: invalid UTF-8 byte 0xE9 (the config file must be UTF-8)`);
      return true;
    });
    const firstLine = join(directory, 'first-line.ini');
    writeFileSync(firstLine, Buffer.concat([Buffer.from('\uFEFFab'), Buffer.from([0xff])]));
    assert.throws(() => loadConfig(firstLine), { message: `${firstLine}:1:3: invalid UTF-8 byte 0xFF (the config file must be UTF-8)` });
  });
});

describe('TLS and ACME keys (SPEC 1.2): what needs what', () => {
  const CERT = 'tls_cert = site.pem site.key\n';
  const cases: [string, string, string][] = [
    ['listen = off without tls_listen', '[server]\nlisten = off\n', "env.ini:2:1: 'listen = off' needs 'tls_listen' in [server] (the proxy would have no listener)"],
    ['tls_listen without certificates', '[server]\ntls_listen = :8443\n', "env.ini:2:1: 'tls_listen' needs certificates: 'tls_cert = CERT.pem KEY.pem' lines in [server], or an [acme] section"],
    ['tls_cert without tls_listen', `[server]\n${CERT}`, "env.ini:2:1: 'tls_cert' needs 'tls_listen' in [server] (the HTTPS listener)"],
    ['tls_cert with one path', '[server]\ntls_listen = :8443\ntls_cert = site.pem\n', "env.ini:3:20: invalid 'tls_cert' (expected two paths: CERT.pem KEY.pem)"],
    ['tls_cert with three paths', '[server]\ntls_listen = :8443\ntls_cert = a b c\n', "env.ini:3:16: invalid 'tls_cert' (expected two paths: CERT.pem KEY.pem)"],
    ['redirect_https without tls_listen', '[server]\nredirect_https = on\n', "env.ini:2:1: 'redirect_https' needs 'tls_listen' in [server] (there is no HTTPS listener to redirect to)"],
    ['redirect_https with listen = off', `[server]\nlisten = off\ntls_listen = :8443\n${CERT}redirect_https = on\n`, "env.ini:5:1: 'redirect_https' needs the plain 'listen' in [server] (it is 'off')"],
    ['hsts without tls_listen', '[server]\nhsts = 1d\n', "env.ini:2:1: 'hsts' needs 'tls_listen' in [server] (HSTS is sent on HTTPS responses only)"],
    ['hsts that is not a duration', '[server]\nhsts = forever\n', "env.ini:2:8: invalid duration 'forever' for 'hsts' (expected e.g. 500ms, 3s, 1m)"],
    ['tls_listen on the plain port', `[server]\nlisten = :8080\ntls_listen = 127.0.0.1:8080\n${CERT}`, "env.ini:3:14: 'tls_listen' collides with 'listen' on port 8080"],
    ['admin on the TLS port', `[server]\ntls_listen = :8443\n${CERT}[admin]\nlisten = 127.0.0.1:8443\n`, "env.ini:5:10: admin 'listen' collides with [server] tls_listen on port 8443"],
    ['an unknown TLS version', '[server]\ntls_min_version = TLSv1.1\n', "env.ini:2:19: unknown TLS version 'TLSv1.1' for 'tls_min_version' (did you mean 'TLSv1.2'?)"],
    ['[acme] without tls_listen', '[acme]\ndomains = example.com\n', "env.ini:2:11: [acme] needs 'tls_listen' in [server] (where its certificate is served)"],
    ['[acme] with listen = off', '[server]\nlisten = off\ntls_listen = :8443\n[acme]\ndomains = example.com\n', "env.ini:5:11: [acme] needs the plain 'listen' in [server]: the HTTP-01 challenge is answered there (port 80 for a public ACME server)"],
    ['[acme] keys without domains', '[acme]\nemail = a@example.com\n', "env.ini:2:1: 'email' needs 'domains' in [acme] (ACME is off without it)"],
    ['a wildcard ACME domain', '[acme]\ndomains = example.com, *.example.com\n', "env.ini:2:24: wildcard domain '*.example.com' for 'domains' (the HTTP-01 challenge cannot prove a wildcard name (RFC 8555 section 8.3); list each name)"],
    ['a repeated ACME domain', '[acme]\ndomains = a.example.com,A.example.com\n', "env.ini:2:25: domain 'a.example.com' is listed twice for 'domains'"],
    ['an ACME domain without a dot', '[acme]\ndomains = localhost\n', "env.ini:2:11: invalid domain 'localhost' for 'domains' (expected DNS names separated by commas, e.g. example.com, www.example.com)"],
    ['an ACME domain with an underscore', '[acme]\ndomains = example.com, a_b.example.com\n', "env.ini:2:24: invalid domain 'a_b.example.com' for 'domains' (a certificate's DNS name cannot contain '_')"],
    ['101 ACME domains', `[acme]\ndomains = ${Array.from({ length: 101 }, (_, i) => `d${i}.example.com`).join(',')}\n`, "env.ini:2:11: 101 domains for 'domains' (one certificate names at most 100 (Let's Encrypt's limit); split them over several proxies or use tls_cert)"],
    ['a plain-http directory', '[acme]\ndomains = example.com\ndirectory = http://acme.test/dir\n', "env.ini:3:13: invalid directory URL 'http://acme.test/dir' for 'directory' (ACME directories are https:// URLs (RFC 8555 section 6.1))"],
    ['a bad email', '[acme]\ndomains = example.com\nemail = admin\n', "env.ini:3:9: invalid email 'admin' for 'email' (expected an address like admin@example.com)"],
    ['a bad tls_server_name', '[proxy]\ntls_server_name = a b\n', "env.ini:2:19: invalid server name 'a b' for 'tls_server_name' (expected a DNS name like api.example.com, or an IP address)"],
  ];
  for (const [name, text, message] of cases) {
    it(`rejects: ${name}`, () => assertError(text + ROUTE, message));
  }

  it('reads listen = off with a TLS listener alone, and [acme] with its defaults', () => {
    const alone = parseConfig(`[server]\nlisten = off\ntls_listen = [::]:443\n${CERT}` + ROUTE, 'env.ini');
    assert.equal(alone.server.listen, undefined);
    assert.deepEqual(alone.server.tlsListen, { host: '::', port: 443 });
    const acme = parseConfig('[server]\nlisten = :80\ntls_listen = :443\n[acme]\ndomains = Example.com, www.example.com\n' + ROUTE, 'env.ini');
    assert.deepEqual(acme.acme, {
      domains: ['example.com', 'www.example.com'],
      email: undefined,
      directoryUrl: 'https://acme-v02.api.letsencrypt.org/directory',
      directoryCaFile: undefined,
      directoryCaPlace: undefined,
      storageDir: './acme',
      storagePlace: undefined,
      place: { file: 'env.ini', line: 5, column: 11 },
    });
  });

  it('inherits tls_* route keys from [proxy]; tls_client_cert = off drops an inherited one', () => {
    const config = parseConfig(
      '[proxy]\ntls_ca = ca.pem\ntls_client_cert = me.pem me.key\n[proxy.a]\npath=/a\npass=https://a\n[proxy.b]\npath=/b\npass=https://b\ntls_client_cert = off\n',
      'env.ini',
    );
    assert.deepEqual([route(config, 'a').tls.caFile, route(config, 'b').tls.caFile], ['ca.pem', 'ca.pem']);
    assert.equal(route(config, 'a').tls.clientCertificate?.certFile, 'me.pem');
    assert.equal(route(config, 'b').tls.clientCertificate, undefined);
  });
});
