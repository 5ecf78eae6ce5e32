/**
 * Streaming proof (Step 1): a 1 GiB request body and a 1 GiB response body through the proxy,
 * while the proxy's resident memory is sampled from /proc. The proxy runs as its own process
 * (`node dist/main.js`), the backend and the client run here. Goal: peak RSS stays under 100 MiB
 * above the proxy's idle RSS — nothing buffers a whole body.
 *
 *   npm run build && npx tsx scripts/stream-memory.ts [--mib 1024]
 */
import http from 'node:http';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';

const mibArg = process.argv.indexOf('--mib');
const totalBytes = (mibArg > 0 ? Number(process.argv[mibArg + 1]) : 1024) * 1024 * 1024;
const chunk = Buffer.alloc(64 * 1024, 'x');

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

async function main(): Promise<void> {
  const backend = http.createServer((req, res) => {
    if (req.method === 'POST') {
      let received = 0;
      req.on('data', (c: Buffer) => (received += c.length));
      req.on('end', () => res.end(String(received)));
      return;
    }
    res.writeHead(200, { 'Content-Length': String(totalBytes) });
    let sent = 0;
    const pump = (): void => {
      while (sent < totalBytes) {
        const piece = chunk.subarray(0, Math.min(chunk.length, totalBytes - sent));
        sent += piece.length;
        if (!res.write(piece)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  const backendPort = (backend.address() as AddressInfo).port;

  const dir = mkdtempSync(join(tmpdir(), 'stream-memory-'));
  const config = join(dir, 'env.ini');
  writeFileSync(config, `[server]\nlisten = 127.0.0.1:0\naccess_log = off\n[proxy.all]\npath = /\npass = http://127.0.0.1:${backendPort}\n`);
  const proxy = spawn(process.execPath, [new URL('../dist/main.js', import.meta.url).pathname, '--config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  const port = await new Promise<number>((resolve) => {
    let text = '';
    proxy.stderr.on('data', (c: Buffer) => {
      text += c.toString();
      const m = /listening on [^\s]+:(\d+)/.exec(text);
      if (m) resolve(Number(m[1]));
    });
  });
  await new Promise((r) => setTimeout(r, 300));
  const idle = rssMiB(proxy.pid!);
  let peak = idle;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(proxy.pid!))), 50);

  const startedDown = Date.now();
  const downloaded = await new Promise<number>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/big', agent: false }, (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => (n += c.length));
      res.on('end', () => resolve(n));
    }).on('error', reject);
  });
  const downSeconds = (Date.now() - startedDown) / 1000;
  const peakDown = peak;

  const startedUp = Date.now();
  const uploaded = await new Promise<string>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/upload', method: 'POST', agent: false, headers: { 'Content-Length': String(totalBytes) } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    let sent = 0;
    const pump = (): void => {
      while (sent < totalBytes) {
        const piece = chunk.subarray(0, Math.min(chunk.length, totalBytes - sent));
        sent += piece.length;
        if (!req.write(piece)) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
  const upSeconds = (Date.now() - startedUp) / 1000;
  clearInterval(sampler);
  proxy.kill('SIGTERM');
  backend.close();
  backend.closeAllConnections();

  const mib = totalBytes / 1024 / 1024;
  console.log(`body size: ${mib} MiB`);
  console.log(`download: ${downloaded === totalBytes ? 'complete' : `SHORT (${downloaded} bytes)`} in ${downSeconds.toFixed(1)} s (${(mib / downSeconds).toFixed(0)} MiB/s), proxy peak RSS ${peakDown.toFixed(1)} MiB`);
  console.log(`upload:   ${uploaded === String(totalBytes) ? 'complete' : `SHORT (backend got ${uploaded})`} in ${upSeconds.toFixed(1)} s (${(mib / upSeconds).toFixed(0)} MiB/s)`);
  console.log(`proxy RSS: idle ${idle.toFixed(1)} MiB, peak ${peak.toFixed(1)} MiB, peak above idle ${(peak - idle).toFixed(1)} MiB (goal < 100 MiB)`);
  process.exitCode = peak - idle < 100 && downloaded === totalBytes && uploaded === String(totalBytes) ? 0 : 1;
}

void main();
