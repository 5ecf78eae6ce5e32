/**
 * The reference side of the request differential test: node's own server parser (llhttp, strict
 * mode) reading the same raw bytes. A real `http.createServer` on 127.0.0.1:0 (default options) gets
 * each case on its own connection; we record which event node raised for it and, for a request,
 * what node:http made of the head.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** What node:http did with one request head. */
export interface NodeRequestVerdict {
  /** The server event: `request` (a normal request), `clientError`, `upgrade`, `connect`, `checkContinue`, `checkExpectation`, or `none`. */
  event: string;
  /** `HPE_…` code of a clientError. */
  error: string | undefined;
  method: string | undefined;
  url: string | undefined;
  httpVersion: string | undefined;
  rawHeaders: string[] | undefined;
  /** `res.shouldKeepAlive` as node decided it from the head (before anything we do). */
  shouldKeepAlive: boolean | undefined;
}

export interface NodeRequestOracle {
  /** Sends `bytes` on a new connection, half-closes it, and resolves when node closed it. */
  parse(bytes: Buffer): Promise<NodeRequestVerdict>;
  close(): Promise<void>;
}

/** Starts the server. `caseTimeoutMs` bounds one case (node should answer every case at once). */
export async function startNodeRequestOracle(caseTimeoutMs = 3000): Promise<NodeRequestOracle> {
  // verdicts by the client's local port = the server side's remotePort
  const pending = new Map<number, NodeRequestVerdict>();
  const verdictOf = (socket: net.Socket): NodeRequestVerdict | undefined => pending.get(socket.remotePort ?? -1);

  const server = http.createServer();
  const record = (event: string) => (req: http.IncomingMessage, res: http.ServerResponse) => {
    const verdict = verdictOf(req.socket);
    if (verdict !== undefined && verdict.event === 'none') {
      verdict.event = event;
      verdict.method = req.method;
      verdict.url = req.url;
      verdict.httpVersion = req.httpVersion;
      verdict.rawHeaders = req.rawHeaders;
      verdict.shouldKeepAlive = res.shouldKeepAlive;
    }
    res.writeHead(200, { 'content-length': '0', connection: 'close' });
    res.end();
  };
  server.on('request', record('request'));
  server.on('checkContinue', record('checkContinue'));
  server.on('checkExpectation', record('checkExpectation'));
  const recordTunnel = (event: string) => (req: http.IncomingMessage, socket: net.Socket) => {
    const verdict = verdictOf(socket);
    if (verdict !== undefined && verdict.event === 'none') {
      verdict.event = event;
      verdict.method = req.method;
      verdict.url = req.url;
    }
    socket.destroy();
  };
  server.on('upgrade', recordTunnel('upgrade'));
  server.on('connect', recordTunnel('connect'));
  server.on('clientError', (error: Error & { code?: string }, socket: net.Socket) => {
    const verdict = verdictOf(socket);
    if (verdict !== undefined && verdict.event === 'none') {
      verdict.event = 'clientError';
      verdict.error = error.code;
    }
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const parse = (bytes: Buffer): Promise<NodeRequestVerdict> =>
    new Promise((resolve) => {
      const verdict: NodeRequestVerdict = {
        event: 'none',
        error: undefined,
        method: undefined,
        url: undefined,
        httpVersion: undefined,
        rawHeaders: undefined,
        shouldKeepAlive: undefined,
      };
      let localPort = -1;
      const socket = net.connect(port, '127.0.0.1', () => {
        localPort = socket.localPort as number;
        pending.set(localPort, verdict);
        socket.end(bytes);
      });
      const timer = setTimeout(() => {
        verdict.error ??= 'timeout';
        socket.destroy();
      }, caseTimeoutMs);
      socket.on('data', () => {});
      socket.on('error', () => {});
      socket.on('close', () => {
        clearTimeout(timer);
        pending.delete(localPort);
        resolve(verdict);
      });
    });

  const close = (): Promise<void> =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });

  return { parse, close };
}
