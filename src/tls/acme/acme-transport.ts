/**
 * The HTTPS requests of an ACME client (RFC 8555 §6.1: every ACME request goes over HTTPS), on
 * `node:https` — not the proxy's data path, so node's own client is the right tool and keeps the
 * project free of dependencies. The transport is a function so the client can be tested without a
 * network and the certificate manager's tests can count requests.
 */
import https from 'node:https';
import { AcmeError } from '../../errors.js';

export interface AcmeHttpRequest {
  readonly method: 'GET' | 'HEAD' | 'POST';
  readonly url: string;
  /** Header name → value (the transport adds Content-Length and User-Agent). */
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

export interface AcmeHttpResponse {
  readonly status: number;
  /** Lowercased header name → value (a repeated header's values joined with ", ", as node does). */
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body: Buffer;
}

/** One HTTPS exchange. Rejects with an AcmeError when there is no answer (connect, TLS, timeout, size). */
export type AcmeTransport = (request: AcmeHttpRequest) => Promise<AcmeHttpResponse>;

/** An ACME answer larger than this (1 MiB) is refused: a certificate chain is a few KiB. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

/**
 * The real transport: `node:https` with verification on. `ca` (PEM) replaces the trust store for
 * the ACME server's own certificate (`directory_ca`, for Pebble or a private CA); undefined = node's
 * store. Each exchange has `timeoutMs` (default 30 s) of socket inactivity. Only `https:` URLs.
 */
export function httpsTransport(ca: string | undefined, timeoutMs = 30_000): AcmeTransport {
  // No keep-alive: an issuance is a dozen requests every few weeks, and no idle socket outlives it.
  const agent = new https.Agent({ keepAlive: false, ca });
  return (request) =>
    new Promise((resolve, reject) => {
      const fail = (reason: string): void => reject(new AcmeError(`ACME ${request.method} ${request.url}: ${reason}`));
      let url: URL;
      try {
        url = new URL(request.url);
      } catch {
        return fail('not a URL');
      }
      if (url.protocol !== 'https:') return fail('ACME URLs must be https:// (RFC 8555 §6.1)');
      const body = request.body === undefined ? undefined : Buffer.from(request.body);
      const headers: Record<string, string> = { 'User-Agent': 'ini-proxy-acme', ...request.headers };
      if (body !== undefined) headers['Content-Length'] = String(body.length);
      const outgoing = https.request(url, { method: request.method, headers, agent, timeout: timeoutMs }, (incoming) => {
        const chunks: Buffer[] = [];
        let size = 0;
        incoming.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            outgoing.destroy();
            fail(`answer larger than ${MAX_RESPONSE_BYTES} bytes`);
            return;
          }
          chunks.push(chunk);
        });
        incoming.on('end', () => {
          const responseHeaders: Record<string, string | undefined> = {};
          for (const [name, value] of Object.entries(incoming.headers)) responseHeaders[name] = Array.isArray(value) ? value.join(', ') : value;
          resolve({ status: incoming.statusCode ?? 0, headers: responseHeaders, body: Buffer.concat(chunks) });
        });
        incoming.on('error', (error) => fail(error.message));
      });
      outgoing.on('timeout', () => outgoing.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      outgoing.on('error', (error) => fail(error.message));
      outgoing.end(body);
    });
}
