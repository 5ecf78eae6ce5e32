/**
 * Micro-benchmark of every balancing strategy (issue 3, step 6): picks per second and memory with
 * 3, 100 and 10 000 upstreams, at weight 1 and at weights up to 1 000 000.
 *
 *   npx tsx scripts/bench-balancers.ts
 *
 * Two timings per row: the strategy's own `pick` (STRATEGIES[name] over the upstreams), and the
 * route balancer the proxy uses (createBalancer: backups wrapper + the SPEC 4 regain of effective
 * weight, which visits only upstreams below their weight — none here, all are healthy). Memory is what the strategy retains
 * after construction (V8 heap + typed-array buffers, measured around a forced GC), upstream objects
 * not included. Goal: every strategy that is not O(n) by nature under 1 µs per pick at 10 000
 * upstreams; memory independent of weight size.
 */
import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import { STRATEGY_NAMES } from '../src/config/config.js';
import type { RouteConfig, StrategyName, UpstreamConfig } from '../src/config/config.js';
import { ROUTE_DEFAULTS } from '../src/config/load-config.js';
import type { Balancer, PickContext, StrategyOptions } from '../src/upstream/balancer/balancer.js';
import { createBalancer, STRATEGIES } from '../src/upstream/balancer/strategies.js';
import { HASH_FUNCTIONS } from '../src/upstream/balancer/hash.js';
import { Upstream } from '../src/upstream/upstream.js';
import { seededRandom } from '../test/helpers/seeded-random.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const SIZES = [3, 100, 10_000];
const WEIGHTINGS = ['1', '1..1e6'] as const;
const MEASURE_MS = 150;
/** O(n) per pick by nature: every upstream's state is read (least-connections) or changed (SWRR). */
const LINEAR: ReadonlySet<StrategyName> = new Set(['smooth-weighted-round-robin', 'least-connections']);


function upstreamConfigs(count: number, weighting: (typeof WEIGHTINGS)[number]): UpstreamConfig[] {
  const random = seededRandom(count);
  return Array.from({ length: count }, (_, i) => {
    const host = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    return {
      url: `http://${host}:8080`,
      scheme: 'http',
      origin: `http://${host}:8080`,
      host,
      port: 8080,
      hostHeader: `${host}:8080`,
      path: undefined,
      weight: weighting === '1' ? 1 : 1 + Math.floor(random() * 1_000_000),
      isBackup: false,
      isDown: false,
      place: { file: 'bench', line: i + 1, column: 1 },
    };
  });
}

function routeFor(strategy: StrategyName, upstreams: readonly UpstreamConfig[]): RouteConfig {
  return {
    name: 'bench',
    path: { kind: 'prefix', prefix: '/' },
    host: undefined,
    upstreams,
    passPath: undefined,
    strategy,
    hash: 'crc32',
    hashKey: { kind: 'client_ip' },
    virtualNodes: 160,
    preserveHost: true,
    connectTimeoutMs: 5000,
    readTimeoutMs: 60000,
    retries: 0,
    isRetriesDefault: false,
    maxFails: 1,
    failTimeoutMs: 10000,
    failFactor: 5,
    health: { isEnabled: false, method: 'HEAD', path: '/', intervalMs: 3000, timeoutMs: 2000, fall: 3, rise: 2, statuses: [] },
    authBasic: undefined,
    authUsers: [],
    authForward: false,
    trace: false,
    tls: ROUTE_DEFAULTS.tls,
    access: [],
    rateLimit: undefined,
    connLimit: undefined,
    place: { file: 'bench', line: 1, column: 1 },
  };
}

/** 1024 contexts with distinct client IPs and keys, cycled through. */
const CONTEXTS: PickContext[] = Array.from({ length: 1024 }, (_, i) => {
  const clientIp = `192.168.${i >> 8}.${i & 255}`;
  return { clientIp, hashKey: `/item/${i}`, tried: new Set<Upstream>() };
});

/** Nanoseconds per pick, over about MEASURE_MS of batches. */
function nanosecondsPerPick(balancer: Balancer): number {
  for (let i = 0; i < 2000; i++) balancer.pick(CONTEXTS[i & 1023]!); // warm up
  let picks = 0;
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < MEASURE_MS) {
    for (let i = 0; i < 1000; i++) balancer.pick(CONTEXTS[(picks + i) & 1023]!);
    picks += 1000;
    elapsed = performance.now() - start;
  }
  return (elapsed * 1e6) / picks;
}

/** Live bytes after full GCs; array buffers are freed by a concurrent sweeper, so yield between GCs. */
async function retainedBytes(): Promise<{ heap: number; buffers: number }> {
  for (let round = 0; round < 4; round++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, buffers: usage.arrayBuffers };
}

function formatNs(ns: number): string {
  return ns >= 1000 ? `${(ns / 1000).toFixed(1)} µs` : `${ns.toFixed(0)} ns`;
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${Math.max(0, bytes)} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

interface CaseResult {
  readonly buildMs: number;
  /** Typed-array bytes the strategy keeps (exact). */
  readonly bufferBytes: number;
  /** V8 heap growth (objects, closures; ± a few KiB of JIT noise). */
  readonly heapBytes: number;
  readonly pickNs: number;
  readonly routePickNs: number;
}

/** One row. Everything it allocates is garbage when it returns, so the next row's baseline is clean. */
async function measureCase(strategy: StrategyName, size: number, weighting: (typeof WEIGHTINGS)[number]): Promise<CaseResult> {
  const configs = upstreamConfigs(size, weighting);
  const route = routeFor(strategy, configs);
  const upstreams = configs.map((config) => new Upstream(config, route.name));
  const options: StrategyOptions = {
    random: seededRandom(42),
    now: () => 0,
    hash: HASH_FUNCTIONS[route.hash],
    virtualNodes: route.virtualNodes,
  };
  const before = await retainedBytes();
  const buildStart = performance.now();
  let balancer: Balancer | undefined = new STRATEGIES[strategy](upstreams, options);
  const buildMs = performance.now() - buildStart;
  const after = await retainedBytes();
  const bufferBytes = after.buffers - before.buffers;
  const heapBytes = after.heap - before.heap;
  const pickNs = nanosecondsPerPick(balancer);
  balancer = undefined;
  const routePickNs = nanosecondsPerPick(createBalancer(route, upstreams, { random: seededRandom(42), now: () => 0 }));
  return { buildMs, bufferBytes, heapBytes, pickNs, routePickNs };
}

const rows: string[][] = [
  ['strategy', 'upstreams', 'weights', 'build', 'arrays', 'heap', 'pick', 'picks/s', 'route pick', 'goal'],
];
for (const strategy of STRATEGY_NAMES) {
  for (const size of SIZES) {
    for (const weighting of WEIGHTINGS) {
      const { buildMs, bufferBytes, heapBytes, pickNs, routePickNs } = await measureCase(strategy, size, weighting);
      const goal = LINEAR.has(strategy) ? 'O(n)' : size === 10_000 ? (pickNs < 1000 ? 'ok <1µs' : 'MISSED') : '';
      rows.push([
        strategy,
        String(size),
        weighting,
        `${buildMs.toFixed(1)} ms`,
        formatBytes(bufferBytes),
        formatBytes(heapBytes),
        formatNs(pickNs),
        `${(1e9 / pickNs / 1e6).toFixed(2)} M`,
        formatNs(routePickNs),
        goal,
      ]);
    }
  }
}

const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
const lines = rows.map((row) => row.map((cell, c) => (c <= 2 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
lines.splice(1, 0, widths.map((width) => '-'.repeat(width)).join('  '));
console.log(`node ${process.version}, ${MEASURE_MS} ms per measurement`);
console.log('arrays = typed arrays the strategy keeps (exact); heap = V8 heap growth (small values are GC/JIT noise)');
console.log('pick = the strategy alone; route pick = createBalancer (backups wrapper + SPEC 4 regain of degraded upstreams)');
console.log(lines.join('\n'));
