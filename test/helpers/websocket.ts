/**
 * A small WebSocket kit for tests, written by hand from RFC 6455 so the proxy's upgrade tunnel can be
 * exercised with real sockets and no dependency: the opening handshake (section 4, with
 * `Sec-WebSocket-Accept` = base64(SHA-1(key + GUID)) from section 1.3), a frame codec (section 5.2:
 * 7-, 16- and 64-bit payload lengths, client masking from section 5.3), an echo server on node:http's
 * `'upgrade'` event, and a client on a raw node:net socket.
 *
 * Deliberately small: no fragmentation (a non-final frame is a protocol error here), no extensions,
 * no subprotocols. Close and ping frames are handled (section 5.5). The client can put its first
 * frame in the same write as the handshake, to test bytes that arrive together with the upgrade
 * request (node:http hands those to the `'upgrade'` handler as `head`).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';

/** RFC 6455 section 1.3: the GUID appended to the client's key before hashing. */
export const WEBSOCKET_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/** Frame opcodes, RFC 6455 section 5.2. */
export const Opcode = {
  continuation: 0x0,
  text: 0x1,
  binary: 0x2,
  close: 0x8,
  ping: 0x9,
  pong: 0xa,
} as const;

/** `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)) (RFC 6455 section 4.2.2). */
export function acceptValueFor(key: string): string {
  return createHash('sha1').update(key + WEBSOCKET_GUID).digest('base64');
}

// ---- frame codec ----------------------------------------------------------------------------------

/** One decoded frame; `payload` is already unmasked. */
export interface Frame {
  readonly isFinal: boolean;
  readonly opcode: number;
  readonly isMasked: boolean;
  readonly payload: Buffer;
}

/**
 * Encodes one frame (RFC 6455 section 5.2). Payload lengths up to 125 use the 7-bit field, up to
 * 65 535 the 16-bit one, above that the 64-bit one.
 *
 * @param payload - a string is sent as its UTF-8 bytes.
 * @param options.mask - `true` masks with 4 random bytes (what clients must do), a 4-byte Buffer masks
 *   with that key (for the RFC's examples); default false (what servers do).
 * @param options.isFinal - the FIN bit; default true.
 */
export function encodeFrame(
  opcode: number,
  payload: Buffer | string,
  options: { readonly mask?: boolean | Buffer; readonly isFinal?: boolean } = {},
): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const maskKey = options.mask === true ? randomBytes(4) : options.mask === false ? undefined : options.mask;
  if (maskKey !== undefined && maskKey.length !== 4) throw new RangeError(`mask key must be 4 bytes, got ${maskKey.length}`);
  const lengthBytes = body.length <= 125 ? 0 : body.length <= 0xffff ? 2 : 8;
  const header = Buffer.alloc(2 + lengthBytes + (maskKey === undefined ? 0 : 4));
  header[0] = ((options.isFinal ?? true) ? 0x80 : 0) | (opcode & 0x0f);
  const maskBit = maskKey === undefined ? 0 : 0x80;
  if (lengthBytes === 0) {
    header[1] = maskBit | body.length;
  } else if (lengthBytes === 2) {
    header[1] = maskBit | 126;
    header.writeUInt16BE(body.length, 2);
  } else {
    header[1] = maskBit | 127;
    header.writeBigUInt64BE(BigInt(body.length), 2);
  }
  if (maskKey === undefined) return Buffer.concat([header, body]);
  maskKey.copy(header, 2 + lengthBytes);
  return Buffer.concat([header, applyMask(body, maskKey)]);
}

/** XORs `bytes` with the 4-byte key, into a new Buffer (RFC 6455 section 5.3; masking and unmasking are the same). */
function applyMask(bytes: Buffer, maskKey: Buffer): Buffer {
  const out = Buffer.allocUnsafe(bytes.length);
  for (let i = 0; i < bytes.length; i++) out[i] = bytes[i]! ^ maskKey[i & 3]!;
  return out;
}

/** Thrown by FrameDecoder for bytes that are not a frame this kit accepts. */
export class WebSocketProtocolError extends Error {}

/**
 * Incremental frame decoder: `push` each chunk as it arrives, in any sizes (one byte at a time
 * works), and get back the frames completed by it. Buffers only what an incomplete frame needs.
 *
 * @throws WebSocketProtocolError for reserved bits, a control frame that is fragmented or longer than
 *   125 bytes, or a 64-bit length with its top bit set or beyond 2^53.
 */
export class FrameDecoder {
  #chunks: Buffer[] = [];
  #byteCount = 0;

  /** Bytes received that do not yet form a whole frame. */
  get bufferedBytes(): number {
    return this.#byteCount;
  }

  push(chunk: Buffer): Frame[] {
    if (chunk.length > 0) {
      this.#chunks.push(chunk);
      this.#byteCount += chunk.length;
    }
    const frames: Frame[] = [];
    for (let frame = this.#nextFrame(); frame !== undefined; frame = this.#nextFrame()) frames.push(frame);
    return frames;
  }

  #nextFrame(): Frame | undefined {
    if (this.#byteCount < 2) return undefined;
    const head = this.#peek(Math.min(this.#byteCount, 14)); // the longest header is 2 + 8 + 4 bytes
    const first = head[0]!;
    const second = head[1]!;
    if ((first & 0x70) !== 0) throw new WebSocketProtocolError('reserved bits set (no extension was negotiated)');
    const isFinal = (first & 0x80) !== 0;
    const opcode = first & 0x0f;
    const isMasked = (second & 0x80) !== 0;
    const lengthField = second & 0x7f;
    const lengthBytes = lengthField === 126 ? 2 : lengthField === 127 ? 8 : 0;
    const headerLength = 2 + lengthBytes + (isMasked ? 4 : 0);
    if (head.length < headerLength) return undefined;

    let payloadLength = lengthField;
    if (lengthBytes === 2) payloadLength = head.readUInt16BE(2);
    if (lengthBytes === 8) {
      const long = head.readBigUInt64BE(2);
      if (long > BigInt(Number.MAX_SAFE_INTEGER)) throw new WebSocketProtocolError(`64-bit payload length too large: ${long}`);
      payloadLength = Number(long);
    }
    if (opcode >= 0x8 && (!isFinal || payloadLength > 125)) {
      throw new WebSocketProtocolError(`control frame ${opcode} is fragmented or longer than 125 bytes`);
    }
    if (this.#byteCount < headerLength + payloadLength) return undefined;

    const bytes = this.#take(headerLength + payloadLength);
    const body = bytes.subarray(headerLength);
    const payload = isMasked ? applyMask(body, bytes.subarray(headerLength - 4, headerLength)) : Buffer.from(body);
    return { isFinal, opcode, isMasked, payload };
  }

  /** The first `count` buffered bytes (count ≤ bufferedBytes), without consuming them. */
  #peek(count: number): Buffer {
    const first = this.#chunks[0]!;
    if (first.length >= count) return first.subarray(0, count);
    const parts: Buffer[] = [];
    let collected = 0;
    for (const chunk of this.#chunks) {
      if (collected >= count) break;
      parts.push(chunk);
      collected += chunk.length;
    }
    return Buffer.concat(parts).subarray(0, count);
  }

  /** Removes and returns the first `count` buffered bytes (count ≤ bufferedBytes). */
  #take(count: number): Buffer {
    const parts: Buffer[] = [];
    let needed = count;
    let used = 0; // whole chunks consumed, removed in one splice (shift() per chunk would be quadratic)
    while (needed > 0) {
      const chunk = this.#chunks[used]!;
      if (chunk.length <= needed) {
        parts.push(chunk);
        used++;
        needed -= chunk.length;
      } else {
        parts.push(chunk.subarray(0, needed));
        this.#chunks[used] = chunk.subarray(needed);
        needed = 0;
      }
    }
    this.#chunks.splice(0, used);
    this.#byteCount -= count;
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }
}

/** Close frame payload: 2-byte status code then UTF-8 reason (RFC 6455 section 5.5.1). */
function closePayload(code: number, reason = ''): Buffer {
  const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
  payload.writeUInt16BE(code, 0);
  payload.write(reason, 2);
  return payload;
}

// ---- echo server ----------------------------------------------------------------------------------

/** What the echo server saw on one upgraded connection. Fields update live. */
export interface EchoConnection {
  /** The upgrade request's URL and headers as the server received them (e.g. to check forwarded headers). */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** Bytes node:http passed along with the handshake (`head`): > 0 when the first frame came in the same packet. */
  readonly headBytes: number;
  /** Bytes received after the handshake, `head` included. */
  bytesReceived: number;
  /** Text and binary messages received (and echoed). */
  messagesReceived: number;
  /** The client's side ended (TCP FIN seen). */
  hasEnded: boolean;
  isClosed: boolean;
  /** Resolves when the socket is closed. */
  readonly closed: Promise<void>;
}

export interface EchoServer {
  readonly port: number;
  /** Every accepted upgrade, in order. */
  readonly connections: readonly EchoConnection[];
  /** Accepted upgrades so far. */
  readonly connectionCount: number;
  /** Upgraded sockets currently open. */
  readonly openSocketCount: number;
  /** Upgrade requests refused with 400 (bad or missing key, version, or headers). */
  readonly rejectedCount: number;
  /** Destroys every socket and stops listening. */
  close(): Promise<void>;
}

/**
 * Starts a WebSocket echo server on 127.0.0.1, port 0. On `'upgrade'` it checks the request (GET,
 * `Upgrade: websocket`, `Connection: upgrade`, `Sec-WebSocket-Version: 13`, a key of 16 base64
 * bytes), answers `101` with the accept value, decodes the `head` bytes and then the socket's data,
 * and echoes each text or binary message with the same opcode (unmasked, as a server must). Pings get
 * pongs; a close frame is answered with a close frame and the socket ended. When the client
 * half-closes, everything received before is still echoed, then the server ends its side.
 * A plain request (no upgrade) gets `200 websocket echo server`.
 */
export async function startEchoServer(): Promise<EchoServer> {
  const connections: EchoConnection[] = [];
  const sockets = new Set<Socket>();
  let rejectedCount = 0;

  const server = createServer((request, response) => {
    response.end('websocket echo server\n');
  });
  server.on('upgrade', (request, duplex, head: Buffer) => {
    const socket = duplex as Socket;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const key = request.headers['sec-websocket-key'];
    const isValid =
      request.method === 'GET' &&
      request.headers.upgrade?.toLowerCase() === 'websocket' &&
      /(^|,)\s*upgrade\s*(,|$)/i.test(request.headers.connection ?? '') &&
      request.headers['sec-websocket-version'] === '13' &&
      typeof key === 'string' &&
      Buffer.from(key, 'base64').length === 16;
    if (!isValid) {
      rejectedCount++;
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    socket.setNoDelay(true);
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\n' +
        'Upgrade: websocket\r\n' +
        'Connection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${acceptValueFor(key)}\r\n\r\n`,
    );
    connections.push(serveEcho(socket, request.url ?? '', request.headers, head));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    port,
    connections,
    get connectionCount() {
      return connections.length;
    },
    get openSocketCount() {
      return connections.filter((connection) => !connection.isClosed).length;
    },
    get rejectedCount() {
      return rejectedCount;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The echo loop of one upgraded socket. */
function serveEcho(socket: Socket, url: string, headers: IncomingHttpHeaders, head: Buffer): EchoConnection {
  const decoder = new FrameDecoder();
  let hasSentClose = false;
  let resolveClosed!: () => void;
  const connection: EchoConnection = {
    url,
    headers,
    headBytes: head.length,
    bytesReceived: 0,
    messagesReceived: 0,
    hasEnded: false,
    isClosed: false,
    closed: new Promise((resolve) => (resolveClosed = resolve)),
  };
  const sendClose = (code: number): void => {
    if (hasSentClose) return;
    hasSentClose = true;
    socket.end(encodeFrame(Opcode.close, closePayload(code)));
  };
  const onBytes = (bytes: Buffer): void => {
    connection.bytesReceived += bytes.length;
    let frames: Frame[];
    try {
      frames = decoder.push(bytes);
    } catch {
      socket.destroy();
      return;
    }
    for (const frame of frames) {
      if (hasSentClose) return;
      if (!frame.isMasked || !frame.isFinal) {
        sendClose(1002); // protocol error: client frames must be masked; fragmentation unsupported here
      } else if (frame.opcode === Opcode.text || frame.opcode === Opcode.binary) {
        connection.messagesReceived++;
        socket.write(encodeFrame(frame.opcode, frame.payload));
      } else if (frame.opcode === Opcode.ping) {
        socket.write(encodeFrame(Opcode.pong, frame.payload));
      } else if (frame.opcode === Opcode.close) {
        sendClose(frame.payload.length >= 2 ? frame.payload.readUInt16BE(0) : 1000);
      } else if (frame.opcode !== Opcode.pong) {
        sendClose(1002);
      }
    }
  };
  socket.on('data', onBytes);
  socket.on('end', () => {
    connection.hasEnded = true;
    socket.end(); // after every echo queued above: half-close answered, then both sides are closed
  });
  socket.on('close', () => {
    connection.isClosed = true;
    resolveClosed();
  });
  if (head.length > 0) onBytes(head);
  return connection;
}

// ---- client ---------------------------------------------------------------------------------------

/** A text or binary message; `text` is `data` decoded as UTF-8. */
export interface WebSocketMessage {
  readonly opcode: number;
  readonly data: Buffer;
  readonly text: string;
}

/** The handshake got something other than a valid 101. Carries the response, so tests can check a relayed 200 or 426. */
export class WebSocketHandshakeError extends Error {
  constructor(
    message: string,
    /** 0 when no status line was received. */
    readonly statusCode: number,
    readonly headers: Readonly<Record<string, string>>,
    /** The response body as far as it arrived (all of it when Content-Length was given). */
    readonly body: string,
  ) {
    super(message);
  }
}

export interface WebSocketClient {
  /** The raw socket, e.g. for `bytesWritten`/`bytesRead`. */
  readonly socket: Socket;
  /** The 101 response's headers, lowercased names. */
  readonly responseHeaders: Readonly<Record<string, string>>;
  /** Sends a masked text frame (string) or binary frame (Buffer). */
  send(data: string | Buffer): void;
  /** Sends a masked ping; the pong is not a message (see `pongs`). */
  ping(payload?: Buffer | string): void;
  /** Pong payloads received, in order. */
  readonly pongs: readonly Buffer[];
  /** The next text or binary message, in arrival order. Rejects if the connection closes first. */
  nextMessage(): Promise<WebSocketMessage>;
  /** Half-close: TCP FIN without a close frame; messages can still arrive. */
  end(): void;
  /** Closing handshake: sends a close frame with `code` (default 1000), resolves when the socket has closed. */
  close(code?: number): Promise<void>;
  /** Abrupt close. */
  destroy(): void;
  /** Resolves when the peer ends its side (TCP FIN). */
  readonly ended: Promise<void>;
  /** Resolves when the socket is closed, however. */
  readonly closed: Promise<void>;
  /** The status code of the close frame received, if any. */
  readonly closeCode: number | undefined;
}

/**
 * Opens a WebSocket on 127.0.0.1:`port` with a raw node:net socket: writes the handshake (and, with
 * `firstMessage`, a first frame in the SAME write), checks the 101, `Upgrade`, `Connection` and
 * `Sec-WebSocket-Accept`, then feeds any bytes that came with the 101 to the frame decoder.
 *
 * @param options.headers - extra request headers; a `host` here replaces the default `127.0.0.1:PORT`.
 * @param options.firstMessage - sent in the same write as the handshake (string = text, Buffer = binary).
 * @throws WebSocketHandshakeError for a non-101 answer (with its status, headers and body) or a 101
 *   with wrong headers; the socket is destroyed.
 */
export function connectWebSocket(
  port: number,
  path: string,
  options: { readonly headers?: Readonly<Record<string, string>>; readonly firstMessage?: string | Buffer } = {},
): Promise<WebSocketClient> {
  const key = randomBytes(16).toString('base64');
  const extraHeaders = options.headers ?? {};
  const hasHost = Object.keys(extraHeaders).some((name) => name.toLowerCase() === 'host');
  const requestHead =
    `GET ${path} HTTP/1.1\r\n` +
    (hasHost ? '' : `Host: 127.0.0.1:${port}\r\n`) +
    'Upgrade: websocket\r\n' +
    'Connection: Upgrade\r\n' +
    `Sec-WebSocket-Key: ${key}\r\n` +
    'Sec-WebSocket-Version: 13\r\n' +
    Object.entries(extraHeaders)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('') +
    '\r\n';
  const firstFrame = options.firstMessage === undefined ? Buffer.alloc(0) : messageFrame(options.firstMessage);

  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    socket.setNoDelay(true);
    let received = Buffer.alloc(0);
    /** A non-101 response whose body is still arriving. */
    let pendingResponse:
      | { statusCode: number; headers: Record<string, string>; bodyLength: number | 'chunked'; bodyStart: number }
      | undefined;

    const fail = (message: string, statusCode = 0, headers: Record<string, string> = {}, body = ''): void => {
      socket.off('data', onHandshakeData);
      socket.off('end', onHandshakeEnd);
      socket.destroy();
      reject(new WebSocketHandshakeError(message, statusCode, headers, body));
    };
    const onHandshakeEnd = (): void => {
      if (pendingResponse !== undefined) {
        const { statusCode, headers, bodyStart } = pendingResponse;
        fail(`handshake answered ${statusCode}`, statusCode, headers, received.subarray(bodyStart).toString());
      } else {
        fail(`connection closed before the handshake response; got ${JSON.stringify(received.toString())}`);
      }
    };
    const onHandshakeData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      if (pendingResponse !== undefined) {
        const { statusCode, headers, bodyStart, bodyLength } = pendingResponse;
        const body = received.subarray(bodyStart);
        if (bodyLength === 'chunked') {
          const chunked = decodeChunked(body);
          if (chunked !== undefined) fail(`handshake answered ${statusCode}`, statusCode, headers, chunked);
        } else if (body.length >= bodyLength) {
          fail(`handshake answered ${statusCode}`, statusCode, headers, body.subarray(0, bodyLength).toString());
        }
        return;
      }
      const headEnd = received.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const [statusLine = '', ...headerLines] = received.subarray(0, headEnd).toString('latin1').split('\r\n');
      const statusCode = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
      }
      const bodyStart = headEnd + 4;
      if (statusCode !== 101) {
        const isChunked = /chunked/i.test(headers['transfer-encoding'] ?? '');
        const bodyLength = isChunked ? ('chunked' as const) : Number(headers['content-length'] ?? 0);
        pendingResponse = { statusCode, headers, bodyStart, bodyLength };
        onHandshakeData(Buffer.alloc(0));
        return;
      }
      if (headers.upgrade?.toLowerCase() !== 'websocket') return fail(`101 with Upgrade: ${headers.upgrade}`, 101, headers);
      if (!/(^|,)\s*upgrade\s*(,|$)/i.test(headers.connection ?? '')) return fail(`101 with Connection: ${headers.connection}`, 101, headers);
      if (headers['sec-websocket-accept'] !== acceptValueFor(key)) {
        return fail(`101 with Sec-WebSocket-Accept ${headers['sec-websocket-accept']}, want ${acceptValueFor(key)}`, 101, headers);
      }
      socket.off('data', onHandshakeData);
      socket.off('end', onHandshakeEnd);
      socket.off('error', onHandshakeError);
      resolve(openClient(socket, headers, received.subarray(bodyStart)));
    };
    const onHandshakeError = (error: Error): void => {
      socket.off('data', onHandshakeData);
      socket.off('end', onHandshakeEnd);
      reject(error);
    };
    socket.on('data', onHandshakeData);
    socket.on('end', onHandshakeEnd);
    socket.on('error', onHandshakeError);
    socket.write(Buffer.concat([Buffer.from(requestHead, 'latin1'), firstFrame]));
  });
}

/** The body of a complete chunked encoding (trailers ignored), or undefined while it is incomplete. */
function decodeChunked(bytes: Buffer): string | undefined {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', offset);
    if (lineEnd < 0) return undefined;
    const size = Number.parseInt(bytes.subarray(offset, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) return bytes.toString(); // not chunked after all: give what there is
    if (size === 0) {
      // Complete once the (possibly empty) trailer section has its final empty line.
      return bytes.indexOf('\r\n\r\n', lineEnd) < 0 ? undefined : Buffer.concat(parts).toString();
    }
    if (bytes.length < lineEnd + 2 + size + 2) return undefined;
    parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
}

function messageFrame(data: string | Buffer): Buffer {
  return encodeFrame(typeof data === 'string' ? Opcode.text : Opcode.binary, data, { mask: true });
}

/** The client after a valid 101. */
function openClient(socket: Socket, responseHeaders: Record<string, string>, leftover: Buffer): WebSocketClient {
  const decoder = new FrameDecoder();
  const messages: WebSocketMessage[] = [];
  const waiters: { resolve: (message: WebSocketMessage) => void; reject: (error: Error) => void }[] = [];
  const pongs: Buffer[] = [];
  let closeCode: number | undefined;
  let hasSentClose = false;
  let isClosed = false;
  let resolveEnded!: () => void;
  let resolveClosed!: () => void;
  const ended = new Promise<void>((resolve) => (resolveEnded = resolve));
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve));

  const sendClose = (code: number): void => {
    if (hasSentClose || socket.destroyed || socket.writableEnded) return;
    hasSentClose = true;
    socket.write(encodeFrame(Opcode.close, closePayload(code), { mask: true }));
  };
  const onBytes = (bytes: Buffer): void => {
    let frames: Frame[];
    try {
      frames = decoder.push(bytes);
    } catch (error) {
      socket.destroy(error as Error);
      return;
    }
    for (const frame of frames) {
      if (frame.opcode === Opcode.text || frame.opcode === Opcode.binary) {
        const message = { opcode: frame.opcode, data: frame.payload, text: frame.payload.toString('utf8') };
        const waiter = waiters.shift();
        if (waiter === undefined) messages.push(message);
        else waiter.resolve(message);
      } else if (frame.opcode === Opcode.ping) {
        if (!socket.writableEnded) socket.write(encodeFrame(Opcode.pong, frame.payload, { mask: true }));
      } else if (frame.opcode === Opcode.pong) {
        pongs.push(frame.payload);
      } else if (frame.opcode === Opcode.close) {
        closeCode = frame.payload.length >= 2 ? frame.payload.readUInt16BE(0) : 1005;
        sendClose(closeCode === 1005 ? 1000 : closeCode);
        if (!socket.writableEnded) socket.end();
      }
    }
  };
  socket.on('data', onBytes);
  socket.on('end', () => resolveEnded());
  socket.on('error', () => {});
  socket.on('close', () => {
    isClosed = true;
    resolveEnded();
    resolveClosed();
    for (const waiter of waiters.splice(0)) waiter.reject(new Error('connection closed before the next message'));
  });
  if (leftover.length > 0) onBytes(leftover);

  return {
    socket,
    responseHeaders,
    pongs,
    ended,
    closed,
    get closeCode() {
      return closeCode;
    },
    send(data) {
      socket.write(messageFrame(data));
    },
    ping(payload = Buffer.alloc(0)) {
      socket.write(encodeFrame(Opcode.ping, payload, { mask: true }));
    },
    nextMessage() {
      const message = messages.shift();
      if (message !== undefined) return Promise.resolve(message);
      if (isClosed) return Promise.reject(new Error('connection closed before the next message'));
      return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
    },
    end() {
      socket.end();
    },
    async close(code = 1000) {
      sendClose(code);
      await closed;
    },
    destroy() {
      socket.destroy();
    },
  };
}
