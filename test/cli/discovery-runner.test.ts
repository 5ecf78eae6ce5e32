/**
 * The discovery beside a proxy (src/cli/discovery-runner.ts): a config without discovery lines
 * makes no Discovery (no lookup is ever made); the first config with one starts its lookups, pushes
 * the set to the target and reports its line; after `stop` a reload starts nothing. The lookups are
 * a fake DnsLookup, the timers a manual clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { DiscoveryRunner, hasDiscoveryLines } from '../../src/cli/discovery-runner.js';
import type { DiscoveredLine } from '../../src/discovery/discovered-line.js';
import type { DnsLookup } from '../../src/discovery/dns-lookup.js';
import { FakeClock } from '../admin/fake-clock.js';

const plain = parseConfig(['[proxy.api]', 'path = /', 'pass = http://127.0.0.1:9001'].join('\n'), 'env.ini');
const withLine = parseConfig(['[proxy.api]', 'path = /', 'pass = http://127.0.0.1:9001', 'pass = http://api.test:8080 resolve'].join('\n'), 'env.ini');

/** A DnsLookup answering api.test with 127.0.0.2 (TTL 60), counting its lookups. */
function fakeLookup(): { lookup: DnsLookup; names: string[] } {
  const names: string[] = [];
  return {
    names,
    lookup: {
      resolveAddresses: async (name) => {
        names.push(name);
        return { v4: { result: 'ok', records: [{ address: '127.0.0.2', ttlSeconds: 60 }] }, v6: { result: 'empty', reason: `no AAAA for ${name}` } };
      },
      resolveService: async (name) => {
        names.push(name);
        return { result: 'nxdomain', reason: `no ${name}` };
      },
      close: () => {},
    },
  };
}

test('no discovery lines: no Discovery, no lookup; the first config with a line starts one; after stop nothing starts', async () => {
  const clock = new FakeClock();
  const { lookup, names } = fakeLookup();
  let lookupsMade = 0;
  const pushed: { routeName: string; lines: readonly DiscoveredLine[] }[] = [];
  const runner = new DiscoveryRunner({
    target: { setDiscoveredUpstreams: (routeName, lines) => void pushed.push({ routeName, lines }) },
    lookup: () => (lookupsMade++, lookup),
    timers: clock,
    now: clock.now,
    epochNow: () => 0,
  });
  assert.equal(hasDiscoveryLines(plain), false);
  assert.equal(hasDiscoveryLines(withLine), true);

  runner.apply(plain);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(lookupsMade, 0, `without discovery lines: got ${lookupsMade} DnsLookups made, want 0`);
  assert.equal(runner.lines.length, 0, `got ${runner.lines.length} lines, want 0`);
  assert.equal(runner.lookupCounts.length, 0);

  runner.apply(withLine); // a reload that brings the first line
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(names, ['api.test'], `got lookups ${JSON.stringify(names)}, want one of api.test`);
  assert.deepEqual(pushed.at(-1)?.lines.map((line) => [line.lineOrigin, line.upstreams.map((u) => u.origin)]), [['http://api.test:8080', ['http://127.0.0.2:8080']]]);
  assert.deepEqual(runner.lines.map((line) => [line.routeName, line.name, line.upstreamCount, line.lastResult]), [['api', 'api.test', 1, 'ok']]);

  runner.stop();
  runner.apply(withLine);
  clock.advance(120_000);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(names, ['api.test'], `after stop: got lookups ${JSON.stringify(names)}, want no new one`);
});
