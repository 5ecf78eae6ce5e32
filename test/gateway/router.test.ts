/**
 * The router (src/gateway/router.ts) on both readings of a path: decisions as a table, regex routes
 * on both readings, the rewrite on the client's bytes, host normalisation, and a property test of
 * thousands of generated targets: either the proxy refuses the target (400), or every backend
 * reading of what it forwards (test/helpers/path-backends.ts) serves the route the proxy chose.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ClientRequest } from '../../src/wire/client-side.js';
import { parseConfig } from '../../src/config/load-config.js';
import type { RouteConfig } from '../../src/config/config.js';
import { pathWarnings, REGEX_BUDGET_MS, Router, type RouteDecision } from '../../src/gateway/router.js';
import { readRequestTarget } from '../../src/gateway/request-target.js';
import { generateTarget, isUnder, PATH_READERS } from '../helpers/path-backends.js';
import { seededRandom } from '../helpers/seeded-random.js';

interface TestRoute {
  readonly config: RouteConfig;
}

function routerFor(ini: string): Router<TestRoute> {
  return new Router(parseConfig(ini, 'test.ini').routes.map((config) => ({ config })));
}

/** The route's name, `404`, `400 ambiguous`, `400 outside the pass path`, `301 LOCATION (route)`, or `400 …` for a target refused before routing. */
function decide(router: Router<TestRoute>, url: string, host = 'h'): string {
  const decision = route(router, url, host);
  if (typeof decision === 'string') return decision;
  switch (decision.kind) {
    case 'route':
      return decision.route.config.name;
    case 'none':
      return '404';
    case 'ambiguous':
      return '400 ambiguous';
    case 'outside-pass-path':
      return '400 outside the pass path';
    case 'redirect':
      return `301 ${decision.location} (${decision.route.config.name})`;
    case 'over-regex-budget':
      return '414 over the regex budget';
  }
}

function route(router: Router<TestRoute>, url: string, host = 'h'): RouteDecision<TestRoute> | string {
  const target = readRequestTarget({ url, rawHeaders: ['Host', host], httpVersion: '1.1' } as unknown as ClientRequest);
  return 'status' in target ? `400 ${target.text}` : router.match(target);
}

const OPEN_AND_ADMIN = '[proxy.open]\npath = /\npass = http://127.0.0.1:1\n[proxy.admin]\npath = /admin\npass = http://127.0.0.1:2\n';

test('a route only when the literal and the normalised reading select it; 400 when they disagree', () => {
  const router = routerFor(OPEN_AND_ADMIN);
  const cases: [string, string][] = [
    ['/', 'open'],
    ['/public/x', 'open'],
    ['/admin', 'admin'],
    ['/admin/', 'admin'],
    ['/admin/secret', 'admin'],
    ['/administrator', 'open'],
    ['/admin/./secret', 'admin'], // both readings: /admin
    ['/admin/x/../y', 'admin'],
    ['/a%2Fb', 'open'], // %2F survives: both readings are under /
    ['/public//x', 'open'],
    ['/x?next=/admin/../admin', 'open'], // the query is not a path
    ['/%61dmin/secret', '400 ambiguous'],
    ['/%2fadmin', '400 ambiguous'],
    ['//admin/secret', '400 ambiguous'],
    ['/admin\\secret', '400 ambiguous'], // literally one name `admin\secret` under /, normalised /admin/secret
    ['/public\\..\\admin', '400 ambiguous'],
    ['/admin/..%2F..%2Fpublic', '400 ambiguous'],
    ['/public/../admin', '400 ambiguous'],
    ['/a/%2e%2e/admin', '400 ambiguous'],
    ['/admin/../public', '400 ambiguous'],
    ['/admin;x/secret', '400 ambiguous'],
    ['/admin/..;/x', '400 ambiguous'],
    ['/admin%3Bx/secret', 'open'], // an escaped `;` is a character to every reader, Tomcat too
    ['/Admin/secret', 'open'], // prefixes are case-sensitive, as nginx's
  ];
  for (const [url, want] of cases) assert.equal(decide(router, url), want, `${url}: got ${decide(router, url)}, want ${want}`);
  assert.match(decide(router, '/admin#/../x'), /^400 .*'#'/);
  assert.match(decide(router, '/admin%00'), /^400 .*control byte/);
  assert.match(decide(router, '/%C0%AE%C0%AE/admin'), /^400 .*not UTF-8/);
});

test('no route in either reading → 404; a route in only one reading → 400', () => {
  const router = routerFor('[proxy.admin]\npath = /admin\npass = http://127.0.0.1:2\n');
  assert.equal(decide(router, '/public'), '404');
  assert.equal(decide(router, '/public/../admin'), '400 ambiguous');
  assert.equal(decide(router, '/admin/../public'), '400 ambiguous');
});

test('regex routes are matched against both readings, with their own case rule', () => {
  const router = routerFor(`${OPEN_AND_ADMIN}[proxy.php]\npath = ~ \\.php$\npass = http://127.0.0.1:3\n[proxy.api]\npath = ~* ^/api(/|$)\npass = http://127.0.0.1:4\n`);
  const cases: [string, string][] = [
    ['/index.php', 'php'],
    ['/index%2ephp', '400 ambiguous'],
    ['/index.ph%70', '400 ambiguous'],
    ['/y/../x.php', 'php'],
    ['/api/v1', 'api'],
    ['/API/v1', 'api'], // ~* ignores case in both readings
    ['/%41PI/v1', '400 ambiguous'], // literally `/%41PI` is not /api
    ['/api/../admin', '400 ambiguous'],
    ['/x/../api', '400 ambiguous'],
  ];
  for (const [url, want] of cases) assert.equal(decide(router, url), want, `${url}: got ${decide(router, url)}, want ${want}`);
});

test('a prefix with escapes is matched in each reading in that reading’s form', () => {
  const router = routerFor(`${OPEN_AND_ADMIN}[proxy.cafe]\npath = /caf%C3%A9\npass = http://127.0.0.1:3\n`);
  assert.equal(decide(router, '/caf%C3%A9/menu'), 'cafe');
  assert.equal(decide(router, '/caf%c3%a9/menu'), '400 ambiguous', 'literally a different prefix (hex case), normalised the same');
  assert.equal(decide(router, '/cafe/menu'), 'open');
});

test('the upstream gets the client’s bytes: the matched prefix replaced on the raw path, the query unchanged', () => {
  const router = routerFor(
    '[proxy.plain]\npath = /a\npass = http://127.0.0.1:1\n' +
      '[proxy.strip]\npath = /s\npass = http://127.0.0.1:2/\n' +
      '[proxy.v2]\npath = /api\npass = http://127.0.0.1:3/v2\n' +
      '[proxy.pub]\npath = /pub/\npass = http://127.0.0.1:4/public/\n' +
      '[proxy.root]\npath = /root/\npass = http://127.0.0.1:5/\n',
  );
  const cases: [string, string][] = [
    ['/a//x%2F%7E?q=%zz&r=/../', '/a//x%2F%7E?q=%zz&r=/../'],
    ['/a/./x', '/a/./x'],
    ['/s/x/y?q=%20', '/x/y?q=%20'],
    ['/s', '/'],
    ['/s//x', '//x'], // one slash joined (the README's deviation), the client's second kept
    ['/s/%7Euser/a%2Fb', '/%7Euser/a%2Fb'],
    ['/api/users?id=7', '/v2/users?id=7'],
    ['/api/x/../users', '/v2/x/../users'],
    // A prefix that ends in `/` takes the separator: every slash after it is the client's (a break test: one was dropped).
    ['/pub/x', '/public/x'],
    ['/pub//x', '/public//x'],
    ['/pub///x', '/public///x'],
    ['/root//x', '//x'],
    ['/root/', '/'],
  ];
  for (const [url, want] of cases) {
    const decision = route(router, url);
    assert.ok(typeof decision !== 'string' && decision.kind === 'route', `${url}: got ${JSON.stringify(decision)}`);
    assert.equal(decision.upstreamTarget, want, `${url}: got ${decision.upstreamTarget}, want ${want}`);
  }
});

test('a rewritten path must stay in the pass path: dot segments that climb out of it → 400 (found by a break test)', () => {
  const router = routerFor(
    '[proxy.site]\npath = /\npass = http://127.0.0.1:1/public/\n' +
      '[proxy.v2]\npath = /api\npass = http://127.0.0.1:2/v2/\n',
  );
  const cases: [string, string][] = [
    ['/../internal/secret.txt', '400 outside the pass path'],
    ['/%2e%2e/internal/secret.txt', '400 outside the pass path'],
    ['/..%2finternal%2fsecret.txt', '400 outside the pass path'],
    ['/x/../../internal/secret.txt', '400 outside the pass path'],
    ['/x\\..\\..\\internal', '400 outside the pass path'],
    ['/api/../api/x', '400 outside the pass path'], // sent as /v2/../api/x
    ['/api/%2e%2e/api/x', '400 outside the pass path'],
    ['/x/../y', 'site'], // /public/x/../y stays in /public/
    ['/index.html', 'site'],
    ['/api/x/../users', 'v2'], // /v2/x/../users stays in /v2/
    ['/api/a%2Fb', 'v2'],
  ];
  for (const [url, want] of cases) assert.equal(decide(router, url), want, `${url}: got ${decide(router, url)}, want ${want}`);
});

test('the slash redirect, as nginx: exactly a prefix route without its trailing slash → 301 to it (found by a break test)', () => {
  const router = routerFor(
    '[proxy.open]\npath = /\npass = http://127.0.0.1:1\n' +
      '[proxy.admin]\npath = /admin/\npass = http://127.0.0.1:2\n' +
      '[proxy.docs]\npath = /docs/\npass = http://127.0.0.1:3\n[proxy.docs_exact]\npath = /docs\npass = http://127.0.0.1:4\n' +
      '[proxy.php]\npath = ~ ^/shop\npass = http://127.0.0.1:5\n[proxy.shop]\npath = /shop/\npass = http://127.0.0.1:6\n' +
      '[proxy.tenant]\nhost = t.example\npath = /app/\npass = http://127.0.0.1:7\n',
  );
  const cases: [string, string, string?][] = [
    ['/admin', '301 /admin/ (admin)'],
    ['/admin?next=%2F', '301 /admin/?next=%2F (admin)'],
    ['/admin/', 'admin'],
    ['/admin/x', 'admin'],
    ['/administrator', 'open'],
    ['/%61dmin', '400 ambiguous'], // the decoded reading is redirected, the literal one is not
    ['/admin;', '400 ambiguous'], // Tomcat's reading is /admin
    ['/admin%20', '400 ambiguous'], // a backend that decodes before it parses reads /admin
    ['/admin%c2%85', '400 ambiguous'], // and one that trims as Go or Python, NEL too (a break test)
    ['/docs', 'docs_exact'], // a route with the prefix itself: no redirect
    ['/shop', '301 /shop/ (shop)'], // before regex routes, as nginx
    ['/app', '301 /app/ (tenant)', 't.example'],
    ['/app', 'open', 'other.example'],
  ];
  for (const [url, want, host] of cases) assert.equal(decide(router, url, host), want, `${url} (Host ${host ?? 'h'}): got ${decide(router, url, host)}, want ${want}`);
});

test('Host is matched lower-cased, without one trailing dot and the port; wildcard hosts too', () => {
  const router = routerFor(
    '[proxy.admin]\nhost = admin.example.com\npath = /\npass = http://127.0.0.1:1\n' +
      '[proxy.wild]\nhost = *.example.com\npath = /\npass = http://127.0.0.1:2\n' +
      '[proxy.any]\npath = /\npass = http://127.0.0.1:3\n',
  );
  const cases: [string, string][] = [
    ['admin.example.com', 'admin'],
    ['Admin.Example.COM.:80', 'admin'],
    ['ADMIN.EXAMPLE.COM.', 'admin'],
    ['admin.example.com:8080', 'admin'],
    ['www.Example.com.', 'wild'],
    ['a.b.example.com:1', 'wild'],
    ['example.com', 'any'],
    ['admin.example.com.evil', 'any'],
  ];
  for (const [host, want] of cases) assert.equal(decide(router, '/x', host), want, `Host ${host}: got ${decide(router, '/x', host)}, want ${want}`);
  assert.equal(decide(router, 'http://Admin.Example.COM.:80/x', 'other'), 'admin', 'an absolute-form authority routes like a Host');
  assert.match(decide(router, '/x', 'admin.example.com..'), /^400 .*invalid Host/);
});

/** A route table of an open `/` and a protected admin route, and how a backend decides "admin". */
const PROPERTY_TABLES = [
  { name: 'prefix /admin', ini: OPEN_AND_ADMIN, isAdmin: (path: string) => isUnder(path, '/admin') },
  {
    name: 'regex ~* ^/admin(/|$)',
    ini: '[proxy.open]\npath = /\npass = http://127.0.0.1:1\n[proxy.admin]\npath = ~* ^/admin(/|$)\npass = http://127.0.0.1:2\n',
    isAdmin: (path: string) => isUnder(path, '/admin', true),
  },
];

for (const table of PROPERTY_TABLES) {
  test(`property, ${table.name}: 20,000 generated targets are refused, or every backend reading serves the route the proxy chose`, () => {
    const router = routerFor(table.ini);
    const random = seededRandom(11);
    const counts = { refused: 0, open: 0, admin: 0 };
    for (let i = 0; i < 20_000; i++) {
      const url = generateTarget(random);
      const decision = route(router, url);
      if (typeof decision === 'string' || decision.kind !== 'route') {
        counts.refused++;
        continue;
      }
      const chosen = decision.route.config.name;
      counts[chosen as 'open' | 'admin']++;
      const forwardedPath = decision.upstreamTarget.split('?')[0]!;
      for (const [reader, read] of Object.entries(PATH_READERS)) {
        let served: string;
        try {
          served = table.isAdmin(read(forwardedPath)) ? 'admin' : 'open';
        } catch {
          continue; // that backend refuses the path: it serves no route
        }
        assert.equal(served, chosen, `${JSON.stringify(url)}: the proxy chose ${chosen}, a ${reader} backend reads ${JSON.stringify(read(forwardedPath))} and serves ${served}`);
      }
    }
    // The property says nothing if (nearly) everything is refused: both routes must be reached often.
    assert.ok(counts.open > 2000 && counts.admin > 2000, `got ${JSON.stringify(counts)}, want many targets accepted on each route`);
  });
}

test(`the regex budget: once the route regexes of one request took more than ${REGEX_BUDGET_MS} ms of CPU time the decision is 414, and no further regex runs`, () => {
  const ini = ['a', 'b', 'c', 'd'].map((name) => `[proxy.${name}]\npath = ~ ^/${name}x\npass = http://127.0.0.1:9001\n`).join('') + '[proxy.rest]\npath = /\npass = http://127.0.0.1:9001\n';
  const routes = parseConfig(ini, 'test.ini').routes.map((config) => ({ config }));
  const tested: string[] = [];
  for (const route of routes) {
    const matcher = route.config.path;
    if (matcher.kind !== 'regex') continue;
    const original = matcher.regex.test.bind(matcher.regex);
    matcher.regex.test = (path: string): boolean => (tested.push(route.config.name), original(path));
  }
  // Each wall-clock reading is 4 ms after the last: the match starts at 0, the regex tests end at
  // 4 (a), 8 (b) and 12 (c). When the process was running all along (CPU time = wall time) the
  // budget is spent after c.
  let nowMs = -4;
  const tick = (): number => (nowMs += 4);
  const busy = new Router(routes, { now: tick, cpuMicros: () => nowMs * 1000 });
  assert.equal(decide(busy, '/dx'), '414 over the regex budget');
  assert.deepEqual(tested, ['a', 'b', 'c'], 'the regexes tried before the budget ran out');
  // The same wall time while the process was descheduled (no CPU time spent): no 414.
  tested.length = 0;
  nowMs = -4;
  const descheduled = new Router(routes, { now: tick, cpuMicros: () => 0 });
  assert.equal(decide(descheduled, '/dx'), 'd');
  assert.deepEqual(tested, ['a', 'b', 'c', 'd']);
  // A single regex test that already took more than the budget (the first clock reading is past
  // it): spent at once, the next regex does not run.
  tested.length = 0;
  let slowNowMs = -12;
  const oneSlowTest = new Router(routes, { now: () => (slowNowMs += 12), cpuMicros: () => assert.fail('no CPU sample is needed to judge it') });
  assert.equal(decide(oneSlowTest, '/dx'), '414 over the regex budget');
  assert.deepEqual(tested, ['a']);
  tested.length = 0;
  const fast = new Router(routes, { now: () => 0, cpuMicros: () => assert.fail('CPU time is asked only once the wall clock says 1 ms passed') });
  assert.equal(decide(fast, '/dx'), 'd');
  assert.equal(decide(fast, '/zz'), 'rest');
  assert.deepEqual(tested, ['a', 'b', 'c', 'd', 'a', 'b', 'c', 'd']);
  const prefixesOnly = new Router(parseConfig('[proxy.rest]\npath = /\npass = http://127.0.0.1:9001\n', 'test.ini').routes.map((config) => ({ config })), {
    now: () => assert.fail('a router without regex routes reads no clock'),
  });
  assert.equal(decide(prefixesOnly, '/x'), 'rest');
});

test('pathWarnings: a prefix that reads differently normalised is named at its value, with the spelling it reads; one that reads the same, a regex and an inherited path say nothing new', () => {
  const config = parseConfig(
    '[proxy]\npath = /in%2Fherited\n' +
      '[proxy.slash]\npath = /a%2fb\npass = http://127.0.0.1:9001\n' +
      '[proxy.utf8]\npath = /caf%C3%A9\npass = http://127.0.0.1:9001\n' +
      '[proxy.double]\npath = /x//y\npass = http://127.0.0.1:9001\n' +
      '[proxy.plain]\npath = /plain/\npass = http://127.0.0.1:9001\n' +
      '[proxy.regex]\npath = ~ ^/a%2fb\npass = http://127.0.0.1:9001\n' +
      '[proxy.inherits]\npass = http://127.0.0.1:9001\n',
    'env.ini',
  );
  assert.deepEqual(pathWarnings(config.routes), [
    "env.ini:4:8: [proxy.slash] path '/a%2fb' reads '/a/b' normalised: only requests spelt '/a%2fb…' match it, and other spellings of that path (such as '/a/b…') get 400; path = /a/b matches that spelling instead",
    "env.ini:7:8: [proxy.utf8] path '/caf%C3%A9' reads '/café' normalised: only requests spelt '/caf%C3%A9…' match it, and other spellings of that path (such as '/café…') get 400",
    "env.ini:10:8: [proxy.double] path '/x//y' reads '/x/y' normalised: only requests spelt '/x//y…' match it, and other spellings of that path (such as '/x/y…') get 400; path = /x/y matches that spelling instead",
    "env.ini:2:8: [proxy.inherits] path '/in%2Fherited' reads '/in/herited' normalised: only requests spelt '/in%2Fherited…' match it, and other spellings of that path (such as '/in/herited…') get 400; path = /in/herited matches that spelling instead",
  ]);
});

test('a prefix with an escape serves its own spelling and answers 400 to the others, as pathWarnings says', () => {
  const router = routerFor('[proxy.slash]\npath = /a%2fb\npass = http://127.0.0.1:9001\n[proxy.all]\npath = /\npass = http://127.0.0.1:9002\n');
  assert.equal(decide(router, '/a%2fb/x'), 'slash');
  for (const other of ['/a/b/x', '/a%2Fb/x', '/a//b/x']) assert.equal(decide(router, other), '400 ambiguous', other);
});
