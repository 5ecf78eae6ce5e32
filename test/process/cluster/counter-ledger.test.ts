/**
 * The primary's ledger of worker counters (src/process/cluster/counter-ledger.ts): the
 * counts of a worker that exited stay in the totals, a worker that did not answer counts with its
 * last report, and no total goes down across any sequence of reports, deaths and scrapes.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { emptyMetrics, mergeMetrics } from '../../../src/admin/metrics-collector.js';
import type { CarriedCounters, WorkerReport } from '../../../src/admin/status-snapshot.js';
import { CounterLedger } from '../../../src/process/cluster/counter-ledger.js';
import { seededRandom } from '../../helpers/seeded-random.js';

/** A report of `requests` 2xx answers on route a, `failures` failed attempts at its upstream. */
function report(pid: number, requests: number, failures = 0): WorkerReport {
  const metrics = emptyMetrics();
  metrics.requests['a\t2xx'] = requests;
  metrics.durations['a'] = { counts: [requests, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], sum: requests * 0.001, count: requests };
  const counters = { activeRequests: 0, requestsTotal: requests, failuresTotal: failures, effectiveWeight: 1, isEjected: false, healthState: 'up' as const, isDraining: false };
  return { pid, upstreams: { 'a http://127.0.0.1:1': counters }, strategyState: {}, metrics };
}

/** What a scrape shows: fresh answers plus the carried counters. */
function scrape(ledger: CounterLedger, fresh: ReadonlyMap<number, WorkerReport>): { requests: number; count: number; upstreamRequests: number; failures: number } {
  const carried: CarriedCounters = ledger.carried(new Set(fresh.keys()));
  const metrics = mergeMetrics([...[...fresh.values()].map((r) => r.metrics), carried.metrics]);
  const upstream = (field: 'requestsTotal' | 'failuresTotal'): number =>
    [...fresh.values()].reduce((sum, r) => sum + (r.upstreams['a http://127.0.0.1:1']?.[field] ?? 0), 0) + (carried.upstreams['a http://127.0.0.1:1']?.[field] ?? 0);
  return { requests: metrics.requests['a\t2xx'] ?? 0, count: metrics.durations['a']?.count ?? 0, upstreamRequests: upstream('requestsTotal'), failures: upstream('failuresTotal') };
}

it('a worker that exited keeps its last report in the totals', () => {
  const ledger = new CounterLedger();
  ledger.record(1, report(101, 10, 1));
  ledger.record(2, report(102, 5));
  assert.deepEqual(scrape(ledger, new Map([[1, report(101, 10, 1)], [2, report(102, 5)]])), { requests: 15, count: 15, upstreamRequests: 15, failures: 1 });
  ledger.retire(1);
  ledger.record(3, report(103, 0)); // the replacement starts at 0
  const after = scrape(ledger, new Map([[2, report(102, 7)], [3, report(103, 0)]]));
  assert.deepEqual(after, { requests: 17, count: 17, upstreamRequests: 17, failures: 1 }, `got ${JSON.stringify(after)} after worker 1 died`);
});

it('a live worker that did not answer in time counts with its last report', () => {
  const ledger = new CounterLedger();
  ledger.record(1, report(101, 10));
  ledger.record(2, report(102, 5));
  const result = scrape(ledger, new Map([[2, report(102, 6)]]));
  assert.equal(result.requests, 16, `got ${result.requests}, want 10 (silent worker's last report) + 6`);
});

it('retiring a worker that never reported, or twice, changes nothing', () => {
  const ledger = new CounterLedger();
  ledger.retire(9);
  ledger.record(1, report(101, 4));
  ledger.retire(1);
  ledger.retire(1);
  assert.equal(scrape(ledger, new Map()).requests, 4, 'got the retired report counted twice, or lost');
});

it('property: over random reports, deaths and scrapes no total ever goes down', () => {
  const random = seededRandom(11);
  const ledger = new CounterLedger();
  /** worker id → its true running count. */
  const live = new Map<number, number>([[1, 0], [2, 0]]);
  let nextId = 3;
  let previous = { requests: 0, count: 0, upstreamRequests: 0, failures: 0 };
  for (let step = 0; step < 2_000; step++) {
    const ids = [...live.keys()];
    const id = ids[Math.floor(random() * ids.length)]!;
    const roll = random();
    if (roll < 0.5) live.set(id, live.get(id)! + 1 + Math.floor(random() * 3));
    else if (roll < 0.75) ledger.record(id, report(id, live.get(id)!, Math.floor(live.get(id)! / 4)));
    else if (roll < 0.8) {
      ledger.retire(id); // died: counts since its last report are lost (the documented bound)
      live.delete(id);
      live.set(nextId++, 0);
    } else {
      // A scrape: each live worker answers (and is recorded) or is silent.
      const fresh = new Map<number, WorkerReport>();
      for (const [workerId, count] of live) {
        if (random() < 0.8) {
          const answer = report(workerId, count, Math.floor(count / 4));
          ledger.record(workerId, answer);
          fresh.set(workerId, answer);
        }
      }
      const now = scrape(ledger, fresh);
      for (const key of Object.keys(now) as (keyof typeof now)[]) {
        assert.ok(now[key] >= previous[key], `step ${step}: got ${key} ${now[key]}, below the previous scrape's ${previous[key]}`);
      }
      previous = now;
    }
  }
  assert.ok(previous.requests > 0, 'got a property run that never scraped any traffic');
});
