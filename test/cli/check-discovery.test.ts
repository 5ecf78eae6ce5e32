/**
 * `--check` with discovery lines (SPEC 7): the flags are validated by the loader and nothing is
 * looked up (the `resolver` sees no packet, so `--check` passes while the DNS server is away); the
 * summary lists each line with what it looks up, and a note says the names are resolved at start-up.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { runCheck } from '../../src/cli/check-config.js';
import { writeConfig } from '../helpers/cli-process.js';

test('--check lists the discovery lines, notes they are looked up at start-up, and sends no DNS query', async () => {
  // A resolver that only counts what reaches it.
  const socket = dgram.createSocket('udp4');
  let packets = 0;
  socket.on('message', () => void packets++);
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  try {
    const port = (socket.address() as AddressInfo).port;
    const file = writeConfig(
      ['[server]', 'listen = 127.0.0.1:0', 'access_log = off', `resolver = 127.0.0.1:${port}`, '[proxy.api]', 'path = /api', 'pass = http://api.test:8080 resolve', 'pass = http://web.test service=http weight=2'].join('\n'),
    );
    const result = runCheck(file, Date.now());
    assert.equal(result.exitCode, 0, `got exit ${result.exitCode}, want 0: ${result.messages.join('; ')}`);
    assert.ok(result.output.includes('http://api.test:8080 resolve (A and AAAA of api.test)'), `got:\n${result.output}\nwant the resolve line described`);
    assert.ok(result.output.includes('http://web.test weight=2 service=http (SRV of _http._tcp.web.test)'), `got:\n${result.output}\nwant the service line described`);
    const note = 'note: not looked up now, the proxy resolves them at start-up and as their TTLs run out: api.test (A/AAAA, route api), _http._tcp.web.test (SRV, route api)';
    assert.ok(result.output.includes(`${note}\n`), `got:\n${result.output}\nwant the line ${note}`);
    assert.ok(result.output.endsWith(`configuration file ${file} is valid\n`));
    await new Promise((resolve) => setTimeout(resolve, 200)); // a lookup started by the check would arrive by now
    assert.equal(packets, 0, `got ${packets} DNS packets at the resolver, want 0`);
  } finally {
    socket.close();
  }
});

test("--check warns about resolver = ::1:53, which is read as [::1:53] (port 53), and stays valid", () => {
  const file = writeConfig(['[server]', 'listen = 127.0.0.1:0', 'access_log = off', 'resolver = ::1:53', '[proxy.api]', 'path = /api', 'pass = http://api.test:8080 resolve', ''].join('\n'));
  const result = runCheck(file, Date.now());
  assert.equal(result.exitCode, 0, `got exit ${result.exitCode}, want 0: ${result.messages.join('; ')}`);
  assert.ok(result.output.includes('[::1:53]'), `got:\n${result.output}\nwant the resolver summarised as [::1:53]`);
  const warning = `warning: ${file}:4:12: [server] resolver '::1:53' is the IPv6 address ::1:53 (port 53); for ::1 port 53 write [::1]:53`;
  assert.deepEqual(result.messages, [warning], `got messages ${JSON.stringify(result.messages)}, want the one resolver warning`);
});

test('--check of a config without discovery lines has no discovery note', () => {
  const file = writeConfig(['[server]', 'listen = 127.0.0.1:0', 'access_log = off', '[proxy.a]', 'path = /', 'pass = http://127.0.0.1:9001'].join('\n'));
  const result = runCheck(file, Date.now());
  assert.equal(result.exitCode, 0);
  assert.equal(result.output.includes('note: not looked up now'), false, `got:\n${result.output}\nwant no discovery note`);
});
