/**
 * Test harness: real sockets on port 0, 127.0.0.1 only. Scripted backends that record what they
 * received, a proxy built from INI text, and clients that speak raw bytes when node:http would hide
 * what the test is about.
 */
import http from 'node:http';
import type { TestContext } from 'node:test';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../src/config/load-config.js';
import { validatePasswordHash } from '../../src/auth/password-hash.js';
import { checkUserName } from '../../src/auth/basic-auth.js';
import type { AccessLog, AccessLogRecord } from '../../src/gateway/access-log.js';
import { ProxyServer, type ProxyServerOptions } from '../../src/gateway/proxy-server.js';

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly rawHeaders: string[];
  readonly body: Buffer;
}

export interface Backend {
  readonly port: number;
  readonly url: string;
  readonly server: http.Server;
  readonly requests: RecordedRequest[];
  close(): Promise<void>;
}

/** A backend that records every request (with its whole body) and answers with `handler`, or 200 "ok". */
export async function startBackend(handler?: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void): Promise<Backend> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders, body });
      if (handler) handler(req, res, body);
      else res.end('ok');
    });
  });
  return listenBackend(server, requests);
}

/** Wraps an existing server (for streaming handlers that must not wait for the body). */
export async function listenBackend(server: http.Server, requests: RecordedRequest[] = []): Promise<Backend> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    server,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A raw TCP backend: `onConnection` gets each socket (for misbehaving upstreams). */
export async function startRawBackend(onConnection: (socket: net.Socket) => void): Promise<{ port: number; url: string; close(): Promise<void>; server: net.Server }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface TestProxy {
  readonly port: number;
  readonly proxy: ProxyServer;
  readonly logs: AccessLogRecord[];
  close(): Promise<void>;
}

/** A proxy from INI text; `[server] listen` is forced to 127.0.0.1:0 and the access log is collected. */
export async function startTestProxy(ini: string, options: Omit<ProxyServerOptions, 'accessLog'> = {}): Promise<TestProxy> {
  const config = parseConfig(ini, 'test.ini', { validateAuthHash: validatePasswordHash, validateAuthUserName: checkUserName });
  const logs: AccessLogRecord[] = [];
  const accessLog: AccessLog = { isEnabled: true, write: (r) => logs.push(r), close: async () => {} };
  const proxy = new ProxyServer(config, { ...options, accessLog });
  const port = await proxy.listen(0, '127.0.0.1');
  return { port, proxy, logs, close: async () => void (await proxy.close(2000)) };
}

export interface SimpleResponse {
  readonly status: number;
  readonly statusMessage: string;
  readonly rawHeaders: string[];
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
  readonly rawTrailers: string[];
}

/** One request with a fresh connection (agent: false). */
export function request(
  port: number,
  options: { method?: string; path?: string; headers?: http.OutgoingHttpHeaders | string[]; body?: string | Buffer } = {},
): Promise<SimpleResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method: options.method ?? 'GET', path: options.path ?? '/', headers: options.headers as http.OutgoingHttpHeaders, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            statusMessage: res.statusMessage ?? '',
            rawHeaders: res.rawHeaders,
            headers: res.headers,
            body: Buffer.concat(chunks),
            rawTrailers: res.rawTrailers,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** How long `rawRequest` waits and when it may stop early. */
export interface RawRequestOptions {
  /** Silence after which the answer counts as over, ms; default 1500. */
  readonly idleMs?: number;
  /**
   * Called with everything received so far (latin1) after each chunk; `true` ends the exchange at
   * once, e.g. `wholeResponses(1)`. Only for a test that knows what a complete answer is: a test
   * that proves that nothing more arrives must wait out `idleMs` instead.
   */
  readonly isComplete?: (text: string) => boolean;
}

/**
 * Writes `bytes` on a fresh connection (from `localAddress` when given) and collects everything
 * until the server closes, `idleMs` passes with nothing received, or `isComplete` holds.
 * `closedByServer` tells whether the server closed. An array is written piece by piece, 20 ms apart.
 */
export function rawRequest(
  port: number,
  bytes: string | Buffer | readonly (string | Buffer)[],
  idle: number | RawRequestOptions = 1500,
  localAddress?: string,
): Promise<{ text: string; data: Buffer; closedByServer: boolean }> {
  const { idleMs = 1500, isComplete } = typeof idle === 'number' ? { idleMs: idle } : idle;
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', noDelay: true, ...(localAddress === undefined ? {} : { localAddress }) });
    const chunks: Buffer[] = [];
    let timer = setTimeout(done, idleMs, false);
    function done(closedByServer: boolean): void {
      clearTimeout(timer);
      socket.destroy();
      const data = Buffer.concat(chunks);
      resolve({ text: data.toString('latin1'), data, closedByServer });
    }
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      clearTimeout(timer);
      if (isComplete?.(Buffer.concat(chunks).toString('latin1'))) done(false);
      else timer = setTimeout(done, idleMs, false);
    });
    socket.on('end', () => done(true));
    socket.on('error', () => done(true));
    if (typeof bytes === 'string' || Buffer.isBuffer(bytes)) socket.write(bytes);
    else bytes.forEach((piece, i) => setTimeout(() => socket.writable && socket.write(piece), i * 20));
  });
}

/**
 * An `isComplete` for `rawRequest`: true once `text` holds `count` whole final responses, each
 * framed by Content-Length or chunked (RFC 9112 section 6.3), after any 1xx interim responses
 * other than 101. A 101, a response framed by the close, or a HEAD's answer never counts as whole,
 * so those wait for the close or the idle time as before.
 */
export function wholeResponses(count: number): (text: string) => boolean {
  return (text) => {
    let at = 0;
    for (let finals = 0; finals < count; ) {
      const headEnd = text.indexOf('\r\n\r\n', at);
      if (headEnd === -1) return false;
      const head = text.slice(at, headEnd);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? NaN);
      at = headEnd + 4;
      if (status === 101 || Number.isNaN(status)) return false;
      if (status < 200) continue;
      finals++;
      if (status === 204 || status === 304) continue;
      const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
      if (length !== null) at += Number(length[1]);
      else if (/\r\ntransfer-encoding:[^\r]*chunked/i.test(head)) at = chunkedBodyEnd(text, at);
      else return false;
      if (at > text.length) return false;
    }
    return true;
  };
}

/** Where the chunked body starting at `at` ends (after its trailer section), or Infinity if `text` does not hold all of it yet. */
function chunkedBodyEnd(text: string, at: number): number {
  for (;;) {
    const lineEnd = text.indexOf('\r\n', at);
    if (lineEnd === -1) return Infinity;
    const size = parseInt(text.slice(at, lineEnd), 16);
    if (Number.isNaN(size)) return Infinity;
    at = lineEnd + 2;
    if (size === 0) break;
    at += size + 2;
  }
  const trailersEnd = text.startsWith('\r\n', at) ? at : text.indexOf('\r\n\r\n', at);
  if (trailersEnd === -1) return Infinity;
  return trailersEnd + (trailersEnd === at ? 2 : 4);
}

/** `[k, v, k, v]` → values of header `name` (any case), in order. */
export function headerValues(rawHeaders: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === name.toLowerCase()) out.push(rawHeaders[i + 1]!);
  return out;
}

/** Waits until `predicate()` holds, polling every 10 ms, up to `timeoutMs`. For socket events only, never timers under test. */
export async function waitFor(predicate: () => boolean, timeoutMs = 3000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A recording backend and a proxy in front of it, both closed when test `t` ends: the setup most
 * integration tests share. `ini` gets the backend's URL and returns the proxy's config.
 */
export async function startProxiedBackend(
  t: TestContext,
  ini: (backendUrl: string) => string,
  handler?: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void,
): Promise<{ backend: Backend; proxy: TestProxy }> {
  const backend = await startBackend(handler);
  const proxy = await startTestProxy(ini(backend.url));
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  return { backend, proxy };
}
