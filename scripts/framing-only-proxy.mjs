// A measuring stick, not a proxy to use: an HTTP/1.1 proxy that does nothing but framing, to see
// how close to the zero-work relay (relay-proxy.mjs) any Node proxy that parses HTTP can come
// (docs/performance.md, "Where the time of one request goes").
// It reads each request head (bodiless requests only), drops `Connection`, adds X-Forwarded-For,
// sends it on a pooled keep-alive connection, reads the response head up to its Content-Length
// body (no chunked bodies), drops `Connection` and `Keep-Alive`, and writes head and body to the
// client in one write. No routing, no checks, no timeouts, no error answers.
//   node scripts/framing-only-proxy.mjs LISTEN_PORT UPSTREAM_PORT
import net from 'node:net';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const HEAD_END = '\r\n\r\n';

/** `text` (a head without its empty line) → the start line and its fields. */
function parseHead(text) {
  const lines = text.split('\r\n');
  const fields = [];
  for (let i = 1; i < lines.length; i++) {
    const colon = lines[i].indexOf(':');
    fields.push([lines[i].slice(0, colon), lines[i].slice(colon + 1).trim()]);
  }
  return { startLine: lines[0], fields };
}

/** Idle upstream connections (`{ socket, buffered, onResponse }`), newest last. */
const idle = [];

function takeUpstream() {
  const reused = idle.pop();
  if (reused !== undefined) return reused;
  const upstream = { socket: net.connect({ host: '127.0.0.1', port: upstreamPort, noDelay: true }), buffered: undefined, onResponse: undefined };
  upstream.socket.on('data', (chunk) => readResponse(upstream, chunk));
  upstream.socket.on('error', () => {});
  upstream.socket.on('close', () => {
    const at = idle.indexOf(upstream);
    if (at >= 0) idle.splice(at, 1);
  });
  return upstream;
}

function readResponse(upstream, chunk) {
  const data = upstream.buffered === undefined ? chunk : Buffer.concat([upstream.buffered, chunk]);
  const headEnd = data.indexOf(HEAD_END);
  const { startLine, fields } = headEnd < 0 ? {} : parseHead(data.latin1Slice(0, headEnd));
  const contentLength = Number(fields?.find(([name]) => name.toLowerCase() === 'content-length')?.[1] ?? 0);
  if (headEnd < 0 || data.length < headEnd + HEAD_END.length + contentLength) {
    upstream.buffered = data;
    return;
  }
  upstream.buffered = undefined;
  let head = `${startLine}\r\n`;
  for (const [name, value] of fields) {
    const lower = name.toLowerCase();
    if (lower !== 'connection' && lower !== 'keep-alive') head += `${name}: ${value}\r\n`;
  }
  const onResponse = upstream.onResponse;
  upstream.onResponse = undefined;
  idle.push(upstream);
  onResponse(Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), data.subarray(headEnd + HEAD_END.length)]));
}

net
  .createServer({ noDelay: true }, (client) => {
    let buffered;
    client.on('error', () => {});
    client.on('data', (chunk) => {
      const data = buffered === undefined ? chunk : Buffer.concat([buffered, chunk]);
      const headEnd = data.indexOf(HEAD_END);
      if (headEnd < 0) {
        buffered = data;
        return;
      }
      buffered = undefined;
      const { startLine, fields } = parseHead(data.latin1Slice(0, headEnd));
      let head = `${startLine}\r\n`;
      for (const [name, value] of fields) if (name.toLowerCase() !== 'connection') head += `${name}: ${value}\r\n`;
      const upstream = takeUpstream();
      upstream.onResponse = (response) => client.write(response);
      upstream.socket.write(`${head}X-Forwarded-For: ${client.remoteAddress}${HEAD_END}`, 'latin1');
    });
  })
  .listen(listenPort, '127.0.0.1', () => process.stderr.write(`framing-only proxy listening on 127.0.0.1:${listenPort}\n`));
