/**
 * The tunnel after an upgrade (SPEC 5; RFC 9110 §7.8 Upgrade, RFC 6455 §4 for WebSocket): once the
 * upstream answered 101 and the 101 went to the client (request-path.ts, as Go's
 * `handleUpgradeResponse`), the two raw sockets are joined both ways and the proxy stops reading
 * HTTP on either. Everything before that — routing, auth, balancing, retries, the error answers —
 * is the request path's, as for any request.
 *
 *   - the bytes that came with either handshake (after the client's request head, after the
 *     upstream's 101 head) cross first;
 *   - with backpressure both ways (`pipe`);
 *   - half-close travels across: a FIN from one side ends only the other side's writing half (both
 *     sockets are half-open capable); the tunnel is over once both sockets are closed, or at once
 *     when one of them is destroyed or fails;
 *   - `idleTimeoutMs` (the route's `read_timeout`) without a byte on a socket closes both; once one
 *     side has ended, the limit is HALF_CLOSED_IDLE_MS: the other direction may still carry bytes
 *     (a download after the upload ended), but a peer that never answers the FIN cannot hold the
 *     tunnel, and its `conn_limit` slot, for a whole `read_timeout` (nginx closes an upgraded
 *     connection at the first EOF; HAProxy has `timeout client-fin` / `server-fin`).
 *
 * The caller counts the tunnel as an active request until `onClosed`, and logs it then with the
 * byte counts.
 */
import type { Socket } from 'node:net';

/** One side of a tunnel: a socket and the bytes already read from it that belong to the tunnel. */
export interface TunnelEnd {
  readonly socket: Socket;
  readonly head: Buffer;
}

/** The idle limit of a tunnel once one side has sent its FIN, ms. */
export const HALF_CLOSED_IDLE_MS = 1_000;

export class Tunnel {
  /** Bytes that crossed from the client to the upstream. */
  bytesFromClient = 0;
  /** Bytes that crossed from the upstream to the client. */
  bytesFromUpstream = 0;
  /** Settles once both sockets are closed and `onClosed` ran. */
  readonly closed: Promise<void>;
  readonly #client: Socket;
  readonly #upstream: Socket;

  /**
   * Joins `client` and `upstream` (see the file comment); owns both sockets from now on.
   * @param idleTimeoutMs ms without a byte on either socket before both are closed; 0: no limit
   * @param onClosed called once, when both sockets are closed
   */
  constructor(client: TunnelEnd, upstream: TunnelEnd, idleTimeoutMs: number, onClosed: (tunnel: Tunnel) => void) {
    this.#client = client.socket;
    this.#upstream = upstream.socket;
    let markClosed!: () => void;
    this.closed = new Promise((resolve) => (markClosed = resolve));
    const clientSocket = client.socket;
    const upstreamSocket = upstream.socket;
    const destroyBoth = (): void => this.destroy();
    let openCount = 2;
    const onClose = (): void => {
      if (--openCount > 0) {
        destroyBoth(); // one side fully closed: nothing can cross any more
        return;
      }
      onClosed(this);
      markClosed();
    };
    const halfClosedIdleMs = idleTimeoutMs === 0 ? HALF_CLOSED_IDLE_MS : Math.min(idleTimeoutMs, HALF_CLOSED_IDLE_MS);
    const onEnd = (): void => {
      for (const socket of [clientSocket, upstreamSocket]) socket.setTimeout(halfClosedIdleMs, destroyBoth);
    };
    for (const socket of [clientSocket, upstreamSocket]) {
      socket.on('error', destroyBoth);
      socket.once('end', onEnd);
      socket.setTimeout(idleTimeoutMs, destroyBoth);
      socket.setNoDelay(true);
      if (socket.destroyed) process.nextTick(onClose); // closed before the tunnel began
      else socket.once('close', onClose);
    }
    if (upstream.head.length > 0) {
      this.bytesFromUpstream += upstream.head.length;
      clientSocket.write(upstream.head);
    }
    if (client.head.length > 0) {
      this.bytesFromClient += client.head.length;
      upstreamSocket.write(client.head);
    }
    clientSocket.on('data', (chunk: Buffer) => {
      this.bytesFromClient += chunk.length;
    });
    upstreamSocket.on('data', (chunk: Buffer) => {
      this.bytesFromUpstream += chunk.length;
    });
    clientSocket.pipe(upstreamSocket);
    upstreamSocket.pipe(clientSocket);
    clientSocket.resume();
    upstreamSocket.resume();
  }

  /** Closes both sockets at once (an error, the idle limit, a shutdown out of time). Idempotent. */
  destroy(): void {
    this.#client.destroy();
    this.#upstream.destroy();
  }
}
