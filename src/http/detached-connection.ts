/**
 * A client connection that node:http has let go of, for its last exchange: an upgrade request (the
 * server's `upgrade` event), CONNECT, or bytes node could not parse (`clientError`). Its one
 * response is written by the fast lane's writer (fast-lane-response.ts) as on any connection, so
 * these answers go through the same request path and error funnel as every other; then the
 * connection closes — or, after a 101, it is released to the tunnel (RFC 9110 §7.8).
 *
 * While an upgrade request waits for the upstream, the socket is read: a client that leaves (EOF,
 * reset) is noticed at once, and the bytes it sends meanwhile (a first WebSocket frame) are kept,
 * up to `MAX_EARLY_BYTES`, for the tunnel.
 */
import type { Socket } from 'node:net';
import { FastLaneResponse, type ResponseConnection } from './fast-lane-response.js';

/** Bytes an upgrading client may send before the 101 before the socket stops being read. */
export const MAX_EARLY_BYTES = 64 * 1024;

export class DetachedConnection implements ResponseConnection {
  readonly socket: Socket;
  /** The connection's one response. */
  readonly response: FastLaneResponse;
  /** An upgrade request's bytes after its head, until `releaseSocket`; undefined otherwise. */
  #early: Buffer[] | undefined;
  #earlyBytes = 0;
  readonly #onData = (chunk: Buffer): void => {
    this.#early!.push(chunk);
    this.#earlyBytes += chunk.length;
    if (this.#earlyBytes > MAX_EARLY_BYTES) this.socket.pause();
  };
  /** A FIN before the 101: the client gave up on the upgrade. */
  readonly #onEnd = (): void => {
    this.socket.destroy();
  };
  readonly #onDrain = (): void => this.response.onSocketDrain();
  readonly #onClose = (): void => this.response.onConnectionClose();

  /**
   * @param method the request's method (HEAD answers carry no body)
   * @param upgradeHead for an upgrade request, the bytes node read after its head (its `upgrade`
   *   event's `head`): the socket is then read until `releaseSocket`; undefined for a plain answer
   */
  constructor(socket: Socket, method: string, upgradeHead?: Buffer) {
    this.socket = socket;
    this.response = new FastLaneResponse(this, { method, shouldKeepAlive: false, keepAliveTimeoutMs: 0 });
    socket.on('error', ignoreError); // reported through 'close'
    socket.on('drain', this.#onDrain);
    socket.once('close', this.#onClose);
    if (upgradeHead !== undefined) {
      this.#early = upgradeHead.length > 0 ? [upgradeHead] : [];
      this.#earlyBytes = upgradeHead.length;
      socket.on('data', this.#onData);
      socket.once('end', this.#onEnd);
      socket.resume(); // node hands the socket over paused
    }
  }

  /** The response is written: close (the connection carries nothing more). */
  onResponseFinished(): void {
    this.socket.destroySoon();
  }

  /**
   * After the 101: stops reading, forgets the socket (whose errors and closing are the tunnel's
   * now) and returns the bytes the client sent after its request head.
   */
  releaseSocket(): Buffer {
    const socket = this.socket;
    socket.off('data', this.#onData);
    socket.off('end', this.#onEnd);
    socket.off('drain', this.#onDrain);
    socket.off('close', this.#onClose);
    socket.off('error', ignoreError);
    const early = this.#early ?? [];
    this.#early = undefined;
    return early.length === 1 ? early[0]! : Buffer.concat(early);
  }
}

function ignoreError(): void {}
