/**
 * Test kit for the health, failover and retry integration tests: take a backend away and bring it
 * back on the same port (what an operator's restart looks like to the proxy), a port with nothing
 * listening, a raw backend that reads one whole HTTP/1.1 request before misbehaving, and a bounded
 * keep-alive client for load. Real sockets on 127.0.0.1 only.
 */
import http from 'node:http';
import net from 'node:net';
import type { Backend } from '../helpers/proxy-harness.js';

/** A port on 127.0.0.1 with nothing listening on it (connects get ECONNREFUSED). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Listens again on the port `backend` had before `backend.close()`: the same upstream, restarted. */
export function restartBackend(backend: Backend): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    backend.server.once('error', reject);
    backend.server.listen(backend.port, '127.0.0.1', () => {
      backend.server.off('error', reject);
      resolve();
    });
  });
}

/** One request as a raw backend saw it: the head text and the body bytes (Content-Length framing only). */
export interface RawRequest {
  readonly head: string;
  readonly body: Buffer;
}

/**
 * Calls `onRequest` once the socket has delivered one whole request: the head, and as many body bytes
 * as its Content-Length says (0 when absent). Bytes after that are ignored.
 */
export function onWholeRequest(socket: net.Socket, onRequest: (request: RawRequest) => void): void {
  let received = Buffer.alloc(0);
  let isDone = false;
  socket.on('data', (chunk: Buffer) => {
    if (isDone) return;
    received = Buffer.concat([received, chunk]);
    const headEnd = received.indexOf('\r\n\r\n');
    if (headEnd < 0) return;
    const head = received.subarray(0, headEnd).toString('latin1');
    const contentLength = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
    const body = received.subarray(headEnd + 4);
    if (body.length < contentLength) return;
    isDone = true;
    onRequest({ head, body: body.subarray(0, contentLength) });
  });
}

export interface LoadResult {
  /** Status per request, in request order (0 = the request failed at the client: reset, error). */
  readonly statuses: number[];
  /** Client-side errors, in the order they happened. */
  readonly errors: string[];
}

/**
 * Sends `total` GET requests for `path` to `port` over at most `concurrency` keep-alive connections
 * (one bounded agent), `concurrency` requests in flight at any time. `onCompleted(n)` runs after the
 * n-th completion (1-based), so a test can act "in the middle" of the run.
 */
export async function runLoad(
  port: number,
  options: { total: number; concurrency: number; path: string; onCompleted?: (completed: number) => void },
): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const statuses = new Array<number>(options.total).fill(0);
  const errors: string[] = [];
  let next = 0;
  let completed = 0;
  const worker = async (): Promise<void> => {
    while (next < options.total) {
      const index = next++;
      try {
        statuses[index] = await get(agent, port, options.path);
      } catch (error) {
        errors.push(`request ${index}: ${String(error)}`);
      }
      options.onCompleted?.(++completed);
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, worker));
  } finally {
    agent.destroy();
  }
  return { statuses, errors };
}

function get(agent: http.Agent, port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const clientReq = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    clientReq.on('error', reject);
  });
}
