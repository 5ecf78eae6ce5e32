/** ProxyServer.reload: what it applies, what it keeps, and what it says needs a restart. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { ProxyServer } from '../../src/proxy/proxy-server.js';

const base = '[server]\naccess_log = off\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\npass = http://127.0.0.1:9002\n';

test('reload keeps the runtime state of unchanged upstreams and warns only about settings it cannot apply', () => {
  const proxy = new ProxyServer(parseConfig(base, 'env.ini'), { deps: { log: () => {} } });
  const [a] = proxy.routes[0]!.upstreams;
  a!.requestsTotal = 7;

  // trusted_proxies applies at once; moving access_log's line is not a change.
  const trusted = proxy.reload(parseConfig(`\n[server]\ntrusted_proxies = 10.0.0.0/8\naccess_log = off\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\npass = http://127.0.0.1:9003\n`, 'env.ini'));
  assert.deepEqual(trusted, { kept: 1, added: 1, removed: 1, warnings: [] });
  assert.equal(proxy.routes[0]!.upstreams[0], a, 'the same Upstream object, with its counters');
  assert.equal(a!.requestsTotal, 7);

  const restart = proxy.reload(parseConfig(`[server]\naccess_log = off\nheader_timeout = 3s\n[admin]\nlisten = 127.0.0.1:9090\n[proxy.a]\npath = /a\npass = http://127.0.0.1:9001\n`, 'env.ini'));
  assert.deepEqual(restart.warnings, [
    '[server] settings other than trusted_proxies take effect only after a restart',
    '[admin] changes take effect only after a restart',
  ]);
});
