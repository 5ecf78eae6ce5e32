/**
 * The rule that says a new upstream connection reached one of the proxy's own listeners
 * (src/wire/own-listeners.ts), as a table: exact address, unspecified IPv4 and IPv6 listeners,
 * IPv4-mapped peers, another port, another address of the host, and addresses of other hosts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import type { LookupFunction, Socket } from 'node:net';
import { HOST_ADDRESSES_MAX_AGE_MS, loopErrorFor, loopErrorOf, lookupAvoidingOwnListeners, OwnListeners } from '../../src/wire/own-listeners.js';

/** This host, as the test sees it: one IPv4 and one IPv6 interface address besides loopback. */
const HOST_ADDRESSES = ['127.0.0.1', '::1', '192.0.2.2', 'fd00::2'];

function listeners(...endpoints: [string, number][]): OwnListeners {
  const own = new OwnListeners(() => HOST_ADDRESSES);
  endpoints.forEach(([address, port], index) => own.add({ address, port, key: index === 0 ? 'listen' : 'tls_listen' }));
  return own;
}

test('a peer is the proxy itself exactly when the rule says so', () => {
  const rows: { listen: [string, number]; peer: [string, number]; want: boolean; why: string }[] = [
    { listen: ['127.0.0.1', 8080], peer: ['127.0.0.1', 8080], want: true, why: 'the exact address' },
    { listen: ['127.0.0.1', 8080], peer: ['::ffff:127.0.0.1', 8080], want: true, why: 'an IPv4-mapped peer is its IPv4 address' },
    { listen: ['::ffff:127.0.0.1', 8080], peer: ['127.0.0.1', 8080], want: true, why: 'an IPv4-mapped listener too' },
    { listen: ['127.0.0.1', 8080], peer: ['127.0.0.1', 8081], want: false, why: 'another port' },
    { listen: ['127.0.0.1', 8080], peer: ['127.0.0.2', 8080], want: false, why: 'another loopback address than the bound one' },
    { listen: ['0.0.0.0', 8080], peer: ['127.0.0.1', 8080], want: true, why: '0.0.0.0 takes 127.0.0.1' },
    { listen: ['0.0.0.0', 8080], peer: ['127.3.4.5', 8080], want: true, why: '0.0.0.0 takes all of 127.0.0.0/8, listed or not' },
    { listen: ['0.0.0.0', 8080], peer: ['192.0.2.2', 8080], want: true, why: "0.0.0.0 takes an interface's IPv4 address" },
    { listen: ['0.0.0.0', 8080], peer: ['::ffff:192.0.2.2', 8080], want: true, why: 'mapped interface address' },
    { listen: ['0.0.0.0', 8080], peer: ['192.0.2.3', 8080], want: false, why: 'another host on the same network' },
    { listen: ['0.0.0.0', 8080], peer: ['::1', 8080], want: false, why: 'an IPv4 listener never receives an IPv6 connection' },
    { listen: ['0.0.0.0', 8080], peer: ['127.0.0.1', 9090], want: false, why: 'another port' },
    { listen: ['::', 8443], peer: ['::1', 8443], want: true, why: ':: takes ::1' },
    { listen: ['::', 8443], peer: ['fd00::2', 8443], want: true, why: ":: takes an interface's IPv6 address" },
    { listen: ['::', 8443], peer: ['127.0.0.1', 8443], want: true, why: ':: is dual-stack: it takes IPv4 loopback' },
    { listen: ['::', 8443], peer: ['::ffff:192.0.2.2', 8443], want: true, why: ':: takes a mapped interface address' },
    { listen: ['::', 8443], peer: ['fd00::3', 8443], want: false, why: 'another host' },
    { listen: ['::', 8443], peer: ['::1', 8080], want: false, why: 'another port' },
    { listen: ['::1', 8443], peer: ['::1', 8443], want: true, why: 'the exact IPv6 address' },
    { listen: ['::1', 8443], peer: ['127.0.0.1', 8443], want: false, why: 'another family than the bound one' },
  ];
  for (const { listen, peer, want, why } of rows) {
    const got = listeners(listen).match(peer[0], peer[1]) !== undefined;
    assert.equal(got, want, `listen ${listen.join(' ')}, peer ${peer.join(' ')} (${why}): got ${got}, want ${want}`);
  }
});

test('the match names the listener, and a socket not connected yet is no match', () => {
  const own = listeners(['0.0.0.0', 8080], ['::', 8443]);
  assert.deepEqual(own.match('127.0.0.1', 8443), { address: '::', port: 8443, key: 'tls_listen' });
  assert.equal(own.match(undefined, undefined), undefined, 'got a match for a socket without a peer, want none');
});

test('host addresses are read again by refreshHostAddresses, and by a match of an unknown peer once the last reading is a second old', () => {
  let reads = 0;
  let nowMs = 0;
  const addresses = ['192.0.2.2'];
  const own = new OwnListeners(
    () => {
      reads++;
      return [...addresses];
    },
    () => nowMs,
  );
  own.add({ address: '0.0.0.0', port: 8080, key: 'listen' });
  addresses.push('198.51.100.7');
  nowMs = HOST_ADDRESSES_MAX_AGE_MS - 1;
  assert.equal(own.match('198.51.100.7', 8080), undefined, 'got a match for an address added within the second, want none yet');
  assert.equal(own.match('203.0.113.9', 8080), undefined, 'another host on the same port number is no match');
  assert.equal(reads, 1, `got ${reads} reads within the second, want 1 (construction)`);
  own.refreshHostAddresses();
  assert.ok(own.match('198.51.100.7', 8080) !== undefined, 'got no match after the refresh, want one');
  assert.equal(reads, 2, `got ${reads} reads of the interfaces, want 2 (construction and refresh)`);

  addresses.push('198.51.100.8');
  nowMs += HOST_ADDRESSES_MAX_AGE_MS - 1;
  assert.equal(own.match('198.51.100.8', 8080), undefined, 'the refresh was under a second ago: not read again');
  nowMs += 1;
  assert.ok(own.match('198.51.100.8', 8080) !== undefined, 'got no match a second after the last reading, want the new address found');
  assert.equal(reads, 3);
  assert.equal(own.match('203.0.113.9', 8080), undefined);
  assert.equal(own.match('198.51.100.8', 9090), undefined, 'a port the proxy does not listen on reads nothing');
  assert.equal(reads, 3, `got ${reads} reads, want 3: the unknown peer came within the second after the last`);
});

test('loopErrorOf words the error with the peer and the listener', () => {
  const own = listeners(['0.0.0.0', 8080]);
  const socket = { remoteAddress: '::ffff:127.0.0.1', remotePort: 8080 } as Socket;
  const error = loopErrorOf(socket, own);
  assert.equal(error?.code, 'PRX_UPSTREAM_LOOP');
  assert.equal(error?.status, 502);
  assert.equal(error?.message, "127.0.0.1:8080 is this proxy's own listener (listen 0.0.0.0:8080): the request would loop");
  assert.equal(loopErrorOf({ remoteAddress: '127.0.0.1', remotePort: 9001 } as Socket, own), undefined);
  assert.equal(loopErrorOf(socket, undefined), undefined, 'got an error without listeners, want none');
});

test('loopErrorFor refuses an IP literal that is a listener, and never a name', () => {
  const own = new OwnListeners(() => []);
  own.add({ address: '0.0.0.0', port: 8080, key: 'listen' });
  assert.equal(loopErrorFor('127.0.0.2', 8080, own)?.message, "127.0.0.2:8080 is this proxy's own listener (listen 0.0.0.0:8080): the request would loop");
  assert.equal(loopErrorFor('localhost', 8080, own), undefined, 'a name is judged by its addresses, in the lookup');
  assert.equal(loopErrorFor('127.0.0.2', 8081, own), undefined);
  assert.equal(loopErrorFor('127.0.0.2', 8080, undefined), undefined);
});

test('lookupAvoidingOwnListeners leaves out the proxy\'s own addresses, and fails with UpstreamLoopError when nothing else is left', async () => {
  const own = new OwnListeners(() => []);
  own.add({ address: '127.0.0.1', port: 8080, key: 'listen' });
  const answers: LookupAddress[] = [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }];
  const fake = ((_host: string, options: { all?: boolean }, callback: (error: null, address: unknown, family?: number) => void) =>
    options.all === true ? callback(null, answers) : callback(null, answers[0]!.address, 4)) as unknown as LookupFunction;
  const ask = (port: number, all: boolean): Promise<{ error: unknown; answer: unknown }> =>
    new Promise((resolve) => lookupAvoidingOwnListeners(port, own, fake)('localhost', { all }, (error, answer) => resolve({ error, answer })));

  const both = await ask(8080, true);
  assert.deepEqual(both, { error: null, answer: [{ address: '::1', family: 6 }] }, 'got the own 127.0.0.1 kept, or ::1 dropped');
  const one = await ask(8080, false);
  assert.equal((one.error as Error | null)?.message, "127.0.0.1:8080 is this proxy's own listener (listen 127.0.0.1:8080): the request would loop");
  assert.equal((one.error as { code?: string }).code, 'PRX_UPSTREAM_LOOP');
  const otherPort = await ask(9090, true);
  assert.deepEqual(otherPort, { error: null, answer: answers }, 'another port: every address kept');
  assert.equal(lookupAvoidingOwnListeners(8080, undefined, fake), fake, 'no matcher: the lookup itself');
});
