/**
 * The client's address as the proxy reports it (X-Forwarded-For, access log, ip-hash), and the
 * `trusted_proxies` check (SPEC 5): an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, what a dual-stack
 * socket reports for IPv4 peers) is shown as plain IPv4, and the port is never included.
 */
import { isIP } from 'node:net';
import type { Cidr } from '../config/config.js';

/** `::ffff:1.2.3.4` → `1.2.3.4`; anything else unchanged; undefined (socket already gone) → ''. */
export function normalizeClientIp(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined) return '';
  if (remoteAddress.startsWith('::ffff:') && isIP(remoteAddress.slice(7)) === 4) return remoteAddress.slice(7);
  return remoteAddress;
}

/** The address as 4 or 16 bytes, or undefined when it is not an IP literal. */
export function ipToBytes(ip: string): Uint8Array | undefined {
  const family = isIP(ip);
  if (family === 4) {
    return Uint8Array.from(ip.split('.').map(Number));
  }
  if (family !== 6) return undefined;
  let text = ip.split('%')[0]!; // drop a zone id (`fe80::1%eth0`)
  const tail: number[] = [];
  if (text.includes('.')) {
    // Embedded IPv4 (`::ffff:1.2.3.4`) fills the last 32 bits.
    const lastColon = text.lastIndexOf(':');
    const v4 = ipToBytes(text.slice(lastColon + 1))!;
    tail.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
    text = text.slice(0, lastColon + 1);
    if (!text.endsWith('::')) text = text.slice(0, -1);
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const headGroups = head === '' ? [] : head.split(':').map((g) => parseInt(g, 16));
  const restGroups = rest === undefined || rest === '' ? [] : rest.split(':').map((g) => parseInt(g, 16));
  const missing = 8 - tail.length - headGroups.length - restGroups.length;
  const groups = [...headGroups, ...new Array<number>(rest === undefined ? 0 : missing).fill(0), ...restGroups, ...tail];
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    bytes[i * 2] = (g >> 8) & 0xff;
    bytes[i * 2 + 1] = g & 0xff;
  });
  return bytes;
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
