/**
 * Every error the proxy raises on purpose, one class each, with a stable `code` (as undici does with
 * `UND_ERR_…`), grouped by area. Each entry says when it is thrown and, for the request path, which
 * HTTP status it becomes. Anything that is not one of these is a bug and becomes a 502 plus a log line.
 */

/** Base class: a stable machine-readable `code` plus a human message. */
export abstract class ProxyError extends Error {
  abstract readonly code: string;
  override get name(): string {
    return this.constructor.name;
  }
}

/** A place in a config file, 1-based line and column (column counts characters, not bytes). */
export interface SourcePlace {
  readonly file: string;
  readonly line: number;
  readonly column: number;
}

export function formatPlace(place: SourcePlace): string {
  return `${place.file}:${place.line}:${place.column}`;
}

/** The longest value, in characters, that a config error's message quotes in full. */
const MAX_QUOTED_CHARS = 80;
/** How much of a longer value the message keeps, in characters. */
const KEPT_QUOTED_CHARS = 60;
const LONG_QUOTED = new RegExp(`'([^'\\n]{${MAX_QUOTED_CHARS + 1},})'`, 'g');

/**
 * `reason` with every quoted value over 80 characters cut to its first 60 and its length:
 * `invalid duration 'xxxx…' (5000 characters)`. A 5,000-character value repeated in full buries
 * the place and the reason in a terminal (nginx cuts its error lines at 2,048 bytes instead).
 * The error's `reason` keeps the whole text.
 */
export function shortenQuotedValues(reason: string): string {
  return reason.replace(LONG_QUOTED, (_quoted, value: string) => `'${value.slice(0, KEPT_QUOTED_CHARS)}…' (${value.length} characters)`);
}

// ---- configuration ------------------------------------------------------------------------------

/**
 * Thrown by the INI parser when the text is not valid INI (SPEC 1.1): a bad section header, a line
 * without `=`, an unterminated quote, a repeated key. Message: `env.ini:12:7: reason`.
 * The CLI turns it into exit code 1.
 */
export class ConfigSyntaxError extends ProxyError {
  readonly code = 'CFG_SYNTAX';
  constructor(
    readonly place: SourcePlace,
    readonly reason: string,
  ) {
    super(`${formatPlace(place)}: ${shortenQuotedValues(reason)}`);
  }
}

/**
 * Thrown by the config loader when the INI is well formed but a section, key or value is not
 * acceptable (SPEC 1.2): unknown key (with "did you mean"), bad duration, missing `pass`.
 * Message: `env.ini:12:7: reason`. The CLI turns it into exit code 1.
 */
export class ConfigValueError extends ProxyError {
  readonly code = 'CFG_VALUE';
  constructor(
    readonly place: SourcePlace,
    readonly reason: string,
  ) {
    super(`${formatPlace(place)}: ${shortenQuotedValues(reason)}`);
  }
}

/** Thrown when the config file cannot be read at all (missing, permissions). Exit code 1. */
export class ConfigFileError extends ProxyError {
  readonly code = 'CFG_FILE';
}

/** Thrown for a bad command line (unknown flag, missing argument). Exit code 2. */
export class UsageError extends ProxyError {
  readonly code = 'CLI_USAGE';
}

/**
 * Thrown by `simulate ROUTE` when the route has no upstream to run its balancer on: each of its
 * upstreams comes from a discovery line (`resolve`, `service=`) and none gave an address now.
 * Message: `env.ini:7:8: route api has no upstream to simulate: …`, at the route's first discovery
 * line. The CLI prints it alone (no table of `-` picks) with exit code 1, as a configuration error.
 */
export class NoUpstreamToSimulateError extends ProxyError {
  readonly code = 'CLI_NO_UPSTREAM';
  constructor(
    readonly place: SourcePlace,
    readonly reason: string,
  ) {
    super(`${formatPlace(place)}: ${reason}`);
  }
}

// ---- request path -------------------------------------------------------------------------------

/** Base class of errors that end a proxied request; `status` is what the client gets (if no bytes went out yet). */
export abstract class RequestError extends ProxyError {
  abstract readonly status: number;
}

/** The balancer found no available upstream (all DOWN, ejected, `down`, or already tried). Becomes 503 + Retry-After. */
export class NoUpstreamError extends RequestError {
  readonly code = 'PRX_NO_UPSTREAM';
  readonly status = 503;
}

/**
 * The proxy itself lacked what a new upstream connection needs: file descriptors (EMFILE,
 * ENFILE) or kernel memory (ENOBUFS, ENOMEM); src/wire/connection-pool.ts, `isProxyShortage`.
 * Not the upstream's failure: it is not counted by passive health nor by a health probe (a break
 * test: under `ulimit -n 200` both healthy upstreams of a route were ejected), and not retried on
 * another upstream, which would need the same. Becomes 503 with `Retry-After: 1`, as the proxy is overloaded, not its
 * upstream (nginx answers a failed socket() with 500). Message: `connect EMFILE 127.0.0.1:9001`.
 */
export class ProxyResourceError extends RequestError {
  readonly code = 'PRX_PROXY_RESOURCES';
  readonly status = 503;
}

/** TCP connect to the upstream failed (refused, unreachable, DNS). Becomes 502. Always retryable. */
export class UpstreamConnectError extends RequestError {
  readonly code = 'PRX_UPSTREAM_CONNECT';
  readonly status = 502;
}

/**
 * A new upstream connection reached one of this proxy's own listeners (`listen` or `tls_listen`;
 * src/wire/own-listeners.ts has the rule): a `pass` line, a DNS answer or a registry entry names
 * the proxy itself, and the request would come back in and be forwarded to itself again, without
 * end. The connection is destroyed right after the TCP connect, before any request byte is written
 * (src/wire/connection-pool.ts), so it is retried on another upstream like a connect error and
 * counts as an upstream failure for passive health. Becomes 502. Message:
 * `127.0.0.1:8080 is this proxy's own listener (listen 0.0.0.0:8080): the request would loop`.
 */
export class UpstreamLoopError extends RequestError {
  readonly code = 'PRX_UPSTREAM_LOOP';
  readonly status = 502;
  constructor(
    /** The peer connected to, `127.0.0.1:8080`. */
    readonly peer: string,
    /** The listener it is, as `listen 0.0.0.0:8080` or `tls_listen [::]:8443`. */
    readonly listener: string,
  ) {
    super(`${peer} is this proxy's own listener (${listener}): the request would loop`);
  }
}

/**
 * TLS to an `https://` upstream failed (src/wire/connection-pool.ts): its certificate did not
 * verify (`certificate has expired`, `unable to verify the first certificate`, `Hostname/IP does
 * not match certificate's altnames: …`), the handshake failed (an alert, a peer that does not speak
 * TLS), or the upstream ended an established connection with an alert (with TLS 1.3 a server that
 * requires a client certificate says so only after the client finished its handshake:
 * `tlsv13 alert certificate required`). `reason` is those words, logged as
 * `PRX_UPSTREAM_TLS: certificate has expired`. Becomes 502 and counts as an upstream failure for
 * passive health. In the `handshake` phase no request byte reached the upstream, so it is retried
 * on another upstream like a connect error; `after-handshake` is retried like a reset.
 */
export class UpstreamTlsError extends RequestError {
  readonly code = 'PRX_UPSTREAM_TLS';
  readonly status = 502;
  constructor(
    /** OpenSSL's or node's words, one line: `certificate has expired`. */
    readonly reason: string,
    readonly phase: 'handshake' | 'after-handshake',
    /** `127.0.0.1:8443`, for the message. */
    origin: string,
  ) {
    super(`TLS with ${origin}: ${reason}`);
  }
}

/** `connect_timeout` or `read_timeout` elapsed. Becomes 504. */
export class UpstreamTimeoutError extends RequestError {
  readonly code = 'PRX_UPSTREAM_TIMEOUT';
  readonly status = 504;
  constructor(
    message: string,
    /**
     * `connect`: no connection within connect_timeout, which covers the TCP connect and, for an
     * `https://` upstream, the TLS handshake (retryable like a connect error); `read`: upstream idle.
     */
    readonly phase: 'connect' | 'read',
  ) {
    super(message);
  }
}

/**
 * The upstream connection ended before the response was complete: a close (FIN) or a reset (RST).
 * Becomes 502 before the response head; after it the client connection is cut. `reason` says which
 * and how far the response got, logged as `PRX_UPSTREAM_RESET: closed the connection before the
 * response was complete (10 of 100 body bytes)` or `PRX_UPSTREAM_RESET: reset the connection
 * (ECONNRESET)` (nginx: "upstream prematurely closed connection" and "Connection reset by peer";
 * Go's httputil: "unexpected EOF" and "connection reset by peer"). One code for both: retries and
 * passive health treat them alike, as nginx's `proxy_next_upstream error` does.
 */
export class UpstreamResetError extends RequestError {
  readonly code = 'PRX_UPSTREAM_RESET';
  readonly status = 502;
  constructor(
    /** What the upstream did, one line, the upstream its subject: `closed the connection before sending a response`. */
    readonly reason: string,
    /** Who did it, for the message: the upstream's origin `http://127.0.0.1:9001`, or `upstream`. */
    subject: string,
  ) {
    super(`${subject} ${reason}`);
  }
}

/**
 * The upstream sent a response whose framing is malformed or ambiguous, or a 101 that does not
 * switch as asked (to a request that asked for no upgrade, without `Connection: upgrade`, or to
 * another protocol; Go's httputil refuses those too). Becomes 502; the connection is closed. The
 * message is the reason, logged as `PRX_UPSTREAM_PROTOCOL: 101 without Connection: upgrade`.
 */
export class UpstreamProtocolError extends RequestError {
  readonly code = 'PRX_UPSTREAM_PROTOCOL';
  readonly status = 502;
}

/** The client's request body is larger than `max_body_size`. Becomes 413. */
export class BodyTooLargeError extends RequestError {
  readonly code = 'PRX_BODY_TOO_LARGE';
  readonly status = 413;
}

/** The client's request is malformed in a way node:http let through (e.g. Content-Length with Transfer-Encoding). Becomes 400. */
export class BadRequestError extends RequestError {
  readonly code = 'PRX_BAD_REQUEST';
  readonly status = 400;
}

/**
 * The client's request body is framed wrongly: a bad chunk-size line or chunk extension, a chunk
 * not followed by CRLF, a bare LF, a malformed trailer field, a chunk-size line or trailer section
 * longer than its limit (RFC 9112 §7.1). Thrown by the request body decoder (src/wire/body-decoder.ts).
 * Becomes 400 and the connection is closed: where the body ends, and so where the next request
 * starts, is no longer known.
 */
export class RequestFramingError extends RequestError {
  readonly code = 'PRX_REQUEST_FRAMING';
  readonly status = 400;
}

/**
 * A graceful shutdown ran out of `shutdown_timeout` and the proxy cut the request: nothing more is
 * sent; the upstream request is aborted. Logged with the status 499 (no answer was completed), but
 * named apart from a client that left.
 */
export class ShutdownCutError extends RequestError {
  readonly code = 'PRX_SHUTDOWN_CUT';
  readonly status = 499;
}

/** The client went away before the response was complete. Nothing is sent; the upstream request is aborted. */
export class ClientAbortError extends RequestError {
  readonly code = 'PRX_CLIENT_ABORT';
  readonly status = 499; // nginx's "client closed request", for the access log only
}

/**
 * The client was too slow sending its request (src/wire/http1-server.ts): a pause in its body
 * longer than `body_timeout` (nginx's `client_body_timeout`), or the whole request not received
 * within `request_timeout`. Becomes 408 when no answer was started; otherwise the connection is cut.
 */
export class ClientTimeoutError extends RequestError {
  readonly code = 'PRX_CLIENT_TIMEOUT';
  readonly status = 408;
  constructor(
    message: string,
    /** `body`: `body_timeout` between two reads of the body; `request`: `request_timeout` for head and body. */
    readonly phase: 'body' | 'request',
  ) {
    super(message);
  }
}

// ---- TLS ----------------------------------------------------------------------------------------

/**
 * A certificate and key that cannot be served (src/tls/certificate-pair.ts): no PEM certificate or
 * no PEM private key in the text, a key that does not belong to the certificate, a certificate
 * expired or not yet valid. Thrown for PEM texts (an ACME certificate, `ProxyServer.setAcmeCertificate`);
 * for a `tls_cert` line it becomes a ConfigValueError at the line's place (exit 1 at start-up and
 * in `--check`, a rejected reload at SIGHUP). `subject` says which of the two is wrong.
 */
export class TlsCertificateError extends ProxyError {
  readonly code = 'TLS_CERTIFICATE';
  constructor(
    readonly subject: 'cert' | 'key',
    /** e.g. `expired on 2020-06-01 00:00:00 UTC`, `does not match the certificate`. */
    readonly reason: string,
  ) {
    super(`${subject === 'cert' ? 'the certificate' : 'the private key'} ${reason}`);
  }
}

// ---- admin --------------------------------------------------------------------------------------

/**
 * An admin API call that cannot be carried out (src/admin): a bad JSON body or upstream (400), a
 * missing or wrong bearer token (401), no token configured (403), an unknown route or upstream (404),
 * an upstream already configured by a `pass` line (409). `status` is what the admin client gets,
 * with `{"error": message}` as the body.
 */
export class AdminRequestError extends ProxyError {
  readonly code = 'ADM_REQUEST';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

// ---- ACME ---------------------------------------------------------------------------------------

/**
 * An ACME exchange that did not give what was asked (src/tls/acme): the server answered with an
 * RFC 7807 problem document (`type` e.g. `urn:ietf:params:acme:error:badNonce`, RFC 8555 §6.7), a
 * challenge or order became `invalid`, an answer was not what RFC 8555 says, polling ran out of
 * time, or the directory could not be reached. Never reaches a client: the certificate manager logs
 * it and tries again later (backoff). Message: `ACME POST https://…/new-order: urn:…:rejectedIdentifier: detail`.
 */
export class AcmeError extends ProxyError {
  readonly code = 'PRX_ACME';
  constructor(
    message: string,
    /** The problem document's `type` (RFC 7807 §3.1), when the server sent one. */
    readonly problemType: string | undefined = undefined,
    /** The HTTP status of the answer, when there was one. */
    readonly status: number | undefined = undefined,
  ) {
    super(message);
  }
}
