/**
 * `--check`'s warning for a `pass` line that names the proxy's own listener: a static URL whose host
 * is an IP literal (or `localhost`, read as both 127.0.0.1 and ::1) and whose port is that of this
 * config's `listen` or `tls_listen`, by the rule of src/wire/own-listeners.ts (a listener on
 * `0.0.0.0` or `::` is reached through any address of this host). Such a route would send every
 * request back into the proxy. A warning, not an error: the real guard is at run time, where each
 * new upstream connection is checked against the bound listeners (DNS answers and registry entries
 * included, which no file check can see). A listen host `localhost` is read as 127.0.0.1 and ::1
 * too (node binds the first address the name resolves to); other listen host names, and port 0, are
 * not judged.
 *
 * The warning says "is" only when every address the pass line may reach is a listener this config
 * surely binds. Where `localhost` leaves that open it says "may be" and why: a `pass` to
 * `localhost:P` with only one of its addresses a listener (`listen = [::1]:P`) reaches a real backend
 * where `/etc/hosts` gives localhost only the other, and a `listen = localhost:P` is on only one of
 * 127.0.0.1 and ::1.
 */
import { isIP, SocketAddress } from 'node:net';
import type { Config, ListenAddress } from '../config/config.js';
import { formatPlace } from '../errors.js';
import { formatListenAddress } from '../config/values.js';
import { OwnListeners } from '../wire/own-listeners.js';

/** The addresses `localhost` may have (RFC 6761 section 6.3; /etc/hosts gives one or both). */
const LOCALHOST_ADDRESSES: readonly string[] = ['127.0.0.1', '::1'];

/**
 * One line per looping `pass` line: `env.ini:6:8: [proxy.a] pass http://127.0.0.1:8080 is this
 * proxy's own listener (listen = 0.0.0.0:8080): requests would loop`.
 * @param hostAddresses this host's interface addresses; default `os.networkInterfaces()`'s
 */
export function ownListenerWarnings(config: Config, hostAddresses?: () => Iterable<string>): string[] {
  const listeners = new OwnListeners(hostAddresses);
  const written = new Map<string, string>(); // 'listen' | 'tls_listen' → its address as written
  const isOnLocalhost = new Set<string>(); // the keys whose listen host is `localhost`
  const addListener = (key: 'listen' | 'tls_listen', address: ListenAddress | undefined): void => {
    if (address === undefined || address.port === 0) return;
    const hosts = address.host === 'localhost' ? LOCALHOST_ADDRESSES : isIP(address.host) === 0 ? [] : [canonicalIp(address.host)];
    for (const host of hosts) listeners.add({ address: host, port: address.port, key });
    if (address.host === 'localhost') isOnLocalhost.add(key);
    if (hosts.length > 0) written.set(key, formatListenAddress(address));
  };
  addListener('listen', config.server.listen);
  addListener('tls_listen', config.server.tlsListen);
  if (written.size === 0) return [];

  const warnings: string[] = [];
  for (const route of config.routes) {
    for (const upstream of route.upstreams) {
      if (upstream.discovery !== undefined) continue;
      const addresses = upstream.host === 'localhost' ? LOCALHOST_ADDRESSES : isIP(upstream.host) === 0 ? [] : [canonicalIp(upstream.host)];
      const owned = addresses.flatMap((address) => {
        const own = listeners.match(address, upstream.port);
        return own === undefined ? [] : [{ address, own }];
      });
      const [first] = owned;
      if (first === undefined) continue;
      const where = `${formatPlace(upstream.place)}: [proxy.${route.name}] pass ${upstream.url}`;
      const listener = `${first.own.key} = ${written.get(first.own.key)}`;
      if (isOnLocalhost.has(first.own.key)) {
        warnings.push(`${where} may be this proxy's own listener (${listener} is on the first address localhost resolves to, 127.0.0.1 or ::1): if so, requests would loop`);
      } else if (owned.length < addresses.length) {
        const others = addresses.filter((address) => !owned.some((entry) => entry.address === address)).map((address) => formatEndpoint(address, upstream.port));
        warnings.push(`${where} may be this proxy's own listener (localhost can resolve to ${first.address}, which is ${listener}; ${others.join(' and ')} is not): where it does, requests would loop`);
      } else {
        warnings.push(`${where} is this proxy's own listener (${listener}): requests would loop`);
      }
    }
  }
  return warnings;
}

/** `127.0.0.1:80`, `[::1]:80`. */
function formatEndpoint(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

/** An IP literal in the form sockets report it (IPv6 compressed, RFC 5952). */
function canonicalIp(ip: string): string {
  return isIP(ip) === 6 ? new SocketAddress({ address: ip, family: 'ipv6' }).address : ip;
}
