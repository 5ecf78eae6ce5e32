/**
 * The `[admin]` listener (SPEC 1.2): a node:http server of its own, apart from the proxy's, so
 * operators can firewall it and a flood of proxied traffic cannot starve it. Its API:
 *
 * | method and path | what | needs the token |
 * |---|---|---|
 * | `GET /status` | the live HTML status page | only off loopback |
 * | `GET /status.json` | the same data as JSON | only off loopback |
 * | `GET /metrics` | Prometheus text format 0.0.4 | only off loopback |
 * | `GET /routes/ROUTE/upstreams` | the route's upstreams (status JSON) and its registry entries | only off loopback |
 * | `PUT /routes/ROUTE/upstreams` | register or refresh `{"url", "weight"?, "backup"?, "ttl"?}` | yes |
 * | `DELETE /routes/ROUTE/upstreams` | deregister | yes |
 * | `POST /routes/ROUTE/upstreams/drain` | no new requests; in-flight ones finish | yes |
 * | `POST /routes/ROUTE/upstreams/enable` | end a drain | yes |
 *
 * The four calls that name an upstream follow one rule (`namedUpstream`): it is named exactly once,
 * by the query's `url` or the body's `"url"`; twice (`?url=A&url=B`, or a query and a body) or not at
 * all is a 400, as is any other query parameter (`?weight=2` would otherwise be silently ignored:
 * `weight`, `backup` and `ttl` go in the body). Paths are matched as received, never resolved, and
 * with no trailing slash (`/status/`, `/routes/a/upstreams/` are 404s, as `//routes/a/upstreams`).
 * CONNECT is answered 405 with an empty `Allow`, as the proxy listener answers it.
 *
 * Access rules: every state-changing call needs `Authorization: Bearer TOKEN` (RFC 6750), compared
 * in constant time; missing or wrong → 401 with `WWW-Authenticate: Bearer`. With no `token`
 * configured, state-changing calls are refused with 403: an admin API without a secret must not
 * change anything. Read-only pages are open when `listen` is a loopback address (only this box can
 * reach them, as nginx's `stub_status` behind `allow 127.0.0.1`); on any other address they need the
 * token too, and with no token they are refused (403). Errors are `{"error": "…"}` JSON.
 */
import http from 'node:http';
import { adminConnectionLimit, readOpenFileLimit } from '../process/descriptor-budget.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AdminConfig } from '../config/config.js';
import { AdminRequestError } from '../errors.js';
import type { ProxyServer } from '../gateway/proxy-server.js';
import { isLoopbackHost, isTokenEqual, readBearerToken } from './bearer-token.js';
import type { MetricsState } from './metrics-collector.js';
import { renderMetrics } from './metrics-exposition.js';
import { EXPOSITION_CONTENT_TYPE } from './prometheus-text.js';
import { renderStatusPage } from './status-page.js';
import { buildStatusSnapshot, type CarriedCounters, type DiscoveryView, type StatusSnapshot, type WorkerReport, type WorkerStartFailure } from './status-snapshot.js';
import { parseRegisteredUpstream, type UpstreamRegistry } from './upstream-registry.js';
import { firstDuplicateKey } from './duplicate-json-key.js';

/** Largest JSON body the admin API reads: 64 KiB. */
export const MAX_ADMIN_BODY_BYTES = 64 * 1024;

/** Counters of every process that serves traffic, and their metrics added up. */
export interface CollectedCounters {
  readonly reports: readonly WorkerReport[];
  /** Everything added up, `carried` included. */
  readonly metrics: MetricsState;
  /** Cluster: counters of workers that exited or did not answer, kept in the totals. */
  readonly carried?: CarriedCounters;
  /** Cluster: worker slots that cannot start. */
  readonly workerStartFailures?: readonly WorkerStartFailure[];
  /** Cluster: pids of running workers that did not answer in time. */
  readonly silentWorkerPids?: readonly number[];
}

export interface AdminServerOptions {
  readonly config: AdminConfig;
  /** The authoritative routes, health and draining (the proxy itself, or the cluster primary's model). */
  readonly proxy: ProxyServer;
  readonly registry: UpstreamRegistry;
  /** Gathers the counters: this process's in single mode, every worker's in a cluster. */
  readonly collect: () => Promise<CollectedCounters>;
  readonly mode: 'single' | 'cluster';
  /** DNS discovery of this process (the cluster primary's with workers); absent without one. */
  readonly discovery?: DiscoveryView;
  /** Called after drain/enable (cluster mode pushes the change to the workers). */
  readonly onStateChange?: () => void;
  /** Registry clock (ms); must match the registry's. Default `Date.now`. */
  readonly registryNow?: () => number;
  /** Health checker clock (ms), for probe ages. Default `Date.now`. */
  readonly probeNow?: () => number;
  /** Action log (one line, no newline). Default: nowhere. */
  readonly log?: (line: string) => void;
}

type Handler = (clientReq: IncomingMessage, url: URL, routeName: string | undefined) => Promise<Reply>;

interface Reply {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export class AdminServer {
  readonly server: http.Server;
  readonly #options: AdminServerOptions;
  readonly #isLoopback: boolean;
  /** Open connections, oldest first (the cap's bookkeeping). */
  readonly #connections = new Set<Socket>();
  /** Connections with a request in flight: never closed to make room. */
  readonly #busy = new Set<Socket>();

  constructor(options: AdminServerOptions) {
    this.#options = options;
    this.#isLoopback = isLoopbackHost(options.config.listen.host);
    this.server = http.createServer({ headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 });
    // At most adminConnectionLimit connections (descriptor-budget.ts): the process's descriptors are
    // for the proxy's clients. A new one over the cap closes the oldest without a request in flight
    // (idle, or still sending its head) instead of being refused, so connections that send nothing
    // cannot shut operators and heartbeats out (a break test: 64 of them did, without a token).
    const cap = adminConnectionLimit(readOpenFileLimit());
    this.server.on('connection', (socket: Socket) => {
      if (this.#connections.size >= cap) {
        const idle = [...this.#connections].find((open) => !this.#busy.has(open));
        (idle ?? socket).destroy();
        if (idle === undefined) return;
        this.#connections.delete(idle);
      }
      this.#connections.add(socket);
      socket.once('close', () => {
        this.#connections.delete(socket);
        this.#busy.delete(socket);
      });
    });
    this.server.on('request', (clientReq: IncomingMessage, clientRes: ServerResponse) => {
      const socket = clientReq.socket;
      this.#busy.add(socket);
      clientRes.once('finish', () => this.#busy.delete(socket));
      void this.#handle(clientReq).then((reply) => send(clientRes, clientReq.method === 'HEAD' ? { ...reply, body: '' } : reply));
    });
    // Without a 'connect' listener node:http closes a CONNECT's connection without a word.
    this.server.on('connect', (_clientReq: IncomingMessage, socket: Duplex) => refuseConnect(socket));
  }

  /** Listens on `[admin] listen` (or `port`/`host` when given; 0 picks a free port). Resolves with the port. */
  async listen(port = this.#options.config.listen.port, host = this.#options.config.listen.host): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return (this.server.address() as AddressInfo).port;
  }

  /** Stops listening and closes every admin connection (nothing long-running is served here). */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** The status now, with every process's counters. */
  async snapshot(): Promise<{ snapshot: StatusSnapshot; metrics: MetricsState }> {
    const { reports, metrics, carried, workerStartFailures, silentWorkerPids } = await this.#options.collect();
    const snapshot = buildStatusSnapshot(this.#options.proxy, reports, {
      mode: this.#options.mode,
      carried,
      workerStartFailures,
      silentWorkerPids,
      ...(this.#options.discovery === undefined ? {} : { discovery: this.#options.discovery }),
      registry: this.#options.registry.entries(),
      registryNowMs: (this.#options.registryNow ?? Date.now)(),
      probeNowMs: (this.#options.probeNow ?? Date.now)(),
    });
    return { snapshot, metrics };
  }

  async #handle(clientReq: IncomingMessage): Promise<Reply> {
    try {
      // The path as received: resolved against a base, `//routes/a` would be host `routes` and path
      // `/a` (RFC 3986 §4.2), `/routes/x/../a` would be `/routes/a`: a path never sent.
      const target = clientReq.url ?? '/';
      const url = new URL(target.startsWith('/') ? `http://admin.invalid${target}` : target, 'http://admin.invalid');
      const pathname = target.startsWith('/') ? target.split('?', 1)[0]! : url.pathname;
      const { handler, isStateChanging, routeName, allow } = this.#resolve(clientReq.method ?? 'GET', pathname);
      if (handler === undefined) {
        if (allow === undefined) throw new AdminRequestError(404, `no admin endpoint ${pathname}`);
        return { ...json(405, { error: `method ${clientReq.method} not allowed here` }), headers: { allow } };
      }
      this.#authorize(clientReq, isStateChanging);
      return await handler(clientReq, url, routeName);
    } catch (error) {
      if (error instanceof AdminRequestError) {
        const reply = json(error.status, { error: error.message });
        return error.status === 401 ? { ...reply, headers: { 'www-authenticate': 'Bearer realm="proxy admin"' } } : reply;
      }
      this.#options.log?.(`admin: ${(error as Error)?.stack ?? String(error)}`);
      return json(500, { error: 'internal error' });
    }
  }

  /** The endpoint table. */
  #resolve(method: string, pathname: string): { handler?: Handler; isStateChanging: boolean; routeName?: string; allow?: string } {
    const isRead = method === 'GET' || method === 'HEAD';
    const readOnly = (handler: Handler): { handler?: Handler; isStateChanging: boolean; allow?: string } =>
      isRead ? { handler, isStateChanging: false } : { isStateChanging: false, allow: 'GET, HEAD' };
    switch (pathname) {
      case '/':
        return readOnly(async () => ({ status: 302, contentType: 'text/plain; charset=utf-8', body: 'see /status\n', headers: { location: '/status' } }));
      case '/status':
        return readOnly(async () => ({ status: 200, contentType: 'text/html; charset=utf-8', body: renderStatusPage((await this.snapshot()).snapshot) }));
      case '/status.json':
        return readOnly(async () => json(200, (await this.snapshot()).snapshot));
      case '/metrics':
        return readOnly(async () => {
          const { snapshot, metrics } = await this.snapshot();
          return { status: 200, contentType: EXPOSITION_CONTENT_TYPE, body: renderMetrics(snapshot, metrics) };
        });
    }
    const match = /^\/routes\/([^/]+)\/upstreams(?:\/(drain|enable))?$/.exec(pathname);
    if (match === null) return { isStateChanging: false };
    let routeName: string;
    try {
      routeName = decodeURIComponent(match[1] ?? '');
    } catch {
      throw new AdminRequestError(400, `route name '${match[1]}' has a bad %-escape`);
    }
    const action = match[2];
    if (action !== undefined) {
      if (method !== 'POST') return { isStateChanging: true, allow: 'POST' };
      return { handler: (req, url) => this.#setDraining(req, url, routeName, action === 'drain'), isStateChanging: true, routeName };
    }
    if (isRead) return { handler: () => this.#listUpstreams(routeName), isStateChanging: false, routeName };
    if (method === 'PUT') return { handler: (req, url) => this.#register(req, url, routeName), isStateChanging: true, routeName };
    if (method === 'DELETE') return { handler: (req, url) => this.#deregister(req, url, routeName), isStateChanging: true, routeName };
    return { isStateChanging: true, allow: 'GET, HEAD, PUT, DELETE' };
  }

  /**
   * Throws AdminRequestError 400/401/403 unless the request may go on (see the file comment). Two
   * `Authorization` headers are a 400 on every call, as on the proxy listener: node keeps the first
   * in `headers`, another reader may take the last.
   */
  #authorize(clientReq: IncomingMessage, isStateChanging: boolean): void {
    const authorizations = clientReq.headersDistinct['authorization']?.length ?? 0;
    if (authorizations > 1) throw new AdminRequestError(400, `more than one Authorization header (got ${authorizations}): send one`);
    if (!isStateChanging && this.#isLoopback) return;
    const expected = this.#options.config.token;
    if (expected === undefined) {
      throw new AdminRequestError(
        403,
        isStateChanging
          ? 'state-changing admin calls are disabled: set [admin] token in the config to enable them'
          : 'the admin listener is not on a loopback address, so it needs [admin] token even for read-only pages',
      );
    }
    const given = readBearerToken(clientReq.headers.authorization);
    if (given === undefined) throw new AdminRequestError(401, 'missing bearer token (send Authorization: Bearer TOKEN)');
    if (!isTokenEqual(given, expected)) throw new AdminRequestError(401, 'wrong bearer token');
  }

  async #listUpstreams(routeName: string): Promise<Reply> {
    const { snapshot } = await this.snapshot();
    const route = snapshot.routes.find((candidate) => candidate.name === routeName);
    if (route === undefined) throw new AdminRequestError(404, `no route named '${routeName}'`);
    return json(200, route);
  }

  async #register(clientReq: IncomingMessage, url: URL, routeName: string): Promise<Reply> {
    const { target, fields } = namedUpstream(url.searchParams, await readJsonBody(clientReq), 'PUT …/upstreams');
    const { entry, isNew } = this.#options.registry.register(routeName, { ...fields, url: target });
    return json(isNew ? 201 : 200, {
      route: routeName,
      url: entry.config.url,
      origin: entry.config.origin,
      weight: entry.config.weight,
      backup: entry.config.isBackup,
      ttlMs: entry.ttlMs,
      status: isNew ? 'registered' : 'refreshed',
    });
  }

  async #deregister(clientReq: IncomingMessage, url: URL, routeName: string): Promise<Reply> {
    const { target } = namedUpstream(url.searchParams, await readJsonBody(clientReq), 'DELETE …/upstreams', true);
    const isRemoved = this.#options.registry.deregister(routeName, target);
    if (!isRemoved) throw new AdminRequestError(404, `${String(target)} is not registered for route '${routeName}'`);
    return json(200, { route: routeName, url: target, status: 'deregistered' });
  }

  async #setDraining(clientReq: IncomingMessage, url: URL, routeName: string, isDraining: boolean): Promise<Reply> {
    const { target } = namedUpstream(url.searchParams, await readJsonBody(clientReq), `POST …/upstreams/${isDraining ? 'drain' : 'enable'}`, true);
    const config = parseRegisteredUpstream({ url: target }, routeName);
    const route = this.#options.proxy.routes.find((candidate) => candidate.name === routeName);
    if (route === undefined) throw new AdminRequestError(404, `no route named '${routeName}'`);
    const upstream = route.upstreams.find((candidate) => candidate.origin === config.origin);
    if (upstream === undefined) throw new AdminRequestError(404, `route '${routeName}' has no upstream ${config.origin}`);
    const wasDraining = upstream.isDraining;
    upstream.isDraining = isDraining;
    if (wasDraining !== isDraining) {
      this.#options.log?.(`admin: ${isDraining ? 'draining' : 'enabled'} upstream ${upstream.origin} of route ${routeName}`);
    }
    this.#options.onStateChange?.();
    return json(200, { route: routeName, origin: upstream.origin, draining: isDraining, activeRequests: upstream.activeRequests });
  }
}

/**
 * The upstream a call names and the body's other fields, by the one rule of every call that names
 * an upstream (PUT, DELETE, drain, enable): exactly one `url`, from the query (`?url=U`) or the body
 * (`{"url": U}`), and no other query parameter. `call` (`DELETE …/upstreams`) goes into the hints.
 * The body's other fields (PUT's `weight`, `backup`, `ttl`) are returned as they are; with
 * `isUrlOnly` (DELETE, drain, enable) there may be none.
 * @throws AdminRequestError 400 when the body is not a JSON object, a query parameter is not `url`,
 *   a body key is not `url` (with `isUrlOnly`), or the upstream is named twice or not at all; the
 *   message says where each `url` came from.
 */
function namedUpstream(query: URLSearchParams, body: unknown, call: string, isUrlOnly = false): { readonly target: unknown; readonly fields: Readonly<Record<string, unknown>> } {
  if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body))) {
    throw new AdminRequestError(400, `expected a JSON object like {"url": "http://127.0.0.1:9003"}, got ${Array.isArray(body) ? 'an array' : JSON.stringify(body)}`);
  }
  const fields = (body ?? {}) as Record<string, unknown>;
  // A PUT's other keys are the registry's to check; the other calls take `url` alone.
  const unknownKey = isUrlOnly ? Object.keys(fields).find((key) => key !== 'url') : undefined;
  if (unknownKey !== undefined) throw new AdminRequestError(400, `unknown key ${JSON.stringify(unknownKey)}: ${call} takes {"url": …} only`);
  for (const key of query.keys()) {
    if (key !== 'url') throw new AdminRequestError(400, `unknown query parameter ${JSON.stringify(key)}: the query names the upstream only (?url=…); weight, backup and ttl go in a PUT's body`);
  }
  const fromQuery = query.getAll('url');
  const named: unknown[] = 'url' in fields ? [...fromQuery, fields['url']] : fromQuery;
  const hint = `${call}?url=http://host:port or a {"url": …} body`;
  if (named.length > 1) {
    const where = `${fromQuery.length} in the query${named.length > fromQuery.length ? ', 1 in the body' : ''}`;
    throw new AdminRequestError(400, `name the upstream once: got ${named.length} urls (${where}); ${hint}`);
  }
  if (named.length === 0) throw new AdminRequestError(400, `say which upstream: ${hint}`);
  return { target: named[0], fields };
}

/**
 * Answers a CONNECT and closes: 405 with an empty `Allow` (a 405 must carry one, RFC 9110 §15.5.6;
 * the `host:port` target is no resource of the admin listener's, §10.2.1), as the proxy listener
 * answers it; nginx answers 400. What the client still sends is read and dropped; the socket is
 * destroyed once the client closes, or 1 s after the answer.
 */
function refuseConnect(socket: Duplex): void {
  const body = `${JSON.stringify({ error: 'method CONNECT not allowed: the admin listener tunnels nothing' }, null, 2)}\n`;
  const linger = setTimeout(() => socket.destroy(), 1_000);
  socket.once('close', () => clearTimeout(linger));
  socket.on('error', () => socket.destroy());
  socket.resume();
  socket.end(
    'HTTP/1.1 405 Method Not Allowed\r\nallow: \r\ncontent-type: application/json; charset=utf-8\r\ncache-control: no-store\r\n' +
      `x-content-type-options: nosniff\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

function json(status: number, value: unknown): Reply {
  return { status, contentType: 'application/json; charset=utf-8', body: `${JSON.stringify(value, null, 2)}\n` };
}

function send(clientRes: ServerResponse, reply: Reply): void {
  clientRes.writeHead(reply.status, {
    'content-type': reply.contentType,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    ...reply.headers,
  });
  clientRes.end(reply.body);
}

/**
 * Reads a JSON body of at most MAX_ADMIN_BODY_BYTES. An empty body is undefined. Throws
 * AdminRequestError 400 (not JSON, or a key twice in one object: duplicate-json-key.ts), 413 (too
 * large).
 */
async function readJsonBody(clientReq: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of clientReq as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_ADMIN_BODY_BYTES) throw new AdminRequestError(413, `body larger than ${MAX_ADMIN_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch (error) {
    throw new AdminRequestError(400, `body is not JSON: ${(error as Error).message}`);
  }
  const duplicate = firstDuplicateKey(text);
  if (duplicate !== undefined) throw new AdminRequestError(400, `body has the key ${JSON.stringify(duplicate)} more than once: say it once`);
  return body;
}
