import test from 'node:test';
import assert from 'node:assert/strict';
import { AccessList, accessRuleWarnings } from '../../src/limits/access-list.js';
import { parseConfig } from '../../src/config/load-config.js';
import { parseAccessRule } from '../../src/config/values.js';
import type { AccessRule } from '../../src/config/config.js';

const rules = (...lines: string[]): AccessRule[] => lines.map((line, i) => ({ ...parseAccessRule(line), place: { file: 't.ini', line: i + 1, column: 1 } }));

test('access: lines in order, the first match decides, no match allows (IPv4, IPv6, all)', () => {
  const cases: { lines: string[]; ip: string; want: boolean }[] = [
    { lines: ['deny 10.0.0.0/8'], ip: '10.1.2.3', want: false },
    { lines: ['deny 10.0.0.0/8'], ip: '11.1.2.3', want: true },
    { lines: ['allow 10.1.0.0/16', 'deny 10.0.0.0/8'], ip: '10.1.2.3', want: true },
    { lines: ['deny 10.0.0.0/8', 'allow 10.1.0.0/16'], ip: '10.1.2.3', want: false },
    { lines: ['allow 127.0.0.2', 'deny all'], ip: '127.0.0.2', want: true },
    { lines: ['allow 127.0.0.2', 'deny all'], ip: '127.0.0.3', want: false },
    { lines: ['deny all', 'allow 127.0.0.2'], ip: '127.0.0.2', want: false },
    { lines: ['allow all'], ip: '203.0.113.9', want: true },
    { lines: ['allow 2001:db8::/32', 'deny all'], ip: '2001:db8::1', want: true },
    { lines: ['allow 2001:db8::/32', 'deny all'], ip: '2001:db9::1', want: false },
    { lines: ['deny ::1'], ip: '::1', want: false },
    { lines: ['deny 10.0.0.0/8'], ip: '2001:db8::1', want: true },
    { lines: ['allow 192.0.2.0/24', 'allow 198.51.100.0/24', 'deny 203.0.113.0/24', 'allow 203.0.0.0/8', 'deny all'], ip: '198.51.100.7', want: true },
    { lines: ['allow 192.0.2.0/24', 'allow 198.51.100.0/24', 'deny 203.0.113.0/24', 'allow 203.0.0.0/8', 'deny all'], ip: '203.0.113.7', want: false },
    { lines: ['allow 192.0.2.0/24', 'allow 198.51.100.0/24', 'deny 203.0.113.0/24', 'allow 203.0.0.0/8', 'deny all'], ip: '203.0.1.1', want: true },
    { lines: ['allow 192.0.2.0/24', 'allow 198.51.100.0/24', 'deny 203.0.113.0/24', 'allow 203.0.0.0/8', 'deny all'], ip: '8.8.8.8', want: false },
  ];
  for (const { lines, ip, want } of cases) {
    const got = new AccessList(rules(...lines)).isAllowed(ip);
    assert.equal(got, want, `[${lines.join('; ')}] ${ip}: got ${got ? 'allowed' : 'denied'}, want ${want ? 'allowed' : 'denied'}`);
  }
});

test('access: an IPv4 rule also matches the ::ffff: mapped form of its addresses', () => {
  const list = new AccessList(rules('deny 10.0.0.0/8'));
  assert.equal(list.isAllowed('::ffff:10.1.2.3'), false, 'got ::ffff:10.1.2.3 allowed past deny 10.0.0.0/8');
  assert.equal(list.isAllowed('::ffff:11.1.2.3'), true);
});

test('access: an IPv4-mapped network is its IPv4 network; other IPv6 networks never match an IPv4 client (nginx keeps the families apart)', () => {
  const cases: { lines: string[]; ip: string; want: boolean }[] = [
    { lines: ['allow ::ffff:127.0.0.2', 'deny all'], ip: '127.0.0.2', want: true },
    { lines: ['allow ::ffff:127.0.0.2', 'deny all'], ip: '127.0.0.3', want: false },
    { lines: ['deny ::ffff:10.0.0.0/104'], ip: '10.1.2.3', want: false },
    { lines: ['deny ::ffff:10.0.0.0/104'], ip: '::ffff:10.1.2.3', want: false },
    { lines: ['deny ::/0'], ip: '127.0.0.1', want: true },
    { lines: ['deny ::/64', 'allow all'], ip: '10.1.2.3', want: true },
    { lines: ['deny ::/0'], ip: '2001:db8::1', want: false },
    { lines: ['allow 10.0.0.0/8', 'deny ::/0', 'deny 10.1.0.0/16'], ip: '10.1.2.3', want: true },
    { lines: ['deny 0.0.0.0/0'], ip: '::1', want: true },
  ];
  for (const { lines, ip, want } of cases) {
    const got = new AccessList(rules(...lines)).isAllowed(ip);
    assert.equal(got, want, `[${lines.join('; ')}] ${ip}: got ${got ? 'allowed' : 'denied'}, want ${want ? 'allowed' : 'denied'}`);
  }
});

test('access: a client IP that is not an address (socket gone) matches only all', () => {
  assert.equal(new AccessList(rules('deny 10.0.0.0/8')).isAllowed(''), true);
  assert.equal(new AccessList(rules('allow 10.0.0.0/8', 'deny all')).isAllowed(''), false);
});

test('access: a remembered verdict is the same verdict, across the memory being emptied (10 000 distinct clients)', () => {
  const list = new AccessList(rules('allow 10.0.0.0/8', 'deny all'));
  for (let i = 0; i < 25_000; i++) {
    const ip = `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`;
    assert.equal(list.isAllowed(ip), true);
    if (i % 1000 === 0) assert.equal(list.isAllowed('192.0.2.1'), false);
  }
});

test('accessRuleWarnings (--check)', async (t) => {
  await t.test('warns about host bits below the prefix and about lines after an all, with file:line:column', () => {
    const config = parseConfig(
      '[proxy.a]\npath=/a\npass=http://a\naccess = allow 127.0.0.1/8\naccess = deny 10.0.0.0/8\naccess = allow fd00::1/8\naccess = deny all\naccess = allow 192.168.0.0/16\n',
      'env.ini',
    );
    assert.deepEqual(accessRuleWarnings(config.routes), [
      'env.ini:4:10: [proxy.a] access allow 127.0.0.1/8: the bits below /8 are ignored, it means 127.0.0.0/8',
      'env.ini:6:10: [proxy.a] access allow fd00::1/8: the bits below /8 are ignored, it means fd00::/8',
      "env.ini:8:10: [proxy.a] this access line can never decide: 'deny all' on line 7 matches every client first",
    ]);
    assert.deepEqual(accessRuleWarnings(parseConfig('[proxy.a]\npath=/a\npass=http://a\naccess = allow 10.0.0.0/8\naccess = allow ::1\naccess = deny all\n', 'env.ini').routes), []);
    // Break test: [proxy] access = deny all, and a route's own allow-only list opened the route to everyone.
    assert.deepEqual(accessRuleWarnings(parseConfig('[proxy]\naccess = deny all\n[proxy.a]\npath=/a\npass=http://a\naccess = allow 127.0.0.10\n[proxy.b]\npath=/b\npass=http://a\n', 'env.ini').routes), [
      "env.ini:6:10: [proxy.a] every access line is an allow, and a client no line matches is allowed too: this list lets every client in (end it with 'access = deny all' to allow only these; a route's own access lines replace the [proxy] ones)",
    ]);
    assert.deepEqual(
      accessRuleWarnings(parseConfig('[proxy.a]\npath=/a\npass=http://a\naccess = allow ::ffff:10.0.0.0/104\naccess = deny ::ffff:10.1.2.3/104\n', 'env.ini').routes),
      ['env.ini:5:10: [proxy.a] access deny ::ffff:10.1.2.3/104: the bits below /104 are ignored, it means 10.0.0.0/8'],
      'a mapped network is compared with its IPv4 bytes',
    );
  });
});
