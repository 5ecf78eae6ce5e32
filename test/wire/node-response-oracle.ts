/**
 * The reference side of the differential test: node's own HTTP client parser (llhttp) reading the
 * same raw bytes. A `net` server on 127.0.0.1:0 answers `GET /case/<id>` with the case's bytes and
 * closes; `http.request` reads them and we record what node:http made of it.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface NodeVerdict {
  /** node:http delivered a complete response (`res.complete`), or a 101 through its `upgrade` event. */
  isAccepted: boolean;
  /** Error code when not accepted (`HPE_…`, `ECONNRESET`, `timeout`). */
  error: string | undefined;
  /** node:http raised a parse error after the response was complete (bytes after the message). */
  hasLaterError: boolean;
  informational: [number, string[]][];
  statusCode: number | undefined;
  statusMessage: string | undefined;
  httpVersion: string | undefined;
  rawHeaders: string[] | undefined;
  body: string; // latin1
  rawTrailers: string[];
  /** For an upgrade: the bytes node handed over after the head (`head` plus later socket data), latin1. */
  upgradeRest: string | undefined;
}

export interface NodeOracle {
  parse(id: number, method: string, isUpgrade: boolean): Promise<NodeVerdict>;
  close(): Promise<void>;
}

/** Starts the raw-bytes server. `responseFor(id)` gives the bytes to send for `/case/<id>`. */
export async function startNodeOracle(responseFor: (id: number) => Buffer, caseTimeoutMs = 5000): Promise<NodeOracle> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let request = '';
    const onData = (data: Buffer): void => {
      request += data.toString('latin1');
      if (!request.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      const id = Number(/^\w+ \/case\/(\d+) /.exec(request)?.[1]);
      socket.end(responseFor(id));
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const parse = (id: number, method: string, isUpgrade: boolean): Promise<NodeVerdict> =>
    new Promise((resolve) => {
      const verdict: NodeVerdict = {
        isAccepted: false,
        error: undefined,
        hasLaterError: false,
        informational: [],
        statusCode: undefined,
        statusMessage: undefined,
        httpVersion: undefined,
        rawHeaders: undefined,
        body: '',
        rawTrailers: [],
        upgradeRest: undefined,
      };
      let response: http.IncomingMessage | undefined;
      let requestError: string | undefined;
      const body: Buffer[] = [];
      const upgradeRest: Buffer[] = [];
      let isUpgraded = false;
      let isTimedOut = false;

      let isFinished = false;
      const finish = (): void => {
        if (isFinished) return;
        isFinished = true;
        clearTimeout(timer);
        setImmediate(() => {
          // a parse error of bytes after the message arrives around the response's close; wait for it
          if (isUpgraded) {
            verdict.isAccepted = true;
            verdict.upgradeRest = Buffer.concat(upgradeRest).toString('latin1');
          } else if (response?.complete === true && !isTimedOut) {
            verdict.isAccepted = true;
            verdict.hasLaterError = requestError !== undefined;
            verdict.body = Buffer.concat(body).toString('latin1');
            verdict.rawTrailers = response.rawTrailers;
          } else {
            verdict.error = isTimedOut ? 'timeout' : (requestError ?? (response === undefined ? 'no response' : 'incomplete'));
          }
          resolve(verdict);
        });
      };
      const timer = setTimeout(() => {
        isTimedOut = true;
        request.destroy();
        finish();
      }, caseTimeoutMs);

      const headers: Record<string, string> = isUpgrade ? { Connection: 'Upgrade', Upgrade: 'test' } : {};
      const request = http.request({ host: '127.0.0.1', port, path: `/case/${id}`, method, agent: false, headers });
      const recordHead = (message: http.IncomingMessage): void => {
        verdict.statusCode = message.statusCode;
        verdict.statusMessage = message.statusMessage;
        verdict.httpVersion = message.httpVersion;
        verdict.rawHeaders = message.rawHeaders;
      };
      request.on('information', (info) => verdict.informational.push([info.statusCode, info.rawHeaders]));
      request.on('upgrade', (message, socket, head) => {
        recordHead(message);
        isUpgraded = true;
        upgradeRest.push(head);
        socket.on('data', (data: Buffer) => upgradeRest.push(data));
        socket.on('error', () => {});
        socket.on('close', finish);
      });
      request.on('response', (message) => {
        response = message;
        recordHead(message);
        message.on('data', (data: Buffer) => body.push(data));
        message.on('error', () => {}); // the verdict comes from `complete` and the request's error
        message.on('close', finish);
      });
      request.on('error', (error: NodeJS.ErrnoException) => {
        requestError ??= error.code ?? error.message;
        if (response === undefined && !isUpgraded) finish();
      });
      request.on('close', () => {
        if (response === undefined && !isUpgraded) finish();
      });
      request.end();
    });

  const close = async (): Promise<void> => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { parse, close };
}
