/**
 * `node dist/main.js heartbeat --admin URL --token T --route ROUTE --url URL [--weight N] [--every 3s]
 * [--ttl 10s]`: the client a backend runs beside itself (the tutorials' heartbeat, over HTTP). It
 * PUTs the registration to the admin listener every `--every` (first one at once), logs a failure
 * and keeps trying (the proxy may be restarting), and on SIGTERM/SIGINT sends DELETE so the proxy
 * stops sending traffic at once instead of waiting for the ttl. `--ttl` should be about three
 * heartbeats, so one lost heartbeat does not drop the backend. The token may also come from the
 * environment variable `PROXY_ADMIN_TOKEN`, which keeps it out of `ps`.
 *
 * Time is injected (`timers`), and `fetch` too, so tests drive it exactly.
 */
import { systemTimers, type Timers } from '../timers.js';

export interface HeartbeatOptions {
  /** The admin listener's base URL, e.g. `http://127.0.0.1:9090`. */
  readonly admin: string;
  readonly token: string | undefined;
  readonly route: string;
  /** The upstream URL to register, e.g. `http://10.0.0.5:9003`. */
  readonly url: string;
  readonly weight: number | undefined;
  /** Heartbeat period, ms. Default 3 000. */
  readonly everyMs: number;
  /** Registration lifetime, ms. Default 10 000. */
  readonly ttlMs: number;
}

export interface HeartbeatDeps {
  readonly fetch?: typeof fetch;
  readonly timers?: Timers;
  readonly log?: (line: string) => void;
}

export interface RunningHeartbeat {
  /** Resolves after the first PUT finished (either way): true when it was accepted. */
  readonly firstBeat: Promise<boolean>;
  /**
   * Resolves with the reason when the admin listener refused in a way retrying cannot fix (400, 401,
   * 403, 404, 409; see PERMANENT_REFUSALS); the heartbeat has stopped then. Never rejects.
   */
  readonly refused: Promise<string>;
  /** Stops the timer and DELETEs the registration; resolves true when the DELETE was accepted. */
  stop(): Promise<boolean>;
}

/** Starts heartbeating. Never throws for network errors: they are logged and the next beat retries. */
export function startHeartbeat(options: HeartbeatOptions, deps: HeartbeatDeps = {}): RunningHeartbeat {
  const doFetch = deps.fetch ?? fetch;
  const timers = deps.timers ?? systemTimers;
  const log = deps.log ?? (() => {});
  const endpoint = `${options.admin.replace(/\/+$/, '')}/routes/${encodeURIComponent(options.route)}/upstreams`;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  const body = JSON.stringify({ url: options.url, ...(options.weight === undefined ? {} : { weight: options.weight }), ttl: `${options.ttlMs}ms` });

  let timer: unknown;
  let isStopped = false;
  let wasFailing = false;
  let onRefused: (reason: string) => void = () => {};
  const refused = new Promise<string>((resolve) => (onRefused = resolve));

  const beat = async (): Promise<boolean> => {
    try {
      const response = await doFetch(endpoint, { method: 'PUT', headers, body, signal: AbortSignal.timeout(Math.max(1_000, options.everyMs)) });
      const text = await response.text();
      if (PERMANENT_REFUSALS.has(response.status)) {
        isStopped = true;
        const reason = `heartbeat: PUT ${endpoint} refused: ${response.status} ${errorOf(text)}; not retrying`;
        log(reason);
        onRefused(reason);
        return false;
      }
      if (!response.ok) throw new Error(`${response.status} ${errorOf(text)}`);
      if (wasFailing || response.status === 201) log(`heartbeat: ${options.url} registered for route ${options.route} at ${options.admin}`);
      wasFailing = false;
      return true;
    } catch (error) {
      wasFailing = true;
      log(`heartbeat: PUT ${endpoint} failed: ${failureReason(error as Error)}; retrying in ${options.everyMs}ms`);
      return false;
    }
  };
  const schedule = (): void => {
    if (isStopped) return;
    timer = timers.setTimeout(() => void beat().then(schedule), options.everyMs);
  };
  const firstBeat = beat();
  void firstBeat.then(schedule);

  return {
    firstBeat,
    refused,
    async stop() {
      isStopped = true;
      if (timer !== undefined) timers.clearTimeout(timer);
      try {
        const response = await doFetch(`${endpoint}?url=${encodeURIComponent(options.url)}`, { method: 'DELETE', headers, signal: AbortSignal.timeout(5_000) });
        const text = await response.text();
        if (!response.ok) throw new Error(`${response.status} ${errorOf(text)}`);
        log(`heartbeat: ${options.url} deregistered from route ${options.route}`);
        return true;
      } catch (error) {
        log(`heartbeat: DELETE ${endpoint} failed: ${failureReason(error as Error)}`);
        return false;
      }
    },
  };
}

/**
 * Runs the heartbeat until SIGTERM/SIGINT, then deregisters: exit code 0. A permanent refusal (bad
 * token, unknown route) ends it at once with exit code 1.
 */
export async function runHeartbeat(options: HeartbeatOptions, log: (line: string) => void): Promise<number> {
  const running = startHeartbeat(options, { log });
  const isRefused = await Promise.race([
    running.refused.then(() => true),
    new Promise<boolean>((resolve) => {
      process.once('SIGTERM', () => resolve(false));
      process.once('SIGINT', () => resolve(false));
    }),
  ]);
  if (isRefused) return 1;
  await running.stop();
  return 0;
}

/**
 * Answers that retrying cannot change: a bad request (an invalid URL, a path that does not match
 * the route), a missing or wrong token, a route the proxy does not have, a URL that duplicates a
 * configured upstream.
 */
const PERMANENT_REFUSALS: ReadonlySet<number> = new Set([400, 401, 403, 404, 409]);

function errorOf(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
  } catch {
    // not JSON: show the text
  }
  return text.trim().slice(0, 200);
}

/**
 * Why a request to the admin listener failed: fetch's own message is only `fetch failed`, the
 * reason (`connect ECONNREFUSED 127.0.0.1:9090`) is its `cause`.
 */
function failureReason(error: Error): string {
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
}
