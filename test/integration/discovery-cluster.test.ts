/**
 * DNS discovery with `workers = 2` (SPEC 7, issue 14 item 3), real processes (`node dist/main.js`
 * from a private build) and the test DNS responder on loopback: only the primary resolves, so at
 * TTL 1 the DNS server sees one resolver's rate (about one A question a second, not two); a new
 * answer reaches both workers (both serve the address that appeared); a worker started later
 * (after a SIGKILL) gets the current set in its start message, without a new push; `/metrics` on the
 * primary counts the lookups and the members. Backends: 127.0.0.2 and 127.0.0.3 on one port.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { StatusSnapshot } from '../../src/admin/status-snapshot.js';
import { buildCli, REPO } from '../helpers/built-cli.js';
import { addressBackend, freePort, get, isAlive, waitFor } from '../helpers/cli-process.js';
import { startDnsResponder } from '../helpers/dns-responder.js';

let mainJs = '';
before(async () => {
  mainJs = await buildCli();
});

test('workers = 2: the primary alone resolves (one resolver rate at TTL 1), each new set reaches both workers, a later worker starts with the current set', { timeout: 40_000 }, async () => {
  const dns = await startDnsResponder();
  const first = await addressBackend('127.0.0.2', 0);
  const backendPort = (first.address() as AddressInfo).port;
  const second = await addressBackend('127.0.0.3', backendPort);
  dns.set('api.test', 'A', [{ address: '127.0.0.2', ttl: 1 }]);
  dns.set('api.test', 'AAAA', 'nodata');
  const [proxyPort, adminPort] = [await freePort(), await freePort()];
  const configFile = join(mkdtempSync(join(tmpdir(), 'proxy-discovery-')), 'env.ini');
  writeFileSync(
    configFile,
    [
      '[server]',
      `listen = 127.0.0.1:${proxyPort}`,
      'access_log = off',
      'workers = 2',
      `resolver = 127.0.0.1:${dns.port}`,
      'resolver_timeout = 500ms',
      '[admin]',
      `listen = 127.0.0.1:${adminPort}`,
      '[proxy.api]',
      'path = /',
      `pass = http://api.test:${backendPort} resolve`,
      '',
    ].join('\n'),
  );

  let stderr = '';
  const primary: ChildProcess = spawn(process.execPath, [mainJs, '--config', configFile], { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'] });
  primary.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => primary.once('exit', (code) => resolve(code)));
  const status = async (): Promise<StatusSnapshot> => JSON.parse((await get(adminPort, '/status.json')).body) as StatusSnapshot;
  /** The discovered addresses every one of `count` workers has, or undefined. */
  const inEveryWorker = async (addresses: readonly string[], count = 2): Promise<StatusSnapshot | undefined> => {
    const snapshot = await status();
    const upstreams = snapshot.routes[0]!.upstreams;
    const has = upstreams.map((u) => u.address).sort().join(' ') === addresses.map((a) => `${a}:${backendPort}`).join(' ');
    return snapshot.workers.length === count && has && upstreams.every((u) => u.workers.length === count) ? snapshot : undefined;
  };
  let workerPids: number[] = [];
  try {
    // 1. The first answer reaches both workers.
    const initial = await waitFor('127.0.0.2 in both workers', () => inEveryWorker(['127.0.0.2']), 10_000);
    workerPids = initial.workers.map((w) => w.pid);
    assert.equal(initial.routes[0]!.upstreams[0]!.discoveredFrom?.name, 'api.test');

    // 2. One resolver's rate: at TTL 1, over 3 s, about 3 A questions (two resolvers would ask about 6).
    const before = dns.count('api.test', 'A');
    await new Promise((r) => setTimeout(r, 3_000));
    const asked = dns.count('api.test', 'A') - before;
    assert.ok(asked >= 2 && asked <= 4, `got ${asked} A questions for api.test in 3 s at TTL 1, want about 3 (one resolver for 2 workers)`);

    // 3. A new answer with 127.0.0.3 added: in both workers within 2 TTLs, and both addresses serve.
    const changedAt = Date.now();
    dns.set('api.test', 'A', [{ address: '127.0.0.2', ttl: 1 }, { address: '127.0.0.3', ttl: 1 }]);
    await waitFor('127.0.0.2 and 127.0.0.3 in both workers', () => inEveryWorker(['127.0.0.2', '127.0.0.3']));
    const elapsedMs = Date.now() - changedAt;
    assert.ok(elapsedMs < 2_000 + 300, `got the new set in both workers after ${elapsedMs} ms, want within 2 TTLs (2 s)`);
    const bodies = new Set<string>();
    for (let i = 0; i < 12; i++) bodies.add((await get(proxyPort, '/')).body);
    assert.deepEqual([...bodies].sort(), ['127.0.0.2', '127.0.0.3'], 'got traffic on these addresses');

    // 4. A worker started later gets the current set with its start (the set does not change, so nothing is pushed).
    process.kill(workerPids[0]!, 'SIGKILL');
    const replaced = await waitFor(
      'a replacement worker with both addresses',
      async () => {
        const snapshot = await inEveryWorker(['127.0.0.2', '127.0.0.3']);
        return snapshot !== undefined && !snapshot.workers.some((w) => w.pid === workerPids[0]) ? snapshot : undefined;
      },
      10_000,
    );
    workerPids = replaced.workers.map((w) => w.pid);

    // 5. /metrics on the primary: lookups by result, members now.
    const metrics = (await get(adminPort, '/metrics')).body;
    const okLine = /^proxy_dns_lookups_total\{route="api",name="api\.test",result="ok"\} (\d+)$/m.exec(metrics);
    assert.ok(okLine !== null && Number(okLine[1]) >= 3, `got ${okLine?.[0]}, want at least 3 ok lookups`);
    assert.match(metrics, /^proxy_discovered_upstreams\{route="api",name="api\.test"\} 2$/m);

    primary.kill('SIGTERM');
    assert.equal(await exited, 0, `got the primary's exit code, want 0; stderr:\n${stderr}`);
  } finally {
    for (const pid of [primary.pid, ...workerPids]) if (pid !== undefined && isAlive(pid)) process.kill(pid, 'SIGKILL');
    await Promise.all([first, second].map((server) => new Promise((resolve) => server.close(resolve))));
    await dns.close();
  }
});
