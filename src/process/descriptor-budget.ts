/**
 * How many connections a cluster worker may hold, from its file descriptor limit, so that it
 * always keeps some descriptors free.
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
 * So the descriptors left after a reserve for the process itself are split in two fixed shares:
 * a worker serves at most `maxClientConnections` client connections (a new one over that is
 * closed at once, as libuv closes a connection it accepted without a descriptor for it) and holds
 * at most `maxUpstreamSockets` upstream sockets, pooled ones and tunnels' together (a new upstream
 * connection over that first closes the longest-idle pooled one, and with none idle is the
 * proxy's own shortage, a 503). Fixed shares, because a pool filled while few clients were
 * connected must not leave the clients that come later without descriptors (a review: one
 * client's requests to 40 upstreams left 31 idle pooled connections, then 40 idle clients took
 * the rest, and the worker stalled as before). The split follows HAProxy's rule for its default
 * `maxconn`, taken from `ulimit -n`: two descriptors per proxied connection, after the reserve. A
 * single process (`workers = 1`) needs none of this: libuv already closes a connection it cannot
 * take, and nothing waits for it.
 */
import { readFileSync } from 'node:fs';

/**
 * Descriptors kept out of the sockets' share: node's own (about 20 in a worker at rest: the event
 * loop, its signal and wake-up pipes, the IPC channel, stdio, log files), a config or certificate
 * file read at a reload, and the ones that receive the primary's hand-offs.
 */
export const RESERVED_DESCRIPTORS = 32;

/** The connection limits of one worker (see the file comment). */
export interface DescriptorBudget {
  /** The soft RLIMIT_NOFILE the limits come from. */
  readonly openFileLimit: number;
  /** Client connections served at once (plain and TLS, handshakes included): ⌊(limit − reserve) / 2⌋, at least 1. */
  readonly maxClientConnections: number;
  /** Upstream sockets at once, pooled (connecting, in use, idle) and tunnels': the rest, ⌈(limit − reserve) / 2⌉, at least 1. */
  readonly maxUpstreamSockets: number;
}

/** The limits for a process whose soft RLIMIT_NOFILE is `openFileLimit`. */
export function descriptorBudget(openFileLimit: number): DescriptorBudget {
  const sockets = Math.max(2, openFileLimit - RESERVED_DESCRIPTORS);
  const maxClientConnections = Math.floor(sockets / 2);
  return { openFileLimit, maxClientConnections, maxUpstreamSockets: sockets - maxClientConnections };
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
