/**
 * `npm run bench` (Step 4): one invocation, one table. A fast static backend, then for each target —
 * direct to the backend, this project, a zero-work node:net relay that copies bytes unparsed (the
 * limit for a Node proxy on one core, scripts/relay-proxy.mjs), the minimal node:http proxy
 * (scripts/baseline-proxy.mjs), Go's httputil.ReverseProxy (GOMAXPROCS=1), nginx with one worker as
 * a proxy — the same workloads from a load generator in its own process:
 *
 *   small   GET, 12-byte responses, 64 connections
 *   1mib    GET, 1 MiB responses, 16 connections
 *   post    POST of 64 KiB bodies, 64 connections
 *
 * and over TLS (issue 13), with this project (`tls_listen`, `tls_cert`), nginx (`listen … ssl`) and
 * Go (`ListenAndServeTLS`) each terminating TLS with the same ECDSA P-256 pair
 * (test/fixtures/tls/localhost.pem) and forwarding plain HTTP to the same backend:
 *
 *   tls keep-alive          GET, 12-byte responses, 64 keep-alive TLS connections
 *   tls new connection      the same with `Connection: close`: one TCP connection and one TLS
 *                           handshake per request (wrk reconnects after every response); wrk
 *                           resumes its last session whenever the server gave it a ticket
 *   tls full handshake      the same against a second instance of each server that issues no
 *                           session tickets, so that every handshake is a full one
 *
 * wrk offers TLS 1.3 with one cipher suite, TLS_AES_128_GCM_SHA256 (the one RFC 8446 §9.1 makes
 * mandatory; an OpenSSL config for wrk alone), so every server negotiates the same suite whatever
 * its own preference (Go's is AES-128-GCM, Node's AES-256-GCM, nginx takes the client's). After
 * each TLS workload's runs, a one-second census per target through a relay that reads each
 * ServerHello prints what was negotiated, how many TCP connections served how many requests, and
 * how many handshakes resumed a session.
 *
 * On Linux the proxy under test runs on core 0 (taskset), the backend and the load generator on
 * core 1. Tools come from Debian's packages when they can be installed (wrk, nginx, golang-go);
 * peers that cannot be had are skipped with a line saying so, and without wrk the built-in
 * generator (scripts/load-generator.ts) runs the plain workloads instead. Output: req/s, p50, p99 and the ratio of each
 * target's req/s to this project's, this project's share of the relay's req/s per workload, plus
 * this project's peak RSS, and a check that holds 10,000 idle keep-alive client connections.
 *
 * Each cell is the median of `--runs` measurements (default 3), taken in turns across the targets so
 * that a slow moment of the machine does not fall on one target only; the table ends with the
 * issue's targets, each met or with its measured distance.
 *
 *   npm run bench [-- --duration 8 --runs 3 --only NAME --write docs/benchmark.md]
 *
 * `--only tls` runs the TLS workloads alone; `--only NAME` any other measures this project and the
 * targets whose name contains NAME (`Go`, `nginx`, `relay`, …).
 *
 * The cost of a `rate_limit` (issue 15), run with the others or alone with `--only limits`: a second
 * instance of this project with two routes to the same backend's /small, equal but for
 * `rate_limit = 1000000/s` on one (burst 1 000 000: the load generator's requests all come from
 * 127.0.0.1, one client, one bucket, and it never runs dry), measured in rounds of both back to
 * back (AB, BA, …); the cost is the median of the rounds' ratios:
 *
 *   limits  GET, 12-byte responses, 64 connections, through /plain and through /limited
 */
import { execFile, execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve as resolvePath } from 'node:path';
import net from 'node:net';
import { promisify } from 'node:util';

const root = new URL('../', import.meta.url).pathname;
const args = process.argv.slice(2);
const option = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const durationSeconds = Number(option('--duration', '8'));
const WARM_UP_SECONDS = 3;
const runs = Math.max(1, Number(option('--runs', '3')));
const writeTo = option('--write', '');
const only = option('--only', '');
const work = mkdtempSync(join(tmpdir(), 'proxy-bench-'));
chmodSync(work, 0o755); // nginx workers run as an unprivileged user and must read the files
const children: ChildProcess[] = [];
const notes: string[] = [];

const PORTS = {
  backend: 18080, direct: 18080, project: 18081, baseline: 18082, go: 18083, nginx: 18084, relay: 18085, projectLimits: 18086,
  projectTls: 18443, goTls: 18444, nginxTls: 18445, projectNoTickets: 18446, goNoTickets: 18447, nginxNoTickets: 18448,
};
const RELAY = 'node:net relay (no parsing)';
const GO = 'Go httputil (GOMAXPROCS=1)';
const NGINX = 'nginx proxy (1 worker)';
/** The pair every TLS target serves: ECDSA P-256, DNS:localhost and IP:127.0.0.1 (scripts/make-test-certificates.sh). */
const CERTIFICATE = { certFile: join(root, 'test/fixtures/tls/localhost.pem'), keyFile: join(root, 'test/fixtures/tls/localhost.key') };
/** wrk's OpenSSL config for the TLS workloads: TLS_AES_128_GCM_SHA256 the only TLS 1.3 suite offered. */
const CLIENT_OPENSSL_CONF = join(work, 'client-openssl.cnf');
const runFile = promisify(execFile);
const hasTaskset = process.platform === 'linux' && commandExists('taskset') && cpus().length >= 2;
const proxyCore = ['taskset', '-c', '0'];
const helperCore = ['taskset', '-c', '1'];

function commandExists(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** Installs Debian packages for the missing tools, when apt-get is there and we are root. */
function ensureTools(): void {
  const wanted = [
    ['wrk', 'wrk'],
    ['nginx', 'nginx-light'],
    ['go', 'golang-go'],
  ].filter(([command]) => !commandExists(command!) && !(command === 'nginx' && existsSync('/usr/sbin/nginx')));
  if (wanted.length === 0 || !commandExists('apt-get') || process.getuid?.() !== 0) return;
  console.error(`installing ${wanted.map(([, pkg]) => pkg).join(', ')} from Debian's packages...`);
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'ignore' });
  for (const [, pkg] of wanted) {
    const result = spawnSync('apt-get', ['install', '-y', '-qq', pkg!], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    if (result.status !== 0) notes.push(`could not install ${pkg} (apt-get exit ${result.status})`);
  }
}

function nginxBinary(): string | undefined {
  if (commandExists('nginx')) return 'nginx';
  return existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : undefined;
}

function start(name: string, command: string[], pin: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
  const argv = hasTaskset ? [...pin, ...command] : command;
  // detached: its own process group, so cleanUp can end it with every child it made (nginx workers).
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env }, detached: true });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  child.on('exit', (code) => {
    if (code !== 0 && code !== null) console.error(`${name} exited with ${code}: ${stderr.slice(-500)}`);
  });
  children.push(child);
  return child;
}

async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const isOpen = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (isOpen) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function startBackend(): string {
  const nginx = nginxBinary();
  writeFileSync(join(work, 'small.txt'), 'hello world\n'); // 12 bytes
  writeFileSync(join(work, 'big.bin'), Buffer.alloc(1024 * 1024, 'b'));
  if (nginx !== undefined) {
    mkdirSync(join(work, 'backend'), { recursive: true });
    writeFileSync(
      join(work, 'backend.conf'),
      `worker_processes 1; daemon off; pid ${work}/backend.pid; error_log ${work}/backend-error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; client_body_temp_path ${work}/backend;
  server { listen 127.0.0.1:${PORTS.backend} reuseport backlog=4096;
    location = /small { alias ${work}/small.txt; }
    location = /big { alias ${work}/big.bin; }
    location = /upload { client_max_body_size 1m; client_body_buffer_size 128k; return 200 "uploaded\\n"; }
  } }`,
    );
    start('backend nginx', [nginx, '-c', join(work, 'backend.conf'), '-p', work], helperCore);
    return 'nginx (1 worker, static files)';
  }
  notes.push('nginx not available: the backend is a node:http server');
  start('backend node', [process.execPath, join(root, 'scripts/static-backend.mjs'), String(PORTS.backend)], helperCore);
  return 'node:http static server';
}

function startProject(): ChildProcess {
  writeFileSync(
    join(work, 'project.ini'),
    `[server]\nlisten = 127.0.0.1:${PORTS.project}\naccess_log = off\nkeepalive_timeout = 120s\n[proxy.all]\npath = /\npass = http://127.0.0.1:${PORTS.backend}\n`,
  );
  return start('project', [process.execPath, join(root, 'dist/main.js'), '--config', join(work, 'project.ini')], proxyCore);
}

/** The soft open-file limit of process `pid` (Linux /proc), or undefined. */
function openFileLimitOf(pid: number): number | undefined {
  const line = readFileSync(`/proc/${pid}/limits`, 'latin1').split('\n').find((text) => text.startsWith('Max open files'));
  const soft = line?.split(/\s{2,}/)[1];
  return soft === undefined || soft === 'unlimited' ? undefined : Number(soft);
}

/** This project with the `--only limits` pair's routes: /plain and /limited, the same but for a rate_limit that never triggers. */
function startProjectLimits(): void {
  const route = (name: string, extra: string): string => `[proxy.${name}]\npath = /${name}\npass = http://127.0.0.1:${PORTS.backend}/small\n${extra}`;
  writeFileSync(
    join(work, 'project-limits.ini'),
    `[server]\nlisten = 127.0.0.1:${PORTS.projectLimits}\naccess_log = off\nkeepalive_timeout = 120s\n` + route('plain', '') + route('limited', 'rate_limit = 1000000/s\n'),
  );
  start('project-limits', [process.execPath, join(root, 'dist/main.js'), '--config', join(work, 'project-limits.ini')], proxyCore);
}

/**
 * This project terminating TLS in a process of its own, so the plain runs' RSS figures stay its own.
 * Without tickets: OpenSSL's `NumTickets = 0` in the process's OpenSSL config (Node reads its
 * `nodejs_conf` section), since the project has no key for it.
 */
function startProjectTls(port: number, hasTickets: boolean): void {
  const name = hasTickets ? 'project-tls' : 'project-no-tickets';
  writeFileSync(
    join(work, `${name}.ini`),
    `[server]\nlisten = off\ntls_listen = 127.0.0.1:${port}\ntls_cert = ${CERTIFICATE.certFile} ${CERTIFICATE.keyFile}\n` +
      `access_log = off\nkeepalive_timeout = 120s\n[proxy.all]\npath = /\npass = http://127.0.0.1:${PORTS.backend}\n`,
  );
  const env: NodeJS.ProcessEnv = {};
  if (!hasTickets) {
    env.OPENSSL_CONF = join(work, 'no-tickets-openssl.cnf');
    writeFileSync(env.OPENSSL_CONF, 'nodejs_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n[ssl_sect]\nsystem_default = server_sect\n[server_sect]\nNumTickets = 0\n');
  }
  start(name, [process.execPath, join(root, 'dist/main.js'), '--config', join(work, `${name}.ini`)], proxyCore, env);
}

/**
 * Builds the Go peer once: `goproxy ADDRESS` serves HTTP, `goproxy ADDRESS CERT KEY` HTTPS, and
 * `goproxy ADDRESS CERT KEY no-tickets` HTTPS with `SessionTicketsDisabled`.
 */
function buildGo(): boolean {
  if (!commandExists('go')) {
    notes.push('go not available: Go httputil.ReverseProxy skipped');
    return false;
  }
  writeFileSync(
    join(work, 'main.go'),
    `package main

import ("crypto/tls"; "log"; "net/http"; "net/http/httputil"; "net/url"; "os")

func main() {
	target, _ := url.Parse("http://127.0.0.1:${PORTS.backend}")
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024}
	if len(os.Args) >= 4 {
		server := &http.Server{Addr: os.Args[1], Handler: proxy, TLSConfig: &tls.Config{SessionTicketsDisabled: len(os.Args) == 5}}
		log.Fatal(server.ListenAndServeTLS(os.Args[2], os.Args[3]))
	}
	log.Fatal(http.ListenAndServe(os.Args[1], proxy))
}
`,
  );
  const build = spawnSync('go', ['build', '-o', join(work, 'goproxy'), join(work, 'main.go')], {
    env: { ...process.env, GOCACHE: join(work, 'gocache'), GOPATH: join(work, 'gopath'), GOFLAGS: '-mod=mod', GO111MODULE: 'off' },
    encoding: 'utf8',
  });
  if (build.status !== 0) {
    notes.push(`go build failed: ${build.stderr.trim().split('\n')[0]}`);
    return false;
  }
  return true;
}

function startGo(port: number, listener: Listener): void {
  const tlsArgs = listener === 'http' ? [] : [CERTIFICATE.certFile, CERTIFICATE.keyFile, ...(listener === 'https' ? [] : ['no-tickets'])];
  start(`go (${listener})`, [join(work, 'goproxy'), `127.0.0.1:${port}`, ...tlsArgs], proxyCore, { GOMAXPROCS: '1' });
}

/**
 * nginx with one worker as a proxy; over TLS with nginx's defaults (no session cache, session
 * tickets on) except `ssl_protocols`, which nginx before 1.23.4 defaults to TLS 1.0–1.2 only;
 * without tickets, `ssl_session_tickets off` (and still no cache: nothing to resume from).
 */
function startNginxProxy(nginx: string, port: number, listener: Listener): void {
  const name = { http: 'proxy', https: 'proxy-tls', 'https without tickets': 'proxy-no-tickets' }[listener];
  const tls = listener === 'http' ? '' : ` ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate ${CERTIFICATE.certFile}; ssl_certificate_key ${CERTIFICATE.keyFile};` +
    (listener === 'https' ? '' : ' ssl_session_tickets off;');
  mkdirSync(join(work, `${name}-tmp`), { recursive: true });
  writeFileSync(
    join(work, `${name}.conf`),
    `worker_processes 1; daemon off; pid ${work}/${name}.pid; error_log ${work}/${name}-error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; client_body_temp_path ${work}/${name}-tmp; proxy_temp_path ${work}/${name}-tmp;
  upstream backend { server 127.0.0.1:${PORTS.backend}; keepalive 256; }
  server { listen 127.0.0.1:${port}${listener === 'http' ? '' : ' ssl'} backlog=4096; client_max_body_size 1m;${tls}
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  } }`,
  );
  start(`nginx proxy (${listener})`, [nginx, '-c', join(work, `${name}.conf`), '-p', work], proxyCore);
}

/**
 * Which instance of each target a workload runs against: plain HTTP, HTTPS with each server's
 * session resumption as it comes, or HTTPS from a second instance that issues no session tickets.
 * The HTTPS ones need wrk (the built-in generator speaks plain HTTP).
 */
type Listener = 'http' | 'https' | 'https without tickets';

interface Workload {
  readonly name: string;
  readonly listener: Listener;
  readonly path: string;
  readonly connections: number;
  readonly postBytes?: number;
  /** Sends `Connection: close`: the server closes after each response and wrk connects anew. */
  readonly isNewConnectionPerRequest?: boolean;
}
const WORKLOADS: readonly Workload[] = [
  { name: 'small (12 B, 64 conns)', listener: 'http', path: '/small', connections: 64 },
  { name: '1 MiB (16 conns)', listener: 'http', path: '/big', connections: 16 },
  { name: 'POST 64 KiB (64 conns)', listener: 'http', path: '/upload', connections: 64, postBytes: 64 * 1024 },
  { name: 'TLS keep-alive small (12 B, 64 conns)', listener: 'https', path: '/small', connections: 64 },
  { name: 'TLS new connection per request (12 B, 64 conns)', listener: 'https', path: '/small', connections: 64, isNewConnectionPerRequest: true },
  { name: 'TLS new connection, full handshakes (12 B, 64 conns)', listener: 'https without tickets', path: '/small', connections: 64, isNewConnectionPerRequest: true },
];
/** The `--only limits` pair: the same route of the same process, without and with a rate_limit that never triggers. */
const LIMIT_WORKLOADS: readonly [Workload, Workload] = [
  { name: 'small, no rate_limit (12 B, 64 conns)', listener: 'http', path: '/plain', connections: 64 },
  { name: 'small, rate_limit = 1000000/s (12 B, 64 conns)', listener: 'http', path: '/limited', connections: 64 },
];

interface Measurement {
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  /** Responses counted over the whole run. */
  readonly requests: number;
}

function parseLatency(text: string): number {
  const m = /([\d.]+)(us|ms|s|m)/.exec(text);
  if (m === null) throw new Error(`cannot read a latency from '${text}'`);
  const value = Number(m[1]);
  return m[2] === 'us' ? value / 1000 : m[2] === 's' ? value * 1000 : m[2] === 'm' ? value * 60_000 : value;
}

async function measure(port: number, workload: Workload, seconds: number): Promise<Measurement> {
  const url = `${workload.listener === 'http' ? 'http://127.0.0.1' : 'https://localhost'}:${port}${workload.path}`;
  if (commandExists('wrk')) {
    const wrkArgs = ['-t1', `-c${workload.connections}`, `-d${seconds}s`, '--latency'];
    if (workload.postBytes !== undefined) {
      const script = join(work, 'post.lua');
      writeFileSync(script, `wrk.method = "POST"\nwrk.body = string.rep("p", ${workload.postBytes})\nwrk.headers["Content-Type"] = "application/octet-stream"\n`);
      wrkArgs.push('-s', script);
    }
    if (workload.isNewConnectionPerRequest === true) wrkArgs.push('-H', 'Connection: close');
    const argv = hasTaskset ? [...helperCore, 'wrk', ...wrkArgs, url] : ['wrk', ...wrkArgs, url];
    const env = workload.listener === 'http' ? process.env : { ...process.env, OPENSSL_CONF: CLIENT_OPENSSL_CONF };
    const { stdout: out } = await runFile(argv[0]!, argv.slice(1), { encoding: 'utf8', env });
    if (!/50%/.test(out)) throw new Error(`unexpected wrk output:\n${out}`);
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]);
    const p50 = parseLatency(/^\s+50%\s+(\S+)/m.exec(out)![1]!); // the Latency Distribution lines, not '85.50%' of the thread stats
    const p99 = parseLatency(/^\s+99%\s+(\S+)/m.exec(out)![1]!);
    const errorsMatch = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
    const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    const errors = Number(errorsMatch?.[1] ?? 0) + (socketErrors ? socketErrors.slice(1).reduce((n, v) => n + Number(v), 0) : 0);
    const requests = Number(/(\d+) requests in/.exec(out)![1]);
    return { requestsPerSecond: rps, p50Ms: p50, p99Ms: p99, errors, requests };
  }
  const argv = [process.execPath, '--import', 'tsx', join(root, 'scripts/load-generator.ts'), url, String(workload.connections), String(seconds), String(workload.postBytes ?? 0)];
  const { stdout: out } = await runFile(hasTaskset ? helperCore[0]! : argv[0]!, hasTaskset ? [...helperCore.slice(1), ...argv] : argv.slice(1), { encoding: 'utf8', cwd: root });
  return JSON.parse(out) as Measurement;
}

/** One TLS target's handshakes during a short run of a TLS workload, read off the wire. */
interface HandshakeCensus {
  readonly requests: number;
  readonly connections: number;
  readonly resumed: number;
  /** Each distinct "version cipher group" seen, e.g. "TLSv1.3 TLS_AES_128_GCM_SHA256 X25519". */
  readonly negotiated: ReadonlySet<string>;
}

/**
 * Runs `workload` for one second through a relay in this process that joins each wrk connection to
 * one connection to the target and reads the target's first TLS record: the ServerHello, sent in
 * the clear (RFC 8446 §4.1.3). It counts TCP connections against the requests wrk completed, the
 * handshakes that resumed a session (the ServerHello carries `pre_shared_key`, RFC 8446 §4.2.11),
 * and the version, cipher suite and key-exchange group negotiated. The relay's time is not measured.
 */
async function handshakeCensus(port: number, workload: Workload): Promise<HandshakeCensus> {
  let connections = 0;
  let resumed = 0;
  const negotiated = new Set<string>();
  const relay = net.createServer({ noDelay: true }, (client) => {
    connections++;
    const upstream = net.connect({ host: '127.0.0.1', port, noDelay: true });
    let head = Buffer.alloc(0);
    const readHello = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const hello = readServerHello(head);
      if (hello === 'incomplete' && head.length < 16_384) return;
      upstream.off('data', readHello);
      if (typeof hello === 'string') return void negotiated.add(`${hello} in the first record`);
      negotiated.add(`${hello.version} ${hello.cipher} ${hello.group}`);
      if (hello.isResumed) resumed++;
    };
    upstream.on('data', readHello);
    const closeBoth = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', closeBoth).on('close', closeBoth);
    upstream.on('error', closeBoth).on('close', closeBoth);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  try {
    const { requests } = await measure((relay.address() as net.AddressInfo).port, workload, 1);
    return { requests, connections, resumed, negotiated };
  } finally {
    relay.close();
  }
}

const TLS_NAMES: Readonly<Record<number, string>> = {
  0x0303: 'TLSv1.2', 0x0304: 'TLSv1.3',
  0x1301: 'TLS_AES_128_GCM_SHA256', 0x1302: 'TLS_AES_256_GCM_SHA384', 0x1303: 'TLS_CHACHA20_POLY1305_SHA256',
  0x0017: 'secp256r1', 0x0018: 'secp384r1', 0x001d: 'X25519',
};

interface ServerHello {
  readonly version: string;
  readonly cipher: string;
  readonly group: string;
  readonly isResumed: boolean;
}

/**
 * Reads a ServerHello (RFC 8446 §4.1.3) from the start of a server's byte stream: 'incomplete'
 * until its whole first record has arrived. Record: type 22, version (2 bytes), length (2);
 * handshake: type 2, length (3); then legacy_version (2), random (32), legacy_session_id (1 + n),
 * cipher_suite (2), compression (1), extensions (2 + n), of which it reads supported_versions (43),
 * key_share (51) and pre_shared_key (41).
 */
function readServerHello(bytes: Buffer): ServerHello | 'incomplete' | 'not a ServerHello' {
  if (bytes.length < 5 || bytes.length < 5 + bytes.readUInt16BE(3)) return 'incomplete';
  const end = 5 + bytes.readUInt16BE(3);
  if (bytes[0] !== 22 || end < 5 + 4 + 2 + 32 + 1 || bytes[5] !== 2) return 'not a ServerHello';
  let at = 5 + 4 + 2 + 32;
  at += 1 + bytes[at]!;
  if (at + 5 > end) return 'not a ServerHello';
  const cipher = bytes.readUInt16BE(at);
  at += 2 + 1 + 2;
  let version = bytes.readUInt16BE(9);
  let group = 0;
  let isResumed = false;
  for (; at + 4 <= end; at += 4 + bytes.readUInt16BE(at + 2)) {
    const type = bytes.readUInt16BE(at);
    const hasTwoBytes = bytes.readUInt16BE(at + 2) >= 2 && at + 6 <= end;
    if (type === 43 && hasTwoBytes) version = bytes.readUInt16BE(at + 4);
    if (type === 51 && hasTwoBytes) group = bytes.readUInt16BE(at + 4);
    if (type === 41) isResumed = true;
  }
  const name = (code: number): string => TLS_NAMES[code] ?? `0x${code.toString(16).padStart(4, '0')}`;
  return { version: name(version), cipher: name(cipher), group: group === 0 ? 'no key_share' : name(group), isResumed };
}

function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)![1]) / 1024;
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

/**
 * Opens `count` keep-alive connections at once (raw sockets, 200 connecting at a time), sends one
 * request on each, keeps every one open and idle, then reads the proxy's RSS and counts how many are
 * still open and answered 200.
 */
async function idleConnections(port: number, pid: number, count: number): Promise<{ ok: number; errors: number; rssMiB: number }> {
  const sockets: net.Socket[] = [];
  let ok = 0;
  let errors = 0;
  const openOne = (): Promise<void> =>
    new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      sockets.push(socket);
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('latin1');
        if (text.endsWith('hello world\n')) {
          if (text.startsWith('HTTP/1.1 200')) ok++;
          else errors++;
          resolve();
        }
      });
      socket.on('error', () => {
        errors++;
        resolve();
      });
      socket.write('GET /small HTTP/1.1\r\nHost: bench\r\n\r\n');
    });
  for (let i = 0; i < count; i += 200) await Promise.all(Array.from({ length: Math.min(200, count - i) }, openOne));
  await new Promise((r) => setTimeout(r, 2000));
  const rss = rssMiB(pid);
  const stillOpen = sockets.filter((socket) => !socket.destroyed && !socket.readableEnded).length;
  for (const socket of sockets) socket.destroy();
  return { ok: Math.min(ok, stillOpen), errors: errors + (count - errors - Math.min(ok, stillOpen)), rssMiB: rss };
}

interface Target {
  readonly name: string;
  readonly port: number;
}

async function main(): Promise<void> {
  ensureTools();
  console.error('building...');
  execFileSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
  const hasWrk = commandExists('wrk');
  if (!hasWrk) notes.push('wrk not available: the TLS workloads were skipped (the built-in generator speaks plain HTTP)');
  const isLimitsOnly = only === 'limits';
  const hasLimits = only === '' || isLimitsOnly;
  const workloads = isLimitsOnly ? [] : WORKLOADS.filter((workload) => (workload.listener === 'http' ? only !== 'tls' : hasWrk));
  const listeners = new Set(workloads.map((workload) => workload.listener));
  const hasTls = listeners.has('https') || listeners.has('https without tickets');
  const backendKind = startBackend();
  await waitForPort(PORTS.backend);

  const nginx = nginxBinary();
  if (nginx === undefined) notes.push('nginx not available: nginx proxy skipped');
  const hasGo = listeners.size > 0 && buildGo();
  if (hasLimits) startProjectLimits();
  // Every listener's targets carry the same names, so each workload's row compares like with like.
  const targets = new Map<Listener, Target[]>([...listeners].map((listener) => [listener, []]));
  let project: ChildProcess | undefined;
  if (listeners.has('http')) {
    const plain = targets.get('http')!;
    plain.push({ name: 'direct to backend', port: PORTS.direct });
    project = startProject();
    plain.push({ name: 'this project', port: PORTS.project });
    plain.push({ name: RELAY, port: PORTS.relay });
    start('relay', [process.execPath, join(root, 'scripts/relay-proxy.mjs'), String(PORTS.relay), String(PORTS.backend)], proxyCore);
    plain.push({ name: 'minimal node:http proxy', port: PORTS.baseline });
    start('baseline', [process.execPath, join(root, 'scripts/baseline-proxy.mjs'), String(PORTS.baseline), String(PORTS.backend)], proxyCore);
  }
  if (hasTls) {
    writeFileSync(
      CLIENT_OPENSSL_CONF,
      'openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n[ssl_sect]\nsystem_default = client_sect\n' +
        '[client_sect]\nCiphersuites = TLS_AES_128_GCM_SHA256\n',
    );
  }
  const TLS_PORTS = {
    https: { project: PORTS.projectTls, go: PORTS.goTls, nginx: PORTS.nginxTls },
    'https without tickets': { project: PORTS.projectNoTickets, go: PORTS.goNoTickets, nginx: PORTS.nginxNoTickets },
  } as const;
  for (const [listener, list] of targets) {
    if (listener !== 'http') {
      startProjectTls(TLS_PORTS[listener].project, listener === 'https');
      list.push({ name: 'this project', port: TLS_PORTS[listener].project });
    }
    if (hasGo) {
      const port = listener === 'http' ? PORTS.go : TLS_PORTS[listener].go;
      startGo(port, listener);
      list.push({ name: GO, port });
    }
    if (nginx !== undefined) {
      const port = listener === 'http' ? PORTS.nginx : TLS_PORTS[listener].nginx;
      startNginxProxy(nginx, port, listener);
      list.push({ name: NGINX, port });
    }
  }
  for (const list of targets.values()) for (const target of list) await waitForPort(target.port);
  if (hasLimits) await waitForPort(PORTS.projectLimits);

  const pick = (list: readonly Target[]): readonly Target[] =>
    only === '' || only === 'tls' ? list : list.filter((t) => t.name.includes(only) || t.name === 'this project');
  const results = new Map<string, Map<string, Measurement>>();
  const censuses: { workload: string; target: string; census: HandshakeCensus }[] = [];
  for (const workload of workloads) {
    const selected = pick(targets.get(workload.listener)!);
    const samples = new Map<string, Measurement[]>(selected.map((target) => [target.name, []]));
    for (const target of selected) {
      // Warm-up, the same for every target: V8 compiles on the one core it runs on, and a cold node
      // process has a p99 above 200 ms in its first seconds (docs/performance.md); pools fill too.
      await measure(target.port, workload, WARM_UP_SECONDS);
    }
    for (let run = 1; run <= runs; run++) {
      for (const target of selected) {
        const m = await measure(target.port, workload, durationSeconds);
        samples.get(target.name)!.push(m);
        console.error(`${workload.name.padEnd(24)} ${target.name.padEnd(28)} run ${run}/${runs} ${m.requestsPerSecond.toFixed(0).padStart(8)} req/s  p50 ${m.p50Ms.toFixed(2)} ms  p99 ${m.p99Ms.toFixed(2)} ms${m.errors ? `  errors ${m.errors}` : ''}`);
      }
    }
    results.set(workload.name, new Map([...samples].map(([name, list]) => [name, medianOf(list)])));
    if (workload.listener === 'http') continue;
    for (const target of selected) censuses.push({ workload: workload.name, target: target.name, census: await handshakeCensus(target.port, workload) });
  }
  const limits = hasLimits ? await measureLimits() : undefined;
  const peakRss = project === undefined ? undefined : peakRssMiB(project.pid!);
  const idle = project === undefined ? undefined : await idleConnections(PORTS.project, project.pid!, 10_000);

  const lines: string[] = [];
  lines.push(`Machine: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; Node ${process.version}; ` +
    `${hasTaskset ? 'proxy under test pinned to core 0, backend and load generator to core 1' : 'no CPU pinning'}; ` +
    `load generator ${hasWrk ? 'wrk (1 thread)' : 'built-in'}; backend ${backendKind}; each cell the median of ${runs} run(s) of ${durationSeconds} s, after a ${WARM_UP_SECONDS} s warm-up.` +
    (hasTls ? ' TLS targets: each terminates TLS with the same ECDSA P-256 certificate and forwards plain HTTP to the backend; wrk offers TLS 1.3 with TLS_AES_128_GCM_SHA256 only.' : ''));
  lines.push('');
  if (results.size > 0) {
    lines.push('| workload | target | req/s | p50 ms | p99 ms | req/s ÷ this project | errors |');
    lines.push('|---|---|---:|---:|---:|---:|---:|');
    for (const [workloadName, row] of results) {
      const ours = row.get('this project')!.requestsPerSecond;
      for (const [targetName, m] of row) {
        lines.push(`| ${workloadName} | ${targetName} | ${m.requestsPerSecond.toFixed(0)} | ${m.p50Ms.toFixed(2)} | ${m.p99Ms.toFixed(2)} | ${(m.requestsPerSecond / ours).toFixed(2)} | ${m.errors} |`);
      }
    }
    lines.push('');
  }
  if (censuses.length > 0) {
    lines.push('TLS handshakes, counted during 1 s of each TLS workload run through a relay that reads every ServerHello:', '');
    lines.push('| workload | target | requests | TCP connections | handshakes resumed | negotiated |');
    lines.push('|---|---|---:|---:|---:|---|');
    for (const { workload, target, census } of censuses) {
      lines.push(`| ${workload} | ${target} | ${census.requests} | ${census.connections} | ${census.resumed} | ${[...census.negotiated].join('; ')} |`);
    }
    lines.push('');
  }
  const ofRelay = [...results].filter(([, row]) => row.has(RELAY)).map(([workloadName, row]) => {
    const share = row.get('this project')!.requestsPerSecond / row.get(RELAY)!.requestsPerSecond;
    return `${workloadName} ${share.toFixed(2)}×`;
  });
  if (ofRelay.length > 0) lines.push(`This project's req/s ÷ the ${RELAY}, the limit for a Node proxy on one core: ${ofRelay.join(', ')}.`);
  if (peakRss !== undefined) lines.push(`This project's peak RSS during the runs: ${peakRss.toFixed(1)} MiB.`);
  if (idle !== undefined) lines.push(`10,000 idle keep-alive client connections: ${idle.ok} held, ${idle.errors} errors, proxy RSS ${idle.rssMiB.toFixed(1)} MiB (the proxy's ulimit -n: ${openFileLimitOf(project!.pid!) ?? 'unknown'}).`);
  if (limits !== undefined) {
    lines.push(`The cost of a rate_limit that never triggers (one process, route /plain vs /limited, in rounds of both back to back):`, '');
    lines.push('| workload | req/s | p50 ms | p99 ms | errors |', '|---|---:|---:|---:|---:|');
    for (const [workload, m] of [[LIMIT_WORKLOADS[0], limits.without], [LIMIT_WORKLOADS[1], limits.with]] as const) {
      lines.push(`| ${workload.name} | ${m.requestsPerSecond.toFixed(0)} | ${m.p50Ms.toFixed(2)} | ${m.p99Ms.toFixed(2)} | ${m.errors} |`);
    }
  }
  lines.push('', ...targetLines(results, peakRss, idle, limits));
  for (const note of notes) lines.push(`Note: ${note}.`);
  const table = lines.join('\n');
  console.log(table);
  if (writeTo !== '') writeFileSync(resolvePath(root, writeTo), `# Benchmark\n\nMeasured by \`npm run bench\` (scripts/bench.ts).\n\n${table}\n`);
}

/**
 * The `--only limits` pair: a warm-up each, then `runs` rounds, each measuring both back to back (in
 * turns AB, BA, … so a drift of the machine does not favour one). Returns the medians without and
 * with the rate_limit, and the median of each round's ratio (with ÷ without), steadier on a shared
 * machine than the ratio of the medians.
 */
async function measureLimits(): Promise<{ readonly without: Measurement; readonly with: Measurement; readonly ratio: number }> {
  for (const workload of LIMIT_WORKLOADS) await measure(PORTS.projectLimits, workload, WARM_UP_SECONDS);
  const samples: [Measurement[], Measurement[]] = [[], []];
  const ratios: number[] = [];
  for (let run = 1; run <= runs; run++) {
    for (const i of run % 2 === 1 ? [0, 1] : [1, 0]) {
      const workload = LIMIT_WORKLOADS[i]!;
      const m = await measure(PORTS.projectLimits, workload, durationSeconds);
      samples[i]!.push(m);
      console.error(`${workload.name.padEnd(48)} run ${run}/${runs} ${m.requestsPerSecond.toFixed(0).padStart(8)} req/s  p50 ${m.p50Ms.toFixed(2)} ms  p99 ${m.p99Ms.toFixed(2)} ms${m.errors ? `  errors ${m.errors}` : ''}`);
    }
    ratios.push(samples[1].at(-1)!.requestsPerSecond / samples[0].at(-1)!.requestsPerSecond);
  }
  return { without: medianOf(samples[0]), with: medianOf(samples[1]), ratio: median(ratios) };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The median of each figure separately (req/s, p50, p99); errors and requests are summed over the runs. */
function medianOf(list: readonly Measurement[]): Measurement {
  return {
    requestsPerSecond: median(list.map((m) => m.requestsPerSecond)),
    p50Ms: median(list.map((m) => m.p50Ms)),
    p99Ms: median(list.map((m) => m.p99Ms)),
    errors: list.reduce((sum, m) => sum + m.errors, 0),
    requests: list.reduce((sum, m) => sum + m.requests, 0),
  };
}

/**
 * Issue 12's performance targets, issue 13's TLS one and issue 15's rate_limit cost against this run's medians: each met, or
 * its measured distance; the other TLS ratios have no target and are reported as measured.
 */
function targetLines(
  results: Map<string, Map<string, Measurement>>,
  peakRss: number | undefined,
  idle: { readonly ok: number; readonly rssMiB: number } | undefined,
  limits: { readonly ratio: number } | undefined,
): string[] {
  const [small, big, post, tlsKeepAlive, tlsNewConnection, tlsFullHandshake] = WORKLOADS.map((workload) => results.get(workload.name));
  const rows: string[] = ['| target | measured | met |', '|---|---:|---|'];
  const ratio = (row: Map<string, Measurement> | undefined, peer: string, label: string, atLeast?: number): void => {
    const ours = row?.get('this project');
    const theirs = row?.get(peer);
    if (ours === undefined || theirs === undefined) return;
    const value = ours.requestsPerSecond / theirs.requestsPerSecond;
    if (atLeast === undefined) return void rows.push(`| ${label} | ${value.toFixed(2)}× | no target |`);
    rows.push(`| ${label} ≥ ${atLeast}× | ${value.toFixed(2)}× | ${value >= atLeast ? 'yes' : `no (${(atLeast - value).toFixed(2)}× short)`} |`);
  };
  ratio(small, RELAY, `small: req/s ÷ ${RELAY}`, 0.7);
  ratio(small, 'minimal node:http proxy', 'small: req/s ÷ minimal node:http proxy', 2.2);
  ratio(small, GO, 'small: req/s ÷ Go httputil', 1.8);
  const ours = small?.get('this project');
  const go = small?.get(GO);
  if (ours !== undefined && go !== undefined) {
    rows.push(`| small: p99 ≤ Go's (${go.p99Ms.toFixed(2)} ms) | ${ours.p99Ms.toFixed(2)} ms | ${ours.p99Ms <= go.p99Ms ? 'yes' : 'no'} |`);
  }
  ratio(post, GO, 'POST 64 KiB: req/s ÷ Go httputil', 1.5);
  ratio(big, 'direct to backend', '1 MiB: req/s ÷ direct', 0.9);
  if (peakRss !== undefined) rows.push(`| peak RSS < 100 MiB | ${peakRss.toFixed(1)} MiB | ${peakRss < 100 ? 'yes' : 'no'} |`);
  if (idle !== undefined) {
    const held = idle.ok === 10_000 ? '' : ` (${idle.ok} held)`;
    rows.push(`| 10,000 idle keep-alive clients < 150 MiB | ${idle.rssMiB.toFixed(1)} MiB${held} | ${idle.rssMiB < 150 && held === '' ? 'yes' : 'no'} |`);
  }
  if (limits !== undefined) {
    const share = limits.ratio;
    const cost = (1 - share) * 100;
    rows.push(`| a rate_limit that never triggers costs < 5% (req/s with ÷ without, the median of the rounds' ratios) | ${share.toFixed(3)}× (${Math.abs(cost).toFixed(1)}% ${cost >= 0 ? 'slower' : 'faster'}) | ${cost < 5 ? 'yes' : `no (${(cost - 5).toFixed(1)} points over)`} |`);
  }
  ratio(tlsKeepAlive, GO, 'TLS keep-alive small: req/s ÷ Go httputil', 1.2);
  ratio(tlsKeepAlive, NGINX, 'TLS keep-alive small: req/s ÷ nginx proxy');
  ratio(tlsNewConnection, GO, 'TLS new connection per request: req/s ÷ Go httputil');
  ratio(tlsNewConnection, NGINX, 'TLS new connection per request: req/s ÷ nginx proxy');
  ratio(tlsFullHandshake, GO, 'TLS new connection, full handshakes: req/s ÷ Go httputil');
  ratio(tlsFullHandshake, NGINX, 'TLS new connection, full handshakes: req/s ÷ nginx proxy');
  return rows;
}

function cleanUp(): void {
  for (const child of children) {
    if (child.pid === undefined || child.exitCode !== null) continue;
    try {
      process.kill(-child.pid, 'SIGKILL'); // the whole group
    } catch {
      child.kill('SIGKILL');
    }
  }
}
process.on('exit', cleanUp);
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143)); // exit runs cleanUp: no peer outlives the script
main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
