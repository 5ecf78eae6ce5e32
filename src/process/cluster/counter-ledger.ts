/**
 * Counters stay counters. Prometheus counters must never go down between two
 * scrapes, but in a cluster every worker counts for itself and the primary only adds the workers'
 * reports up: when a worker dies its counts would vanish from the totals. The ledger keeps, per
 * live worker, the newest report it sent (answers to scrapes, and the report every worker pushes
 * unasked each second), and folds the last report of a worker that exited into the totals of the
 * retired workers. A scrape then adds up the fresh answers, the last report of every live worker
 * that did not answer in time, and the retired totals: every term only grows.
 *
 * The bound: what a worker counted after its last report is lost when it is killed (SIGKILL, a
 * crash), at most `REPORT_PUSH_INTERVAL_MS` (1 s) of its requests. The totals do not go down; they
 * just miss those. nginx keeps such counters in shared memory (`zone`), where a dead worker's counts
 * stay, except for the requests it was serving when it died.
 */
import { mergeMetrics } from '../../admin/metrics-collector.js';
import type { CarriedCounters, WorkerReport } from '../../admin/status-snapshot.js';

export class CounterLedger {
  /** cluster worker id → its newest report (ids, unlike pids, are never reused). */
  readonly #last = new Map<number, WorkerReport>();
  #retired: CarriedCounters = { metrics: mergeMetrics([]), upstreams: {} };

  /** Keeps `report` as worker `workerId`'s newest. */
  record(workerId: number, report: WorkerReport): void {
    this.#last.set(workerId, report);
  }

  /** Worker `workerId` exited: its last report joins the retired totals (it never changes again). */
  retire(workerId: number): void {
    const last = this.#last.get(workerId);
    if (last === undefined) return;
    this.#last.delete(workerId);
    this.#retired = addReports(this.#retired, [last]);
  }

  /** The counters no fresh report stands for: the retired totals plus the last report of every live worker not in `answered`. */
  carried(answered: ReadonlySet<number>): CarriedCounters {
    const silent = [...this.#last].filter(([workerId]) => !answered.has(workerId)).map(([, report]) => report);
    return silent.length === 0 ? this.#retired : addReports(this.#retired, silent);
  }
}

/** `carried` plus `reports` (a new object; the inputs are not changed). */
function addReports(carried: CarriedCounters, reports: readonly WorkerReport[]): CarriedCounters {
  const upstreams: Record<string, { requestsTotal: number; failuresTotal: number }> = {};
  for (const [key, counters] of Object.entries(carried.upstreams)) upstreams[key] = { ...counters };
  for (const report of reports) {
    for (const [key, counters] of Object.entries(report.upstreams)) {
      const into = (upstreams[key] ??= { requestsTotal: 0, failuresTotal: 0 });
      into.requestsTotal += counters.requestsTotal;
      into.failuresTotal += counters.failuresTotal;
    }
  }
  return { metrics: mergeMetrics([carried.metrics, ...reports.map((report) => report.metrics)]), upstreams };
}
