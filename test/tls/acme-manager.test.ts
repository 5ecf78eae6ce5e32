/**
 * The certificate lifecycle of src/tls/acme/acme-manager.ts against the in-memory ACME server
 * (test/helpers/fake-acme-server.ts), on fake timers and a fake wall clock: issue from an empty
 * storage, reuse at restart without a single request, renew when a third of the lifetime is left,
 * back off 1 min doubling to 1 h with one log line per failed attempt, and the files and modes on disk.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AcmeConfig } from '../../src/config/config.js';
import { AcmeManager, type AcmeManagerOptions } from '../../src/tls/acme/acme-manager.js';
import { FakeAcmeServer } from '../helpers/fake-acme-server.js';
import { FakeTimers } from '../helpers/health-fakes.js';

const skip = spawnSync('openssl', ['version']).status === 0 ? false : 'openssl is not installed (the fake ACME server signs with it)';
const DAY_MS = 86_400_000;
/** node's longest timer: a check further away is reached in steps of this. */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Rig {
  readonly server: FakeAcmeServer;
  readonly timers: FakeTimers;
  readonly storageDir: string;
  readonly certificates: string[];
  readonly challenges: [string, string | undefined][];
  readonly logs: string[];
  manager(overrides?: Partial<AcmeManagerOptions>): AcmeManager;
}

function rig(t: { after(fn: () => void): void }, domains = ['acme.test', 'www.acme.test']): Rig {
  const storageDir = join(mkdtempSync(join(tmpdir(), 'acme-manager-')), 'storage');
  t.after(() => rmSync(join(storageDir, '..'), { recursive: true, force: true }));
  const server = new FakeAcmeServer();
  const timers = new FakeTimers();
  timers.nowMs = Date.now();
  const certificates: string[] = [];
  const challenges: [string, string | undefined][] = [];
  const logs: string[] = [];
  const config: AcmeConfig = { domains, email: 'ops@acme.test', directoryUrl: server.directoryUrl, directoryCaFile: undefined, directoryCaPlace: undefined, storagePlace: undefined, storageDir, place: { file: 'test.ini', line: 1, column: 1 } };
  return {
    server, timers, storageDir, certificates, challenges, logs,
    manager: (overrides = {}) => {
      const manager = new AcmeManager({
        config,
        onCertificate: (certPem) => certificates.push(certPem),
        onChallenge: (token, keyAuthorization) => {
          challenges.push([token, keyAuthorization]);
          if (keyAuthorization === undefined) server.published.delete(token);
          else server.published.set(token, keyAuthorization);
        },
        log: (line) => logs.push(line),
        now: timers.now,
        timers,
        transport: server.transport,
        ...overrides,
      });
      t.after(() => manager.stop());
      return manager;
    },
  };
}

/** Runs the timers due within `ms` and waits for the check they started. */
async function advance(timers: FakeTimers, manager: AcmeManager, ms: number): Promise<void> {
  timers.advance(ms);
  await manager.settled;
}

test('from an empty storage: one order, the chain handed over, account key and certificate key stored 0600, atomically', { skip }, async (t) => {
  const { server, timers, storageDir, certificates, challenges, logs, manager: make } = rig(t);
  const manager = make();
  await manager.load();
  manager.start();
  assert.equal(certificates.length, 0, 'nothing to serve before the order');
  await advance(timers, manager, 0);
  assert.equal(server.orders, 1, `got ${server.orders} orders, want 1`);
  assert.equal(certificates.length, 1, `got ${certificates.length} certificates handed over, want 1`);
  assert.equal(new X509Certificate(certificates[0]!).subjectAltName, 'DNS:acme.test, DNS:www.acme.test');
  assert.equal(challenges.length, 2, 'the token was published, then withdrawn');
  assert.equal(challenges[1]![1], undefined);
  assert.match(logs.at(-1)!, /^acme: new certificate for acme\.test, www\.acme\.test, valid until \d{4}-/);
  const files = readdirSync(storageDir).sort();
  assert.deepEqual(files, ['account.key', 'certificate.directory', 'certificate.key', 'certificate.pem'], `got ${files.join(', ')}, want the four files and no temporary one`);
  assert.equal(readFileSync(join(storageDir, 'certificate.directory'), 'utf8'), `${server.directoryUrl}\n`, 'the directory it was issued through is kept with it');
  for (const [file, mode] of [['account.key', 0o600], ['certificate.key', 0o600], ['certificate.pem', 0o644]] as const) {
    const got = statSync(join(storageDir, file)).mode & 0o777;
    assert.equal(got, mode, `${file}: got mode ${got.toString(8)}, want ${mode.toString(8)}`);
  }
  assert.equal(statSync(storageDir).mode & 0o777, 0o700, 'the storage directory is 0700');
});

test('restart with the same storage: the stored certificate is served at once, without a single ACME request; renewal is due when a third of the lifetime is left', { skip }, async (t) => {
  const { server, timers, certificates, manager: make } = rig(t);
  const first = make();
  await first.load();
  first.start();
  await advance(timers, first, 0);
  first.stop();
  const requestsBefore = server.requests.length;

  const second = make();
  await second.load();
  second.start();
  assert.equal(certificates.length, 2, 'the restart handed over a certificate before any timer ran');
  assert.equal(certificates[1], certificates[0], 'the stored one');
  assert.equal(server.requests.length, requestsBefore, `got ${server.requests.length - requestsBefore} ACME requests at restart, want 0`);
  const { notBeforeMs, notAfterMs } = second.validity!;
  const renewAt = notAfterMs - (notAfterMs - notBeforeMs) / 3;
  assert.ok(renewAt - timers.nowMs > MAX_TIMER_MS, 'a 90-day certificate is renewed later than one timer can wait');
  const pending = [...timers.pending.values()].map((p) => p.atMs);
  const firstStep = timers.nowMs + MAX_TIMER_MS;
  assert.deepEqual(pending, [firstStep], `got a check at ${pending.map((ms) => new Date(ms).toISOString())}, want one at ${new Date(firstStep).toISOString()}, the first step towards the renewal`);

  await advance(timers, second, renewAt - timers.nowMs - 1);
  assert.equal(server.orders, 1, 'nothing is ordered before the renewal time');
  await advance(timers, second, 1);
  assert.equal(server.orders, 2, `got ${server.orders} orders, want a renewal at the renewal time`);
  assert.notEqual(certificates.at(-1), certificates[0], 'the renewed certificate was handed over');
});

test('failed attempts back off 1 min doubling to 1 h, each logged once with the reason; the next success resets it', { skip }, async (t) => {
  const { server, timers, certificates, logs, manager: make } = rig(t);
  server.orderProblem = { type: 'urn:ietf:params:acme:error:rateLimited', detail: 'too many orders', status: 429 };
  const manager = make();
  await manager.load();
  manager.start();
  const delays: number[] = [];
  await advance(timers, manager, 0);
  for (let attempt = 0; attempt < 8; attempt++) {
    const next = [...timers.pending.values()][0]!.atMs - timers.nowMs;
    delays.push(next / 1000);
    await advance(timers, manager, next);
  }
  assert.deepEqual(delays, [60, 120, 240, 480, 960, 1920, 3600, 3600], `got delays ${delays.join(', ')} s`);
  const failures = logs.filter((line) => line.includes('failed'));
  assert.equal(failures.length, 9, `got ${failures.length} failure lines for 9 attempts, want one each`);
  assert.equal(failures[0], 'acme: attempt 1 to get a certificate for acme.test, www.acme.test failed: ACME POST https://acme.fake/order: status 429: urn:ietf:params:acme:error:rateLimited: too many orders; next attempt in 60 s');
  // A problem's detail comes from the ACME server: it cannot forge a log line.
  server.orderProblem = { type: 'urn:ietf:params:acme:error:serverInternal', detail: 'boom\r\nacme: new certificate for evil.test', status: 500 };
  await advance(timers, manager, [...timers.pending.values()][0]!.atMs - timers.nowMs);
  assert.match(logs.at(-1)!, /failed: .*serverInternal: boom\\x0D\\x0Aacme: new certificate for evil\.test; next attempt in 3600 s$/, `got ${JSON.stringify(logs.at(-1))}`);
  server.orderProblem = { type: 'urn:ietf:params:acme:error:serverInternal', detail: `a\u2028b${'x'.repeat(5000)}`, status: 500 };
  await advance(timers, manager, [...timers.pending.values()][0]!.atMs - timers.nowMs);
  assert.match(logs.at(-1)!, /serverInternal: a\\u2028bx+… \(cut\); next attempt in 3600 s$/, 'a Unicode line separator is escaped, and a long detail cut');
  assert.ok(logs.at(-1)!.length < 800, `got a ${logs.at(-1)!.length}-character line`);
  server.orderProblem = undefined;
  await advance(timers, manager, 3600_000);
  assert.equal(certificates.length, 1, 'the attempt after the problem went away succeeded');
  const { notBeforeMs, notAfterMs } = manager.validity!;
  const renewAt = notAfterMs - (notAfterMs - notBeforeMs) / 3;
  assert.equal([...timers.pending.values()][0]!.atMs, Math.min(renewAt, timers.nowMs + MAX_TIMER_MS), 'then the next check is towards the renewal, not a backoff');
});

test('a stored certificate that is expired, for other names, or not its key is not served: a new order', { skip }, async (t) => {
  const cases = ['expired', 'other names', 'another key', 'another directory'] as const;
  for (const what of cases) {
    const { server, timers, storageDir, certificates, logs, manager: make } = rig(t);
    const first = make();
    await first.load();
    first.start();
    await advance(timers, first, 0);
    first.stop();
    let second: AcmeManager;
    if (what === 'expired') {
      timers.nowMs += 91 * DAY_MS;
      second = make();
    } else if (what === 'other names') {
      second = make({ config: { domains: ['other.test'], email: undefined, directoryUrl: server.directoryUrl, directoryCaFile: undefined, directoryCaPlace: undefined, storagePlace: undefined, storageDir, place: { file: 'test.ini', line: 1, column: 1 } } });
    } else if (what === 'another key') {
      writeFileSync(join(storageDir, 'certificate.key'), spawnSync('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256']).stdout);
      second = make();
    } else {
      // As if issued through Let's Encrypt's staging directory, before `directory` moved on.
      writeFileSync(join(storageDir, 'certificate.directory'), 'https://acme-staging-v02.api.letsencrypt.org/directory\n');
      second = make();
    }
    await second.load();
    second.start();
    assert.equal(certificates.length, 1, `${what}: got ${certificates.length - 1} stored certificates served, want none`);
    const want = what === 'another directory' ? /stored certificate was issued through https:\/\/acme-staging-v02\.api\.letsencrypt\.org\/directory, not https:\/\/acme\.fake\/directory: ordering a new one$/ : /stored certificate is not usable/;
    assert.match(logs.at(-1)!, want, `${what}: got log ${logs.at(-1)}`);
    await advance(timers, second, 0);
    assert.equal(server.orders, 2, `${what}: got ${server.orders} orders, want a new one at once`);
  }
});

test('an unusable storage or an unreadable directory_ca stops load() with an AcmeError at the [acme] place', async (t) => {
  const directory = mkdtempSync(join(tmpdir(), 'acme-manager-'));
  t.after(() => rmSync(directory, { recursive: true, force: true }));
  writeFileSync(join(directory, 'a-file'), '');
  const config: AcmeConfig = { domains: ['acme.test'], email: undefined, directoryUrl: 'https://acme.fake/directory', directoryCaFile: undefined, directoryCaPlace: undefined, storagePlace: undefined, storageDir: join(directory, 'a-file', 'storage'), place: { file: 'env.ini', line: 7, column: 11 } };
  const options = { onCertificate: () => {}, onChallenge: () => {}, log: () => {} };
  await assert.rejects(new AcmeManager({ ...options, config }).load(), (error: Error) => {
    assert.match(error.message, /^env\.ini:7:11: \[acme\] storage '.*a-file\/storage' is not usable: ENOTDIR/, `got ${error.message}`);
    assert.equal((error as { code?: string }).code, 'PRX_ACME');
    return true;
  });
  const missingCa = { ...config, storageDir: join(directory, 'storage'), directoryCaFile: join(directory, 'missing.pem') };
  await assert.rejects(new AcmeManager({ ...options, config: missingCa }).load(), /^AcmeError: env\.ini:7:11: \[acme\] directory_ca '.*missing\.pem' cannot be read: ENOENT$/);
  // A directory as directory_ca: the code as --check gives it, and the storage not made yet (final break test).
  const directoryCa = { ...config, storageDir: join(directory, 'untouched-storage'), directoryCaFile: directory };
  await assert.rejects(new AcmeManager({ ...options, config: directoryCa }).load(), /^AcmeError: env\.ini:7:11: \[acme\] directory_ca '.*' cannot be read: EISDIR$/);
  assert.equal(existsSync(directoryCa.storageDir), false, 'got the storage made (an account key written) before the directory_ca failed the start');
});

test('a chain from the CA is stored only once it would serve: a broken block fails the attempt with nothing stored; other blocks and text are dropped', { skip }, async (t) => {
  const broken = rig(t);
  broken.server.chainSuffix = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n';
  const first = broken.manager();
  await first.load();
  first.start();
  await advance(broken.timers, first, 0);
  assert.equal(broken.certificates.length, 0, 'got the broken chain handed over');
  assert.deepEqual(readdirSync(broken.storageDir).sort(), ['account.key'], 'want no certificate stored');
  assert.match(broken.logs.at(-1)!, /attempt 1 .* failed: ACME: the certificate chain sent cannot be served/);

  const noisy = rig(t);
  noisy.server.chainSuffix = 'some text\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n';
  const second = noisy.manager();
  await second.load();
  second.start();
  await advance(noisy.timers, second, 0);
  assert.equal(noisy.certificates.length, 1);
  const stored = readFileSync(join(noisy.storageDir, 'certificate.pem'), 'utf8');
  assert.doesNotMatch(stored, /PRIVATE KEY|some text/, 'want only the CERTIFICATE blocks stored');
  assert.equal(stored, noisy.certificates[0], 'and served');
});

test('a stored chain that cannot be served (a broken block) is not loaded: a new order, not a start that fails', { skip }, async (t) => {
  const { server, timers, storageDir, certificates, logs, manager: make } = rig(t);
  const first = make();
  await first.load();
  first.start();
  await advance(timers, first, 0);
  first.stop();
  writeFileSync(join(storageDir, 'certificate.pem'), `${readFileSync(join(storageDir, 'certificate.pem'), 'utf8')}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`);
  const second = make();
  await second.load();
  assert.equal(certificates.length, 1, 'got the broken stored chain handed over');
  assert.match(logs.at(-1)!, /stored certificate is not usable/);
  second.start();
  await advance(timers, second, 0);
  assert.equal(server.orders, 2);
});
