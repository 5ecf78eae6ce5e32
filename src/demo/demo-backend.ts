/**
 * The tutorial's two demo web servers (SPEC 6): `web1` demands Basic credentials (`tom:123` unless
 * `--user` says otherwise) and `web2` is open; each answers `NAME, from ip: IP` with the client IP
 * it saw — the first X-Forwarded-For entry when a proxy sent one, else the TCP peer. Both answer HEAD,
 * so health checks can probe them.
 */
import http from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { normalizeClientIp } from '../gateway/client-address.js';

export interface DemoBackendOptions {
  /** Shown in every answer: `web1`. */
  readonly name: string;
  readonly port: number;
  /** Default 127.0.0.1 (loopback only: the demo is not for the network). */
  readonly host?: string;
  /** `user:password` to demand with Basic auth; undefined = open. */
  readonly credentials?: string;
}

/** Starts one demo backend; resolves once it listens. */
export async function startDemoBackend(options: DemoBackendOptions): Promise<http.Server> {
  const expected = options.credentials === undefined ? undefined : Buffer.from(`Basic ${Buffer.from(options.credentials).toString('base64')}`);
  const server = http.createServer((req, res) => {
    if (expected !== undefined && !hasCredentials(req.headers.authorization, expected)) {
      res.writeHead(401, { 'WWW-Authenticate': `Basic realm="${options.name}"`, 'Content-Type': 'text/plain' });
      res.end(`${options.name}: authentication required\n`);
      return;
    }
    const forwardedFor = req.headers['x-forwarded-for'];
    const clientIp = typeof forwardedFor === 'string' ? forwardedFor.split(',')[0]!.trim() : normalizeClientIp(req.socket.remoteAddress);
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(`${options.name}, from ip: ${clientIp}\n`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

function hasCredentials(authorization: string | undefined, expected: Buffer): boolean {
  if (authorization === undefined) return false;
  const given = Buffer.from(authorization);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
