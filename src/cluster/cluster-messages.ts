/**
 * The IPC messages between the cluster primary and its workers (node:cluster, with the `advanced`
 * serialization, i.e. the structured clone algorithm, so a Config with its RegExps and byte arrays
 * travels as it is). Primary → worker: upstream state, a reloaded config, a report request, shutdown,
 * reopen the log files.
 * Worker → primary: its report.
 */
import type { Config, UpstreamConfig } from '../config/config.js';
import type { ProbeRecord } from '../upstream/upstream.js';
import type { WorkerReport } from '../admin/status-snapshot.js';

/** The primary's view of one upstream, which every worker copies. */
export interface PushedUpstream {
  readonly origin: string;
  readonly healthState: 'up' | 'down';
  readonly isDraining: boolean;
  readonly lastProbe: ProbeRecord | undefined;
}

/** Primary → workers: health, draining and registry of every route. Sent on change and to a new worker. */
export interface UpstreamStateMessage {
  readonly type: 'upstream-state';
  readonly routes: readonly { readonly name: string; readonly registered: readonly UpstreamConfig[]; readonly upstreams: readonly PushedUpstream[] }[];
}

/** Primary → workers: SIGHUP loaded this config (already validated by the primary). */
export interface ReloadMessage {
  readonly type: 'reload';
  readonly config: Config;
}

/** Primary → worker: send your counters, quoting `id`. */
export interface ReportRequestMessage {
  readonly type: 'report-request';
  readonly id: number;
}

/** Primary → worker: drain and exit (SIGTERM on the primary). */
export interface ShutdownMessage {
  readonly type: 'shutdown';
}

/** Primary → workers: SIGUSR1 on the primary; reopen your log files (log rotation, nginx's USR1). */
export interface ReopenLogsMessage {
  readonly type: 'reopen-logs';
}

/** Worker → primary: the answer to a report request. */
export interface ReportMessage {
  readonly type: 'report';
  readonly id: number;
  readonly report: WorkerReport;
}

export type PrimaryMessage = UpstreamStateMessage | ReloadMessage | ReportRequestMessage | ShutdownMessage | ReopenLogsMessage;
export type WorkerMessage = ReportMessage;

/** True for an object with a string `type` (anything else on the channel is ignored). */
export function isMessage(value: unknown): value is { readonly type: string } {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}
