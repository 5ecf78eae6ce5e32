/**
 * The authority a request names — its `Host` header, or the authority of an absolute-form target
 * (`GET http://example.com:8080/a HTTP/1.1`) — checked, and reduced to the host name that a route's
 * `host` is matched against (RFC 3986 §3.2 authority, RFC 9110 §7.2 Host, RFC 9112 §3.2).
 *
 * Accepted: `host [":" port]`, where host is a name or an IPv4 address (dot-separated labels of
 * letters, digits, `-` and `_`, optionally one trailing dot: the DNS root) or an IPv6 address in
 * brackets (`[::1]`), and port is at most five digits, 0..65535 (RFC 3986 §3.2.3 allows it empty).
 * Refused, so that nothing ambiguous reaches a route or an upstream (the issue 11 finding was
 * `GET http://u@evil:1/a/x` forwarded with `Host: u@evil:1`):
 * - userinfo (`u@host`: RFC 9110 §4.2.4 says to treat it as an error),
 * - an empty host (`:80`, ``), an empty label (`a..b`, `.a`),
 * - a port that is not digits or is over 65535,
 * - brackets that do not hold exactly an IPv6 address (`[::1`, `::1]`, `[v1.x]`, `[::1]x`),
 * - anything else RFC 3986 would let through as a reg-name (`%` escapes, `!$&'()*+,;=`): no DNS
 *   name contains them, and a backend that splits `a.com,b.com` or decodes `%2e` could read
 *   another virtual host than the route the proxy chose. nginx accepts those; it refuses control
 *   bytes, `/`, `\` and `..`, as we do.
 *
 * Normalised as nginx does before it picks a `server_name`: lower-cased, one trailing dot removed,
 * the port removed. So `Admin.Example.COM.:80` is matched as `admin.example.com`.
 */
import { isIPv6 } from 'node:net';

/** Letters, digits, `-`, `_` in non-empty labels; one optional trailing dot. */
const NAME = /^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?$/;

/**
 * The host name to route by, or undefined when `authority` is not a valid Host (see the file comment).
 *
 * @param authority a Host header value (node strips surrounding whitespace) or the authority of an
 *   absolute-form target, e.g. `Admin.Example.COM.:80`, `[::1]:8080`, `10.0.0.1`
 * @returns lower-cased, without the port and without one trailing dot: `admin.example.com`,
 *   `[::1]`, `10.0.0.1`
 */
export function parseHostName(authority: string): string | undefined {
  let host: string;
  let rest: string;
  if (authority.charCodeAt(0) === 0x5b /* [ */) {
    const close = authority.indexOf(']');
    if (close < 0) return undefined;
    const address = authority.slice(1, close);
    if (!isIPv6(address) || address.includes('%')) return undefined; // no zone IDs (`%eth0`)
    host = authority.slice(0, close + 1);
    rest = authority.slice(close + 1);
  } else {
    const colon = authority.indexOf(':');
    host = colon < 0 ? authority : authority.slice(0, colon);
    rest = colon < 0 ? '' : authority.slice(colon);
    if (!NAME.test(host)) return undefined;
    if (host.endsWith('.')) host = host.slice(0, -1);
  }
  if (rest !== '' && !isPort(rest)) return undefined;
  return host.toLowerCase();
}

/** `:` then at most five digits, 0..65535 (none at all is allowed, RFC 3986 §3.2.3). */
function isPort(text: string): boolean {
  return /^:\d{0,5}$/.test(text) && (text.length === 1 || Number(text.slice(1)) <= 65535);
}
