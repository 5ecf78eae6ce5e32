/**
 * The client's address as the proxy reports it (X-Forwarded-For, access log, ip-hash), and the
 * `trusted_proxies` check (SPEC 5): an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, what a dual-stack
 * socket reports for IPv4 peers) is shown as plain IPv4, and the port is never included.
 */
import { isIP } from 'node:net';
import type { Cidr } from '../config/config.js';
import { ipv4Bytes, ipv6Bytes } from '../config/values.js';

/** `::ffff:1.2.3.4` → `1.2.3.4`; anything else unchanged; undefined (socket already gone) → ''. */
export function normalizeClientIp(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined) return '';
  if (remoteAddress.startsWith('::ffff:') && isIP(remoteAddress.slice(7)) === 4) return remoteAddress.slice(7);
  return remoteAddress;
}

/** The address as 4 or 16 bytes (zone id dropped), or undefined when it is not an IP literal. */
export function ipToBytes(ip: string): Uint8Array | undefined {
  const address = ip.split('%')[0]!; // `fe80::1%eth0`
  const family = isIP(address);
  return family === 4 ? ipv4Bytes(address) : family === 6 ? ipv6Bytes(address) : undefined;
}

/** True when `ip` lies in one of `networks`. An IPv4 peer also matches IPv4 networks when seen as `::ffff:a.b.c.d`. */
export function isTrustedProxy(ip: string, networks: readonly Cidr[]): boolean {
  if (networks.length === 0) return false;
  const bytes = ipToBytes(normalizeClientIp(ip));
  if (bytes === undefined) return false;
  for (const network of networks) {
    if (network.bytes.length === bytes.length && hasPrefix(bytes, network.bytes, network.prefixLength)) return true;
  }
  return false;
}

function hasPrefix(address: Uint8Array, network: Uint8Array, prefixLength: number): boolean {
  let bits = prefixLength;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((address[i]! & mask) !== (network[i]! & mask)) return false;
  }
  return true;
}
