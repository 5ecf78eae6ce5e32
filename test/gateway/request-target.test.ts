/**
 * The two readings of a request target (src/gateway/request-target.ts) as a table: each target, its
 * literal and its normalised path, or the 400 it gets. Then the target forms (origin, absolute,
 * others) and the query, through readRequestTarget.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ClientRequest } from '../../src/wire/client-side.js';
import { NORMALISATIONS, readPath, readRequestTarget } from '../../src/gateway/request-target.js';

/** `[target path, normalised reading]` (the literal reading is the input itself), or `[target path, /the 400's text/]`. */
const READINGS: readonly (readonly [string, string | RegExp])[] = [
  // nothing to normalise: one string, both readings
  ['/', '/'],
  ['/a', '/a'],
  ['/a/', '/a/'],
  ['/a/b.html', '/a/b.html'],
  ['/.well-known/acme-challenge/x', '/.well-known/acme-challenge/x'],
  ['/a.b/..c/...', '/a.b/..c/...'],
  ["/a-b_c~d!$&'()*+,=:@", "/a-b_c~d!$&'()*+,=:@"],
  ['/"<>[]^`{|}', '/"<>[]^`{|}'],
  // percent-escapes: all decoded, any hex case
  ['/%61dmin/secret', '/admin/secret'],
  ['/%41dmin', '/Admin'],
  ['/a%20b', '/a b'],
  ['/%7Euser', '/~user'],
  ['/%7euser', '/~user'],
  ['/caf%C3%A9', '/café'],
  ['/caf%c3%a9', '/café'],
  ['/%E2%82%AC', '/€'],
  ['/%F0%9F%98%80', '/😀'],
  ['/100%25', '/100%'],
  ['/%2561dmin', '/%61dmin'], // decoded once, as every backend does
  ['/a%3Fb', '/a?b'],
  ['/%23', '/#'],
  // encoded and raw slashes and backslashes
  ['/%2fadmin', '/admin'],
  ['/%2Fadmin', '/admin'],
  ['/a%2Fb', '/a/b'],
  ['/a%2F%2F', '/a/'],
  ['/admin\\secret', '/admin/secret'],
  ['/\\admin', '/admin'],
  ['/%5Cadmin', '/admin'],
  ['/%5C%5Cx', '/x'],
  ['/a\\..\\admin', '/admin'],
  // repeated slashes merged
  ['//admin/secret', '/admin/secret'],
  ['/a//b', '/a/b'],
  ['/a//b/', '/a/b/'],
  ['//', '/'],
  ['///a', '/a'],
  ['/a//../b', '/b'],
  // dot segments (RFC 3986 §5.2.4), encoded dots too
  ['/public/../admin', '/admin'],
  ['/a/./b/../c', '/a/c'],
  ['/../x', '/x'],
  ['/..', '/'],
  ['/.', '/'],
  ['/a/..', '/'],
  ['/a/b/..', '/a/'],
  ['/a/./', '/a/'],
  ['/a/.', '/a/'],
  ['/a/%2e%2e/admin', '/admin'],
  ['/a/%2E%2E/admin', '/admin'],
  ['/a/.%2e/admin', '/admin'],
  ['/a/%2e/b', '/a/b'],
  ['/admin/..%2F..%2Fpublic', '/public'],
  ['/admin/%2e%2e%2fpublic', '/public'],
  ['/../../../etc/passwd', '/etc/passwd'],
  // `;` path parameters: part of the segment in the full normalisation (as nginx, Go); see below for Tomcat's reading
  ['/admin;x/secret', '/admin;x/secret'],
  ['/admin/..;/x', '/admin/..;/x'],
  ['/a/b;jsessionid=1', '/a/b;jsessionid=1'],
  ['/a;x%2F..%2F/b', '/b'],
  ['/%3B', '/;'],
  // refused: fragments, bytes outside visible ASCII, bad escapes, escaped controls, not UTF-8
  ['/admin#/../x', /'#'/],
  ['/a#', /'#'/],
  ['/a b', /outside visible ASCII/],
  ['/a\tb', /outside visible ASCII/],
  ['/a\x00b', /outside visible ASCII/],
  ['/a\x7fb', /outside visible ASCII/],
  ['/café', /outside visible ASCII/],
  ['/a%zz', /bad percent-escape '%zz'/],
  ['/a%0', /bad percent-escape '%0'/],
  ['/a%', /bad percent-escape '%'/],
  ['/a%g1', /bad percent-escape/],
  ['/a%%41', /bad percent-escape/],
  ['/admin%00', /escaped control byte '%00'/],
  ['/a%0A', /escaped control byte '%0A'/],
  ['/a%0d%0aX-Injected:%201', /escaped control byte '%0d'/],
  ['/a%1F', /escaped control byte/],
  ['/a%7f', /escaped control byte/],
  ['/%C0%AE', /not UTF-8/],
  ['/%C0%AE%C0%AE/admin', /not UTF-8/],
  ['/%E9', /not UTF-8/],
  ['/%C3', /not UTF-8/],
  ['/%ED%A0%80', /not UTF-8/], // a UTF-16 surrogate
  ['/%F8%88%80%80%80', /not UTF-8/],
  ['a/b', /must be a path/],
  ['', /must be a path/],
];

test(`the two readings of ${READINGS.length} paths, or the 400 each gets`, () => {
  assert.ok(READINGS.length >= 60, `got ${READINGS.length} rows, want at least 60`);
  for (const [path, want] of READINGS) {
    const got = readPath(path);
    if (want instanceof RegExp) {
      assert.ok('status' in got, `${JSON.stringify(path)}: got readings ${JSON.stringify(got)}, want a 400 matching ${want}`);
      assert.equal(got.status, 400);
      assert.match(got.text, want, `${JSON.stringify(path)}: got ${JSON.stringify(got.text)}`);
    } else {
      assert.ok(!('status' in got), `${JSON.stringify(path)}: got ${JSON.stringify(got)}, want normalised ${JSON.stringify(want)}`);
      assert.equal(got.literal, path, `${JSON.stringify(path)}: the literal reading is the bytes as received`);
      assert.equal(got.normalized[0], want, `${JSON.stringify(path)}: got normalised ${JSON.stringify(got.normalized[0])}, want ${JSON.stringify(want)}`);
    }
  }
});

test('a path with nothing to normalise is the same string in every reading', () => {
  const got = readPath('/api/v1/users/42');
  assert.ok(!('status' in got));
  assert.deepEqual(got.normalized, NORMALISATIONS.map(() => '/api/v1/users/42'));
});

test('the normalised reading as each kind of backend takes it (NORMALISATIONS, in order)', () => {
  assert.deepEqual(
    NORMALISATIONS.map((normalisation) => normalisation.readers.split(' (')[0]),
    ['the full normalisation', 'RFC 3986 resolution of a decoded path', "Go's path.Clean", 'Tomcat, Jetty, Spring', 'the WHATWG URL parser', 'a URL parser given the decoded target'],
  );
  //          path                        full             RFC 3986          Go               Tomcat           WHATWG               decoded, then parsed
  const cases: [string, [string, string, string, string, string, string]][] = [
    ['/x//../admin',               ['/admin',        '/x/admin',       '/admin',        '/admin',        '/x/admin',          '/x/admin']],
    ['/%61dmin/secret',            ['/admin/secret', '/admin/secret',  '/admin/secret', '/admin/secret', '/%61dmin/secret',   '/admin/secret']],
    ['/a/%2e%2e/admin',            ['/admin',        '/admin',         '/admin',        '/admin',        '/admin',            '/admin']],
    ['/a/%2e%2e%2fadmin',          ['/admin',        '/admin',         '/admin',        '/admin',        '/a/%2e%2e%2fadmin', '/admin']],
    ['/admin\\..\\x',              ['/x',            '/admin\\..\\x',  '/admin\\..\\x',  '/x',            '/x',                '/x']],
    ['/admin;x/secret',            ['/admin;x/secret', '/admin;x/secret', '/admin;x/secret', '/admin/secret', '/admin;x/secret', '/admin;x/secret']],
    ['/admin/..;/x',               ['/admin/..;/x',  '/admin/..;/x',   '/admin/..;/x',  '/x',            '/admin/..;/x',      '/admin/..;/x']],
    ['/admin%3Bx/y',               ['/admin;x/y',    '/admin;x/y',     '/admin;x/y',    '/admin;x/y',    '/admin%3Bx/y',      '/admin;x/y']],
    // a network-path reference: to a URL parser, `//host` names a host and the path follows it
    ['//admin',                    ['/admin',        '//admin',        '/admin',        '/admin',        '/',                 '/']],
    ['//evil/admin/secret',        ['/evil/admin/secret', '//evil/admin/secret', '/evil/admin/secret', '/evil/admin/secret', '/admin/secret', '/admin/secret']],
    ['/\\evil/admin',               ['/evil/admin',   '/\\evil/admin',   '/\\evil/admin',  '/evil/admin',   '/admin',            '/admin']],
    ['/a//b/..',                   ['/a/',           '/a//',           '/a/',           '/a/',           '/a//',              '/a//']],
    // decoded before it is parsed: a decoded `?` or `#` ends the path, a trailing space is trimmed
    ['/admin%3F/../x',             ['/x',            '/x',             '/x',            '/x',            '/x',                '/admin']],
    ['/admin%23x',                 ['/admin#x',      '/admin#x',       '/admin#x',      '/admin#x',      '/admin%23x',        '/admin']],
    ['/admin%20',                  ['/admin ',       '/admin ',        '/admin ',       '/admin ',       '/admin%20',         '/admin']],
    // U+0085 (NEL) too, which Go and Python trim and JS's trimEnd does not (a break test)
    ['/admin%C2%85',               ['/admin\u0085',  '/admin\u0085',   '/admin\u0085',  '/admin\u0085',  '/admin%C2%85',      '/admin']],
  ];
  for (const [path, want] of cases) {
    const got = readPath(path);
    assert.ok(!('status' in got), path);
    assert.deepEqual(got.normalized, want, `${JSON.stringify(path)}: got ${JSON.stringify(got.normalized)}, want ${JSON.stringify(want)}`);
  }
});

/** A request head with the shapes readRequestTarget reads; `host` null: no Host header. */
function clientRequest(url: string, host: string | null): ClientRequest {
  return { url, rawHeaders: host === null ? [] : ['Host', host], httpVersion: '1.1' } as unknown as ClientRequest;
}

test('origin form: the host from the Host header (normalised), the query byte for byte', () => {
  const got = readRequestTarget(clientRequest('/a/%2e%2e/b?x=%zz&y=/../;%2F', 'Example.COM.:8080'));
  assert.deepEqual(got, {
    hostName: 'example.com',
    targetHost: undefined,
    path: { literal: '/a/%2e%2e/b', normalized: ['/b', '/b', '/b', '/b', '/b', '/b'] },
    query: '?x=%zz&y=/../;%2F',
  });
  assert.deepEqual(readRequestTarget(clientRequest('/a', null)), { hostName: undefined, targetHost: undefined, path: { literal: '/a', normalized: NORMALISATIONS.map(() => '/a') }, query: '' });
});

test('absolute form: routed by its path, the authority as sent replaces the Host (RFC 9112 §3.2.2)', () => {
  const cases: [string, { hostName: string; targetHost: string; literal: string; query: string }][] = [
    ['http://Example.com/a/x?q=1', { hostName: 'example.com', targetHost: 'Example.com', literal: '/a/x', query: '?q=1' }],
    ['HTTP://example.com.:80/a', { hostName: 'example.com', targetHost: 'example.com.:80', literal: '/a', query: '' }],
    ['https://[::1]:8443', { hostName: '[::1]', targetHost: '[::1]:8443', literal: '/', query: '' }],
    ['http://h?q', { hostName: 'h', targetHost: 'h', literal: '/', query: '?q' }],
    ['http://h//admin', { hostName: 'h', targetHost: 'h', literal: '//admin', query: '' }],
  ];
  for (const [url, want] of cases) {
    const got = readRequestTarget(clientRequest(url, 'other'));
    assert.ok(!('status' in got), `${url}: got ${JSON.stringify(got)}`);
    assert.deepEqual({ hostName: got.hostName, targetHost: got.targetHost, literal: got.path.literal, query: got.query }, want, url);
  }
});

test('a bad authority, Host header, target form or query → 400 with its reason', () => {
  const cases: [string, string, RegExp][] = [
    ['http://u@evil:1/a/x', 'h', /invalid authority/],
    ['http://u:p@h/a', 'h', /invalid authority/],
    ['http:///a', 'h', /invalid authority/],
    ['http://:80/a', 'h', /invalid authority/],
    ['http://evil:99999/a', 'h', /invalid authority/],
    ['http://evil:8x/a', 'h', /invalid authority/],
    ['http://[::1/a', 'h', /invalid authority/],
    ['http://::1]/a', 'h', /invalid authority/],
    ['http://h/a', 'bad host', /invalid Host header/],
    ['/a', 'u@h', /invalid Host header/],
    ['/a', '', /invalid Host header/],
    ['/a', 'h:65536', /invalid Host header/],
    ['*', 'h', /must be a path/],
    ['ftp://h/a', 'h', /must be a path/],
    ['http://h#frag', 'h', /must be a path|'#'/],
    ['/a?x#y', 'h', /'#'.*query/],
    ['/a?x\x01', 'h', /query/],
    ['http://h/a%zz', 'h', /bad percent-escape/],
  ];
  for (const [url, host, want] of cases) {
    const got = readRequestTarget(clientRequest(url, host));
    assert.ok('status' in got, `${JSON.stringify(url)} Host ${JSON.stringify(host)}: got ${JSON.stringify(got)}, want a 400`);
    assert.equal(got.status, 400);
    assert.match(got.text, want, `${JSON.stringify(url)}: got ${JSON.stringify(got.text)}`);
  }
});
