/**
 * The key `consistent-hash` hashes, from the route's `hash_key` (SPEC 1.2): the client IP, the URI,
 * a request header or a cookie. A request without that header or cookie falls back to the client IP,
 * so it still sticks to one upstream (nginx would hash the empty string and send every such request
 * to one upstream).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { RouteConfig } from '../../config/config.js';

/**
 * The hash key of one request.
 *
 * @param route its `hashKey`: `client_ip`, `uri`, `header:NAME` (name lowercased) or `cookie:NAME`
 * @param clientIp client IP without port, `::ffff:` removed
 * @param path the request target as received, path plus query (`/a/b?x=1`): the `uri` key
 * @param headers node's parsed headers (lowercase names); several values of one header are joined
 *   with `, ` (RFC 9110 §5.3); cookies are looked up in every `Cookie` header (RFC 6265 §5.4)
 * @returns the key; the client IP when the header or cookie is missing or empty
 */
export function hashKeyFor(route: RouteConfig, clientIp: string, path: string, headers: IncomingHttpHeaders): string {
  const { hashKey } = route;
  switch (hashKey.kind) {
    case 'client_ip':
      return clientIp;
    case 'uri':
      return path;
    case 'header': {
      const value = headers[hashKey.name];
      const text = Array.isArray(value) ? value.join(', ') : value;
      return text === undefined || text === '' ? clientIp : text;
    }
    case 'cookie': {
      const value = cookieValue(headers.cookie, hashKey.name);
      return value === undefined || value === '' ? clientIp : value;
    }
  }
}

/**
 * The value of cookie `name` in a `Cookie` header (`a=1; b=2`, RFC 6265 §4.2.1), the first one if
 * repeated, surrounding double quotes removed; undefined if absent. Node joins several Cookie headers
 * with `; `, so one string covers them all.
 */
export function cookieValue(cookieHeader: string | undefined, name: string): string | undefined {
  if (cookieHeader === undefined) return undefined;
  for (const pair of cookieHeader.split(';')) {
    const equals = pair.indexOf('=');
    if (equals === -1) continue;
    if (pair.slice(0, equals).trim() !== name) continue;
    const value = pair.slice(equals + 1).trim();
    return value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value;
  }
  return undefined;
}
