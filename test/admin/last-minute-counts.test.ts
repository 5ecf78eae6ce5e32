import test from 'node:test';
import assert from 'node:assert/strict';
import { addLastMinuteCounts, countAt, newLastMinuteCounts, sumLastMinute } from '../../src/admin/last-minute-counts.js';
import { MetricsCollector, mergeMetrics } from '../../src/admin/metrics-collector.js';
import type { AccessLogRecord } from '../../src/gateway/access-log.js';

test('last minute: counts of the 60 seconds up to now, older slots reused', () => {
  const ring = newLastMinuteCounts();
  for (const second of [1000, 1000, 1030, 1059]) countAt(ring, second);
  assert.equal(sumLastMinute(ring, 1059), 4);
  assert.equal(sumLastMinute(ring, 1060), 2, 'second 1000 is out at 1060');
  countAt(ring, 1060); // reuses the slot of 1000
  assert.equal(sumLastMinute(ring, 1060), 3);
  assert.equal(sumLastMinute(ring, 1200), 0);
});

test('last minute: two workers add up slot by slot, an older second in a slot giving way to a newer one', () => {
  const a = newLastMinuteCounts();
  const b = newLastMinuteCounts();
  countAt(a, 1940); // a worker that refused nothing since, a minute ago
  countAt(a, 2001);
  countAt(b, 2000); // the same slot as 1940
  countAt(b, 2001);
  const total = newLastMinuteCounts();
  addLastMinuteCounts(total, a);
  addLastMinuteCounts(total, b);
  assert.equal(sumLastMinute(total, 2001), 3, `got ${sumLastMinute(total, 2001)}, want 3 (2001 twice, 2000 once)`);
  assert.equal(sumLastMinute(total, 1990), 0, 'a count of 1940 outlived the newer one in its slot');
});

test('refusals through the worker report path: mergeMetrics adds denied, rate-limited and the last minute of every worker', () => {
  const record = (refusal: AccessLogRecord['refusal']): AccessLogRecord =>
    ({ time: new Date(0), clientIp: '127.0.0.2', user: undefined, method: 'GET', target: '/', httpVersion: '1.1', status: refusal === 'access' ? 403 : 429, bytesSent: 0, referer: undefined, userAgent: undefined, route: 'a', refusal, attempts: [], durationMs: 1 }) as AccessLogRecord;
  const one = new MetricsCollector(() => 5_000);
  const two = new MetricsCollector(() => 5_500);
  one.recordExchange(record('access'));
  one.recordExchange(record('rate_limit'));
  two.recordExchange(record('rate_limit'));
  two.recordExchange(record('conn_limit'));
  const total = mergeMetrics([one.state, two.state]);
  assert.deepEqual(total.denied, { a: 1 });
  assert.deepEqual(total.rateLimited, { 'a\trate': 2, 'a\tconn': 1 });
  assert.equal(sumLastMinute(total.recentRefusals['a\trate_limit']!, 5), 2);
});
