/**
 * Let's Encrypt's test ACME server, Pebble (Debian package `pebble`), started for one test on
 * 127.0.0.1: its ACME and management ports picked free, its own TLS certificate the fixtures'
 * `localhost.pem` (so `directory_ca = test/fixtures/tls/ca.pem` trusts it), `PEBBLE_VA_NOSLEEP=1`
 * (no artificial validation delay) and real HTTP-01 validation (`PEBBLE_VA_ALWAYS_VALID` unset):
 * it fetches `http://NAME:httpPort/.well-known/acme-challenge/TOKEN`, resolving NAME through the
 * DNS server at `dnsPort` (dns-responder.ts). Stopped by its pid.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import https from 'node:https';
import { freePort } from './cli-process.js';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const fixtures = new URL('../fixtures/tls/', import.meta.url).pathname;

/** undefined when Pebble can be run, else the one-line reason a test skips. */
export const pebbleMissing: string | undefined =
  spawnSync('pebble', ['-h'], { stdio: 'ignore' }).error === undefined ? undefined : 'pebble is not installed (apt-get install pebble; .ci/run does it)';

export interface Pebble {
  /** `https://127.0.0.1:PORT/dir`. */
  readonly directoryUrl: string;
  /** The file that trusts Pebble's own TLS certificate (directory_ca). */
  readonly directoryCaFile: string;
  /** Everything Pebble printed (for a failing test's message). */
  output(): string;
  /** GET on the management interface, e.g. `/roots/0` (Pebble's issuing root, new at every start). */
  management(path: string): Promise<string>;
  stop(): Promise<void>;
}

function get(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(url, { ca, agent: false, timeout: 2000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      })
      .on('error', reject)
      .on('timeout', function (this: { destroy(error: Error): void }) {
        this.destroy(new Error('timeout'));
      });
  });
}

/** Starts Pebble validating HTTP-01 on `httpPort` with names resolved by `dnsPort`; resolves once its directory answers (within 10 s). */
export async function startPebble(options: { readonly httpPort: number; readonly dnsPort: number }): Promise<Pebble> {
  const directory = mkdtempSync(join(tmpdir(), 'pebble-'));
  const [acmePort, managementPort, tlsPort] = [await freePort(), await freePort(), await freePort()];
  const configFile = join(directory, 'pebble-config.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${acmePort}`,
        managementListenAddress: `127.0.0.1:${managementPort}`,
        certificate: join(fixtures, 'localhost.pem'),
        privateKey: join(fixtures, 'localhost.key'),
        httpPort: options.httpPort,
        tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  const env: NodeJS.ProcessEnv = { ...process.env, PEBBLE_VA_NOSLEEP: '1' };
  delete env.PEBBLE_VA_ALWAYS_VALID;
  const child: ChildProcess = spawn('pebble', ['-config', configFile, '-dnsserver', `127.0.0.1:${options.dnsPort}`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ca = readFileSync(join(fixtures, 'ca.pem'), 'utf8');
  const directoryUrl = `https://127.0.0.1:${acmePort}/dir`;
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3000).unref())]);
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
    rmSync(directory, { recursive: true, force: true });
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    const answer = await get(directoryUrl, ca).catch(() => undefined);
    if (answer?.status === 200) break;
    if (Date.now() > deadline || child.exitCode !== null) {
      await stop();
      throw new Error(`pebble did not start within 10 s:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    directoryUrl,
    directoryCaFile: join(fixtures, 'ca.pem'),
    output: () => output,
    management: async (path) => (await get(`https://127.0.0.1:${managementPort}${path}`, ca)).body,
    stop,
  };
}
