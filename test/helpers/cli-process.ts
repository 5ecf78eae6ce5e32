/**
 * Driving `node dist/main.js` as an operator does, for the cluster and signal tests: start it (from
 * the private build of built-cli.ts), read its stderr, poll with a deadline, send signals by pid,
 * and stop everything it started by pid afterwards.
 */
import http from 'node:http';
import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildCli, REPO } from './built-cli.js';

/** A port that was free a moment ago (for the cluster, whose workers all need the same port). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** One GET (or `method`) on a new connection, so the cluster deals each request to a worker afresh. */
export function get(port: number, path: string, method = 'GET'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Polls `probe` every 25 ms until it gives a value; throws "timed out waiting for WHAT" after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 8_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await Promise.resolve()
      .then(probe)
      .catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A backend on `host:port` (port 0: a free one) that answers each request with its own local address, e.g. `127.0.0.2`. */
export async function addressBackend(host: string, port: number): Promise<http.Server> {
  const server = http.createServer((req, res) => res.end(req.socket.localAddress));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Writes `text` as `env.ini` in a new temp dir; returns the file's path. */
export function writeConfig(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-cli-')), 'env.ini');
  writeFileSync(file, text);
  return file;
}

export interface CliProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Everything on stderr so far. */
  stderr(): string;
  /** Resolves once stderr has a line matching `pattern`, with the match. */
  line(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `node [nodeArgs] main.js --config FILE`, with `env` added to this process's environment. */
export async function spawnCli(configFile: string, nodeArgs: readonly string[] = [], env: Readonly<Record<string, string>> = {}): Promise<CliProcess> {
  const mainJs = await buildCli();
  const child = spawn(process.execPath, [...nodeArgs, mainJs, '--config', configFile], { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return {
    child,
    pid: child.pid!,
    stderr: () => stderr,
    line: (pattern, timeoutMs = 8_000) =>
      waitFor(`${pattern} on stderr`, () => pattern.exec(stderr) ?? undefined, timeoutMs).catch((error: Error) => {
        throw new Error(`${error.message}; stderr:\n${stderr}`);
      }),
    exited,
  };
}

/** SIGKILLs every pid still alive (test cleanup). */
export function killAll(pids: Iterable<number | undefined>): void {
  for (const pid of pids) if (pid !== undefined && isAlive(pid)) process.kill(pid, 'SIGKILL');
}
