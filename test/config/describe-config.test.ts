/**
 * The `--check` summary: the tutorial's file word for word, matching order, and non-default settings.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeConfig, routesInMatchingOrder } from '../../src/config/describe-config.js';
import { parseConfig } from '../../src/config/load-config.js';

describe('describeConfig', () => {
  it("summarises the tutorial's file", () => {
    const config = parseConfig('[proxy]\n\n[proxy.a]\npath=/a\npass=http://localhost:9001\n\n[proxy.b]\npath=/b\npass=http://localhost:9002\n', 'env.ini');
    const want = [
      'listen 0.0.0.0:8080, 1 worker, access log stdout (combined)',
      '2 routes, in matching order:',
      '  [proxy.a] path /a (prefix), any host, round-robin',
      '      http://localhost:9001',
      '  [proxy.b] path /b (prefix), any host, round-robin',
      '      http://localhost:9002',
      '',
    ].join('\n');
    const got = describeConfig(config);
    assert.equal(got, want, `got:\n${got}\nwant:\n${want}`);
  });

  it('lists host routes first, then regex routes, then longer prefixes, with flags and non-defaults', () => {
    const config = parseConfig(
      `
[server]
listen = [::]:80
workers = auto
body_timeout = 30s
keepalive_timeout = 0
max_body_size = 1m
trusted_proxies = 10.0.0.0/8
[admin]
listen = 127.0.0.1:9090
[proxy.root]
path = /
pass = http://a:1
pass = http://b:2 weight=3 backup
pass = http://c:3 down
[proxy.api]
path = /api
pass = http://a:1
connect_timeout = 1500ms
retries = 0
strategy = consistent-hash
hash_key = header:x-user
[proxy.site]
path = /
host = *.example.com
pass = http://s
health_check = on
auth_basic = Staff
auth_user = tom:H
[proxy.images]
path = ~* \\.png$
pass = http://img
trace = on
`,
      'env.ini',
    );
    const got = describeConfig(config);
    const want = [
      'listen [::]:80, one worker per core, access log stdout (combined)',
      '  body_timeout 30s, keepalive_timeout 0s, max_body_size 1m, trusted_proxies 10.0.0.0/8',
      'admin 127.0.0.1:9090 (no token: read-only)',
      '4 routes, in matching order:',
      '  [proxy.site] path / (prefix), host *.example.com, round-robin',
      '      health_check HEAD / every 3s (timeout 2s, fall 3, rise 2, status 200-399), auth_basic "Staff" (users: tom)',
      '      http://s',
      '  [proxy.images] path ~* \\.png$ (regex), any host, round-robin',
      '      trace on',
      '      http://img',
      '  [proxy.api] path /api (prefix), any host, consistent-hash',
      '      hash_key header:x-user, connect_timeout 1500ms',
      '      http://a:1',
      '  [proxy.root] path / (prefix), any host, round-robin',
      '      http://a:1',
      '      http://b:2 weight=3 backup',
      '      http://c:3 down',
      '',
    ].join('\n');
    assert.equal(got, want, `got:\n${got}\nwant:\n${want}`);
  });

  it('shows retries when they differ from upstreams − 1', () => {
    const config = parseConfig('[proxy.a]\npath=/\npass=http://a\npass=http://b\nretries=0\n', 'env.ini');
    assert.match(describeConfig(config), /\n {6}retries 0\n/, 'got no retries line, want "retries 0"');
  });

  it('shows access rules and limits', () => {
    const config = parseConfig('[proxy.a]\npath=/\npass=http://a\naccess=deny 10.0.0.0/8\naccess=allow all\nrate_limit=10/s burst=5\nconn_limit=2\n', 'env.ini');
    const got = describeConfig(config);
    assert.match(got, /\n {6}access deny 10\.0\.0\.0\/8, allow all \(first match decides, else allowed\), rate_limit 10\/s burst=5 per client IP, conn_limit 2 per client IP\n/, got);
  });

  it('names what each discovery line looks up, and the resolver when set', () => {
    const config = parseConfig(
      '[server]\nresolver=127.0.0.1:5353,::1\nresolver_timeout=1s\n[proxy.a]\npath=/\npass=http://api.test:8080 resolve\npass=http://web.test service=http weight=2\n',
      'env.ini',
    );
    const got = describeConfig(config);
    assert.match(got, /\n {2}resolver 127\.0\.0\.1:5353,\[::1\], resolver_timeout 1s\n/, got);
    assert.match(got, /\n {6}http:\/\/api\.test:8080 resolve \(A and AAAA of api\.test\)\n/, got);
    assert.match(got, /\n {6}http:\/\/web\.test weight=2 service=http \(SRV of _http\._tcp\.web\.test\)\n/, got);
  });
});

describe('routesInMatchingOrder', () => {
  it('puts host routes first, then regex routes in file order, then prefixes by length (the router\'s order)', () => {
    const config = parseConfig(
      '[proxy.p1]\npath=/a\npass=http://x\n[proxy.r1]\npath=~ b\npass=http://x\n[proxy.p2]\npath=/a/b\npass=http://x\n' +
        '[proxy.r2]\npath=~ a\npass=http://x\n[proxy.h]\npath=/\nhost=h.example\npass=http://x\n[proxy.p3]\npath=/c\npass=http://x\n',
      'env.ini',
    );
    const names = routesInMatchingOrder(config.routes).map((route) => route.name);
    assert.deepEqual(names, ['h', 'r1', 'r2', 'p2', 'p1', 'p3'], `got ${names.join(' ')}`);
  });
});
