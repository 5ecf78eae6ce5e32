/**
 * The upstream config of a discovered address (SPEC 7): the address is the identity, the line's
 * name stays in the Host header and the TLS name, the line's flags apply, SRV weights 0 → 1 and
 * priorities above the lowest make backups, a written weight= wins over the records'.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load-config.js';
import { discoveredUpstreamConfig } from '../../src/discovery/discovered-line.js';

const line = (pass: string) => parseConfig(`[proxy.a]\npath=/a\npass = ${pass}\n`, 'env.ini').routes[0]!.upstreams[0]!;

describe('discoveredUpstreamConfig', () => {
  it('makes the address the origin and keeps the line name for Host and TLS', () => {
    const resolveLine = line('https://api.test:8443/v1 resolve weight=4 backup');
    const got = discoveredUpstreamConfig(resolveLine, { address: '10.0.0.7', port: 8443 });
    assert.deepEqual(got, {
      url: 'https://api.test:8443/v1',
      scheme: 'https',
      origin: 'https://10.0.0.7:8443',
      host: '10.0.0.7',
      port: 8443,
      hostHeader: 'api.test:8443',
      path: '/v1',
      weight: 4,
      isBackup: true,
      isDown: false,
      place: { file: 'env.ini', line: 3, column: 8 },
      tlsName: 'api.test',
      discoveredFrom: { name: 'api.test', lineOrigin: 'https://api.test:8443', place: { file: 'env.ini', line: 3, column: 8 } },
    });
    assert.equal(discoveredUpstreamConfig(resolveLine, { address: 'fd00::7', port: 8443 }).origin, 'https://[fd00::7]:8443');
  });

  it('takes SRV weights (0 → 1) and priorities, unless the line writes weight=', () => {
    const srv = line('http://web.test service=http');
    assert.deepEqual(
      [
        discoveredUpstreamConfig(srv, { address: '127.0.0.2', port: 9000, srvWeight: 3 }),
        discoveredUpstreamConfig(srv, { address: '127.0.0.3', port: 9001, srvWeight: 0 }),
        discoveredUpstreamConfig(srv, { address: '127.0.0.4', port: 9002, srvWeight: 5, isBackupByPriority: true }),
      ].map((u) => [u.origin, u.weight, u.isBackup, u.hostHeader]),
      [
        ['http://127.0.0.2:9000', 3, false, 'web.test'],
        ['http://127.0.0.3:9001', 1, false, 'web.test'],
        ['http://127.0.0.4:9002', 5, true, 'web.test'],
      ],
    );
    const weighted = line('http://web.test service=http weight=7');
    assert.equal(discoveredUpstreamConfig(weighted, { address: '127.0.0.2', port: 9000, srvWeight: 3 }).weight, 7);
  });

  it('refuses a plain line', () => {
    assert.throws(() => discoveredUpstreamConfig(line('http://a:1'), { address: '127.0.0.1', port: 1 }), /not a discovery line/);
  });
});
