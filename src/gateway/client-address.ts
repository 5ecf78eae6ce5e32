/**
 * The client's address (SPEC 5 and 8): the `trusted_proxies` check, and the one client IP per
 * request that access rules, limits, `ip-hash`, `consistent-hash` on `client_ip` and the access log
 * all use. An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, what a dual-stack socket reports for IPv4
 * peers) is shown as plain IPv4, and the port is never included.
 *
 * The client IP is the peer's address, or, when the peer is a trusted proxy, found by walking
 * `X-Forwarded-For` from the right (nginx's `real_ip_header X-Forwarded-For` with
 * `real_ip_recursive on`, ngx_http_get_forwarded_addr): each entry was written by the hop to its
 * right, so an entry is believed only while every hop to its right is trusted.
 *   1. Start with the peer; while the current address is a trusted proxy, step to the next entry
 *      to the left. The first entry that is not a trusted proxy is the client.
 *   2. Every entry trusted: the leftmost one is the client.
 *   3. An entry that is not an address ends the walk: the client is the last address accepted (the
 *      trusted hop to its right, or the peer). nginx stops the same way; an attacker can only land
 *      on a trusted proxy's address, never choose one.
 *   4. Several `X-Forwarded-For` lines are one list, in order (nginx since 1.23.0). Entries are
 *      separated by commas or spaces, as nginx splits them (`6.6.6.6 198.51.100.7` is two
 *      entries, not one that is no address), and by tabs too, which nginx takes as part of an
 *      entry: RFC 9110 lets a tab stand wherever a space does around list items. Empty entries
 *      are skipped (nginx stops at one that is only a tab).
 *   5. An entry is an IPv4 or IPv6 literal, `IPv4:port` or `[IPv6]:port` (port 1..65535, dropped),
 *      as nginx's ngx_parse_addr_port takes it; `[IPv6]` without a port, zone ids (`fe80::1%eth0`)
 *      and anything else are not addresses. IPv6 is written in its canonical form (RFC 5952), so one
 *      client never counts as two.
 * From a peer that is not trusted nothing of the header is read: a spoofed `X-Forwarded-For`
 * changes nothing.
 */
import { isIP, SocketAddress } from 'node:net';
import type { Cidr, ServerConfig } from '../config/config.js';
import { ignoredHostBits, ipv4Bytes, ipv6Bytes, unmapIpv4 } from '../config/values.js';
import { formatPlace } from '../errors.js';
import { equalsIgnoringCase } from '../wire/field-bytes.js';

/** `::ffff:1.2.3.4` → `1.2.3.4`; anything else unchanged; undefined (socket already gone) → ''. */
export function normalizeClientIp(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined) return '';
  return unmapIpv4(remoteAddress);
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

/**
 * What `--check`, start-up and a reload warn about in `trusted_proxies` (one line each, without the
 * `warning: ` prefix, at the item's file:line:column):
 * - an item written with host bits below its prefix (`10.0.0.1/8` means `10.0.0.0/8`), the same
 *   warning as for `access` (values.ts `ignoredHostBits`; nginx warns "low address bits … are
 *   meaningless" for `set_real_ip_from` too);
 * - an item that covers every address of a family (`0.0.0.0/0`, `::/0`, `::ffff:0:0/96`) trusts
 *   every peer of it, so any client can choose its own client IP with X-Forwarded-For and walk past
 *   `access` and `rate_limit`. nginx takes `set_real_ip_from 0.0.0.0/0` silently; we warn. So do
 *   items that cover a family only together (`0.0.0.0/1, 128.0.0.0/1`): one warning at the first
 *   of them.
 */
export function trustedProxyWarnings(server: ServerConfig): string[] {
  const warnings: string[] = [];
  const risk = 'any client can then choose its own client IP with X-Forwarded-For, which defeats access and rate_limit (list only the proxies in front of this one)';
  for (const network of server.trustedProxies) {
    const where = `${formatPlace(network.place)}: [server] trusted_proxies ${network.source}`;
    const hostBits = ignoredHostBits(network);
    if (hostBits !== undefined) warnings.push(`${where}: ${hostBits}`);
    if (network.prefixLength === 0) warnings.push(`${where} trusts every IPv${network.family} peer: ${risk}`);
  }
  for (const family of [4, 6] as const) {
    const networks = server.trustedProxies.filter((network) => network.family === family);
    if (networks.length < 2 || networks.some((network) => network.prefixLength === 0) || !coversFamily(networks, family === 4 ? 32 : 128)) continue;
    const sources = networks.map((network) => network.source).join(', ');
    warnings.push(`${formatPlace(networks[0]!.place)}: [server] trusted_proxies ${sources} together trust every IPv${family} peer: ${risk}`);
  }
  return warnings;
}

/** True when the union of `networks` (one family, `bits` long addresses) is every address. */
function coversFamily(networks: readonly Cidr[], bits: number): boolean {
  const ranges = networks
    .map((network) => {
      const start = bigIntOf(network.bytes) & ~((1n << BigInt(bits - network.prefixLength)) - 1n);
      return { start, end: start + (1n << BigInt(bits - network.prefixLength)) - 1n };
    })
    .sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  let next = 0n; // the lowest address not covered yet
  for (const range of ranges) {
    if (range.start > next) return false;
    if (range.end + 1n > next) next = range.end + 1n;
  }
  return next === 1n << BigInt(bits);
}

/** An address's bytes as one number, most significant byte first. */
function bigIntOf(bytes: Uint8Array): bigint {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  return value;
}

function hasPrefix(address: Uint8Array, network: Uint8Array, prefixLength: number): boolean {
  let bits = prefixLength;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((address[i]! & mask) !== (network[i]! & mask)) return false;
  }
  return true;
}

/** What separates `X-Forwarded-For` entries (rule 4 above). */
const ENTRY_SEPARATOR = /[,\t ]/;

/**
 * The client IP of a request from `peerIp` (already normalised) with `rawHeaders` (a flat
 * `[name, value, …]` list), as the file comment says. Costs nothing but one check when the peer is
 * not trusted (and nothing at all when `trusted_proxies` is empty).
 */
export function resolveClientIp(peerIp: string, isTrustedPeer: boolean, rawHeaders: readonly string[], trustedProxies: readonly Cidr[]): string {
  if (!isTrustedPeer) return peerIp;
  let client = peerIp;
  for (let i = rawHeaders.length - 2; i >= 0; i -= 2) {
    const name = rawHeaders[i]!;
    if (!equalsIgnoringCase(name, 'x-forwarded-for')) continue;
    const entries = rawHeaders[i + 1]!.split(ENTRY_SEPARATOR);
    for (let j = entries.length - 1; j >= 0; j--) {
      const entry = entries[j]!;
      if (entry === '') continue;
      const address = parseForwardedAddress(entry);
      if (address === undefined) return client;
      client = address;
      if (!isTrustedProxy(address, trustedProxies)) return client;
    }
  }
  return client;
}

/**
 * One `X-Forwarded-For` entry as an address (normalised, canonical IPv6), or undefined when it is
 * not one: an IPv4 or IPv6 literal, `IPv4:port`, `[IPv6]:port` (nginx's ngx_parse_addr_port).
 */
export function parseForwardedAddress(entry: string): string | undefined {
  let address = entry;
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    if (close < 0 || !isPort(entry.slice(close + 2)) || entry[close + 1] !== ':') return undefined;
    address = entry.slice(1, close);
    if (isIP(address) !== 6) return undefined;
  } else if (isIP(entry) === 0) {
    const colon = entry.indexOf(':');
    if (colon < 0 || !isPort(entry.slice(colon + 1))) return undefined;
    address = entry.slice(0, colon);
    if (isIP(address) !== 4) return undefined;
  }
  if (address.includes('%')) return undefined;
  if (isIP(address) === 6) address = new SocketAddress({ address, family: 'ipv6' }).address;
  return normalizeClientIp(address);
}

function isPort(text: string): boolean {
  if (!/^\d{1,5}$/.test(text)) return false;
  const port = Number(text);
  return port >= 1 && port <= 65535;
}
