/**
 * The IPC messages between the cluster primary and its workers (node:cluster, with the `advanced`
 * serialization, i.e. the structured clone algorithm, so a Config with its RegExps and byte arrays
 * travels as it is). Primary → worker: the config to start with, upstream state, a reloaded config,
 * a report request, shutdown, reopen the log files, an ACME challenge token or certificate.
 * Worker → primary: a start request, a failed start, its report. Both ways: the per-client limits
 * of `rate_limit` and `conn_limit` across workers (limit-bank.ts on the primary, lease-limits.ts in
 * the worker): batched requests for tokens and slots, and their grants.
 *
 * A worker's life: it sends `start-request` as soon as it can hear the answer; the primary answers
 * `start` with the config it serves (a worker never reads the config file); the
 * worker listens, or sends `start-failed` and exits. Messages that come before `start` are dropped:
 * `start` carries the newest config, upstream state and ACME state.
 */
import type { Config, UpstreamConfig } from '../../config/config.js';
import type { ProbeRecord } from '../../upstream/upstream.js';
import type { WorkerReport } from '../../admin/status-snapshot.js';
import type { DiscoveredLine } from '../../discovery/discovered-line.js';
import type { CertificateText } from '../../tls/certificate-pair.js';

/** The primary's view of one upstream, which every worker copies. */
export interface PushedUpstream {
  readonly origin: string;
  readonly healthState: 'up' | 'down';
  readonly isDraining: boolean;
  readonly lastProbe: ProbeRecord | undefined;
}

/**
 * Primary → workers: registry, discovered addresses, health and draining of every route. Sent on
 * change and to a new worker. `discovered` is what the primary's DNS discovery found for each
 * discovery line of the route (SPEC 7: workers never ask DNS themselves).
 */
export interface UpstreamStateMessage {
  readonly type: 'upstream-state';
  readonly routes: readonly {
    readonly name: string;
    readonly registered: readonly UpstreamConfig[];
    readonly discovered: readonly DiscoveredLine[];
    readonly upstreams: readonly PushedUpstream[];
  }[];
}

/** Primary → a new worker: run this config (the one the primary serves) with this upstream state. */
export interface StartMessage {
  readonly type: 'start';
  readonly config: Config;
  readonly upstreamState: UpstreamStateMessage;
  /**
   * The HTTPS listener's session ticket key, 48 bytes, the same for every worker (made once by the
   * primary), so a ticket one worker issued resumes on any other (RFC 8446 §4.6.1).
   */
  readonly ticketKeys: Uint8Array;
  /** `[acme]`: the challenges being validated and the certificate, as the primary has them now; undefined without `[acme]`. */
  readonly acme: AcmeState | undefined;
  /** The `tls_cert` pairs the primary serves, one per pair of `config` in file order: a worker never reads the files itself. */
  readonly certificates: readonly CertificateText[];
}

/** What a worker needs of the primary's ACME manager (src/tls/acme): its published tokens and its certificate. */
export interface AcmeState {
  /** `[token, keyAuthorization]` of every HTTP-01 challenge being validated now. */
  readonly challenges: readonly (readonly [string, string])[];
  readonly certificate: { readonly certPem: string; readonly keyPem: string } | undefined;
}

/** Primary → workers: publish an HTTP-01 token's key authorization, or withdraw it (undefined), RFC 8555 §8.3. */
export interface AcmeChallengeMessage {
  readonly type: 'acme-challenge';
  readonly token: string;
  readonly keyAuthorization: string | undefined;
}

/** Primary → workers: serve this certificate (ACME issued or renewed it, or read it from the storage). */
export interface AcmeCertificateMessage {
  readonly type: 'acme-certificate';
  readonly certPem: string;
  readonly keyPem: string;
}

/** Primary → workers: SIGHUP loaded this config (already validated by the primary). */
export interface ReloadMessage {
  readonly type: 'reload';
  readonly config: Config;
  /** The `tls_cert` pairs as the primary read them for this reload (see StartMessage). */
  readonly certificates: readonly CertificateText[];
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

/** Worker → primary: I am ready to hear my config. */
export interface StartRequestMessage {
  readonly type: 'start-request';
}

/** Worker → primary: I could not start (the worker exits next). */
export interface StartFailedMessage {
  readonly type: 'start-failed';
  /** The error, e.g. `access_log '/var/log/p/a.log' cannot be opened for appending: ENOENT`. */
  readonly reason: string;
}

/**
 * Worker → primary: its counters, as the answer to report request `id`, or unasked every
 * `REPORT_PUSH_INTERVAL_MS` with `id` 0, so the primary always holds a recent report to keep when
 * the worker dies.
 */
export interface ReportMessage {
  readonly type: 'report';
  readonly id: number;
  readonly report: WorkerReport;
}

/** The settings of one `rate_limit` as the primary's bucket needs them (RateLimitConfig without its place). */
export interface RateSettings {
  /** Tokens added per `periodMs`. */
  readonly requests: number;
  readonly periodMs: number;
  /** Bucket size. */
  readonly burst: number;
}

/**
 * One client's token bucket in a worker's request: report what the lease spent, give back what it
 * will not use, ask for more. `limit` names the route and its settings (`api 10/1000ms burst=5`), so a
 * reload that keeps them keeps the primary's buckets, and one that changes them starts new ones.
 */
export interface TokenRequest {
  readonly limit: string;
  readonly rate: RateSettings;
  readonly clientIp: string;
  /** Tokens of this worker's lease spent since its last request for this key. */
  readonly spent: number;
  /** Unspent tokens given back (the lease went idle). */
  readonly returned: number;
  /** Tokens asked for now (0: only a report). */
  readonly want: number;
}

/**
 * One client's in-flight slots in a worker's request: give back idle ones, ask for more. `limit`
 * names the route (`api conn_limit`): a reload that changes the value keeps the counts (they are
 * requests still running), and the primary applies the `maxInFlight` of each request.
 */
export interface SlotRequest {
  readonly limit: string;
  readonly maxInFlight: number;
  readonly clientIp: string;
  /** Slots given back (released and kept idle long enough). */
  readonly returned: number;
  /** Slots asked for now (0: only a return). */
  readonly want: number;
  /** This answers the primary's `slot-recall` for this key (`returned` may be 0: all in use). */
  readonly isRecallAnswer: boolean;
}

/** Worker → primary: every token and slot request of one event-loop turn, in one message. */
export interface LimitsRequestMessage {
  readonly type: 'limits-request';
  readonly tokens: readonly TokenRequest[];
  readonly slots: readonly SlotRequest[];
}

/** The primary's answer to a TokenRequest with `want` > 0. */
export interface TokenGrant {
  readonly limit: string;
  readonly clientIp: string;
  readonly granted: number;
  /** 0 when the bucket still holds a whole token, else the ms until it will (rounded up). */
  readonly nextTokenInMs: number;
}

/** The primary's answer to a SlotRequest with `want` > 0. */
export interface SlotGrant {
  readonly limit: string;
  readonly clientIp: string;
  readonly granted: number;
}

/** Primary → the worker that asked: the grants for one LimitsRequestMessage. */
export interface LimitsGrantMessage {
  readonly type: 'limits-grant';
  readonly tokens: readonly TokenGrant[];
  readonly slots: readonly SlotGrant[];
}

/**
 * Primary → a worker: give back the idle slots (released, kept for the client's next request) of
 * these keys now, and answer each with a SlotRequest marked `isRecallAnswer`: another worker asks
 * for a slot of the same client.
 */
export interface SlotRecallMessage {
  readonly type: 'slot-recall';
  readonly slots: readonly { readonly limit: string; readonly clientIp: string }[];
}

export type PrimaryMessage =
  | StartMessage
  | UpstreamStateMessage
  | ReloadMessage
  | ReportRequestMessage
  | ShutdownMessage
  | ReopenLogsMessage
  | AcmeChallengeMessage
  | AcmeCertificateMessage
  | LimitsGrantMessage
  | SlotRecallMessage;
export type WorkerMessage = StartRequestMessage | StartFailedMessage | ReportMessage | LimitsRequestMessage;

/** True for an object with a string `type` (anything else on the channel is ignored). */
export function isMessage(value: unknown): value is { readonly type: string } {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}
