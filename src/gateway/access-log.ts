/**
 * The access log (SPEC 1.2 `access_log`, `access_log_format`): one line per request, written when
 * the client connection is done with it.
 *
 * `combined` is the NCSA combined format that nginx and Apache write, followed by the upstream
 * address(es), upstream status(es) and the total duration in milliseconds — with retries, every
 * upstream tried, comma separated, as nginx's `$upstream_addr` and `$upstream_status`:
 *
 *     127.0.0.1 - tom [30/Nov/2026:10:41:42 +0000] "GET /a HTTP/1.1" 200 23 "-" "curl/8.5.0" route=a upstream="127.0.0.1:9001" upstream_status="200" duration_ms=1.42
 *
 * A request refused by the route's `access`, `rate_limit` or `conn_limit` (SPEC 8) ends with
 * `refused=access|rate_limit|conn_limit`, so its 403 or 429 cannot be taken for the upstream's; the
 * 400 to a plain HTTP request on the TLS port with `refused=plain_http`.
 *
 * An answer written before any request head was read (a head refused or cut short, the 400 on the
 * TLS port) logs the first line the client sent as its request line, when it is printable ASCII,
 * else `-`; no method, target or version is made up for it.
 *
 * `json` writes the same facts as one JSON object per line (`"refused"` only on such requests;
 * `"request_line"` on every answer without a request head, with method, target and protocol `-`:
 * the line received, or `-` when it is not printable, as combined logs it).
 */
import { isUtf8 } from 'node:buffer';
import { closeSync } from 'node:fs';
import { ConfigFileError, ConfigValueError, type SourcePlace } from '../errors.js';
import { describeOpenError, FileSink, openLogForAppending, type LogSink } from '../log/log-sink.js';
import { closeLogFile, droppedLogLines, openLogFile, stderrSink, stdoutSink } from '../log/process-log.js';

/** How one upstream attempt ended: its status, or the error code that ended it. */
export interface AttemptLog {
  /** `host:port`. */
  readonly upstream: string;
  status?: number;
  error?: string;
}

/**
 * What refused a request: a check of SPEC 8, `access` (403), `rate_limit` or `conn_limit` (429); or
 * `plain_http`, the HTTPS listener's 400 to a plain HTTP request (src/tls/tls-listener.ts).
 */
export type Refusal = 'access' | 'rate_limit' | 'conn_limit' | 'plain_http';

/** Everything one log line says. */
export interface AccessLogRecord {
  readonly time: Date;
  readonly clientIp: string;
  /** Basic-auth user name when the client sent one, else undefined. */
  readonly user: string | undefined;
  /** `-` when no request head was read (an answer the server wrote before one). */
  readonly method: string;
  /** `-` when no request head was read. */
  readonly target: string;
  /** `1.1`, `1.0`; undefined when no request head was read: no version is logged then, and none made up. */
  readonly httpVersion: string | undefined;
  /**
   * Only when no request head was read: the first line the client sent, as it sent it, if
   * printable ASCII (src/wire/received-request-line.ts). Logged in place of method, target and
   * version, as nginx's `$request`; without it the request line is `-`.
   */
  readonly receivedLine?: string | undefined;
  readonly status: number;
  /** Response body bytes sent to the client. */
  readonly bytesSent: number;
  readonly referer: string | undefined;
  readonly userAgent: string | undefined;
  readonly route: string | undefined;
  /** Set when the proxy refused the request by the route's `access`, `rate_limit` or `conn_limit` (logged `refused=…`). */
  readonly refusal?: Refusal;
  readonly attempts: readonly AttemptLog[];
  readonly durationMs: number;
  /** Set for upgraded connections (tunnels): bytes each way. */
  readonly tunnel?: { readonly bytesFromClient: number; readonly bytesFromUpstream: number };
}

/** The request as the access log reads it: a `ClientRequest` (src/wire/client-side.ts) or less. */
export interface LoggedRequest {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly httpVersion: string;
  readonly headers: { readonly authorization?: string | undefined; readonly referer?: string | undefined; readonly 'user-agent'?: string | undefined };
}

/** How one exchange ended: the facts the request itself does not carry. */
export interface ExchangeOutcome {
  readonly clientIp: string;
  /** What the client got; 499 when it left before any answer (nginx's "client closed request"). */
  readonly status: number;
  /** Response body bytes sent to the client (for a tunnel: the bytes from the upstream). */
  readonly bytesSent: number;
  readonly route?: string | undefined;
  readonly refusal?: Refusal | undefined;
  readonly attempts: readonly AttemptLog[];
  readonly durationMs: number;
  readonly tunnel?: { readonly bytesFromClient: number; readonly bytesFromUpstream: number } | undefined;
}

/**
 * The one builder of access-log records, for every line: a proxied request, a tunnel, an answer the
 * server wrote before any request head could be read (`request` undefined: method and target `-`,
 * no version, and the line received, `receivedLine`, when there is one to show).
 * The user is the Basic-auth user name the client sent, never the password.
 */
export function buildAccessLogRecord(request: LoggedRequest | undefined, outcome: ExchangeOutcome, receivedLine?: string): AccessLogRecord {
  return {
    time: new Date(),
    clientIp: outcome.clientIp,
    user: basicUserName(request?.headers.authorization),
    method: request?.method ?? '-',
    target: request?.url ?? '-',
    httpVersion: request?.httpVersion,
    receivedLine: request === undefined ? receivedLine : undefined,
    status: outcome.status,
    bytesSent: outcome.bytesSent,
    referer: request?.headers.referer,
    userAgent: request?.headers['user-agent'],
    route: outcome.route,
    ...(outcome.refusal === undefined ? {} : { refusal: outcome.refusal }),
    attempts: outcome.attempts,
    durationMs: outcome.durationMs,
    ...(outcome.tunnel === undefined ? {} : { tunnel: outcome.tunnel }),
  };
}

/** The user name of a Basic Authorization header, for the log only (never the password). */
function basicUserName(authorization: string | undefined): string | undefined {
  if (authorization === undefined || !/^basic /i.test(authorization)) return undefined;
  const decoded = Buffer.from(authorization.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon > 0 ? decoded.slice(0, colon) : undefined;
}

export interface AccessLog {
  /** False for `access_log = off` with nobody else listening: the request path then builds no record at all. */
  readonly isEnabled: boolean;
  write(record: AccessLogRecord): void;
  close(): Promise<void>;
}

/**
 * Checks that an `access_log` file path can be opened for appending (creating it if needed), as
 * `nginx -t` does. `stdout`, `stderr` and `off` always pass.
 * @throws ConfigValueError at `place` (file:line:column of the `access_log` value), or ConfigFileError
 *   without one, naming the path and the reason (ENOENT, EACCES, EISDIR, ENXIO for a FIFO without a reader, ENOTREG for one with a reader or a socket)
 */
export function checkAccessLogPath(destination: string, place?: SourcePlace): void {
  if (destination === 'off' || destination === 'stdout' || destination === 'stderr') return;
  try {
    closeSync(openLogForAppending(destination));
  } catch (error) {
    throw cannotOpen(destination, error, place);
  }
}

/**
 * Opens the access log named by `access_log` (`stdout`, `stderr`, `off` or a path, appended). Its
 * lines never stop the proxy: a line the destination cannot take (a closed pipe, a full disk, a
 * reader that is too slow) is dropped and counted under `proxy_log_lines_dropped_total{log="access"}`
 * (src/log/log-sink.ts). A file is reopened at its path on SIGUSR1 (log rotation).
 * @throws ConfigValueError or ConfigFileError when the path cannot be opened (see checkAccessLogPath)
 */
export function openAccessLog(destination: string, format: 'combined' | 'json', place?: SourcePlace): AccessLog {
  if (destination === 'off') return { isEnabled: false, write() {}, close: async () => {} };
  let sink: LogSink;
  try {
    sink = destination === 'stdout' ? stdoutSink() : destination === 'stderr' ? stderrSink() : openLogFile(destination);
  } catch (error) {
    throw cannotOpen(destination, error, place);
  }
  const formatLine = format === 'json' ? formatJson : formatCombined;
  return {
    isEnabled: true,
    write(record) {
      if (!sink.write(`${formatLine(record)}\n`)) droppedLogLines.access++;
    },
    async close() {
      if (sink instanceof FileSink) closeLogFile(sink);
    },
  };
}

function cannotOpen(destination: string, error: unknown, place: SourcePlace | undefined): ConfigValueError | ConfigFileError {
  const reason = `access_log '${destination}' cannot be opened for appending: ${describeOpenError(error)}`;
  return place === undefined ? new ConfigFileError(reason) : new ConfigValueError(place, reason);
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** `30/Nov/2026:10:41:42 +0000` (UTC). */
export function formatCommonLogTime(time: Date): string {
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${pad(time.getUTCDate())}/${MONTHS[time.getUTCMonth()]}/${time.getUTCFullYear()}:${pad(time.getUTCHours())}:${pad(time.getUTCMinutes())}:${pad(time.getUTCSeconds())} +0000`;
}

/**
 * Escapes `"`, `\`, control bytes and bytes above ASCII the way nginx does (`\xHH`), so a line
 * stays one line and shows the bytes the client sent: header values are latin1 strings (one
 * character per byte), so a UTF-8 `café` is logged `caf\xC3\xA9`, not re-encoded as `cafÃ©`.
 */
function escapeField(value: string | undefined): string {
  if (value === undefined || value === '') return '-';
  return value.replace(/["\\\x00-\x1f\x7f-\xff]/g, (c) => `\\x${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

/**
 * The Basic-auth user name, which is decoded text and sits unquoted between the address and the
 * time, as `escapeField` writes a header: its UTF-8 bytes, each above ASCII as `\xHH`, and spaces
 * as `\x20` too, so that a name cannot add fields to the line (a break test: a client that was
 * not even logged in shifted every field after it, and wrote U+202E as it was).
 */
function userField(user: string | undefined): string {
  if (user === undefined || user === '') return '-';
  return escapeField(Buffer.from(user, 'utf8').toString('latin1')).replaceAll(' ', '\\x20');
}

export function formatCombined(r: AccessLogRecord): string {
  const upstreams = r.attempts.length === 0 ? '-' : r.attempts.map((a) => a.upstream).join(', ');
  // A status with an error is a response whose body failed after its head: `200 PRX_UPSTREAM_RESET`.
  // An error may carry words from the upstream (a TLS reason names its certificate's altnames): escaped.
  const statuses = r.attempts.length === 0 ? '-' : r.attempts.map((a) => (a.status !== undefined && a.error !== undefined ? `${a.status} ${a.error}` : (a.status ?? a.error ?? '-'))).join(', ');
  const tunnel = r.tunnel === undefined ? '' : ` tunnel_bytes_in=${r.tunnel.bytesFromClient} tunnel_bytes_out=${r.tunnel.bytesFromUpstream}`;
  const refusal = r.refusal === undefined ? '' : ` refused=${r.refusal}`;
  return (
    `${r.clientIp} - ${userField(r.user)} [${formatCommonLogTime(r.time)}] ` +
    `"${escapeField(r.httpVersion === undefined ? r.receivedLine : `${r.method} ${r.target} HTTP/${r.httpVersion}`)}" ${r.status} ${r.bytesSent} ` +
    `"${escapeField(r.referer)}" "${escapeField(r.userAgent)}" route=${r.route ?? '-'} upstream="${upstreams}" ` +
    `upstream_status="${escapeField(statuses)}" duration_ms=${r.durationMs.toFixed(2)}${refusal}${tunnel}`
  );
}

/**
 * A header-derived string (one character per byte, as the parsers read heads: latin1) as JSON
 * text: bytes that are valid UTF-8 as the characters they encode (a UTF-8 `café` is `café`, as in
 * nginx's `escape=json`, which writes the bytes as they came), any other bytes one character each
 * (U+0080–U+00FF), so that the line stays valid UTF-8 JSON. It is for reading, not for the exact
 * bytes (`C3 A9` and a lone `E9` both read `é`): the combined format keeps those (`\xHH`).
 */
export function jsonText(value: string): string;
export function jsonText(value: string | undefined): string | undefined;
export function jsonText(value: string | undefined): string | undefined {
  if (value === undefined || !NON_ASCII.test(value)) return value;
  const bytes = Buffer.from(value, 'latin1');
  return isUtf8(bytes) ? bytes.toString('utf8') : value;
}

const NON_ASCII = /[^\x00-\x7f]/;

/**
 * Characters a JSON line must not carry as they are, although JSON allows them: line and paragraph
 * separators (U+2028, U+2029: line readers such as Python's `splitlines` break there), C1 controls
 * (U+0080–U+009F) and the bidirectional controls (Unicode's Bidi_Control set: U+061C, U+200E,
 * U+200F, U+202A–U+202E, U+2066–U+2069), which make a line display as another (a review: decoding
 * UTF-8 let a client put them into the log).
 */
const UNSAFE_IN_LOG_LINE = /[\u0080-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const EVERY_UNSAFE_IN_LOG_LINE = new RegExp(UNSAFE_IN_LOG_LINE.source, 'g');

export function formatJson(r: AccessLogRecord): string {
  const line = formatJsonRecord(r);
  return UNSAFE_IN_LOG_LINE.test(line) ? line.replace(EVERY_UNSAFE_IN_LOG_LINE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : line;
}

function formatJsonRecord(r: AccessLogRecord): string {
  return JSON.stringify({
    time: r.time.toISOString(),
    client_ip: r.clientIp,
    user: r.user ?? null,
    method: r.method,
    target: r.target,
    protocol: r.httpVersion === undefined ? '-' : `HTTP/${r.httpVersion}`,
    // Every record without a request head has the key, `-` when the line is not printable, as in combined.
    ...(r.httpVersion === undefined ? { request_line: r.receivedLine === undefined || r.receivedLine === '' ? '-' : r.receivedLine } : {}),
    status: r.status,
    bytes_sent: r.bytesSent,
    referer: jsonText(r.referer) ?? null,
    user_agent: jsonText(r.userAgent) ?? null,
    route: r.route ?? null,
    ...(r.refusal === undefined ? {} : { refused: r.refusal }),
    upstreams: r.attempts,
    duration_ms: Math.round(r.durationMs * 100) / 100,
    ...(r.tunnel === undefined ? {} : { tunnel: r.tunnel }),
  });
}
