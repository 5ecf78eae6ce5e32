/**
 * Host normalisation through the real proxy, on raw sockets and on both lanes (the fast lane for a GET
 * without a body, node:http for a request with one): the Host is matched lower-cased, without one
 * trailing dot and without its port, wildcard hosts included; a bad Host header or a bad
 * absolute-form authority (userinfo, a bad port, an empty host, broken brackets) gets 400 and no
 * backend receives anything.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { headerValues, rawRequest, startBackend, startTestProxy, type Backend, type TestProxy } from '../helpers/proxy-harness.js';

const LANES: readonly { readonly name: string; readonly head: (target: string, host: string) => string }[] = [
  { name: 'fast lane', head: (target, host) => `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n` },
  { name: 'node:http', head: (target, host) => `POST ${target} HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi` },
];

function statusOf(text: string): number {
  return Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0);
}

describe('Host normalisation and authority checks', () => {
  let adminBackend: Backend;
  let wildBackend: Backend;
  let anyBackend: Backend;
  let proxy: TestProxy;

  before(async () => {
    [adminBackend, wildBackend, anyBackend] = await Promise.all([startBackend(), startBackend(), startBackend()]);
    proxy = await startTestProxy(
      `[proxy.admin]\nhost = admin.example.com\npath = /\npass = ${adminBackend.url}\n` +
        `[proxy.wild]\nhost = *.example.com\npath = /\npass = ${wildBackend.url}\n` +
        `[proxy.any]\npath = /\npass = ${anyBackend.url}\n`,
    );
  });
  after(async () => {
    await proxy.close();
    await Promise.all([adminBackend.close(), wildBackend.close(), anyBackend.close()]);
  });

  const clear = (): void => {
    for (const backend of [adminBackend, wildBackend, anyBackend]) backend.requests.length = 0;
  };

  test('Host with upper case, a trailing dot and :80 reaches the host route (as nginx); the Host goes upstream as sent', async () => {
    const cases: [string, string][] = [
      ['Admin.Example.COM.:80', 'admin'],
      ['admin.example.com.', 'admin'],
      ['ADMIN.EXAMPLE.COM', 'admin'],
      ['admin.example.com:8080', 'admin'],
      ['WWW.Example.com.:8080', 'wild'],
      ['example.com', 'any'],
      ['admin.example.com.evil', 'any'],
    ];
    for (const lane of LANES) {
      for (const [host, want] of cases) {
        clear();
        const res = await rawRequest(proxy.port, lane.head('/x', host));
        assert.equal(statusOf(res.text), 200, `${lane.name} Host ${host}: got ${res.text.split('\r\n')[0]}`);
        const backends = { admin: adminBackend, wild: wildBackend, any: anyBackend };
        const got = Object.entries(backends).filter(([, backend]) => backend.requests.length > 0).map(([name]) => name);
        assert.deepEqual(got, [want], `${lane.name} Host ${host}: got the ${got.join(', ')} backend, want ${want}`);
        assert.deepEqual(headerValues(backends[want as keyof typeof backends].requests[0]!.rawHeaders, 'host'), [host]);
      }
    }
  });

  test('an absolute-form target is routed by its normalised authority, which replaces the Host upstream', async () => {
    clear();
    const res = await rawRequest(proxy.port, 'GET http://Admin.Example.COM.:80/x?q HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n');
    assert.equal(statusOf(res.text), 200);
    assert.equal(adminBackend.requests[0]?.url, '/x?q');
    assert.deepEqual(headerValues(adminBackend.requests[0]!.rawHeaders, 'host'), ['Admin.Example.COM.:80']);
  });

  test('bad absolute-form authorities → 400, and no backend receives anything (nothing like `Host: u@evil:1` is forwarded)', async () => {
    clear();
    const authorities = ['u@evil:1', 'u:p@admin.example.com', '', ':80', 'evil:99999', 'evil:65536', 'evil:8x', '[::1', '::1]', '[::1]x', 'a..b', 'a,b'];
    for (const authority of authorities) {
      for (const method of ['GET', 'POST']) {
        const body = method === 'POST' ? 'Content-Length: 2\r\n\r\nhi' : '\r\n';
        const res = await rawRequest(proxy.port, `${method} http://${authority}/a/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n${body}`);
        assert.equal(statusOf(res.text), 400, `${method} http://${authority}/a/x: got ${res.text.split('\r\n')[0]}, want 400`);
        assert.match(res.text, /invalid authority in the request target\n$/);
      }
    }
    assert.deepEqual([adminBackend, wildBackend, anyBackend].map((b) => b.requests.length), [0, 0, 0]);
  });

  test('bad Host headers → 400 on both lanes, and no backend receives anything', async () => {
    clear();
    const hosts = ['u@evil:1', 'evil:99999', 'evil:8x', '', '[::1', '[::1]x', 'a..b', '.example.com', 'admin.example.com,evil', 'admin%2eexample.com', 'a/b'];
    for (const lane of LANES) {
      for (const host of hosts) {
        const res = await rawRequest(proxy.port, lane.head('/x', host));
        assert.equal(statusOf(res.text), 400, `${lane.name} Host ${JSON.stringify(host)}: got ${res.text.split('\r\n')[0]}, want 400`);
        assert.match(res.text, /invalid Host header\n$/);
      }
    }
    assert.deepEqual([adminBackend, wildBackend, anyBackend].map((b) => b.requests.length), [0, 0, 0]);
  });
});
