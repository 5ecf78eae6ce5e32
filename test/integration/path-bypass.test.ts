/**
 * Judged as the upstream will read it, through the real proxy, on raw sockets: an open `/` route and an `/admin` route
 * with `auth_basic`, each in front of its own node:http backend that records every request with the
 * way each kind of backend would read its path (test/helpers/path-backends.ts: decoded with dot
 * segments resolved, literal, Go, Tomcat, WHATWG appended and resolved against a base, decoded then parsed). None of the known bypass targets reaches either
 * backend without credentials — not in a GET without a body, not in a request with a body, not in
 * HTTP/1.0, not as an upgrade — and 200 generated targets in two request shapes
 * are either refused or reach the open backend byte for byte with every reading outside `/admin`.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { hashPassword } from '../../src/auth/password-hash.js';
import { rawRequest, startBackend, startTestProxy, type Backend, type TestProxy } from '../helpers/proxy-harness.js';
import { generateTarget, isUnder, PATH_READERS } from '../helpers/path-backends.js';
import { seededRandom } from '../helpers/seeded-random.js';

const PASSWORD = 'pw';
const CREDENTIALS = `Authorization: Basic ${Buffer.from(`tom:${PASSWORD}`).toString('base64')}\r\n`;

/** The request shapes the server reads differently: no body, a body, HTTP/1.0, an upgrade (the tunnel). */
const LANES: readonly { readonly name: string; readonly head: (target: string, extra?: string) => string }[] = [
  { name: 'GET, no body', head: (target, extra = '') => `GET ${target} HTTP/1.1\r\nHost: h\r\n${extra}Connection: close\r\n\r\n` },
  { name: 'POST with a body', head: (target, extra = '') => `POST ${target} HTTP/1.1\r\nHost: h\r\n${extra}Content-Length: 2\r\nConnection: close\r\n\r\nhi` },
  { name: 'HTTP/1.0', head: (target, extra = '') => `GET ${target} HTTP/1.0\r\nHost: h\r\n${extra}\r\n` },
  { name: 'upgrade', head: (target, extra = '') => `GET ${target} HTTP/1.1\r\nHost: h\r\n${extra}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n` },
];

/** Targets that, at one time or another, walked around a proxy's path check. All must get 400. */
const BYPASSES = [
  '/%61dmin/secret',
  '/%41dmin/secret/../../admin/secret',
  '//admin/secret',
  '/admin#/../x',
  '/admin\\secret',
  '/admin/..%2F..%2Fpublic',
  '/public/../admin',
  '/public/../admin/secret',
  '/a/%2e%2e/admin',
  '/.%2e/admin',
  '/%2fadmin',
  '/%2Fadmin/secret',
  '/admin%00',
  '/admin%00/secret',
  '/admin;x/secret',
  '/admin/..;/x',
  '/public/..;/admin/secret',
  '/%C0%AE%C0%AE/admin',
  '/public/%C0%AE%C0%AE/admin',
  '/public\\..\\admin',
  '/public/%5C..%5Cadmin',
  '/x//../admin',
  '/public/%2e%2e%2fadmin',
  // found by a break test: a backend that resolves the target against a base URL reads `//evil` as a host
  '//evil/admin/secret',
  '/\\evil/admin',
  '//u:p@evil/admin',
  // found by a break test: a backend that decodes the target before parsing it
  '/admin%3F',
  '/admin%3F/../x',
  '/admin%23x',
  '/admin%20',
  '/admin%c2%85', // NEL, trimmed by Go and Python, not by JS's trimEnd
];

/** The status line's code. */
function statusOf(text: string): number {
  return Number(/^HTTP\/1\.[01] (\d{3}) /.exec(text)?.[1] ?? 0);
}

/** Whether any backend reading of `url`'s path is inside /admin. */
function isReadAsAdmin(url: string): boolean {
  const path = url.split('?')[0]!;
  return Object.values(PATH_READERS).some((read) => {
    try {
      return isUnder(read(path), '/admin');
    } catch {
      return false; // that backend refuses the path
    }
  });
}

describe('path bypasses through the real proxy, on every lane', () => {
  let openBackend: Backend;
  let adminBackend: Backend;
  let proxy: TestProxy;

  before(async () => {
    openBackend = await startBackend();
    adminBackend = await startBackend();
    proxy = await startTestProxy(
      `[proxy.open]\npath = /\npass = ${openBackend.url}\n` +
        `[proxy.admin]\npath = /admin\npass = ${adminBackend.url}\nauth_basic = Private\nauth_user = tom:${hashPassword(PASSWORD)}\n`,
    );
  });
  after(async () => {
    await proxy.close();
    await openBackend.close();
    await adminBackend.close();
  });

  test(`${BYPASSES.length} bypass targets: 400 on every lane, and neither backend receives anything`, async () => {
    for (const lane of LANES) {
      for (const target of BYPASSES) {
        const res = await rawRequest(proxy.port, Buffer.from(lane.head(target), 'latin1'), 500);
        assert.equal(statusOf(res.text), 400, `${lane.name} ${JSON.stringify(target)}: got ${JSON.stringify(res.text.split('\r\n')[0])}, want 400`);
      }
    }
    assert.deepEqual(openBackend.requests.map((r) => r.url), [], 'the open route forwarded a bypass target');
    assert.deepEqual(adminBackend.requests.map((r) => r.url), [], 'the admin route forwarded a bypass target');
  });

  test('with credentials the same ambiguous targets are still 400 (the readings disagree, whoever asks)', async () => {
    for (const target of ['/%61dmin/secret', '/public/../admin', '/admin;x/secret']) {
      const res = await rawRequest(proxy.port, LANES[0]!.head(target, CREDENTIALS));
      assert.equal(statusOf(res.text), 400, `${target}: got ${res.text.split('\r\n')[0]}`);
      assert.match(res.text, /\r\n\r\nbad request: the path selects different routes read literally and decoded\n$/);
    }
    assert.equal(adminBackend.requests.length + openBackend.requests.length, 0);
  });

  test('what agrees goes through with the client’s bytes: /admin needs credentials, the rest reaches the open backend unchanged', async () => {
    const targets = ['/public/a%2Fb//c%7E?q=%zz&next=/../admin', '/public/./x/../y', '/ADMIN/secret', '/administrator', '/admin%3Bx/y'];
    for (const lane of LANES.slice(0, 3)) {
      openBackend.requests.length = 0;
      for (const target of targets) {
        const res = await rawRequest(proxy.port, lane.head(target));
        assert.equal(statusOf(res.text), 200, `${lane.name} ${target}: got ${res.text.split('\r\n')[0]}`);
      }
      assert.deepEqual(openBackend.requests.map((r) => r.url), targets, `${lane.name}: the open backend got other bytes than the client sent`);
      const unauthenticated = await rawRequest(proxy.port, lane.head('/admin/secret'));
      assert.equal(statusOf(unauthenticated.text), 401, `${lane.name}: got ${unauthenticated.text.split('\r\n')[0]}, want 401`);
      const authenticated = await rawRequest(proxy.port, lane.head('/admin/./secret//x%2Fy', CREDENTIALS));
      assert.equal(statusOf(authenticated.text), 200, `${lane.name}: got ${authenticated.text.split('\r\n')[0]}, want 200`);
    }
    assert.deepEqual(adminBackend.requests.map((r) => r.url), ['/admin/./secret//x%2Fy', '/admin/./secret//x%2Fy', '/admin/./secret//x%2Fy']);
  });

  test('property on real sockets: 200 generated targets × 2 lanes are refused, or reach the open backend byte for byte and no backend reading puts them in /admin', async () => {
    openBackend.requests.length = 0;
    adminBackend.requests.length = 0;
    const random = seededRandom(2026);
    const targets = Array.from({ length: 200 }, () => generateTarget(random));
    const statuses = new Map<number, number>();
    const lanes = [LANES[0]!, LANES[2]!];
    for (let i = 0; i < targets.length; i += 20) {
      await Promise.all(
        targets.slice(i, i + 20).flatMap((target) =>
          lanes.map(async (lane) => {
            const res = await rawRequest(proxy.port, Buffer.from(lane.head(target), 'latin1'), 1000);
            const status = statusOf(res.text);
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
            assert.ok([200, 400, 401].includes(status), `${lane.name} ${JSON.stringify(target)}: got ${JSON.stringify(res.text.split('\r\n')[0])}`);
          }),
        ),
      );
    }
    assert.deepEqual(adminBackend.requests, [], 'a request without credentials reached the /admin backend');
    for (const { url } of openBackend.requests) {
      assert.ok(targets.includes(url), `the open backend got ${JSON.stringify(url)}, which no client sent`);
      assert.equal(isReadAsAdmin(url), false, `the open backend got ${JSON.stringify(url)}, which a backend reads inside /admin`);
    }
    assert.ok((statuses.get(200) ?? 0) > 40 && (statuses.get(400) ?? 0) > 40, `got statuses ${JSON.stringify([...statuses])}, want many of both 200 and 400`);
  });
});

test('hash_key = uri hashes the target the upstream gets before any rewrite (origin form, as sent), and X-Proxy-Trace names the route every reading chose', async (t) => {
  const backends = await Promise.all([startBackend(), startBackend(), startBackend()]);
  const pass = backends.map((backend) => `pass = ${backend.url}`).join('\n');
  const proxy = await startTestProxy(`[proxy.h]\npath = /a\n${pass}\nstrategy = consistent-hash\nhash_key = uri\ntrace = on\n`);
  t.after(async () => {
    await proxy.close();
    await Promise.all(backends.map((backend) => backend.close()));
  });
  const upstreamOf = (): number => backends.findIndex((backend) => backend.requests.length > 0);
  for (const target of ['/a/x?q=1', '/a/%7Ex//y?q=%zz', '/a/./b']) {
    const picks: number[] = [];
    for (const head of [`GET ${target} HTTP/1.1\r\nHost: h\r\n`, `GET http://h${target} HTTP/1.1\r\nHost: other\r\n`, `POST ${target} HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n`]) {
      for (const backend of backends) backend.requests.length = 0;
      const res = await rawRequest(proxy.port, `${head}Connection: close\r\n\r\n`);
      assert.match(res.text, /^HTTP\/1\.1 200 [^]*\r\nX-Proxy-Trace: route=h; strategy=consistent-hash; /, `${JSON.stringify(head)}: got ${res.text.split('\r\n')[0]}`);
      assert.deepEqual(backends[upstreamOf()]!.requests.map((r) => r.url), [target]);
      picks.push(upstreamOf());
    }
    assert.equal(new Set(picks).size, 1, `${target}: got upstreams ${picks.join(', ')} for the same target in origin form, absolute form and with a body, want one`);
  }
});

test('a pass path cannot be climbed out of, and /admin for a route /admin/ is redirected, on every lane (found by a break test)', async (t) => {
  const site = await startBackend();
  const admin = await startBackend();
  const proxy = await startTestProxy(
    `[proxy.site]\npath = /\npass = ${site.url}/public/\n` +
      `[proxy.admin]\npath = /admin/\npass = ${admin.url}\nauth_basic = Private\nauth_user = tom:${hashPassword(PASSWORD)}\n`,
  );
  t.after(async () => {
    await proxy.close();
    await site.close();
    await admin.close();
  });
  for (const lane of LANES) {
    for (const target of ['/../internal/secret.txt', '/%2e%2e/internal/secret.txt', '/..%2finternal%2fsecret.txt', '/x/../../internal/secret.txt']) {
      const res = await rawRequest(proxy.port, Buffer.from(lane.head(target), 'latin1'), 500);
      assert.equal(statusOf(res.text), 400, `${lane.name} ${target}: got ${JSON.stringify(res.text.split('\r\n')[0])}, want 400`);
    }
    const redirected = await rawRequest(proxy.port, Buffer.from(lane.head('/admin?x=1'), 'latin1'), 500);
    assert.equal(statusOf(redirected.text), 301, `${lane.name} /admin: got ${JSON.stringify(redirected.text.split('\r\n')[0])}, want 301`);
    assert.match(redirected.text, /\r\nLocation: \/admin\/\?x=1\r\n/i);
  }
  assert.deepEqual(site.requests.map((r) => r.url), [], 'the site backend got a path outside /public/ or /admin');
  assert.deepEqual(admin.requests.map((r) => r.url), []);
  assert.equal(statusOf((await rawRequest(proxy.port, LANES[0]!.head('/x/../index.html'))).text), 200);
  assert.deepEqual(site.requests.map((r) => r.url), ['/public/x/../index.html'], 'a dot segment that stays inside the pass path goes through as sent');
});
