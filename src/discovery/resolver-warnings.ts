/**
 * The warning of `--check`, start-up and a reload for a `resolver` item that reads two ways: a bare IPv6 address
 * whose last group could be a port (`::1:53`). Here it is the IPv6 address `::1:53` on port 53 (an
 * unbracketed IPv6 item has no port, as in `/etc/resolv.conf`); HAProxy's `nameserver` reads the
 * last `:53` as the port (`::1` port 53), and nginx's `resolver` and Go's `net.SplitHostPort` want
 * `[::1]:53` for a port. A warning, not an error: `::1:53` is a valid address, and may be meant.
 */
import { isIPv6 } from 'node:net';
import type { ServerConfig } from '../config/config.js';
import { formatPlace } from '../errors.js';

/**
 * A bare item ending in `:` and decimal digits: the address before it and the would-be port. An IPv6
 * group has at most 4 hex digits, so a valid item ends in at most 4 (a port up to 9999).
 */
const TRAILING_PORT = /^(.+):(\d{1,4})$/;

/**
 * One line per ambiguous item: `env.ini:2:12: [server] resolver '::1:53' is the IPv6 address ::1:53
 * (port 53); for ::1 port 53 write [::1]:53`. An item warns when it is written without brackets, ends
 * in `:` and digits that make a port (not 0), and what comes before is an IPv6 address itself (so
 * `::1` and `fd00::53` do not: `:` and `fd00:` are no addresses).
 */
export function resolverWarnings(server: ServerConfig): string[] {
  const warnings: string[] = [];
  for (const resolver of server.resolvers) {
    if (resolver.source.startsWith('[')) continue;
    const match = TRAILING_PORT.exec(resolver.source);
    if (match === null) continue;
    const [, address = '', port = ''] = match;
    if (!isIPv6(address) || Number(port) === 0) continue;
    warnings.push(
      `${formatPlace(resolver.place)}: [server] resolver '${resolver.source}' is the IPv6 address ${resolver.host} (port ${resolver.port}); for ${address} port ${Number(port)} write [${address}]:${Number(port)}`,
    );
  }
  return warnings;
}
