/**
 * Health checks across reloads with the real process (`node dist/main.js`) and real SIGHUPs: a reload keeps the
 * health checker's rise/fall streaks, probe schedule and probes in flight. The numbers
 * (SIGHUP every 0.8 s against `health_interval = 3s`; 200 SIGHUPs in 4.5 s) are scaled down: checks
 * every 200 ms with a 150 ms timeout, rise 2, fall 2, and a SIGHUP every 160 ms — more often than
 * the interval, which is what used to break it — then every 40 ms while probes are counted.
 *
 * Before the fix each SIGHUP restarted the checker: (a) the route whose upstreams came back kept
 * answering 503, since no two successes fell between two reloads; (b) the hung upstream was never
 * marked DOWN, since every reload aborted its probe before the timeout; (c) every reload sent a
 * probe to every upstream at once.
 */
import { describe, it, type TestContext } from 'node:test';
import net from 'node:net';
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request, startBackend, waitFor, type Backend } from '../helpers/proxy-harness.js';
import { startCli } from '../helpers/built-cli.js';

const INTERVAL_MS = 200;
const TIMEOUT_MS = 150;
const RISE = 2;
const FALL = 2;

interface SwitchableBackend extends Backend {
  isFailing: boolean;
  isHung: boolean;
  /** Health probes received so far (HEAD requests). */
  probes(): number;
}

/** A backend that answers 200, or 500 while `isFailing`, or nothing at all while `isHung` (it accepts and reads the request). */
async function switchableBackend(): Promise<SwitchableBackend> {
  const control = { isFailing: false, isHung: false };
  const backend = await startBackend((_req, res) => {
    if (control.isHung) return;
    res.statusCode = control.isFailing ? 500 : 200;
    res.end('ok');
  });
  return {
    ...backend,
    get isFailing() {
      return control.isFailing;
    },
    set isFailing(value: boolean) {
      control.isFailing = value;
    },
    get isHung() {
      return control.isHung;
    },
    set isHung(value: boolean) {
      control.isHung = value;
    },
    probes: () => backend.requests.filter((r) => r.method === 'HEAD').length,
  };
}

/** A port free on 127.0.0.1 a moment ago (a cluster needs its listen port before it starts). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Polls `GET path` through the proxy every 25 ms until it answers `status` (a refused connection
 * counts as not yet: a cluster's workers start listening after the primary); resolves with the ms it
 * took, or undefined at `deadlineMs`.
 */
async function msUntilStatus(port: number, path: string, status: number, deadlineMs: number): Promise<number | undefined> {
  const startedAt = performance.now();
  while (performance.now() - startedAt <= deadlineMs) {
    const answered = await request(port, { path }).then((res) => res.status, () => 0);
    if (answered === status) return Math.round(performance.now() - startedAt);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return undefined;
}

/**
 * The scenario, with `workers` processes: in a cluster the primary runs the checks on its model
 * ProxyServer, reloads it with the same `reload`, and pushes health state to the workers within
 * 100 ms, so the same bounds hold through the workers.
 */
async function reloadStorm(t: TestContext, workers: 1 | 2): Promise<void> {
  const b1 = await switchableBackend();
  const b2 = await switchableBackend();
  const hung = await switchableBackend();
  t.after(async () => {
    for (const backend of [b1, b2, hung]) await backend.close();
  });
  b1.isFailing = true;
  b2.isFailing = true;

  const dir = mkdtempSync(join(tmpdir(), 'proxy-reload-health-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'env.ini');
  // A cluster's workers share the primary's listening socket, which needs a port known up front.
  const listen = workers === 1 ? '127.0.0.1:0' : `127.0.0.1:${await freePort()}`;
  // Two versions of the file that differ only outside the upstreams' health settings (route back's
  // `trace`), written atomically: every reload changes the config, none changes an upstream.
  const version = (trace: 'on' | 'off'): string =>
    `[server]\nlisten = ${listen}\naccess_log = off\nworkers = ${workers}\n\n` +
    `[proxy]\nhealth_check = on\nhealth_interval = ${INTERVAL_MS}ms\nhealth_timeout = ${TIMEOUT_MS}ms\n` +
    `health_rise = ${RISE}\nhealth_fall = ${FALL}\nretries = 0\n\n` +
    `[proxy.back]\npath = /back\ntrace = ${trace}\npass = ${b1.url}\npass = ${b2.url}\n\n` +
    // read_timeout: a request that reaches the hung upstream (in a worker the DOWN state may still
    // be on its way) ends in 504 at once instead of after the default 60 s.
    `[proxy.hung]\npath = /hung\nread_timeout = 300ms\npass = ${hung.url}\n`;
  let isTraceOn = false;
  const writeVersion = (): void => {
    writeFileSync(`${file}.new`, version(isTraceOn ? 'on' : 'off'));
    renameSync(`${file}.new`, file);
    isTraceOn = !isTraceOn;
  };
  writeVersion();

  const cli = await startCli(['--config', file]);
  t.after(() => cli.kill());
  const port = workers === 1 ? await cli.port : Number(listen.split(':')[1]);
  const reloads = (): number => cli.stderr().match(/^reloaded /gm)?.length ?? 0;

  // Before any reload: route hung serves, route back is DOWN (both upstreams fail their checks).
  assert.notEqual(await msUntilStatus(port, '/hung', 200, 5000), undefined, 'got route hung not serving after start-up');
  await waitFor(() => /route back is DOWN[\s\S]*route back is DOWN/.test(cli.stderr()), 5000, 'both upstreams of route back to be DOWN');
  assert.notEqual(await msUntilStatus(port, '/back', 503, 1000), undefined, 'got route back serving with both upstreams DOWN, want 503');

  let hangupTimer = setInterval(() => {
    writeVersion();
    cli.child.kill('SIGHUP');
  }, 160);
  try {
    await waitFor(() => reloads() >= 3, 3000, 'the first reloads');

    // (a) and (b) at once: b1 and b2 come back, the third backend hangs.
    b1.isFailing = false;
    b2.isFailing = false;
    hung.isHung = true;
    const hungAt = performance.now();
    const reloadsBefore = reloads();
    const recoveryBoundMs = RISE * INTERVAL_MS + 1000;
    const recoveryMs = await msUntilStatus(port, '/back', 200, recoveryBoundMs);
    assert.notEqual(recoveryMs, undefined, `got route back still not serving ${recoveryBoundMs} ms after its upstreams came back, want a 200 within rise × interval + 1 s`);
    t.diagnostic(`route back served again after ${recoveryMs} ms (bound ${recoveryBoundMs} ms), ${reloads() - reloadsBefore} reloads meanwhile`);

    const downLine = `upstream ${hung.url} of route hung is DOWN after ${FALL} failed checks: timeout after ${TIMEOUT_MS}ms`;
    const downBoundMs = FALL * INTERVAL_MS + TIMEOUT_MS + 1000;
    await waitFor(() => cli.stderr().includes(downLine), downBoundMs - (performance.now() - hungAt), 'the hung upstream to be marked DOWN').catch(() => {
      assert.fail(`got no "${downLine}" within ${downBoundMs} ms of the upstream hanging, want it within fall × interval + timeout + 1 s`);
    });
    const downMs = Math.round(performance.now() - hungAt);
    t.diagnostic(`the hung upstream was DOWN after ${downMs} ms (bound ${downBoundMs} ms), ${reloads() - reloadsBefore} reloads since it hung`);
    assert.notEqual(await msUntilStatus(port, '/hung', 503, 1000), undefined, 'got route hung not answering 503 with its only upstream DOWN');

    // (c) SIGHUPs every 40 ms for 2 s: each upstream still gets one probe per interval.
    clearInterval(hangupTimer);
    hangupTimer = setInterval(() => {
      writeVersion();
      cli.child.kill('SIGHUP');
    }, 40);
    const windowMs = 2000;
    const probesBefore = [b1.probes(), b2.probes(), hung.probes()];
    const reloadsAtWindow = reloads();
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const probes = [b1.probes(), b2.probes(), hung.probes()].map((count, i) => count - probesBefore[i]!);
    const reloadCount = reloads() - reloadsAtWindow;
    t.diagnostic(`in ${windowMs} ms: ${reloadCount} reloads, probes per upstream ${probes.join(', ')}`);
    assert.ok(reloadCount >= 25, `got ${reloadCount} reloads in ${windowMs} ms, want at least 25 (one per 40 ms, some may merge)`);
    const expected = windowMs / INTERVAL_MS;
    for (const [i, count] of probes.entries()) {
      assert.ok(
        count >= expected - 3 && count <= expected + 1,
        `got ${count} probes of upstream ${i + 1} in ${windowMs} ms with ${reloadCount} reloads, want ${expected} (one per ${INTERVAL_MS} ms) ± 1, or up to 3 fewer when a busy machine delays the timers`,
      );
    }
  } finally {
    clearInterval(hangupTimer);
  }
  assert.doesNotMatch(cli.stderr(), /reload rejected/, 'got a reload rejected: the atomic writes should always give a whole file');

  cli.child.kill('SIGTERM');
  assert.equal(await cli.exited, 0);
}

// The two run side by side: each has its own process, backends and file.
describe('a reload storm keeps health checks whole', { concurrency: 2 }, () => {
  it(
    'under a SIGHUP every 160 ms (interval 200 ms): upstreams that come back serve within rise × interval + 1 s, a hung one is DOWN within fall × interval + timeout + 1 s, and probes stay one per interval',
    { timeout: 60_000 },
    (t) => reloadStorm(t, 1),
  );

  it('the same with workers = 2: the cluster primary reloads its model the same way and keeps its health checks whole', { timeout: 60_000 }, (t) =>
    reloadStorm(t, 2),
  );
});
