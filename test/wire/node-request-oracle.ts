/**
 * The reference side of the request differential test: node's own server parser (llhttp, strict
 * mode) reading the same raw bytes. A real `http.createServer` on 127.0.0.1:0 gets each case on its
 * own connection (written at once, then half-closed); we record every request node read on it, in
 * order, with its body bytes and trailers, and the parse error that ended the connection, if any.
 *
 * The server never answers (a response would make node close or delay the connection in ways that
 * depend on the answer, not the parser): it only listens. `requireHostHeader` is off, because
 * whether a Host is required is the request path's rule (src/gateway/request-checks.ts), not the
 * parser's; `Expect` is recorded through `checkContinue` / `checkExpectation`, so node neither
 * writes `100 Continue` nor answers 417 itself.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** One request as node:http read it. */
export interface NodeRequest {
  /** The server event: `request`, `checkContinue`, `checkExpectation`, `upgrade` or `connect`. */
  event: string;
  method: string;
  url: string;
  httpVersion: string;
  rawHeaders: string[];
  /** `res.shouldKeepAlive` as node decided it from the head; undefined for `upgrade` / `connect`. */
  shouldKeepAlive: boolean | undefined;
  /** The body bytes node delivered, latin1 (empty for `upgrade` / `connect`). */
  body: string;
  rawTrailers: string[];
  /** The whole body was read (`req.complete`); true for `upgrade` / `connect` (node reads no body for them). */
  isComplete: boolean;
}

/** What node:http did with one connection's bytes. */
export interface NodeConnectionVerdict {
  requests: NodeRequest[];
  /** `HPE_…` code of the clientError that ended the connection, `timeout`, or undefined. */
  error: string | undefined;
}

export interface NodeRequestOracle {
  /** Sends `bytes` on a new connection, half-closes it, and resolves when node closed it. */
  parse(bytes: Buffer): Promise<NodeConnectionVerdict>;
  close(): Promise<void>;
}

/** Starts the server. `caseTimeoutMs` bounds one case (node closes every case's connection at once). */
export async function startNodeRequestOracle(caseTimeoutMs = 5000): Promise<NodeRequestOracle> {
  // verdicts by the client's local port = the server side's remotePort
  const pending = new Map<number, NodeConnectionVerdict>();
  const verdictOf = (socket: net.Socket): NodeConnectionVerdict | undefined => pending.get(socket.remotePort ?? -1);

  const server = http.createServer({ requireHostHeader: false });
  const record = (event: string) => (req: http.IncomingMessage, res: http.ServerResponse) => {
    const verdict = verdictOf(req.socket);
    if (verdict === undefined) return;
    const request: NodeRequest = {
      event,
      method: req.method as string,
      url: req.url as string,
      httpVersion: req.httpVersion,
      rawHeaders: req.rawHeaders,
      shouldKeepAlive: res.shouldKeepAlive,
      body: '',
      rawTrailers: [],
      isComplete: false,
    };
    verdict.requests.push(request);
    req.on('data', (chunk: Buffer) => {
      request.body += chunk.toString('latin1');
    });
    req.on('end', () => {
      request.isComplete = req.complete;
      request.rawTrailers = req.rawTrailers;
    });
    req.on('error', () => {});
  };
  server.on('request', record('request'));
  server.on('checkContinue', record('checkContinue'));
  server.on('checkExpectation', record('checkExpectation'));
  const recordTunnel = (event: string) => (req: http.IncomingMessage, socket: net.Socket) => {
    verdictOf(socket)?.requests.push({
      event,
      method: req.method as string,
      url: req.url as string,
      httpVersion: req.httpVersion,
      rawHeaders: req.rawHeaders,
      shouldKeepAlive: undefined,
      body: '',
      rawTrailers: [],
      isComplete: true,
    });
    socket.destroy();
  };
  server.on('upgrade', recordTunnel('upgrade'));
  server.on('connect', recordTunnel('connect'));
  server.on('clientError', (error: Error & { code?: string }, socket: net.Socket) => {
    const verdict = verdictOf(socket);
    if (verdict !== undefined) verdict.error ??= error.code;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const parse = (bytes: Buffer): Promise<NodeConnectionVerdict> =>
    new Promise((resolve) => {
      const verdict: NodeConnectionVerdict = { requests: [], error: undefined };
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
        // node's own events for this connection (a body's last 'data' and 'end') may still be queued
        setImmediate(() => {
          pending.delete(localPort);
          resolve(verdict);
        });
      });
    });

  const close = (): Promise<void> =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });

  return { parse, close };
}
