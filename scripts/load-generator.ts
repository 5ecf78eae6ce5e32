/**
 * The benchmark's built-in load generator, used when wrk cannot be installed: N keep-alive raw
 * connections, each sending one request and waiting for its whole response (Content-Length framed),
 * for a fixed time. Prints one JSON object: requestsPerSecond, p50Ms, p99Ms, errors, requests.
 *
 *   node --import tsx scripts/load-generator.ts URL CONNECTIONS SECONDS [POST_BYTES]
 */
import net from 'node:net';

const [url, connectionsText, secondsText, postText] = process.argv.slice(2);
const target = new URL(url!);
const connections = Number(connectionsText);
const seconds = Number(secondsText);
const postBytes = Number(postText ?? 0);
const body = Buffer.alloc(postBytes, 'p');
const head = Buffer.from(
  postBytes > 0
    ? `POST ${target.pathname} HTTP/1.1\r\nHost: ${target.host}\r\nContent-Length: ${postBytes}\r\n\r\n`
    : `GET ${target.pathname} HTTP/1.1\r\nHost: ${target.host}\r\n\r\n`,
);
const request = Buffer.concat([head, body]);
const latencies: number[] = [];
let errors = 0;
const deadline = Date.now() + seconds * 1000;

function runConnection(): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(target.port), target.hostname);
    socket.setNoDelay(true);
    let buffer: Buffer = Buffer.alloc(0);
    let sentAt = 0;
    const send = (): void => {
      if (Date.now() >= deadline) {
        socket.destroy();
        return resolve();
      }
      sentAt = performance.now();
      socket.write(request);
    };
    socket.on('connect', send);
    socket.on('data', (chunk: Buffer) => {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length:\s*(\d+)/i.exec(buffer.subarray(0, end).toString('latin1'))?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        const status = Number(buffer.subarray(9, 12).toString());
        if (status >= 400) errors++;
        buffer = buffer.subarray(end + 4 + length);
        latencies.push(performance.now() - sentAt);
        send();
      }
    });
    socket.on('error', () => {
      errors++;
      resolve();
    });
  });
}

await Promise.all(Array.from({ length: connections }, runConnection));
latencies.sort((a, b) => a - b);
const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
process.stdout.write(JSON.stringify({ requestsPerSecond: latencies.length / seconds, p50Ms: at(0.5), p99Ms: at(0.99), errors, requests: latencies.length }) + '\n');
