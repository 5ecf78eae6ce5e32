/**
 * Host header and absolute-form authority (src/gateway/authority.ts): what is accepted, the host name
 * routes are matched against, and what is refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseHostName } from '../../src/gateway/authority.js';

test('accepted authorities and the host name each routes by (lower-cased, no port, no trailing dot)', () => {
  const cases: [string, string][] = [
    ['example.com', 'example.com'],
    ['Admin.Example.COM.:80', 'admin.example.com'],
    ['admin.example.com.', 'admin.example.com'],
    ['ADMIN.EXAMPLE.COM', 'admin.example.com'],
    ['h:8080', 'h'],
    ['h:', 'h'], // RFC 3986 §3.2.3: an empty port is allowed
    ['h:0', 'h'],
    ['h:65535', 'h'],
    ['10.0.0.1:80', '10.0.0.1'],
    ['[::1]', '[::1]'],
    ['[::1]:8080', '[::1]'],
    ['[FE80::1]', '[fe80::1]'],
    ['[::ffff:1.2.3.4]:1', '[::ffff:1.2.3.4]'],
    ['my_host-1.local', 'my_host-1.local'],
    ['localhost', 'localhost'],
  ];
  for (const [authority, want] of cases) {
    assert.equal(parseHostName(authority), want, `${JSON.stringify(authority)}: got ${String(parseHostName(authority))}, want ${want}`);
  }
});

test('refused: userinfo, empty host or label, bad port, broken brackets, characters no host name has', () => {
  const refused = [
    'u@evil:1', 'u:p@h', '@h',
    '', ':80', '.', '..', 'a..b', '.a', 'a.b..',
    'h:99999', 'h:65536', 'h:8x', 'h:-1', 'h:+80', 'h: 80', 'h:1:2', 'h:000080',
    '[::1', '::1]', '::1', '[::1]x', '[::1]:99999', '[v1.x]', '[1.2.3.4]', '[fe80::1%25eth0]', '[fe80::1%eth0]', 'a[::1]',
    'a b', 'a,b', 'a;b', 'a%2eb', 'a/b', 'a\\b', 'a\tb', 'a\x00b', 'café.com', 'a!b', "a'b", 'a*b', 'a=b', 'a~b',
  ];
  for (const authority of refused) {
    assert.equal(parseHostName(authority), undefined, `${JSON.stringify(authority)}: got ${String(parseHostName(authority))}, want refused`);
  }
});
