/**
 * Step 5, Basic auth enforced by the proxy itself (SPEC 1.2 `auth_basic`, `auth_user`, `auth_forward`;
 * RFC 7617) through the real proxy and the built CLI: the 401 challenge, wrong and right passwords,
 * the proxy's credentials kept from the upstream unless `auth_forward = on`, 1,000 seeded malformed
 * Authorization headers on raw sockets that never produce a 5xx, upgrade requests refused before they
 * reach the upstream, `passwd` output pasted into env.ini, and `--check` pointing at a bad hash.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashPassword } from '../../src/auth/password-hash.js';
import { buildCli } from '../helpers/built-cli.js';
import { headerValues, request, startBackend, startTestProxy, type Backend, type TestProxy } from '../helpers/proxy-harness.js';
import { connectWebSocket, startEchoServer, WebSocketHandshakeError } from '../helpers/websocket.js';
import { seededRandom as mulberry32 } from '../helpers/seeded-random.js';

const configDir = mkdtempSync(join(tmpdir(), 'proxy-auth-'));
const CHALLENGE = 'Basic realm="Private", charset="UTF-8"';
const PASSWORD = 'correct horse';
/** One scrypt hash for the whole file (about 50 ms each). */
const HASH = hashPassword(PASSWORD);

function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`, 'utf8').toString('base64')}`;
}

function authIni(backendUrl: string, extra = ''): string {
  return `[proxy.private]\npath = /private\npass = ${backendUrl}\nauth_basic = Private\nauth_user = tom:${HASH}\n${extra}`;
}

async function startAuthProxy(extra = ''): Promise<{ backend: Backend; proxy: TestProxy; close(): Promise<void> }> {
  const backend = await startBackend();
  const proxy = await startTestProxy(authIni(backend.url, extra));
  return {
    backend,
    proxy,
    async close() {
      await proxy.close();
      await backend.close();
    },
  };
}

// ---- the built CLI -----------------------------------------------------------------------------

let mainJs = '';
before(async () => {
  mainJs = await buildCli();
});

/** Runs `node <build>/dist/main.js ...args` with `stdin` piped in; resolves with its exit code and output. */
function runCli(args: readonly string[], stdin = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [mainJs, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

// ---- raw exchanges -----------------------------------------------------------------------------

interface RawResponse {
  readonly status: number;
  readonly head: string;
}

/**
 * Writes `bytes` on a fresh connection and resolves with the first response's status and head once
 * its Content-Length body has arrived (or the server closed). Status 0 means no response at all.
 */
function rawExchange(port: number, bytes: Buffer): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = Buffer.alloc(0);
    let isDone = false;
    const finish = (): void => {
      if (isDone) return;
      isDone = true;
      socket.destroy();
      const headEnd = received.indexOf('\r\n\r\n');
      const head = received.subarray(0, headEnd < 0 ? received.length : headEnd).toString('latin1');
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0), head });
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const headEnd = received.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(received.subarray(0, headEnd).toString('latin1'))?.[1] ?? 0);
      if (received.length >= headEnd + 4 + length) finish();
    });
    socket.on('end', finish);
    socket.on('close', finish);
    socket.on('error', finish);
    socket.setTimeout(5000, finish);
    socket.write(bytes);
  });
}

/**
 * One malformed `Authorization` value as raw latin1 bytes, of a kind chosen by `random`. None is a
 * valid `tom:correct horse`; most are rejected by the parser without a scrypt run.
 */
function malformedAuthorization(random: () => number): { kind: string; value: Buffer } {
  const int = (n: number): number => Math.floor(random() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const randomText = (length: number, alphabet: string): string => Array.from({ length }, () => alphabet[int(alphabet.length)]).join('');
  const base64Alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const b64 = (bytes: Buffer | string): string => Buffer.from(bytes).toString('base64');
  const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');
  const kinds: (() => { kind: string; value: Buffer })[] = [
    () => ({ kind: 'bad base64 characters', value: latin1(`Basic ${randomText(4 + int(40), `${base64Alphabet}!@#$%^&*()-_.~:;,`)}`) }),
    () => {
      const token = b64(`tom:${randomText(1 + int(20), base64Alphabet)}`);
      const variants = [token.replace(/=+$/, ''), `${token}=`, `${token}==`, `=${token}`, token.slice(0, -1), `${token.slice(0, 4)} ${token.slice(4)}`];
      return { kind: 'bad base64 padding or split', value: latin1(`Basic ${pick(variants)}`) };
    },
    () => ({ kind: 'no colon', value: latin1(`Basic ${b64(randomText(1 + int(30), 'abcdefghijklmnopqrstuvwxyz0123456789 '))}`) }),
    () => {
      const scheme = pick(['Bearer', 'Digest', 'Negotiate', 'NTLM', 'Basik', 'Basi', 'Basic-', 'B', 'xBasic', 'Token', 'AWS4-HMAC-SHA256']);
      return { kind: 'wrong scheme', value: latin1(`${scheme} ${b64(`tom:${PASSWORD}`)}`) };
    },
    () => ({ kind: 'scheme without a space', value: latin1(pick([`Basic${b64(`tom:${PASSWORD}`)}`, 'Basic', 'Basic ', 'basic\t', ''])) }),
    () => {
      const size = 4097 + int(20 * 1024 - 4097);
      const body = random() < 0.5 ? randomText(size, base64Alphabet) : b64(`tom:${randomText(size, 'abc')}`).slice(0, size);
      return { kind: `huge (${size} bytes)`, value: latin1(`Basic ${body}`) };
    },
    () => {
      const bytes = Buffer.from(Array.from({ length: 1 + int(40) }, () => 0x80 + int(0x80)));
      return { kind: 'non-ASCII bytes', value: Buffer.concat([latin1(pick(['Basic ', '', 'Basic dG9t'])), bytes]) };
    },
    () => {
      const invalidUtf8 = Buffer.concat([Buffer.from('tom:'), Buffer.from(pick([[0xff], [0xc3, 0x28], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]]))]);
      return { kind: 'credentials not UTF-8', value: latin1(`Basic ${b64(invalidUtf8)}`) };
    },
    () => {
      const control = String.fromCharCode(pick([0, 1, 9, 10, 13, 27, 127]));
      return { kind: 'control character in the credentials', value: latin1(`Basic ${b64(`tom:${PASSWORD.slice(0, 3)}${control}${PASSWORD.slice(3)}`)}`) };
    },
    () => ({ kind: 'only spaces and tabs', value: latin1(randomText(1 + int(10), ' \t')) }),
  ];
  return pick(kinds)();
}

// ---- tests -------------------------------------------------------------------------------------

test('no credentials → 401 with the realm challenge, and nothing reaches the backend', async (t) => {
  const { backend, proxy, close } = await startAuthProxy();
  t.after(close);
  const res = await request(proxy.port, { path: '/private/page' });
  assert.equal(res.status, 401, `got ${res.status}, want 401`);
  assert.deepEqual(headerValues(res.rawHeaders, 'www-authenticate'), [CHALLENGE], `got ${JSON.stringify(res.headers['www-authenticate'])}, want ${CHALLENGE}`);
  assert.equal(res.body.toString(), 'authentication required\n');
  assert.equal(backend.requests.length, 0, `got ${backend.requests.length} requests at the backend, want 0`);
  assert.equal(proxy.logs[0]?.status, 401);
});

test('wrong password or unknown user → 401; the right one → 200 and the backend does not see Authorization', async (t) => {
  const { backend, proxy, close } = await startAuthProxy();
  t.after(close);
  for (const [user, password] of [
    ['tom', 'wrong'],
    ['tom', `${PASSWORD} `],
    ['tom', PASSWORD.toUpperCase()],
    ['jerry', PASSWORD],
    ['Tom', PASSWORD],
    ['', PASSWORD],
  ] as const) {
    const res = await request(proxy.port, { path: '/private', headers: { Authorization: basic(user, password) } });
    assert.equal(res.status, 401, `${user}:${password}: got ${res.status}, want 401`);
    assert.equal(res.headers['www-authenticate'], CHALLENGE);
  }
  assert.equal(backend.requests.length, 0, `got ${backend.requests.length} requests at the backend, want 0`);

  for (const scheme of ['Basic', 'basic', 'BASIC']) {
    const authorization = basic('tom', PASSWORD).replace('Basic', scheme);
    const res = await request(proxy.port, { path: '/private/x?y=1', headers: { Authorization: authorization, 'X-Keep': 'me' } });
    assert.equal(res.status, 200, `${scheme}: got ${res.status}, want 200`);
    assert.equal(res.body.toString(), 'ok');
  }
  assert.equal(backend.requests.length, 3, `got ${backend.requests.length} requests at the backend, want 3`);
  for (const seen of backend.requests) {
    assert.deepEqual(headerValues(seen.rawHeaders, 'authorization'), [], `got Authorization ${headerValues(seen.rawHeaders, 'authorization')} at the backend, want none`);
    assert.deepEqual(headerValues(seen.rawHeaders, 'x-keep'), ['me'], 'other headers still pass');
    assert.equal(seen.url, '/private/x?y=1');
  }
  assert.equal(proxy.logs.at(-1)?.user, 'tom', `got user ${proxy.logs.at(-1)?.user} in the access log, want tom`);
});

test('auth_forward = on: the checked Authorization header reaches the backend unchanged', async (t) => {
  const { backend, proxy, close } = await startAuthProxy('auth_forward = on\n');
  t.after(close);
  const authorization = basic('tom', PASSWORD);
  const res = await request(proxy.port, { path: '/private', headers: { Authorization: authorization } });
  assert.equal(res.status, 200, `got ${res.status}, want 200`);
  assert.deepEqual(headerValues(backend.requests[0]!.rawHeaders, 'authorization'), [authorization]);

  const refused = await request(proxy.port, { path: '/private', headers: { Authorization: basic('tom', 'nope') } });
  assert.equal(refused.status, 401, `auth_forward does not skip the check: got ${refused.status}, want 401`);
  assert.equal(backend.requests.length, 1);
});

test('a route without auth_basic passes Authorization through to a backend that checks it (the tutorial way)', async (t) => {
  const backend = await startBackend((req, res) => {
    if (req.headers.authorization === basic('tom', '123')) return void res.end('welcome');
    res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="web1"' }).end('backend says no');
  });
  const proxy = await startTestProxy(`[proxy.open]\npath = /open\npass = ${backend.url}\n`);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const refused = await request(proxy.port, { path: '/open' });
  assert.equal(refused.status, 401);
  assert.equal(refused.headers['www-authenticate'], 'Basic realm="web1"', 'the backend challenge passes through unchanged');
  const allowed = await request(proxy.port, { path: '/open', headers: { Authorization: basic('tom', '123') } });
  assert.equal(allowed.status, 200, `got ${allowed.status}, want 200`);
  assert.equal(allowed.body.toString(), 'welcome');
});

test('1,000 seeded malformed Authorization headers on raw sockets: 401 (or 400/431 from the parser), never a 5xx', async (t) => {
  const seed = 20240607;
  const random = mulberry32(seed);
  const { backend, proxy, close } = await startAuthProxy();
  t.after(close);

  const cases = Array.from({ length: 1000 }, () => malformedAuthorization(random));
  // A few more that are well formed but wrong (each costs a scrypt run, so only a few).
  for (const [user, password] of [['tom', 'x'], ['nobody', PASSWORD], ['tom', ''], ['tom', ':'], ['tom:', PASSWORD]] as const) {
    cases.push({ kind: 'well formed, wrong', value: Buffer.from(basic(user, password)) });
  }
  const statuses = new Map<number, number>();
  const results: { kind: string; response: RawResponse; size: number }[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < cases.length) {
      const { kind, value } = cases[next++]!;
      const bytes = Buffer.concat([Buffer.from('GET /private HTTP/1.1\r\nHost: h\r\nAuthorization: '), value, Buffer.from('\r\nConnection: close\r\n\r\n')]);
      results.push({ kind, response: await rawExchange(proxy.port, bytes), size: value.length });
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));

  for (const { kind, response, size } of results) {
    statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    assert.ok(response.status >= 400 && response.status < 500, `seed ${seed}, ${kind}: got status ${response.status}, want a 4xx (never a 5xx)`);
    if (response.status === 401) {
      assert.match(response.head, /\r\nWWW-Authenticate: Basic realm="Private", charset="UTF-8"\r\n/i, `seed ${seed}, ${kind}: a 401 without the challenge`);
    } else if (response.status === 431) {
      assert.ok(size > 15 * 1024, `seed ${seed}, ${kind}: got 431 for a ${size}-byte header, want 431 only near max_header_size (16k)`);
    } else {
      assert.equal(response.status, 400, `seed ${seed}, ${kind}: got ${response.status}, want 401, or 400/431 from node's parser`);
    }
  }
  const summary = JSON.stringify(Object.fromEntries(statuses));
  assert.ok((statuses.get(401) ?? 0) >= 800, `got statuses ${summary}, want most of them 401`);
  assert.equal(backend.requests.length, 0, `got ${backend.requests.length} requests at the backend, want 0`);
  assert.equal(results.length, 1005);
});

test('upgrade requests on an auth route: without or with wrong credentials 401 before the upstream; with the right ones the tunnel opens', async (t) => {
  const echo = await startEchoServer();
  const plain = await startTestProxy(authIni(`http://127.0.0.1:${echo.port}`));
  const forwarding = await startTestProxy(authIni(`http://127.0.0.1:${echo.port}`, 'auth_forward = on\n'));
  const clients: { destroy(): void }[] = [];
  t.after(async () => {
    for (const client of clients) client.destroy();
    await plain.close();
    await forwarding.close();
    await echo.close();
  });

  const refusedHeaders: Record<string, string>[] = [{}, { Authorization: basic('tom', 'wrong') }, { Authorization: 'Bearer abc' }];
  for (const headers of refusedHeaders) {
    const error = await connectWebSocket(plain.port, '/private/ws', { headers }).then(
      () => assert.fail('got a WebSocket, want 401'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof WebSocketHandshakeError, `got ${String(error)}, want a WebSocketHandshakeError`);
    assert.equal(error.statusCode, 401, `got ${error.statusCode}, want 401`);
    assert.equal(error.headers['www-authenticate'], CHALLENGE, `got ${error.headers['www-authenticate']}, want ${CHALLENGE}`);
  }
  assert.equal(echo.connectionCount + echo.rejectedCount, 0, 'a refused upgrade must not reach the backend');

  const authorization = basic('tom', PASSWORD);
  const client = await connectWebSocket(plain.port, '/private/ws', { headers: { Authorization: authorization }, firstMessage: 'let me in' });
  clients.push(client);
  assert.equal((await client.nextMessage()).text, 'let me in');
  assert.equal(echo.connections[0]!.headers.authorization, undefined, 'the proxy keeps its own credentials from the upstream');

  const forwarded = await connectWebSocket(forwarding.port, '/private/ws', { headers: { Authorization: authorization } });
  clients.push(forwarded);
  assert.equal(echo.connections[1]!.headers.authorization, authorization, 'auth_forward = on forwards them on upgrades too');
});

test('passwd output pasted into env.ini works: --check accepts it and the proxy lets that password in', async (t) => {
  const password = 'pässwörd with spaces';
  const passwd = await runCli(['passwd', 'tom'], `${password}\n`);
  assert.equal(passwd.code, 0, `passwd exited ${passwd.code}: ${passwd.stderr}`);
  const line = passwd.stdout.trim();
  assert.match(line, /^auth_user = tom:\$scrypt\$N=\d+,r=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/, `got ${JSON.stringify(line)}, want an auth_user line`);

  const backend = await startBackend();
  const ini = `[proxy.private]\npath = /private\npass = ${backend.url}\nauth_basic = Private\n${line}\n`;
  const file = join(configDir, 'pasted.ini');
  writeFileSync(file, ini);
  const check = await runCli(['--check', '--config', file]);
  assert.equal(check.code, 0, `--check exited ${check.code}, want 0: ${check.stderr}`);

  const proxy = await startTestProxy(ini);
  t.after(async () => {
    await proxy.close();
    await backend.close();
  });
  const allowed = await request(proxy.port, { path: '/private', headers: { Authorization: basic('tom', password) } });
  assert.equal(allowed.status, 200, `got ${allowed.status}, want 200 with the password given to passwd`);
  const refused = await request(proxy.port, { path: '/private', headers: { Authorization: basic('tom', `${password}!`) } });
  assert.equal(refused.status, 401, `got ${refused.status}, want 401 with another password`);
});

test('--check rejects an auth_user line whose hash is malformed, with file:line:column, exit code 1', async () => {
  const good = HASH;
  const badHashes = [
    good.replace(/\$[^$]+$/, '$short'), // key too short
    good.replace('$scrypt$', '$argon2id$'), // unsupported algorithm
    good.replace('N=16384', 'N=1000'), // not a power of two
    'plaintext-password',
    good.slice(0, -1) + '!', // not base64
  ];
  for (const [index, hash] of badHashes.entries()) {
    const prefix = `auth_user = ${index === 0 ? 'tom' : 'jerry'}:`;
    const ini = `[proxy.private]\npath = /private\npass = http://127.0.0.1:9\nauth_basic = Private\n\n${prefix}${hash}\n`;
    const file = join(configDir, `bad-${index}.ini`);
    writeFileSync(file, ini);
    const { code, stdout, stderr } = await runCli(['--check', '--config', file]);
    assert.equal(code, 1, `${hash}: --check exited ${code}, want 1 (stdout ${stdout})`);
    const want = `${file}:6:${prefix.length + 1}: `;
    assert.ok(stderr.startsWith(want), `${hash}: got ${JSON.stringify(stderr.split('\n')[0])}, want it to start with ${JSON.stringify(want)}`);
    assert.match(stderr, /hash/, `${hash}: the message must say what is wrong`);
  }
});
