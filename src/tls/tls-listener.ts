/**
 * The HTTPS listener (`tls_listen`): a `node:tls` server that terminates TLS and hands every
 * established connection to the same HTTP/1.1 connection loop as the plain listener
 * (src/wire/http1-server.ts `accept`), as nginx's `listen … ssl` and Go's `ServeTLS` put TLS under
 * the one HTTP server. What it adds to a TCP listener:
 *
 * - the certificate: chosen per handshake by SNI from a CertificateStore (certificate-store.ts) in
 *   the `SNICallback`; a handshake without SNI gets the server's own context, the store's default;
 *   swapping the store (a reload, a new ACME certificate) changes what the next handshake gets and
 *   nothing else: established connections keep theirs, so none is dropped;
 * - `minVersion` from `tls_min_version`, on the server and on every pair's context;
 * - ALPN: `http/1.1` only. HTTP/2 is not served; a client that offers ALPN without `http/1.1`
 *   (only `h2`) gets the `no_application_protocol` alert (RFC 7301 §3.2), as Go's server does;
 *   a client that sends no ALPN speaks HTTP/1.1;
 * - session tickets (RFC 8446 §4.6.1, RFC 5077) under a 48-byte key given from outside, so that the
 *   workers of one cluster resume each other's sessions (the primary makes one key for all);
 * - `handshakeTimeout` = `header_timeout`: a handshake that does not finish in time is cut, as a
 *   head that does not arrive is (node's default would be 120 s);
 * - handshake errors (`tlsClientError`: garbage or a plain HTTP request on the TLS port, a version
 *   below `tls_min_version`, a timeout, no certificate yet) close that connection only, and are
 *   logged at most once per LOG_INTERVAL_MS per error code. nginx answers a plain HTTP request on an
 *   HTTPS port with a 400 page ("The plain HTTP request was sent to HTTPS port"); node's TLS server
 *   has consumed those bytes by the time it knows, so here the connection is closed.
 *
 * Until there is any certificate (ACME not done yet and no `tls_cert`), every handshake fails
 * with a `handshake_failure` alert, and the log says why once per LOG_INTERVAL_MS.
 */
import { randomBytes } from 'node:crypto';
import tls, { type TLSSocket } from 'node:tls';
import type { TlsVersion } from '../config/config.js';
import type { CertificateStore } from './certificate-store.js';
import { TLS_SERVER_CIPHERS } from './certificate-pair.js';

/** Repeats of one kind of handshake failure are logged once per this period, ms. */
export const LOG_INTERVAL_MS = 60_000;

/** The `ticketKeys` length node's TLS server takes (16 bytes name, 16 HMAC, 16 AES), bytes. */
export const TICKET_KEY_BYTES = 48;

export interface TlsListenerOptions {
  readonly store: CertificateStore;
  readonly minVersion: TlsVersion;
  /** `header_timeout`, ms; 0: node's default (120 s). */
  readonly handshakeTimeoutMs: number;
  /** TICKET_KEY_BYTES bytes shared by every worker; default: random, this process's own. */
  readonly ticketKeys?: Buffer | undefined;
  /** Every established TLS connection (handed to the HTTP/1.1 loop). */
  readonly onConnection: (socket: TLSSocket) => void;
  readonly log: (line: string) => void;
  /** Clock for the log's rate limit, ms. Default `performance.now`. */
  readonly now?: () => number;
}

export class TlsListener {
  /** The listening socket: `listen`, `close` and `address` are node's. */
  readonly server: tls.Server;
  #store: CertificateStore;
  #minVersion: TlsVersion;
  readonly #ticketKeys: Buffer;
  readonly #log: (line: string) => void;
  readonly #now: () => number;
  /** When each kind of handshake failure was last logged, ms, by error code. */
  readonly #lastLogged = new Map<string, number>();
  /** A context without a certificate: the handshake fails with an alert (no certificate yet). */
  #noCertificate: tls.SecureContext | undefined;

  constructor(options: TlsListenerOptions) {
    this.#store = options.store;
    this.#minVersion = options.minVersion;
    this.#ticketKeys = options.ticketKeys ?? randomBytes(TICKET_KEY_BYTES);
    this.#log = options.log;
    this.#now = options.now ?? (() => performance.now());
    this.server = tls.createServer({
      ...this.#defaultContextOptions(),
      ALPNProtocols: ['http/1.1', 'http/1.0'], // as nginx; h2 is not served
      handshakeTimeout: options.handshakeTimeoutMs > 0 ? options.handshakeTimeoutMs : undefined,
      SNICallback: (serverName, callback) => callback(null, this.#contextFor(serverName)),
      // Unlike the plain listener, a client's end (close_notify or FIN) ends the connection, as Go's
      // server reads it (the client is gone). With allowHalfOpen, node 20 never completes a server
      // handshake whose client closed right after its Finished: the connection would stay open.
      allowHalfOpen: false,
      noDelay: true,
    });
    this.server.on('secureConnection', (socket: TLSSocket) => {
      // Client-initiated renegotiation (TLS 1.2) is refused, as nginx and HAProxy refuse it: each one
      // is a full handshake the client can make the server pay for, again and again, on one
      // connection. Node reports the attempt (and its own "session attack" limit) as an 'error' on
      // the socket without closing it, so the socket is closed here on any error.
      socket.disableRenegotiation();
      socket.on('error', () => socket.destroy());
      options.onConnection(socket);
    });
    this.server.on('tlsClientError', (error: NodeJS.ErrnoException, socket: TLSSocket) => this.#onClientError(error, socket));
  }

  get store(): CertificateStore {
    return this.#store;
  }

  /**
   * Serves `store` (and `minVersion`) from the next handshake on: the SNI callback reads the new
   * store, and the server's own context (no SNI) becomes its default pair. Connections already
   * established are not touched.
   */
  update(store: CertificateStore, minVersion: TlsVersion): void {
    this.#store = store;
    this.#minVersion = minVersion;
    this.#noCertificate = undefined;
    this.server.setSecureContext(this.#defaultContextOptions());
  }

  /** The server's own context: the default pair, the minimum version, the ticket key. */
  #defaultContextOptions(): tls.SecureContextOptions {
    const pair = this.#store.defaultPair;
    return {
      ...(pair === undefined ? {} : { cert: pair.certPem, key: pair.keyPem }),
      minVersion: this.#minVersion,
      ciphers: TLS_SERVER_CIPHERS,
      honorCipherOrder: true,
      ticketKeys: this.#ticketKeys,
    };
  }

  #contextFor(serverName: string): tls.SecureContext {
    const pair = this.#store.select(serverName);
    if (pair !== undefined) return pair.context;
    return (this.#noCertificate ??= tls.createSecureContext({ minVersion: this.#minVersion }));
  }

  #onClientError(error: NodeJS.ErrnoException, socket: TLSSocket): void {
    socket.destroy(); // node destroys it too; said here so that no path leaves it open
    const code = this.#store.defaultPair === undefined ? 'no certificate' : (error.code ?? 'unknown');
    const now = this.#now();
    const last = this.#lastLogged.get(code);
    if (last !== undefined && now - last < LOG_INTERVAL_MS) return;
    this.#lastLogged.set(code, now);
    const why =
      code === 'no certificate'
        ? 'no certificate to serve yet (no tls_cert, and ACME has not issued one)'
        : code === 'ERR_SSL_HTTP_REQUEST'
          ? 'ERR_SSL_HTTP_REQUEST: a plain HTTP request was sent to the HTTPS port'
          : `${code}: ${firstLine(error.message)}`;
    this.#log(`tls: handshake failed from ${socket.remoteAddress ?? 'a client'}: ${why} (repeats not logged for ${LOG_INTERVAL_MS / 1000} s)`);
  }
}

/** The first line of an OpenSSL message, which ends with the source file and line. */
function firstLine(message: string): string {
  return message.split('\n')[0]!.trim();
}
