import test from 'node:test';
import assert from 'node:assert/strict';
import { isTrustedProxy, parseForwardedAddress, resolveClientIp, trustedProxyWarnings } from '../../src/gateway/client-address.js';
import { parseCidrList } from '../../src/config/values.js';
import { parseConfig } from '../../src/config/load-config.js';

const trusted = parseCidrList('10.0.0.0/8, 2001:db8:ffff::/48');

/** The client IP of a request from `peer` carrying these X-Forwarded-For lines. */
function clientOf(peer: string, ...forwardedFor: string[]): string {
  const rawHeaders = ['Host', 'h', ...forwardedFor.flatMap((value, i) => [i % 2 === 0 ? 'X-Forwarded-For' : 'x-forwarded-for', value])];
  return resolveClientIp(peer, isTrustedProxy(peer, trusted), rawHeaders, trusted);
}

test('client IP (SPEC 8, nginx real_ip_recursive): a table of peers and X-Forwarded-For chains', () => {
  const cases: { peer: string; xff: string[]; want: string; why: string }[] = [
    { peer: '203.0.113.5', xff: [], want: '203.0.113.5', why: 'no header: the peer' },
    { peer: '203.0.113.5', xff: ['1.2.3.4'], want: '203.0.113.5', why: 'spoofed from an untrusted peer: ignored' },
    { peer: '203.0.113.5', xff: ['10.0.0.1'], want: '203.0.113.5', why: 'an untrusted peer cannot claim to be a trusted proxy either' },
    { peer: '10.0.0.2', xff: [], want: '10.0.0.2', why: 'trusted peer without a header: the peer' },
    { peer: '10.0.0.2', xff: ['198.51.100.7'], want: '198.51.100.7', why: 'one trusted hop' },
    { peer: '10.0.0.2', xff: ['6.6.6.6, 198.51.100.7'], want: '198.51.100.7', why: 'the client spoofed an entry: the rightmost untrusted one wins' },
    { peer: '10.0.0.2', xff: ['6.6.6.6, 198.51.100.7, 10.0.0.9'], want: '198.51.100.7', why: 'two trusted hops' },
    { peer: '10.0.0.2', xff: ['10.0.0.7, 10.0.0.8'], want: '10.0.0.7', why: 'every entry trusted: the leftmost' },
    { peer: '10.0.0.2', xff: ['6.6.6.6', '198.51.100.7'], want: '198.51.100.7', why: 'two header lines are one list, in order' },
    { peer: '10.0.0.2', xff: ['198.51.100.7', '10.0.0.9'], want: '198.51.100.7', why: 'the list goes on in the earlier line' },
    { peer: '10.0.0.2', xff: ['198.51.100.7, garbage'], want: '10.0.0.2', why: 'garbage at the right ends the walk: the peer' },
    { peer: '10.0.0.2', xff: ['198.51.100.7, garbage, 10.0.0.9'], want: '10.0.0.9', why: 'garbage ends the walk at the last address accepted' },
    { peer: '10.0.0.2', xff: ['unknown'], want: '10.0.0.2', why: 'nginx does not take "unknown"' },
    { peer: '10.0.0.2', xff: ['198.51.100.7,,  ,'], want: '198.51.100.7', why: 'empty entries are skipped' },
    { peer: '10.0.0.2', xff: ['6.6.6.6 198.51.100.7'], want: '198.51.100.7', why: 'a space separates entries, as in nginx' },
    { peer: '10.0.0.2', xff: ['6.6.6.6\t198.51.100.7 10.0.0.9'], want: '198.51.100.7', why: 'so does a tab, and a trusted hop is stepped over' },
    { peer: '10.0.0.2', xff: ['198.51.100.7 garbage'], want: '10.0.0.2', why: 'garbage after a space still ends the walk' },
    { peer: '10.0.0.2', xff: ['198.51.100.7:4711'], want: '198.51.100.7', why: 'IPv4:port, the port dropped' },
    { peer: '10.0.0.2', xff: ['[2001:db8::7]:443'], want: '2001:db8::7', why: '[IPv6]:port' },
    { peer: '10.0.0.2', xff: ['[2001:db8::7]'], want: '10.0.0.2', why: '[IPv6] without a port is refused, as nginx does' },
    { peer: '10.0.0.2', xff: ['2001:DB8:0:0::7'], want: '2001:db8::7', why: 'IPv6 in its canonical form' },
    { peer: '10.0.0.2', xff: ['::ffff:198.51.100.7'], want: '198.51.100.7', why: 'a mapped address is IPv4' },
    { peer: '10.0.0.2', xff: ['fe80::1%eth0'], want: '10.0.0.2', why: 'a zone id is not a client address' },
    { peer: '10.0.0.2', xff: ['198.51.100.7:99999'], want: '10.0.0.2', why: 'a port over 65535' },
    { peer: '10.0.0.2', xff: ['01.2.3.4'], want: '10.0.0.2', why: 'leading zeros are not an IPv4 literal' },
    { peer: '2001:db8:ffff::1', xff: ['2001:db8::99, 2001:db8:ffff::2'], want: '2001:db8::99', why: 'IPv6 trusted chain' },
    { peer: '203.0.113.5', xff: ['x'.repeat(10_000)], want: '203.0.113.5', why: 'a huge header from an untrusted peer is not even read' },
  ];
  for (const { peer, xff, want, why } of cases) {
    const got = clientOf(peer, ...xff);
    assert.equal(got, want, `${why}: peer ${peer}, X-Forwarded-For ${JSON.stringify(xff)}: got ${got}, want ${want}`);
  }
});

test('trusted_proxies: an IPv4-mapped entry trusts the IPv4 peer it names (peers are read as IPv4)', () => {
  const mapped = parseCidrList('::ffff:127.0.0.5, ::ffff:10.0.0.0/104');
  const cases: [string, boolean][] = [['127.0.0.5', true], ['::ffff:127.0.0.5', true], ['10.9.8.7', true], ['127.0.0.6', false], ['11.0.0.1', false], ['::1', false]];
  for (const [peer, want] of cases) {
    const got = isTrustedProxy(peer, mapped);
    assert.equal(got, want, `peer ${peer} against ::ffff:127.0.0.5, ::ffff:10.0.0.0/104: got ${got ? 'trusted' : 'not trusted'}, want ${want ? 'trusted' : 'not trusted'}`);
  }
  const client = resolveClientIp('127.0.0.5', isTrustedProxy('127.0.0.5', mapped), ['X-Forwarded-For', '198.51.100.7'], mapped);
  assert.equal(client, '198.51.100.7', `X-Forwarded-For from the trusted mapped peer: got ${client}, want 198.51.100.7`);
});

test('trustedProxyWarnings: an item covering every address of a family is warned about at its file:line:column', () => {
  const server = (value: string) => parseConfig(`[server]\ntrusted_proxies = ${value}\n[proxy.a]\npath = /\npass = http://a\n`, 'env.ini').server;
  const risk = 'any client can then choose its own client IP with X-Forwarded-For, which defeats access and rate_limit (list only the proxies in front of this one)';
  assert.deepEqual(trustedProxyWarnings(server('10.0.0.1, 0.0.0.0/0, ::/0, ::ffff:0:0/96')), [
    `env.ini:2:29: [server] trusted_proxies 0.0.0.0/0 trusts every IPv4 peer: ${risk}`,
    `env.ini:2:40: [server] trusted_proxies ::/0 trusts every IPv6 peer: ${risk}`,
    `env.ini:2:46: [server] trusted_proxies ::ffff:0:0/96 trusts every IPv4 peer: ${risk}`,
  ]);
  assert.deepEqual(
    trustedProxyWarnings(server('"1.2.3.4/0"')),
    ['env.ini:2:20: [server] trusted_proxies 1.2.3.4/0: the bits below /0 are ignored, it means 0.0.0.0/0', `env.ini:2:20: [server] trusted_proxies 1.2.3.4/0 trusts every IPv4 peer: ${risk}`],
    'a quoted value: the column of the item inside the quotes',
  );
  assert.deepEqual(
    trustedProxyWarnings(server('0.0.0.0/1, 10.0.0.0/8, 128.0.0.0/2, ::/1, 192.0.0.0/2')),
    [`env.ini:2:19: [server] trusted_proxies 0.0.0.0/1, 10.0.0.0/8, 128.0.0.0/2, 192.0.0.0/2 together trust every IPv4 peer: ${risk}`],
    'items that cover a family only together: one warning at the first of them; ::/1 covers half of IPv6',
  );
  assert.deepEqual(
    trustedProxyWarnings(server('::/1, 8000::/1')),
    [`env.ini:2:19: [server] trusted_proxies ::/1, 8000::/1 together trust every IPv6 peer: ${risk}`],
  );
  assert.deepEqual(trustedProxyWarnings(server('0.0.0.0/1, 128.0.0.0/2, 224.0.0.0/3, ::/1')), [], 'a gap (192.0.0.0/3) is no warning');
  assert.deepEqual(trustedProxyWarnings(server('0.0.0.0/0, 0.0.0.0/1')), [`env.ini:2:19: [server] trusted_proxies 0.0.0.0/0 trusts every IPv4 peer: ${risk}`], 'a whole family by one item is warned once');
});

test('trustedProxyWarnings: an item with host bits below its prefix gets the warning access gives, at its file:line:column (break test)', () => {
  const server = parseConfig(`[server]\ntrusted_proxies = 10.0.0.1/8, ::ffff:10.0.0.1/104, 192.168.0.0/16, fd00::1/8, 127.0.0.5\n[proxy.a]\npath = /\npass = http://a\n`, 'env.ini').server;
  assert.deepEqual(trustedProxyWarnings(server), [
    'env.ini:2:19: [server] trusted_proxies 10.0.0.1/8: the bits below /8 are ignored, it means 10.0.0.0/8',
    'env.ini:2:31: [server] trusted_proxies ::ffff:10.0.0.1/104: the bits below /104 are ignored, it means 10.0.0.0/8',
    'env.ini:2:68: [server] trusted_proxies fd00::1/8: the bits below /8 are ignored, it means fd00::/8',
  ]);
});

test('parseForwardedAddress: what an entry may be', () => {
  const cases: [string, string | undefined][] = [
    ['1.2.3.4', '1.2.3.4'], ['1.2.3.4:80', '1.2.3.4'], ['1.2.3.4:0', undefined], ['1.2.3.4:', undefined], ['1.2.3.4:x', undefined],
    ['::1', '::1'], ['[::1]:8080', '::1'], ['[::1]', undefined], ['[::1]x80', undefined], ['[1.2.3.4]:80', undefined],
    ['example.com', undefined], ['example.com:80', undefined], ['', undefined],
  ];
  for (const [entry, want] of cases) assert.equal(parseForwardedAddress(entry), want, `'${entry}': got ${parseForwardedAddress(entry)}, want ${want}`);
});
