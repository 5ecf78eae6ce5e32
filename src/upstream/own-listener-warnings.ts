/**
 * `--check`'s warning for a `pass` line that names the proxy's own listener: a static URL whose host
 * is an IP literal (or `localhost`, read as both 127.0.0.1 and ::1) and whose port is that of this
 * config's `listen` or `tls_listen`, by the rule of src/wire/own-listeners.ts (a listener on
 * `0.0.0.0` or `::` is reached through any address of this host). Such a route would send every
 * request back into the proxy. A warning, not an error: the real guard is at run time, where each
 * new upstream connection is checked against the bound listeners (DNS answers and registry entries
 * included, which no file check can see). Listen hosts that are names, and port 0, are not judged.
 */
import { isIP, SocketAddress } from 'node:net';
import type { Config, ListenAddress } from '../config/config.js';
import { formatPlace } from '../errors.js';
import { formatListenAddress } from '../config/values.js';
import { OwnListeners } from '../wire/own-listeners.js';

/**
 * One line per looping `pass` line: `env.ini:6:8: [proxy.a] pass http://127.0.0.1:8080 is this
 * proxy's own listener (listen = 0.0.0.0:8080): requests would loop`.
 * @param hostAddresses this host's interface addresses; default `os.networkInterfaces()`'s
 */
export function ownListenerWarnings(config: Config, hostAddresses?: () => Iterable<string>): string[] {
  const listeners = new OwnListeners(hostAddresses);
  const written = new Map<string, string>(); // 'listen' | 'tls_listen' → its address as written
  const addListener = (key: 'listen' | 'tls_listen', address: ListenAddress | undefined): void => {
    if (address === undefined || address.port === 0 || isIP(address.host) === 0) return;
    listeners.add({ address: canonicalIp(address.host), port: address.port, key });
    written.set(key, formatListenAddress(address));
  };
  addListener('listen', config.server.listen);
  addListener('tls_listen', config.server.tlsListen);
  if (written.size === 0) return [];

  const warnings: string[] = [];
  for (const route of config.routes) {
    for (const upstream of route.upstreams) {
      if (upstream.discovery !== undefined) continue;
      const addresses = upstream.host === 'localhost' ? ['127.0.0.1', '::1'] : isIP(upstream.host) === 0 ? [] : [canonicalIp(upstream.host)];
      const own = addresses.map((address) => listeners.match(address, upstream.port)).find((match) => match !== undefined);
      if (own === undefined) continue;
      warnings.push(`${formatPlace(upstream.place)}: [proxy.${route.name}] pass ${upstream.url} is this proxy's own listener (${own.key} = ${written.get(own.key)}): requests would loop`);
    }
  }
  return warnings;
}

/** An IP literal in the form sockets report it (IPv6 compressed, RFC 5952). */
function canonicalIp(ip: string): string {
  return isIP(ip) === 6 ? new SocketAddress({ address: ip, family: 'ipv6' }).address : ip;
}
