/**
 * How many connections a proxy process may hold, from its file descriptor limit, so that it
 * always keeps some descriptors free: a cluster worker and a single process, each its own way.
 *
 * Why a worker needs free descriptors: with `workers = N` node:cluster's primary accepts every
 * connection and hands it to a worker over the IPC channel (round robin, SCHED_RR). A worker with
 * no descriptor free cannot take the connection in: the kernel drops the descriptor it was sent
 * (MSG_CTRUNC), node answers NACK, and after its retransmissions the primary closes the connection
 * and never gives that worker another one, since node:cluster's round-robin handle waits for an
 * answer that never comes. Measured here (node 20, `ulimit -n 64`, `workers = 2`, 300 idle
 * clients): both workers stopped receiving connections for good, and after the idle clients left
 * every new connection was closed unanswered. Node has no API to resume a worker's turn.
 *
 * Why a single process needs them too: idle clients that take every descriptor leave none for an
 * upstream connection, so every request on the connections already open is a 503 (measured:
 * `ulimit -n 64`, 44 idle clients held, the next request on one of them a 503), and libuv closes
 * the new connections it cannot take without a log line.
 *
 * So the descriptors left after a reserve for the process itself (the sockets) are shared out. A
 * worker splits them in two fixed halves (`workerBudget`): at most `maxClientConnections` client
 * connections (a new one over that is closed at once, as libuv closes a connection it accepted
 * without a descriptor for it, and logged) and at most `maxUpstreamSockets` upstream sockets,
 * pooled ones and tunnels' together (a new upstream connection over that first closes the
 * longest-idle pooled one, and with none idle is the proxy's own shortage, a 503). Fixed halves,
 * because a pool filled while few clients were connected must not leave the clients that come
 * later without descriptors (a review: one client's requests to 40 upstreams left 31 idle pooled
 * connections, then 40 idle clients took the rest, and the worker stalled as before). The split
 * follows HAProxy's rule for its default `maxconn`, taken from `ulimit -n`: two descriptors per
 * proxied connection, after the reserve.
 *
 * A single process (`singleProcessBudget`) may run short for a moment and recovers (its 503s end
 * when clients leave), so it lets clients have three quarters of the sockets and upstream sockets
 * whatever the clients leave, at least a quarter: idle clients can no longer take them all, and
 * 10,000 idle clients fit in the usual limit of 20,000 (the halves would close the last 16). Its
 * sockets are what the reserve, the health probes' cap and the admin listener's cap leave.
 */
import { readFileSync } from 'node:fs';

/**
 * Descriptors kept out of the sockets' share: node's own (about 20 in a worker at rest: the event
 * loop, its signal and wake-up pipes, the IPC channel, stdio, log files), a config or certificate
 * file read at a reload, and the ones that receive the primary's hand-offs.
 */
export const RESERVED_DESCRIPTORS = 32;

/** The connection limits of one proxy process, a worker or the single one (see the file comment). */
export interface DescriptorBudget {
  /** The soft RLIMIT_NOFILE the limits come from. */
  readonly openFileLimit: number;
  /** Descriptors for client and upstream sockets together: the limit less `RESERVED_DESCRIPTORS`, at least 2. */
  readonly sockets: number;
  /** Client connections served at once (plain and TLS, handshakes included). */
  readonly maxClientConnections: number;
  /**
   * Upstream sockets at once, pooled (connecting, in use, idle) and tunnels', and never more than
   * the client connections leave of `sockets` (`upstreamSocketsLeft`).
   */
  readonly maxUpstreamSockets: number;
}

/** A cluster worker's limits: fixed halves, ⌊sockets / 2⌋ client connections and the rest for upstream sockets. */
export function workerBudget(openFileLimit: number): DescriptorBudget {
  const sockets = Math.max(2, openFileLimit - RESERVED_DESCRIPTORS);
  const maxClientConnections = Math.floor(sockets / 2);
  return { openFileLimit, sockets, maxClientConnections, maxUpstreamSockets: sockets - maxClientConnections };
}

/**
 * A single process's limits: ⌊3 × sockets / 4⌋ client connections, upstream sockets whatever those
 * leave. The process also sends the health probes and serves the `[admin]` listener, so their caps
 * (`probeLimit`, `adminConnectionLimit`) come out of its sockets first: without that, 8 probes in
 * flight and 8 idle admin connections took the reserve at `ulimit -n 64`, and clients within their
 * share got 503s for EMFILE and resets nothing logged (a break test).
 */
export function singleProcessBudget(openFileLimit: number): DescriptorBudget {
  const sockets = Math.max(2, openFileLimit - RESERVED_DESCRIPTORS - probeLimit(openFileLimit) - adminConnectionLimit(openFileLimit));
  return { openFileLimit, sockets, maxClientConnections: Math.max(1, Math.floor((3 * sockets) / 4)), maxUpstreamSockets: sockets };
}

/** How many upstream sockets `budget` allows while `clientConnections` client connections are open. */
export function upstreamSocketsLeft(budget: DescriptorBudget, clientConnections: number): number {
  return Math.min(budget.maxUpstreamSockets, budget.sockets - clientConnections);
}

/**
 * The soft limit on open files (RLIMIT_NOFILE) from the `Max open files` line of Linux's
 * `/proc/self/limits` (`Max open files  1024  4096  files`; node raises the soft limit to the hard
 * one at start-up). Undefined when the text has no such line, the limit is `unlimited`, or the file
 * cannot be read (not Linux): then no budget applies.
 */
export function readOpenFileLimit(limitsText?: string): number | undefined {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/limits', 'latin1');
    } catch {
      return undefined;
    }
  }
  const match = /^Max open files +(\d+) /m.exec(text);
  return match === null ? undefined : Number(match[1]);
}

/** The most connections the `[admin]` listener serves at once, whatever the descriptor limit: 64. */
export const MAX_ADMIN_CONNECTIONS = 64;

/**
 * The `[admin]` listener's connection cap: MAX_ADMIN_CONNECTIONS, and at most a quarter of what the
 * reserve leaves of `openFileLimit` (at least 1). The admin listener runs in the cluster primary,
 * which accepts every proxied connection before handing it to a worker: idle admin connections
 * that took its last descriptors made it drop every new client connection, unlogged (a break test,
 * `ulimit -n 64`). An operator's dashboards and scrapers need a few. Undefined limit: the cap alone.
 */
export function adminConnectionLimit(openFileLimit: number | undefined): number {
  return openFileLimit === undefined ? MAX_ADMIN_CONNECTIONS : Math.min(MAX_ADMIN_CONNECTIONS, quarterShare(openFileLimit));
}

/**
 * The most health probes in flight at once in one process: a quarter of what the reserve leaves of
 * `openFileLimit` (at least 1), each probe being a socket; no limit when the limit is unknown. The
 * cluster primary probes every upstream and also accepts every proxied connection: 83 probes that
 * hung took its last descriptors under `ulimit -n 64`, and it dropped most new client connections
 * until they timed out (a break test).
 */
export function probeLimit(openFileLimit: number | undefined): number {
  return openFileLimit === undefined ? Infinity : quarterShare(openFileLimit);
}

/** A quarter of what RESERVED_DESCRIPTORS leave of `openFileLimit`, at least 1. */
function quarterShare(openFileLimit: number): number {
  return Math.max(1, Math.floor((openFileLimit - RESERVED_DESCRIPTORS) / 4));
}
