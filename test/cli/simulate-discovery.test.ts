/**
 * `simulate ROUTE` on a route with discovery lines (SPEC 7): each line is looked up once, now, at
 * the config's `resolver` (the test DNS responder on loopback), and the balancer runs on those
 * addresses; a line that cannot be resolved says so and the rest is simulated; a route left with
 * nothing is one error that names what did not resolve, with no table.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { resolveDiscoveryLines, runSimulate } from '../../src/cli/simulate.js';
import { startDnsResponder } from '../helpers/dns-responder.js';
import { NoUpstreamToSimulateError } from '../../src/errors.js';

function configText(resolverPort: number, ...passLines: string[]): string {
  return ['[server]', `resolver = 127.0.0.1:${resolverPort}`, 'resolver_timeout = 1s', '[proxy.api]', 'path = /api', ...passLines.map((line) => `pass = ${line}`)].join('\n');
}

test('simulate resolves A records and SRV records once and balances over the addresses, labelled with their name', async () => {
  const dns = await startDnsResponder();
  try {
    dns.set('api.test', 'A', [{ address: '127.0.0.2', ttl: 5 }, { address: '127.0.0.3', ttl: 5 }]);
    dns.set('api.test', 'AAAA', 'nodata');
    dns.set('_http._tcp.web.test', 'SRV', [{ priority: 10, weight: 3, port: 8081, target: 'web.test', ttl: 5 }]);
    dns.set('web.test', 'A', [{ address: '127.0.0.4', ttl: 5 }]);
    dns.set('web.test', 'AAAA', 'nodata');
    const config = parseConfig(configText(dns.port, 'http://api.test:8080 resolve', 'http://web.test service=http'), 'env.ini');
    const { config: resolved, messages } = await resolveDiscoveryLines(config, 'api');
    assert.deepEqual(messages, []);
    const got = runSimulate(resolved, 'api', { n: 3 });
    const want = [
      'route api: round-robin, 3 picks, client IP 127.0.0.1, key 127.0.0.1',
      '  a  http://127.0.0.2:8080  weight=1 from api.test',
      '  b  http://127.0.0.3:8080  weight=1 from api.test',
      '  c  http://127.0.0.4:8081  weight=3 from _http._tcp.web.test',
    ].join('\n');
    assert.ok(got.startsWith(`${want}\n`), `got:\n${got}\nwant it to start with:\n${want}`);
    assert.match(got, /^sequence: a b c$/m);
    assert.equal(dns.count('api.test', 'A'), 1, `A questions for api.test: got ${dns.count('api.test', 'A')}, want 1 (one lookup now)`);
  } finally {
    await dns.close();
  }
});

test('a line that cannot be resolved is reported as could not resolve NAME: REASON, and the rest is simulated', async () => {
  const dns = await startDnsResponder();
  try {
    dns.set('gone.test', 'A', 'nxdomain');
    dns.set('gone.test', 'AAAA', 'nxdomain');
    const config = parseConfig(configText(dns.port, 'http://gone.test:8080 resolve', 'http://127.0.0.9:8080'), 'env.ini');
    const { config: resolved, messages } = await resolveDiscoveryLines(config, 'api');
    assert.equal(messages.length, 1, `got messages ${JSON.stringify(messages)}, want one`);
    assert.match(messages[0]!, /^could not resolve gone\.test: nxdomain/);
    assert.deepEqual(resolved.routes[0]!.upstreams.map((upstream) => upstream.origin), ['http://127.0.0.9:8080']);
    assert.match(runSimulate(resolved, 'api', { n: 2 }), /^sequence: a a$/m);
  } finally {
    await dns.close();
  }
});

test('a route whose lines all fail to resolve is one error at its first discovery line, naming each name and why, and no table (found by a break test: it printed both)', async () => {
  const dns = await startDnsResponder();
  try {
    dns.set('down.test', 'A', 'servfail');
    dns.set('down.test', 'AAAA', 'servfail');
    dns.set('_http._tcp.gone.test', 'SRV', 'nxdomain');
    const one = parseConfig(configText(dns.port, 'http://down.test:8080 resolve'), 'env.ini');
    await assert.rejects(resolveDiscoveryLines(one, 'api'), (error: Error) => {
      assert.ok(error instanceof NoUpstreamToSimulateError, `got ${error.name}, want NoUpstreamToSimulateError`);
      assert.match(error.message, /^env\.ini:6:8: route api has no upstream to simulate: its upstreams are known only from DNS, and down\.test \(servfail: [^)]*\) did not resolve$/);
      return true;
    });
    const two = parseConfig(configText(dns.port, 'http://down.test:8080 resolve', 'http://gone.test service=http'), 'env.ini');
    await assert.rejects(resolveDiscoveryLines(two, 'api'), (error: Error) => {
      assert.match(error.message, /^env\.ini:6:8: route api has no upstream to simulate: its upstreams are known only from DNS, and none of down\.test \(servfail: [^)]*\), _http\._tcp\.gone\.test \(nxdomain: [^)]*\) resolved$/);
      return true;
    });
  } finally {
    await dns.close();
  }
});
