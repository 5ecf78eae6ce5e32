/**
 * The authority a request names — its `Host` header, or the authority of an absolute-form target
 * (`GET http://example.com:8080/a HTTP/1.1`) — checked, and reduced to the host name that a route's
 * `host` is matched against (RFC 3986 §3.2 authority, RFC 9110 §7.2 Host, RFC 9112 §3.2).
 *
 * Accepted: `host [":" port]`, where host is a name or an IPv4 address (dot-separated labels of
 * letters, digits, `-` and `_`, optionally one trailing dot: the DNS root) or an IPv6 address in
 * brackets (`[::1]`), and port is at most five digits, 0..65535 (RFC 3986 §3.2.3 allows it empty).
 * Refused, so that nothing ambiguous reaches a route or an upstream (the proxy once sent
 * `GET http://u@evil:1/a/x` upstream with `Host: u@evil:1`):
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

/**
 * The host name to route by, or undefined when `authority` is not a valid Host (see the file comment).
 * One pass over the characters: this runs for every request.
 *
 * @param authority a Host header value (node strips surrounding whitespace) or the authority of an
 *   absolute-form target, e.g. `Admin.Example.COM.:80`, `[::1]:8080`, `10.0.0.1`
 * @returns lower-cased, without the port and without one trailing dot: `admin.example.com`,
 *   `[::1]`, `10.0.0.1`
 */
export function parseHostName(authority: string): string | undefined {
  let end: number; // where the host ends (the port's `:`, or the end)
  let host: string;
  if (authority.charCodeAt(0) === 0x5b /* [ */) {
    const close = authority.indexOf(']');
    if (close < 0) return undefined;
    const address = authority.slice(1, close);
    if (!isIPv6(address) || address.includes('%')) return undefined; // no zone IDs (`%eth0`)
    end = close + 1;
    host = authority.slice(0, end);
  } else {
    end = nameEnd(authority);
    if (end <= 0) return undefined;
    const nameLength = authority.charCodeAt(end - 1) === 0x2e /* . */ ? end - 1 : end; // one trailing dot: the DNS root
    host = authority.slice(0, nameLength);
  }
  if (end < authority.length && !isPort(authority, end)) return undefined;
  return host.toLowerCase();
}

/**
 * Where a name of non-empty labels (letters, digits, `-`, `_`, with one optional trailing dot) at
 * the start of `text` ends: at the first `:`, or at the end of `text`; 0 for an empty name; -1 when
 * a character that belongs to no name comes first.
 */
function nameEnd(text: string): number {
  let labelLength = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x3a /* : */) return i; // (a `.` always follows a label, so anything before is a name)
    if (c === 0x2e /* . */) {
      if (labelLength === 0) return -1; // `..`, or a leading dot
      labelLength = 0;
    } else if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f) {
      labelLength++;
    } else {
      return -1;
    }
  }
  return text.length;
}

/** `:` at `at`, then at most five digits, 0..65535, to the end (none at all is allowed, RFC 3986 §3.2.3). */
function isPort(text: string, at: number): boolean {
  if (text.charCodeAt(at) !== 0x3a /* : */ || text.length - at - 1 > 5) return false;
  let port = 0;
  for (let i = at + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
    port = port * 10 + (c - 0x30);
  }
  return port <= 65535;
}
