/**
 * The cost of exact limits across workers (issue 15 item 3): small-response throughput through the
 * built proxy with `workers = 2`, without limits against a `rate_limit` that never triggers (and
 * one with `conn_limit` too), in the same run, taken in turns so a slow moment of the machine does
 * not fall on one configuration only. The limits spend leases of the primary's buckets
 * (src/process/cluster/lease-limits.ts), so the hot path sends no message per request; this
 * measures what is left. Loopback only; wrk from one client IP (127.0.0.1), 64 keep-alive
 * connections. Each cell is the median of `--runs` runs of `--duration` seconds. Besides req/s
 * (which moves with whatever else the machine runs), it prints the CPU time the primary and its
 * workers spent per request (utime + stime from /proc, Linux), a steadier measure of the cost,
 * and first, in this process, the hot path alone: ns per `takeToken` of a worker's lease
 * (LeaseLimits, its refills answered at once by a LimitBank) against the single process's
 * LocalLimits.
 *
 *   npm run build && node --import tsx scripts/bench-cluster-limits.ts [--duration 5 --runs 3]
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { LeaseLimits } from '../src/process/cluster/lease-limits.js';
import { LimitBank } from '../src/process/cluster/limit-bank.js';
import { LocalLimits } from '../src/limits/local-limits.js';
import type { LimitsProvider } from '../src/limits/limits.js';
import type { RateLimitConfig } from '../src/config/config.js';

const root = new URL('../', import.meta.url).pathname;
const args = process.argv.slice(2);
const option = (name: string, fallback: string): number => {
  const i = args.indexOf(name);
  return Number(i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback);
};
const durationSeconds = option('--duration', '5');
const runs = Math.max(1, option('--runs', '3'));
const work = mkdtempSync(join(tmpdir(), 'proxy-bench-limits-'));
const BACKEND_PORT = 18180;
const PROXY_PORT = 18181;
const children: ChildProcess[] = [];

/** The three configurations: the route's extra lines. */
const CONFIGS: readonly { readonly name: string; readonly lines: readonly string[] }[] = [
  { name: 'no limits', lines: [] },
  { name: 'rate_limit = 1000000/s (never triggers)', lines: ['rate_limit = 1000000/s'] },
  { name: 'rate_limit + conn_limit = 1000', lines: ['rate_limit = 1000000/s', 'conn_limit = 1000'] },
];

async function waitForPort(port: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const isOpen = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (isOpen) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The CPU time `pid` and its children (the workers) have used so far, in ms (Linux /proc, clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)]).toString().trim().split(/\s+/).filter(Boolean).map(Number);
  let ticks = 0;
  for (const one of [pid, ...children]) {
    const fields = readFileSync(`/proc/${one}/stat`, 'utf8').split(') ')[1]!.split(' ');
    ticks += Number(fields[11]) + Number(fields[12]); // utime, stime: fields 14 and 15 of proc(5)
  }
  return ticks * 10;
}

/** Starts the proxy with `lines` on its route, runs wrk once, stops the proxy by pid; returns req/s and µs of CPU per request. */
async function measure(lines: readonly string[]): Promise<{ readonly rps: number; readonly cpuUs: number }> {
  const configFile = join(work, 'env.ini');
  writeFileSync(
    configFile,
    ['[server]', `listen = 127.0.0.1:${PROXY_PORT}`, 'access_log = off', 'workers = 2', '[proxy.api]', 'path = /', `pass = http://127.0.0.1:${BACKEND_PORT}`, ...lines, ''].join('\n'),
  );
  const proxy = spawn(process.execPath, [join(root, 'dist/main.js'), '--config', configFile], { stdio: 'ignore' });
  children.push(proxy);
  try {
    await waitForPort(PROXY_PORT);
    await new Promise((r) => setTimeout(r, 500)); // both workers listening
    execFileSync('wrk', ['-t1', '-c64', '-d1s', `http://127.0.0.1:${PROXY_PORT}/small`]); // warm up
    const cpuBefore = cpuMs(proxy.pid!);
    const out = execFileSync('wrk', ['-t2', '-c64', `-d${durationSeconds}s`, `http://127.0.0.1:${PROXY_PORT}/small`]).toString();
    const cpuAfter = cpuMs(proxy.pid!);
    const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
    const requests = /(\d+) requests in/.exec(out);
    const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
    if (rps === null || requests === null) throw new Error(`unexpected wrk output:\n${out}`);
    if (non2xx !== null) throw new Error(`${non2xx[1]} answers were not 2xx: the limit triggered`);
    return { rps: Number(rps[1]), cpuUs: ((cpuAfter - cpuBefore) * 1_000) / Number(requests[1]) };
  } finally {
    proxy.kill('SIGKILL');
    await new Promise((r) => proxy.once('exit', r));
  }
}

/** ns per `takeToken` of one client under a rate that never triggers, median of 5 rounds of 100 000 calls (600 000 in all: within the burst). */
function hotPathNs(provider: LimitsProvider): number {
  const rate = { requests: 1_000_000, periodMs: 1_000, burst: 1_000_000, source: '1000000/s', place: { file: 'env.ini', line: 1, column: 1 } } as unknown as RateLimitConfig;
  const limits = provider.limitsFor('api', rate, undefined)!;
  const rounds: number[] = [];
  for (let round = 0; round < 6; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < 100_000; i++) {
      const verdict = limits.takeToken('127.0.0.1');
      if (verdict instanceof Promise || !verdict.isAllowed) throw new Error('the never-triggering limit did not answer at once');
    }
    if (round > 0) rounds.push(Number(process.hrtime.bigint() - start) / 100_000);
  }
  return median(rounds);
}

const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

{
  // The lease's refills answered synchronously by a bank in this process (no IPC): what the hot path itself costs.
  const bank: LimitBank = new LimitBank({ send: (_, message) => message.type === 'limits-grant' && leases.applyGrant(message) });
  const leases: LeaseLimits = new LeaseLimits({
    send: (message) => {
      bank.handle(1, message);
      return true;
    },
    defer: (callback) => callback(),
  });
  void leases.limitsFor('api', { requests: 1_000_000, periodMs: 1_000, burst: 1_000_000 } as RateLimitConfig, undefined)!.takeToken('127.0.0.1'); // the first one asks
  console.log(`hot path: takeToken of a never-triggering rate_limit, ns per call: LocalLimits ${hotPathNs(new LocalLimits()).toFixed(1)}, worker lease ${hotPathNs(leases).toFixed(1)}`);
}

try {
  const backend = spawn(process.execPath, [join(root, 'scripts/static-backend.mjs'), String(BACKEND_PORT)], { stdio: 'ignore' });
  children.push(backend);
  await waitForPort(BACKEND_PORT);
  const results = CONFIGS.map(() => [] as { rps: number; cpuUs: number }[]);
  for (let run = 0; run < runs; run++) {
    for (const [index, config] of CONFIGS.entries()) results[index]!.push(await measure(config.lines));
  }
  const baseRps = median(results[0]!.map((r) => r.rps));
  const baseCpu = median(results[0]!.map((r) => r.cpuUs));
  const change = (value: number, base: number): string => `${value >= base ? '+' : '-'}${Math.abs(((value - base) / base) * 100).toFixed(1)}%`;
  console.log(`workers = 2, 12-byte responses, 64 keep-alive connections from 127.0.0.1, median of ${runs} × ${durationSeconds} s`);
  console.log(`${''.padEnd(42)} ${'req/s'.padStart(8)}          ${'CPU µs/request'.padStart(14)}`);
  for (const [index, config] of CONFIGS.entries()) {
    const rps = median(results[index]!.map((r) => r.rps));
    const cpu = median(results[index]!.map((r) => r.cpuUs));
    const versus = index === 0 ? ''.padEnd(7) : change(rps, baseRps).padStart(7);
    console.log(`${config.name.padEnd(42)} ${rps.toFixed(0).padStart(8)} ${versus}  ${cpu.toFixed(1).padStart(14)} ${index === 0 ? '' : change(cpu, baseCpu)}  (req/s runs: ${results[index]!.map((r) => r.rps.toFixed(0)).join(', ')})`);
  }
} finally {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}
