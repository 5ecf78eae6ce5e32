/**
 * `--check` warns at the `pass` line's file:line:column when a static pass URL names this config's
 * own `listen` or `tls_listen` (src/upstream/own-listener-warnings.ts), and still exits 0: the run-time
 * guard is the real one. A table of which lines are judged a loop, then the whole check on a file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/load-config.js';
import { runCheck } from '../../src/cli/check-config.js';
import { ownListenerWarnings } from '../../src/upstream/own-listener-warnings.js';
import { writeConfig } from '../helpers/cli-process.js';

const HOST_ADDRESSES = (): string[] => ['127.0.0.1', '::1', '192.0.2.2'];

test('which pass lines name the proxy\'s own listener', () => {
  const rows: { server: string; pass: string; want: string | undefined }[] = [
    { server: 'listen = :8080', pass: 'http://127.0.0.1:8080', want: 'listen = 0.0.0.0:8080' },
    { server: 'listen = [::]:8080', pass: 'http://localhost:8080', want: 'listen = [::]:8080' },
    { server: 'listen = :8080', pass: 'http://127.9.9.9:8080', want: 'listen = 0.0.0.0:8080' },
    { server: 'listen = :8080', pass: 'http://192.0.2.2:8080', want: 'listen = 0.0.0.0:8080' },
    { server: 'listen = :8080', pass: 'http://192.0.2.3:8080', want: undefined },
    { server: 'listen = :8080', pass: 'http://[::1]:8080', want: undefined },
    { server: 'listen = :8080', pass: 'http://127.0.0.1:8081', want: undefined },
    { server: 'listen = :8080', pass: 'http://backend.internal:8080', want: undefined },
    { server: 'listen = :8080', pass: 'http://backend.internal:8080 resolve', want: undefined },
    { server: 'listen = 127.0.0.1:80', pass: 'http://127.0.0.1', want: 'listen = 127.0.0.1:80' },
    { server: 'listen = 127.0.0.1:8080', pass: 'http://127.0.0.2:8080', want: undefined },
    { server: 'listen = [::]:8080', pass: 'http://[0:0::1]:8080', want: 'listen = [::]:8080' },
    { server: 'listen = [::]:8080', pass: 'http://127.0.0.1:8080', want: 'listen = [::]:8080' },
    { server: `listen = off\ntls_listen = 127.0.0.1:8443\ntls_cert = cert.pem key.pem`, pass: 'https://127.0.0.1:8443', want: 'tls_listen = 127.0.0.1:8443' },
    { server: 'listen = 127.0.0.1:0', pass: 'http://127.0.0.1:80', want: undefined },
  ];
  for (const { server, pass, want } of rows) {
    const config = parseConfig(`[server]\n${server}\n[proxy.a]\npath = /\npass = ${pass}\n`, 'env.ini');
    const warnings = ownListenerWarnings(config, HOST_ADDRESSES);
    const got = warnings[0]?.match(/\((.*)\): requests would loop$/)?.[1];
    assert.equal(got, want, `${server.replaceAll('\n', '; ')} with pass ${pass}: got ${JSON.stringify(warnings)}, want ${want ?? 'no warning'}`);
  }
});

test('localhost: a listen on localhost is matched, and a warning that depends on what localhost resolves to says "may be" (break test)', () => {
  const loopUnlessOnly = (address: string, listener: string) =>
    `may be this proxy's own listener (localhost can resolve to ${address}, which is ${listener}): where it does, requests would loop`;
  const onLocalhost = "may be this proxy's own listener (listen = localhost:8080 is on the first address localhost resolves to, 127.0.0.1 or ::1): if so, requests would loop";
  const rows: { server: string; pass: string; want: string | undefined }[] = [
    { server: 'listen = localhost:8080', pass: 'http://127.0.0.1:8080', want: onLocalhost },
    { server: 'listen = localhost:8080', pass: 'http://[::1]:8080', want: onLocalhost },
    { server: 'listen = localhost:8080', pass: 'http://localhost:8080', want: onLocalhost },
    { server: 'listen = localhost:8080', pass: 'http://127.0.0.2:8080', want: undefined },
    { server: 'listen = localhost:8080', pass: 'http://127.0.0.1:8081', want: undefined },
    { server: 'listen = [::1]:8080', pass: 'http://localhost:8080', want: loopUnlessOnly('::1', 'listen = [::1]:8080; 127.0.0.1:8080 is not') },
    { server: 'listen = :8080', pass: 'http://localhost:8080', want: loopUnlessOnly('127.0.0.1', 'listen = 0.0.0.0:8080; [::1]:8080 is not') },
  ];
  for (const { server, pass, want } of rows) {
    const config = parseConfig(`[server]\n${server}\n[proxy.a]\npath = /\npass = ${pass}\n`, 'env.ini');
    const warnings = ownListenerWarnings(config, HOST_ADDRESSES);
    const prefix = `env.ini:5:8: [proxy.a] pass ${pass} `;
    const got = warnings.length === 0 ? undefined : warnings.length === 1 && warnings[0]!.startsWith(prefix) ? warnings[0]!.slice(prefix.length) : JSON.stringify(warnings);
    assert.equal(got, want, `${server} with pass ${pass}: got ${JSON.stringify(warnings)}, want ${want ?? 'no warning'}`);
  }
});

test('--check warns at the pass line\'s file:line:column and exits 0', () => {
  const file = writeConfig(['[server]', 'listen = :8080', 'access_log = off', '[proxy.a]', 'path = /', 'pass = http://127.0.0.1:9001', 'pass   =   http://127.0.0.1:8080 backup'].join('\n'));
  const result = runCheck(file, Date.now());
  assert.equal(result.exitCode, 0, `got exit ${result.exitCode}, want 0: ${result.messages.join('; ')}`);
  const want = `warning: ${file}:7:12: [proxy.a] pass http://127.0.0.1:8080 is this proxy's own listener (listen = 0.0.0.0:8080): requests would loop`;
  assert.deepEqual(result.messages, [want], `got ${JSON.stringify(result.messages)}, want [${want}]`);
  assert.ok(result.output.endsWith(`configuration file ${file} is valid\n`), `got:\n${result.output}`);
});
