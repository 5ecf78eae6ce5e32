/**
 * The HTTPS listener (`tls_listen`): a TCP listener whose connections start with a TLS handshake,
 * each established connection handed to the same HTTP/1.1 connection loop as the plain listener
 * (src/wire/http1-server.ts `accept`), as nginx's `listen … ssl` and Go's `ServeTLS` put TLS under
 * the one HTTP server.
 *
 * The first bytes decide what a connection is, as nginx's `ngx_http_ssl_handshake` looks at the
 * first byte before it starts TLS. The listening socket is a plain `net.Server`; a `tls.Server`
 * that never listens holds everything TLS, and is handed each connection that starts a handshake:
 *
 * - first byte 0x16, a TLS handshake record (RFC 8446 §5.1): the chunk is put back into the paused
 *   socket and the socket given to the TLS server (its `connection` event, which node lets a caller
 *   emit); node's TLS socket feeds the bytes already read to the TLS layer first (lib/_tls_wrap.js
 *   `initRead`);
 * - a token character (the start of a method, RFC 9110 §9.1) or CR/LF (an empty line before the
 *   request line, RFC 9112 §2.2): a plain HTTP request on the HTTPS
 *   port. It gets the proxy's own 400, `Connection: close` (PLAIN_REQUEST_REASON), as nginx answers
 *   400 "The plain HTTP request was sent to HTTPS port" and Go's server 400 "Client sent an HTTP
 *   request to an HTTPS server."; then the connection closes, lingering so that the client reads it;
 * - anything else is closed at once.
 *
 * Until the first byte comes, the connection has `header_timeout` (node's 120 s when 0); then the
 * handshake has as long again (`handshakeTimeout`): a client that sends nothing is closed silently,
 * as the plain listener closes one. What TLS adds:
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
 * - handshake errors (`tlsClientError`: a broken record, a version below `tls_min_version`, a
 *   timeout, no certificate yet, the client leaving) close that connection only. They, a plain
 *   HTTP request and garbage are logged with the client's address, at most once per
 *   LOG_INTERVAL_MS per error code.
 *
 * At shutdown a connection whose handshake has not finished carries no request, as an idle
 * keep-alive connection does: `closeHandshakes` closes them at once.
 *
 * Until there is any certificate (ACME not done yet and no `tls_cert`), every handshake fails
 * with a `handshake_failure` alert, and the log says why once per LOG_INTERVAL_MS.
 */
import { randomBytes } from 'node:crypto';
import net, { type Socket } from 'node:net';
import tls, { type TLSSocket } from 'node:tls';
import type { TlsVersion } from '../config/config.js';
import { CR, IS_TOKEN, LF } from '../wire/field-bytes.js';
import type { CertificateStore } from './certificate-store.js';
import { TLS_SERVER_CIPHERS } from './certificate-pair.js';

/** Repeats of one kind of handshake failure are logged once per this period, ms. */
export const LOG_INTERVAL_MS = 60_000;

/** The `ticketKeys` length node's TLS server takes (16 bytes name, 16 HMAC, 16 AES), bytes. */
export const TICKET_KEY_BYTES = 48;

/** The first byte of a TLS handshake record: ContentType `handshake` (22), RFC 8446 §5.1. */
const TLS_HANDSHAKE_RECORD = 0x16;

/** The body of the 400 a plain HTTP request on the HTTPS port gets (nginx's and Go's answers, in one line). */
export const PLAIN_REQUEST_REASON = 'bad request: a plain HTTP request was sent to the HTTPS port; use https://';

/** The wait for a connection's first byte, and node's default `handshakeTimeout`, when `header_timeout` is 0, ms. */
const NODE_HANDSHAKE_TIMEOUT_MS = 120_000;

export interface TlsListenerOptions {
  readonly store: CertificateStore;
  readonly minVersion: TlsVersion;
  /** `header_timeout`, ms, for the first byte and again for the handshake; 0: node's default (120 s). */
  readonly handshakeTimeoutMs: number;
  /** TICKET_KEY_BYTES bytes shared by every worker; default: random, this process's own. */
  readonly ticketKeys?: Buffer | undefined;
  /**
   * Every established TLS connection (handed to the HTTP/1.1 loop), with the TCP socket it wraps,
   * which alone can reset the connection: a TLSSocket's own `resetAndDestroy` throws
   * ERR_INVALID_HANDLE_TYPE (its handle is not TCP).
   */
  readonly onConnection: (socket: TLSSocket, tcpSocket: Socket) => void;
  /**
   * A connection whose client sent a plain HTTP request: write the server's own 400 with the
   * one-line `reason` and close it (src/wire/http1-server.ts `refuse`). `received` is its first
   * read, never parsed as a request: only its first line is logged, then it is dropped.
   */
  readonly refusePlainRequest: (socket: Socket, reason: string, received: Buffer) => void;
  readonly log: (line: string) => void;
  /** Clock for the log's rate limit, ms. Default `performance.now`. */
  readonly now?: () => number;
  /** Asked for every new TCP connection before its handshake: false closes it at once (Http1ServerOptions.admit). Default: all served. */
  readonly admit?: (socket: Socket) => boolean;
}

export class TlsListener {
  /** The listening socket, plain TCP: `listen`, `close` and `address` are node's. */
  readonly server: net.Server;
  /** Everything TLS: contexts, SNI, ALPN, tickets, the handshake timeout. It never listens: `server` hands it the connections that start a handshake. */
  readonly #tlsServer: tls.Server;
  #store: CertificateStore;
  #minVersion: TlsVersion;
  readonly #ticketKeys: Buffer;
  /** `header_timeout` (node's 120 s when 0), ms: the wait for the first byte, then for the handshake. */
  readonly #handshakeTimeoutMs: number;
  readonly #refusePlainRequest: (socket: Socket, reason: string, received: Buffer) => void;
  readonly #log: (line: string) => void;
  readonly #now: () => number;
  /**
   * The accepted connections whose handshake has not finished (or not begun), by `connectionKey`:
   * the TLS socket that wraps one shares its addresses, and names nothing else of it.
   */
  readonly #handshaking = new Map<string, Socket>();
  /** When each kind of handshake failure was last logged, ms, by error code. */
  readonly #lastLogged = new Map<string, number>();
  /** A context without a certificate: the handshake fails with an alert (no certificate yet). */
  #noCertificate: tls.SecureContext | undefined;

  constructor(options: TlsListenerOptions) {
    this.#store = options.store;
    this.#minVersion = options.minVersion;
    this.#ticketKeys = options.ticketKeys ?? randomBytes(TICKET_KEY_BYTES);
    this.#handshakeTimeoutMs = options.handshakeTimeoutMs > 0 ? options.handshakeTimeoutMs : NODE_HANDSHAKE_TIMEOUT_MS;
    this.#refusePlainRequest = options.refusePlainRequest;
    this.#log = options.log;
    this.#now = options.now ?? (() => performance.now());
    // Unlike the plain listener, a client's end (close_notify or FIN) ends the connection, as Go's
    // server reads it (the client is gone); the TLS socket takes allowHalfOpen from this one. With
    // allowHalfOpen, node 20 never completes a server handshake whose client closed right after its
    // Finished: the connection would stay open.
    const { admit } = options;
    this.server = net.createServer({ allowHalfOpen: false, noDelay: true }, (socket) => {
      if (admit === undefined || admit(socket)) this.#accept(socket);
      else socket.destroy();
    });
    this.#tlsServer = tls.createServer({
      ...this.#defaultContextOptions(),
      ALPNProtocols: ['http/1.1', 'http/1.0'], // as nginx; h2 is not served
      handshakeTimeout: this.#handshakeTimeoutMs,
      SNICallback: (serverName, callback) => callback(null, this.#contextFor(serverName)),
    });
    this.#tlsServer.on('secureConnection', (socket: TLSSocket) => {
      const key = connectionKey(socket);
      const tcpSocket = this.#handshaking.get(key);
      if (tcpSocket === undefined) {
        socket.destroy(); // its TCP connection was closed already (closeHandshakes, at shutdown)
        return;
      }
      this.#handshaking.delete(key);
      // Client-initiated renegotiation (TLS 1.2) is refused, as nginx and HAProxy refuse it: each one
      // is a full handshake the client can make the server pay for, again and again, on one
      // connection. Node reports the attempt (and its own "session attack" limit) as an 'error' on
      // the socket without closing it, so the socket is closed here on any error.
      socket.disableRenegotiation();
      socket.on('error', () => socket.destroy());
      options.onConnection(socket, tcpSocket);
    });
    this.#tlsServer.on('tlsClientError', (error: NodeJS.ErrnoException, socket: TLSSocket) => this.#onClientError(error, socket));
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
    this.#tlsServer.setSecureContext(this.#defaultContextOptions());
  }

  /**
   * Destroys every connection whose handshake has not finished or not begun (graceful shutdown):
   * it carries no request yet, so it is idle, as a keep-alive connection between requests is, and
   * waiting for it would hold the shutdown for up to `header_timeout` twice. Not logged.
   */
  closeHandshakes(): void {
    const sockets = [...this.#handshaking.values()];
    this.#handshaking.clear();
    for (const socket of sockets) socket.destroy();
  }

  /** A new TCP connection: its first chunk decides what it is (see the file comment). */
  #accept(socket: Socket): void {
    const clientAddress = socket.remoteAddress; // read now: a socket forgets it once it closed
    if (clientAddress === undefined) {
      socket.destroy(); // gone already
      return;
    }
    const key = connectionKey(socket);
    this.#handshaking.set(key, socket);
    let isHandedOver = false;
    const onTimeout = (): void => {
      socket.destroy();
    };
    socket.setTimeout(this.#handshakeTimeoutMs);
    socket.once('timeout', onTimeout);
    socket.on('error', ignoreError); // reported through 'close'
    socket.once('close', () => {
      if (this.#handshaking.get(key) !== socket) return; // established, refused, reported or closed at shutdown
      this.#handshaking.delete(key);
      // A handshake that ended without an error reported while its socket was open: the client
      // left. Node reports that only after the socket closed, when it no longer has an address.
      if (isHandedOver) this.#logFailure(clientAddress, 'ECONNRESET', 'ECONNRESET: the client closed the connection during the handshake');
    });
    socket.once('data', (chunk: Buffer) => {
      socket.setTimeout(0);
      socket.off('timeout', onTimeout);
      const firstByte = chunk[0]!;
      if (firstByte === TLS_HANDSHAKE_RECORD) {
        isHandedOver = true;
        socket.pause();
        socket.unshift(chunk);
        this.#tlsServer.emit('connection', socket);
        return;
      }
      this.#handshaking.delete(key);
      // A method's first character, or the empty line a client may send before a request line (RFC 9112 section 2.2).
      if (IS_TOKEN[firstByte] === 1 || firstByte === CR || firstByte === LF) {
        this.#logFailure(clientAddress, 'ERR_SSL_HTTP_REQUEST', 'ERR_SSL_HTTP_REQUEST: a plain HTTP request was sent to the HTTPS port');
        this.#refusePlainRequest(socket, PLAIN_REQUEST_REASON, chunk);
      } else {
        const hex = firstByte.toString(16).padStart(2, '0');
        this.#logFailure(clientAddress, 'not TLS', `not TLS: the first byte 0x${hex} starts neither a TLS handshake nor an HTTP request`);
        socket.destroy();
      }
    });
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
    const clientAddress = socket.remoteAddress;
    const key = connectionKey(socket);
    socket.destroy(); // node destroys it too; said here so that no path leaves it open
    // A socket already closed has no address left: its TCP socket's 'close' reported it (see #accept).
    if (clientAddress === undefined || !this.#handshaking.delete(key)) return;
    const code = this.#store.defaultPair === undefined ? 'no certificate' : (error.code ?? 'unknown');
    const reason = code === 'no certificate' ? 'no certificate to serve yet (no tls_cert, and ACME has not issued one)' : `${code}: ${firstLine(error.message)}`;
    this.#logFailure(clientAddress, code, reason);
  }

  /** Logs `tls: handshake failed from ADDRESS: REASON`, unless `code` was logged less than LOG_INTERVAL_MS ago. */
  #logFailure(clientAddress: string, code: string, reason: string): void {
    const now = this.#now();
    const last = this.#lastLogged.get(code);
    if (last !== undefined && now - last < LOG_INTERVAL_MS) return;
    this.#lastLogged.set(code, now);
    this.#log(`tls: handshake failed from ${clientAddress}: ${reason} (repeats not logged for ${LOG_INTERVAL_MS / 1000} s)`);
  }
}

/**
 * One TCP connection's identity while it is open: its two addresses and ports (no two open
 * connections share them), the same on the TCP socket and on the TLS socket that wraps it.
 */
function connectionKey(socket: Socket): string {
  return `${socket.remoteAddress} ${socket.remotePort} ${socket.localAddress} ${socket.localPort}`;
}

function ignoreError(): void {}

/**
 * The reason of an OpenSSL message: `804CA76C057F0000:error:0A000102:SSL routines:
 * tls_early_post_process_client_hello:unsupported protocol:../deps/…/statem_srvr.c:1664:` →
 * `unsupported protocol`; any other message's first line as it is.
 */
function firstLine(message: string): string {
  const line = message.split('\n')[0]!.trim();
  return /^[0-9A-F]+:error:[0-9A-F]+:[^:]*:[^:]*:([^:]+):/.exec(line)?.[1] ?? line;
}
