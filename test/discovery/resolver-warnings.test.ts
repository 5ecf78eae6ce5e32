/**
 * `resolverWarnings` (src/discovery/resolver-warnings.ts): a bare IPv6 `resolver` item whose last
 * group could be a port is warned about at its file:line:column; every other form is not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { resolverWarnings } from '../../src/discovery/resolver-warnings.js';

const warningsOf = (value: string): string[] => resolverWarnings(parseConfig(`[server]\nresolver = ${value}\n[proxy.a]\npath = /\npass = http://127.0.0.1:9001\n`, 'env.ini').server);

test("resolver = ::1:53 warns that it is the address ::1:53 on port 53, and how to write ::1 port 53 (break test)", () => {
  assert.deepEqual(warningsOf('::1:53'), ["env.ini:2:12: [server] resolver '::1:53' is the IPv6 address ::1:53 (port 53); for ::1 port 53 write [::1]:53"]);
});

test('every ambiguous item of a list, at its own column; unambiguous forms do not warn', () => {
  assert.deepEqual(warningsOf('127.0.0.53, FD00::2:5353, [::1:53], ::1, fd00::53, [::1]:53, ::ffff:127.0.0.53, 2001:db8::1:0'), [
    "env.ini:2:24: [server] resolver 'FD00::2:5353' is the IPv6 address fd00::2:5353 (port 53); for FD00::2 port 5353 write [FD00::2]:5353",
  ]);
});
