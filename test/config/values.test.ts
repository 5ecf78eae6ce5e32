/**
 * The value types (SPEC 1.1, 1.2) as data tables: text → value, and text → error message.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { levenshtein, suggest } from '../../src/config/did-you-mean.js';
import {
  InvalidValueError,
  formatDuration,
  formatSize,
  parseBoolean,
  parseChoice,
  parseCidrList,
  parseDuration,
  parseInteger,
  parseListenAddress,
  parseSize,
  parseStatusRanges,
} from '../../src/config/values.js';

function errorOf(parse: () => unknown): InvalidValueError {
  try {
    parse();
  } catch (error) {
    if (error instanceof InvalidValueError) return error;
    throw error;
  }
  assert.fail('got a value, want an InvalidValueError');
}

describe('parseDuration', () => {
  const good: [string, number][] = [
    ['500ms', 500],
    ['0ms', 0],
    ['3s', 3_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['3', 3_000],
    ['0', 0],
    ['1.5s', 1_500],
    ['0.25', 250],
    ['1.5m', 90_000],
    ['0.0004s', 0],
    ['2.5ms', 3],
    ['596h', 2_145_600_000],
  ];
  for (const [text, ms] of good) {
    it(`${text} → ${ms} ms`, () => assert.equal(parseDuration(text), ms, `got ${parseDuration(text)}, want ${ms}`));
  }
  for (const text of ['5x', '', ' 1s', '1 s', '1S', '-1s', '1.s', '.5s', '1e3', 's', '1w', '1sec', '0x10']) {
    it(`rejects '${text}'`, () => {
      assert.equal(errorOf(() => parseDuration(text)).message, `invalid duration '${text}' (expected e.g. 500ms, 3s, 1m)`);
    });
  }
  it("rejects durations Node's timers cannot hold", () => {
    assert.equal(errorOf(() => parseDuration('597h')).message, "invalid duration '597h' (expected at most 596h, the limit of Node's timers)");
    assert.equal(parseDuration('2147483647ms'), 2_147_483_647);
    assert.throws(() => parseDuration('2147483648ms'), InvalidValueError);
    assert.throws(() => parseDuration('9'.repeat(400)), InvalidValueError);
  });
  it('enforces a minimum when asked', () => {
    assert.equal(errorOf(() => parseDuration('0s', 1)).message, "invalid duration '0s' (expected at least 1ms)");
    assert.equal(parseDuration('1ms', 1), 1);
  });
});

describe('parseSize', () => {
  const good: [string, number][] = [
    ['512', 512],
    ['0', 0],
    ['16k', 16_384],
    ['16K', 16_384],
    ['1m', 1_048_576],
    ['1M', 1_048_576],
    ['1g', 1_073_741_824],
    ['2G', 2_147_483_648],
  ];
  for (const [text, bytes] of good) {
    it(`${text} → ${bytes} bytes`, () => assert.equal(parseSize(text), bytes, `got ${parseSize(text)}, want ${bytes}`));
  }
  for (const text of ['1.5k', '1t', '1kb', '', 'k', '-1', '1 k']) {
    it(`rejects '${text}'`, () => {
      assert.equal(errorOf(() => parseSize(text)).message, `invalid size '${text}' (expected e.g. 512, 16k, 1m, 1g)`);
    });
  }
  it('rejects sizes beyond safe integers and below a minimum', () => {
    assert.equal(errorOf(() => parseSize('99999999999999g')).message, "invalid size '99999999999999g' (too large)");
    assert.equal(errorOf(() => parseSize('512', 1024)).message, "invalid size '512' (expected at least 1k)");
  });
});

describe('parseBoolean', () => {
  const table: [string, boolean][] = [
    ['on', true],
    ['off', false],
    ['true', true],
    ['false', false],
    ['yes', true],
    ['no', false],
    ['1', true],
    ['0', false],
    ['ON', true],
    ['Off', false],
    ['TRUE', true],
    ['No', false],
  ];
  for (const [text, value] of table) {
    it(`${text} → ${value}`, () => assert.equal(parseBoolean(text), value));
  }
  for (const text of ['', 'maybe', 'enabled', '2', 'o n']) {
    it(`rejects '${text}'`, () => {
      assert.equal(errorOf(() => parseBoolean(text)).message, `invalid boolean '${text}' (expected on/off, true/false, yes/no, 1/0)`);
    });
  }
});

describe('parseInteger', () => {
  it('accepts digits within the range', () => {
    assert.equal(parseInteger('0', 0, 10), 0);
    assert.equal(parseInteger('10', 0, 10), 10);
    assert.equal(parseInteger('007', 0, 10), 7);
  });
  for (const text of ['-1', '11', '1.5', '', '1e1', '+1', ' 1']) {
    it(`rejects '${text}' for 0..10`, () => {
      assert.equal(errorOf(() => parseInteger(text, 0, 10)).message, `invalid number '${text}' (expected a whole number from 0 to 10)`);
    });
  }
});

describe('parseChoice', () => {
  const strategies = ['round-robin', 'random', 'ip-hash'];
  it('returns a listed choice', () => assert.equal(parseChoice('random', strategies, 'strategy'), 'random'));
  it('suggests a close one', () => {
    assert.equal(errorOf(() => parseChoice('round_robin', strategies, 'strategy')).message, "unknown strategy 'round_robin' (did you mean 'round-robin'?)");
    assert.equal(errorOf(() => parseChoice('Random', strategies, 'strategy')).message, "unknown strategy 'Random' (did you mean 'random'?)");
  });
  it('lists all when none is close', () => {
    assert.equal(errorOf(() => parseChoice('fastest', strategies, 'strategy')).message, "unknown strategy 'fastest' (expected one of: round-robin, random, ip-hash)");
  });
});

describe('parseListenAddress', () => {
  const good: [string, string, number][] = [
    ['127.0.0.1:9090', '127.0.0.1', 9090],
    [':8080', '0.0.0.0', 8080],
    ['8080', '0.0.0.0', 8080],
    ['[::]:80', '::', 80],
    ['[::1]:0', '::1', 0],
    ['[2001:DB8::1]:443', '2001:db8::1', 443],
    ['LocalHost:65535', 'localhost', 65_535],
    ['my_service.internal:1', 'my_service.internal', 1],
  ];
  for (const [text, host, port] of good) {
    it(`${text} → ${host} port ${port}`, () => assert.deepEqual(parseListenAddress(text), { host, port }));
  }
  const bad: [string, string, number][] = [
    ['1.2.3.4:99999', "invalid port '99999' (expected a number from 0 to 65535)", 8],
    ['1.2.3.4:', "invalid port '' (expected a number from 0 to 65535)", 8],
    ['localhost', "missing port in listen address 'localhost' (expected host:port, :port or [::]:port)", 9],
    ['::1:80', "invalid listen address '::1:80' (an IPv6 address needs brackets, e.g. [::1]:8080)", 0],
    ['[::1]80', "missing port in listen address '[::1]80' (expected host:port, :port or [::]:port)", 5],
    ['[nope]:80', "invalid IPv6 address in listen address '[nope]:80' (expected host:port, :port or [::]:port)", 1],
    ['bad host:80', "invalid host 'bad host' in listen address (expected host:port, :port or [::]:port)", 0],
    ['1.2.3:80', "invalid host '1.2.3' in listen address (expected host:port, :port or [::]:port)", 0],
    [':-1', "invalid port '-1' (expected a number from 0 to 65535)", 1],
  ];
  for (const [text, message, offset] of bad) {
    it(`rejects '${text}'`, () => {
      const error = errorOf(() => parseListenAddress(text));
      assert.equal(error.message, message);
      assert.equal(error.offset, offset, `got offset ${error.offset}, want ${offset}`);
    });
  }
});

describe('parseCidrList', () => {
  it('reads IPv4 and IPv6 networks, bare addresses as /32 and /128', () => {
    const networks = parseCidrList('10.0.0.0/8, 192.168.1.7 ,::1,2001:db8::/32,::ffff:1.2.3.4/128');
    assert.deepEqual(
      networks.map((n) => [n.family, Array.from(n.bytes).join('.'), n.prefixLength, n.source]),
      [
        [4, '10.0.0.0', 8, '10.0.0.0/8'],
        [4, '192.168.1.7', 32, '192.168.1.7'],
        [6, '0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1', 128, '::1'],
        [6, '32.1.13.184.0.0.0.0.0.0.0.0.0.0.0.0', 32, '2001:db8::/32'],
        [4, '1.2.3.4', 32, '::ffff:1.2.3.4/128'],
      ],
    );
  });
  it('reads an IPv4-mapped entry as the IPv4 network it maps (client IPs are read so)', () => {
    const networks = parseCidrList('::ffff:127.0.0.5, ::ffff:10.1.0.0/104, ::FFFF:7f00:1/120, ::ffff:0:0/96, 0:0:0:0:0:ffff:c000:201');
    assert.deepEqual(
      networks.map((n) => `${n.family} ${Array.from(n.bytes).join('.')}/${n.prefixLength}`),
      ['4 127.0.0.5/32', '4 10.0.0.0/8', '4 127.0.0.0/24', '4 0.0.0.0/0', '4 192.0.2.1/32'],
    );
    assert.deepEqual(
      parseCidrList('::fffe:1.2.3.4, 64:ff9b::1.2.3.4').map((n) => n.family),
      [6, 6],
      'only ::ffff:0:0/96 is the mapped range',
    );
  });
  it('clears host bits below the prefix', () => {
    assert.deepEqual(Array.from(parseCidrList('10.1.2.3/12')[0]?.bytes ?? []), [10, 0, 0, 0]);
    assert.deepEqual(Array.from(parseCidrList('fe80::1:2/10')[0]?.bytes ?? []).slice(0, 3), [0xfe, 0x80, 0]);
    assert.deepEqual(Array.from(parseCidrList('0.0.0.0/0')[0]?.bytes ?? []), [0, 0, 0, 0]);
  });
  it('reads the empty text as an empty list', () => assert.deepEqual(parseCidrList(''), []));
  const bad: [string, string, number][] = [
    ['10.0.0.0/33', "invalid prefix length '/33' (expected /0 to /32 for IPv4)", 8],
    ['10.0.0.1, ::/129', "invalid prefix length '/129' (expected /0 to /128 for IPv6)", 12],
    ['10.0.0.1, example.com', "invalid IP address 'example.com' (expected IPs or CIDRs separated by commas, e.g. 10.0.0.0/8, ::1)", 10],
    ['10.0.0.1,,10.0.0.2', 'empty item in address list (expected IPs or CIDRs separated by commas, e.g. 10.0.0.0/8, ::1)', 9],
    ['fe80::1%eth0', "invalid IP address 'fe80::1%eth0' (expected IPs or CIDRs separated by commas, e.g. 10.0.0.0/8, ::1)", 0],
    ['10.0.0.0/', "invalid prefix length '/' (expected /0 to /32 for IPv4)", 8],
    // A space inside a network is reported as that, at the space (found by a break test: it was "invalid IP address '10.0.0.0 '").
    ['10.0.0.0 /8', "space inside the network '10.0.0.0 /8' (an address/prefix is written without spaces, e.g. 10.0.0.0/8)", 8],
    ['::1, 10.0.0.0/ 8', "space inside the network '10.0.0.0/ 8' (an address/prefix is written without spaces, e.g. 10.0.0.0/8)", 14],
    ['10.0.0.0\t/\t8', "space inside the network '10.0.0.0\t/\t8' (an address/prefix is written without spaces, e.g. 10.0.0.0/8)", 8],
    ['10.0.0.1 10.0.0.2', "space inside the item '10.0.0.1 10.0.0.2' (expected IPs or CIDRs separated by commas, e.g. 10.0.0.0/8, ::1)", 8],
    ['10.0.0.0/08', "invalid prefix length '/08' (expected /0 to /32 for IPv4, without a leading zero)", 8],
    ['10.0.0.1, ::/00', "invalid prefix length '/00' (expected /0 to /128 for IPv6, without a leading zero)", 12],
    ['10.0.0.1, ::ffff:10.0.0.0/0104', "invalid prefix length '/0104' (expected /0 to /128 for IPv6, without a leading zero)", 25],
    [
      '10.0.0.1, ::ffff:10.0.0.0/95',
      "invalid prefix length '/95' for the IPv4-mapped address '::ffff:10.0.0.0' (a mapped network is an IPv4 network: expected /96 to /128 (::ffff:10.0.0.0/104 is 10.0.0.0/8), or write the IPv4 network)",
      25,
    ],
  ];
  for (const [text, message, offset] of bad) {
    it(`rejects '${text}'`, () => {
      const error = errorOf(() => parseCidrList(text));
      assert.equal(error.message, message);
      assert.equal(error.offset, offset, `got offset ${error.offset}, want ${offset}`);
    });
  }
});

describe('parseStatusRanges', () => {
  it('reads ranges and single statuses', () => {
    assert.deepEqual(parseStatusRanges('200-399'), [{ from: 200, to: 399 }]);
    assert.deepEqual(parseStatusRanges('200,204, 300-399'), [
      { from: 200, to: 200 },
      { from: 204, to: 204 },
      { from: 300, to: 399 },
    ]);
  });
  const bad: [string, number][] = [
    ['399-200', 0],
    ['200,600', 4],
    ['99', 0],
    ['200-', 0],
    ['', 0],
    ['200, abc', 5],
  ];
  for (const [text, offset] of bad) {
    it(`rejects '${text}'`, () => {
      const error = errorOf(() => parseStatusRanges(text));
      assert.match(error.message, /^invalid status range '.*' \(expected statuses or ranges from 100 to 599/);
      assert.equal(error.offset, offset, `got offset ${error.offset}, want ${offset}`);
    });
  }
});

describe('formatDuration and formatSize', () => {
  it('write the shortest exact unit', () => {
    const durations: [number, string][] = [[0, '0s'], [500, '500ms'], [1_500, '1500ms'], [3_000, '3s'], [90_000, '90s'], [60_000, '1m'], [7_200_000, '2h'], [172_800_000, '2d']];
    for (const [ms, text] of durations) assert.equal(formatDuration(ms), text, `got ${formatDuration(ms)} for ${ms}, want ${text}`);
    const sizes: [number, string][] = [[0, '0'], [1000, '1000'], [16_384, '16k'], [1_048_576, '1m'], [1_073_741_824, '1g']];
    for (const [bytes, text] of sizes) assert.equal(formatSize(bytes), text, `got ${formatSize(bytes)} for ${bytes}, want ${text}`);
  });
  it('round-trip through the parsers', () => {
    for (const ms of [0, 1, 999, 1_000, 61_000, 3_600_000, 86_400_000]) assert.equal(parseDuration(formatDuration(ms)), ms);
    for (const bytes of [0, 1, 1024, 3 * 1024 ** 2]) assert.equal(parseSize(formatSize(bytes)), bytes);
  });
});

describe('did you mean', () => {
  it('measures edit distance', () => {
    assert.equal(levenshtein('kitten', 'sitting'), 3);
    assert.equal(levenshtein('pas', 'pass'), 1);
    assert.equal(levenshtein('', 'abc'), 3);
    assert.equal(levenshtein('same', 'same'), 0);
  });
  it('suggests the closest candidate within 2 edits, ties to the earlier', () => {
    assert.equal(suggest('pas', ['path', 'pass']), 'pass');
    assert.equal(suggest('helth_path', ['health_path', 'health_method']), 'health_path');
    assert.equal(suggest('HOST', ['host']), 'host');
    assert.equal(suggest('abcd', ['abxy', 'abcx']), 'abcx');
    assert.equal(suggest('pat', ['path', 'pass']), 'path');
  });
  it('stays quiet when nothing is close', () => {
    assert.equal(suggest('x', ['ip', 'uri']), undefined);
    assert.equal(suggest('listen_address', ['listen']), undefined);
    assert.equal(suggest('ab', ['xy']), undefined);
  });
});
