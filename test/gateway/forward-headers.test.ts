/**
 * The client's response headers (src/gateway/forward-headers.ts `buildClientResponseHeaders`):
 * what framing the upstream's head may not pass on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { announcedTrailers, buildClientResponseFields, buildClientResponseHeaders, forwardableRequestTrailers, forwardableTrailers } from '../../src/gateway/forward-headers.js';
import { ResponseParser, type ResponseHead } from '../../src/wire/response-parser.js';
import { namedHopByHopHeaders } from '../../src/gateway/hop-by-hop.js';

test('a 204 or 101 loses its Content-Length (RFC 9110 §8.6; a break test saw a 204 with Content-Length: 4 relayed), a 304 and a 200 keep theirs', () => {
  const upstream = ['Content-Length', '4', 'ETag', '"x"'];
  assert.deepEqual(buildClientResponseHeaders(upstream, 204), ['ETag', '"x"']);
  assert.deepEqual(buildClientResponseHeaders(upstream, 101), ['ETag', '"x"', 'Connection', 'upgrade']);
  assert.deepEqual(buildClientResponseHeaders(upstream, 304), upstream, 'a 304 may say the length of the representation it stands for');
  assert.deepEqual(buildClientResponseHeaders(upstream, 200), upstream);
});

test('headers a Connection header names are dropped in any case, the fixed hop-by-hop list too; Content-Length and Host stay even when named (request smuggling)', () => {
  const upstream = ['Connection', 'keep-alive, X-Internal, content-length, HOST', 'x-internal', '1', 'X-INTERNAL', '2', 'Keep-Alive', 'timeout=5', 'Content-Length', '2', 'Host', 'h', 'X-Other', '3'];
  assert.deepEqual(buildClientResponseHeaders(upstream, 200), ['Content-Length', '2', 'Host', 'h', 'X-Other', '3']);
  assert.deepEqual(namedHopByHopHeaders(['Connection', 'close', 'connection', 'keep-alive, Upgrade']), undefined, 'only names of the fixed list (and close): nothing more to drop');
  assert.equal(namedHopByHopHeaders(['CONNECTION', ' X-A ,,x-b'])?.has('x-b'), true);
});

test('a 426 keeps its Upgrade in any case; a 200 drops it', () => {
  const upstream = ['upgrade', 'h2c', 'X-A', '1'];
  assert.deepEqual(buildClientResponseHeaders(upstream, 426), upstream);
  assert.deepEqual(buildClientResponseHeaders(upstream, 200), ['X-A', '1']);
});

test('buildClientResponseFields: the same list as buildClientResponseHeaders, and its fields as the upstream\'s own lines, copied in runs around the dropped ones', () => {
  const parse = (head: string): ResponseHead => {
    let parsed: ResponseHead | undefined;
    new ResponseParser({ method: 'GET', onHead: (h) => (parsed = h), onBody() {}, onComplete() {} }).execute(Buffer.from(head, 'latin1'));
    return parsed!;
  };
  const cases: [status: number, fields: string][] = [
    [200, 'Server: nginx\r\nDate: d\r\nContent-Length: 0\r\nConnection: keep-alive\r\nETag: "e"\r\n'], // a drop in the middle
    [200, 'Connection: keep-alive, X-Hop\r\nX-A: 1\r\nX-Hop: 2\r\nX-B: 3\r\nKeep-Alive: timeout=5\r\n'], // at the start, in the middle, at the end
    [200, 'X-A: 1\r\nContent-Length: 0\r\n'], // none dropped
    [200, 'Connection: close\r\nKeep-Alive: timeout=5\r\n'], // all dropped
    [204, 'Content-Length: 4\r\nETag: "x"\r\n'], // a 204's Content-Length
    [426, 'Upgrade: h2c\r\nConnection: Upgrade\r\nContent-Length: 0\r\n'], // a 426 keeps Upgrade
  ];
  for (const [status, fields] of cases) {
    const head = parse(`HTTP/1.1 ${status} X\r\n${fields}\r\n`);
    assert.notEqual(head.fieldLines, undefined, `${status} ${JSON.stringify(fields)}: want the lines kept`);
    const { headers, fieldBlock } = buildClientResponseFields(head);
    assert.deepEqual(headers, buildClientResponseHeaders(head.rawHeaders, status));
    let joined = '';
    for (let i = 0; i < headers.length; i += 2) joined += `${headers[i]}: ${headers[i + 1]}\r\n`;
    assert.equal(fieldBlock, joined, `${status} ${JSON.stringify(fields)}`);
  }
  const upgrade = parse('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
  assert.deepEqual(buildClientResponseFields(upgrade), { headers: ['Upgrade', 'websocket', 'Connection', 'upgrade'], fieldBlock: undefined }, 'a 101\'s Connection is the proxy\'s');
  const loose = parse('HTTP/1.1 200 OK\r\nX-A:1\r\nContent-Length: 0\r\n\r\n');
  assert.deepEqual(buildClientResponseFields(loose), { headers: ['X-A', '1', 'Content-Length', '0'], fieldBlock: undefined });
});

test('announcedTrailers: the names of every Trailer header, in order, without those that may not be trailers; undefined when none is left', () => {
  assert.equal(announcedTrailers(['Content-Type', 'text/plain', 'Trailer', 'X-T, Content-Length', 'trailer', 'Server-Timing,, HOST']), 'X-T, Server-Timing');
  assert.equal(announcedTrailers(['Trailer', 'Content-Length, Transfer-Encoding']), undefined);
  assert.equal(announcedTrailers(['Trailer', 'Set-Cookie, Cookie, X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override, Server-Timing']), 'Server-Timing', 'cookies and method overrides are no trailers either');
  assert.equal(announcedTrailers(['Content-Type', 'text/plain']), undefined);
});

test('forwardableRequestTrailers: a client trailer that could pass for a forwarding or hop-by-hop header, in any spelling, is dropped', () => {
  const raw = ['X-Checksum', 'abc', 'x-forwarded-for', '6.6.6.6', 'X_Forwarded_Host', 'evil', 'Forwarded', 'for=1', 'X-Real-IP', '1.2.3.4', 'Upgrade', 'h2c', 'Keep-Alive', '5', 'Content_Length', '9', 'Host', 'h', 'Cookie', 'a=b'];
  assert.deepEqual(forwardableRequestTrailers(raw, undefined), [['X-Checksum', 'abc']], 'a Cookie trailer is dropped too (RFC 9110 §6.5.1)');
});

test('forwardableRequestTrailers: a trailer that may not be one, spelt with `_` for `-`, is dropped as the dashed name is (a CGI-style backend reads both as one)', () => {
  const raw = ['X_HTTP_Method_Override', 'DELETE', 'x_method_override', 'PUT', 'Set_Cookie', 's=1', 'Proxy_Authorization', 'Basic x', 'WWW_Authenticate', 'Basic', 'Content_Type', 'text/evil', 'Transfer_Encoding', 'chunked', 'X_Custom_Sum', 'ok'];
  assert.deepEqual(forwardableRequestTrailers(raw, undefined), [['X_Custom_Sum', 'ok']]);
});

test('a field the head named in Connection is hop-by-hop as a trailer too, in both directions, and is not announced (a break test: Connection: X-Secret removed the header and the trailer came on)', () => {
  const head = ['Transfer-Encoding', 'chunked', 'Connection', 'close, X-Secret', 'X-Secret', 'h', 'Trailer', 'X-Secret, X-Sum'];
  const named = namedHopByHopHeaders(head);
  const trailers = ['X-Secret', 't', 'x-secret', 't2', 'X_Secret', 't3', 'X-Sum', 'ok'];
  assert.deepEqual(forwardableTrailers(trailers, named), [['X-Sum', 'ok']]);
  assert.deepEqual(forwardableRequestTrailers(trailers, named), [['X-Sum', 'ok']]);
  assert.equal(announcedTrailers(head), 'X-Sum');
  assert.deepEqual(forwardableTrailers(trailers, undefined), [['X-Secret', 't'], ['x-secret', 't2'], ['X_Secret', 't3'], ['X-Sum', 'ok']], 'a head that names nothing leaves them alone');
});

test('forwardableTrailers: the response trailers that may not be trailers are dropped in their `_` spelling too, as the request\'s are', () => {
  const raw = ['Set_Cookie', 'c=d', 'Content_Length', '98', 'Transfer_Encoding', 'chunked', 'Keep_Alive', 'y', 'WWW_Authenticate', 'Basic', 'X_Good', 'yes', 'Server-Timing', 'db;dur=1'];
  assert.deepEqual(forwardableTrailers(raw, undefined), [['X_Good', 'yes'], ['Server-Timing', 'db;dur=1']]);
});
