/**
 * The value types of the config language (SPEC 1.1, 1.2): durations, sizes, booleans, whole numbers,
 * listen addresses, CIDR networks and HTTP status ranges. Each parser takes the value's text and
 * returns the value or throws an `InvalidValueError` saying what is wrong and what was expected; the
 * loader adds the key and the place. The units and spellings follow nginx (`500ms`, `16k`, `on/off`;
 * nginx "Measurement units"), CIDR notation follows RFC 4632 (IPv4) and RFC 4291 section 2.3 (IPv6),
 * status classes RFC 9110 section 15.
 */
import { isIPv4, isIPv6, SocketAddress } from 'node:net';
import type { Cidr, ListenAddress, ResolverAddress, StatusRange } from './config.js';
import { suggest } from './did-you-mean.js';

/**
 * A value that does not parse. The loader renders it as
 * `file:line:column: <problem> for '<key>' (<note>)`, the column moved `offset` characters into the value.
 */
export class InvalidValueError extends Error {
  constructor(
    /** E.g. `invalid duration '5x'`. */
    readonly problem: string,
    /** E.g. `expected e.g. 500ms, 3s, 1m`, or a did-you-mean; undefined for none. */
    readonly note: string | undefined,
    /** Where in the value the problem is, in UTF-16 units from its start. */
    readonly offset = 0,
  ) {
    super(note === undefined ? problem : `${problem} (${note})`);
  }
}

// ---- durations and sizes ---------------------------------------------------------------------------

/**
 * The longest duration accepted, in ms: 2^31 − 1, about 24.8 days (596 h). Node's timers fire at once
 * for anything longer (with only a warning), so a longer timeout would silently become 1 ms.
 */
export const MAX_DURATION_MS = 2_147_483_647;

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/;
/** The units of a duration and their length in ms: config durations, and `limit-simulate`'s schedule times. */
export const DURATION_UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a duration: a number with unit `ms`, `s`, `m`, `h` or `d`; a bare number is seconds (nginx).
 * Decimals are allowed (`1.5s`); the result is rounded to whole milliseconds.
 *
 * @param minMs the smallest acceptable result, default 0 (timeouts where 0 means nothing pass 1).
 * @param maxMs the largest, default MAX_DURATION_MS (what a timer can wait); a duration that is never
 *   a timer (`hsts`'s max-age) passes a larger one.
 * @returns milliseconds, minMs..maxMs. `parseDuration('500ms')` = 500, `parseDuration('3')` = 3000.
 * @throws InvalidValueError for other spellings (`5x`, `-1s`, `1 s`, `1S`), below minMs or above maxMs.
 */
export function parseDuration(text: string, minMs = 0, maxMs = MAX_DURATION_MS): number {
  const match = DURATION.exec(text);
  if (match === null) throw new InvalidValueError(`invalid duration '${text}'`, 'expected e.g. 500ms, 3s, 1m');
  const ms = Math.round(Number(match[1]) * (DURATION_UNIT_MS[match[2] ?? 's'] ?? 1_000));
  if (!(ms <= maxMs)) {
    const limit = maxMs === MAX_DURATION_MS ? "596h, the limit of Node's timers" : formatDuration(maxMs);
    throw new InvalidValueError(`invalid duration '${text}'`, `expected at most ${limit}`);
  }
  if (ms < minMs) throw new InvalidValueError(`invalid duration '${text}'`, `expected at least ${formatDuration(minMs)}`);
  return ms;
}

const SIZE = /^(\d+)([kmg])?$/i;
const BYTES_PER_UNIT: Readonly<Record<string, number>> = { k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/**
 * Parses a size: a whole number of bytes, or with `k`, `m`, `g` (×1024, ×1024², ×1024³; either case,
 * as nginx).
 *
 * @param minBytes the smallest acceptable result, default 0.
 * @param maxBytes the largest acceptable result, default 2^53 − 1.
 * @returns bytes. `parseSize('16k')` = 16384.
 * @throws InvalidValueError for other spellings (`1.5k`, `1t`, `1kb`), below minBytes or above maxBytes.
 */
export function parseSize(text: string, minBytes = 0, maxBytes = Number.MAX_SAFE_INTEGER): number {
  const match = SIZE.exec(text);
  if (match === null) throw new InvalidValueError(`invalid size '${text}'`, 'expected e.g. 512, 16k, 1m, 1g');
  const bytes = Number(match[1]) * (BYTES_PER_UNIT[(match[2] ?? '').toLowerCase()] ?? 1);
  if (!Number.isSafeInteger(bytes)) throw new InvalidValueError(`invalid size '${text}'`, 'too large');
  if (bytes < minBytes) throw new InvalidValueError(`invalid size '${text}'`, `expected at least ${formatSize(minBytes)}`);
  if (bytes > maxBytes) throw new InvalidValueError(`invalid size '${text}'`, `expected at most ${formatSize(maxBytes)}`);
  return bytes;
}

// ---- booleans, numbers, choices ----------------------------------------------------------------------

const BOOLEANS: ReadonlyMap<string, boolean> = new Map([
  ['on', true],
  ['off', false],
  ['true', true],
  ['false', false],
  ['yes', true],
  ['no', false],
  ['1', true],
  ['0', false],
]);

/**
 * Parses `on/off`, `true/false`, `yes/no`, `1/0`, in any case.
 * @throws InvalidValueError for anything else.
 */
export function parseBoolean(text: string): boolean {
  const value = BOOLEANS.get(text.toLowerCase());
  if (value === undefined) {
    throw new InvalidValueError(`invalid boolean '${text}'`, 'expected on/off, true/false, yes/no, 1/0');
  }
  return value;
}

/**
 * Parses a whole number in decimal digits (no sign, no exponent) within `min..max`.
 * @throws InvalidValueError naming the range.
 */
export function parseInteger(text: string, min: number, max: number): number {
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!(value >= min && value <= max)) {
    throw new InvalidValueError(`invalid number '${text}'`, `expected a whole number from ${min} to ${max}`);
  }
  return value;
}

/**
 * Returns `text` when it is one of `choices`, else throws with a did-you-mean or the list.
 *
 * @param what what the choice names, for the message: `unknown <what> 'x'`.
 * @throws InvalidValueError `unknown strategy 'round_robin'` (`did you mean 'round-robin'?`).
 */
export function parseChoice<T extends string>(text: string, choices: readonly T[], what: string): T {
  const choice = choices.find((candidate) => candidate === text);
  if (choice !== undefined) return choice;
  throw new InvalidValueError(`unknown ${what} '${text}'`, didYouMean(text, choices));
}

/** `did you mean 'x'?` when one is close, else `expected one of: a, b, c`. */
export function didYouMean(text: string, choices: readonly string[]): string {
  const suggestion = suggest(text, choices);
  return suggestion === undefined ? `expected one of: ${choices.join(', ')}` : `did you mean '${suggestion}'?`;
}

// ---- addresses -------------------------------------------------------------------------------------

const LISTEN_HINT = 'expected host:port, :port or [::]:port';

/**
 * Parses a listen address: `host:port`, `:port` (all IPv4 interfaces, `0.0.0.0`), `[IPv6]:port`, or a
 * bare `port` (as nginx's `listen 8080`). The host is an IPv4 address, a bracketed IPv6 address or a
 * host name (lowercased). Port 0..65535; 0 asks the system for a free port (tests use it).
 *
 * @returns `{ host, port }` with IPv6 hosts unbracketed: `[::]:80` → `{ host: '::', port: 80 }`.
 * @throws InvalidValueError, pointing at the port or the host.
 */
export function parseListenAddress(text: string): ListenAddress {
  if (/^\d+$/.test(text)) return { host: '0.0.0.0', port: parsePort(text, 0, 0) };

  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    const host = close < 0 ? '' : text.slice(1, close);
    if (close < 0 || !isIPv6(host) || host.includes('%')) {
      throw new InvalidValueError(`invalid IPv6 address in listen address '${text}'`, LISTEN_HINT, 1);
    }
    if (text[close + 1] !== ':') throw new InvalidValueError(`missing port in listen address '${text}'`, LISTEN_HINT, close + 1);
    return { host: host.toLowerCase(), port: parsePort(text.slice(close + 2), 0, close + 2) };
  }

  const colon = text.lastIndexOf(':');
  if (colon < 0) throw new InvalidValueError(`missing port in listen address '${text}'`, LISTEN_HINT, text.length);
  const host = text.slice(0, colon);
  if (host.includes(':')) {
    throw new InvalidValueError(`invalid listen address '${text}'`, 'an IPv6 address needs brackets, e.g. [::1]:8080');
  }
  if (host !== '' && !isIPv4(host) && !isHostName(host)) {
    throw new InvalidValueError(`invalid host '${host}' in listen address`, LISTEN_HINT);
  }
  return { host: host === '' ? '0.0.0.0' : host.toLowerCase(), port: parsePort(text.slice(colon + 1), 0, colon + 1) };
}

/**
 * Parses a TCP port in `min..65535`.
 * @param offset where the port starts in the whole value, for the error's column.
 */
export function parsePort(text: string, min: number, offset: number): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= min && port <= 65_535)) {
    throw new InvalidValueError(`invalid port '${text}'`, `expected a number from ${min} to 65535`, offset);
  }
  return port;
}

/**
 * True for a DNS host name (RFC 1123 section 2.1 labels of letters, digits and `-`, plus `_` as
 * container service names use), at most 253 characters. A name whose last label is a number, in
 * decimal or in hex (`0x…`), is refused: the system resolver (`getaddrinfo`, inet_aton's forms)
 * reads `1.2.3`, `2130706433` and `0x7f000001` as IPv4 addresses, so such a "name" is an address
 * in disguise, which would escape every check made on addresses (the WHATWG URL parser's
 * "ends in a number" rule refuses the same).
 */
export function isHostName(text: string): boolean {
  if (text.length === 0 || text.length > 253) return false;
  const labels = text.split('.');
  if (/^(\d+|0x[0-9a-f]*)$/i.test(labels[labels.length - 1] ?? '')) return false;
  return labels.every((label) => /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/.test(label));
}

// ---- comma-separated lists -------------------------------------------------------------------------

/** The items of a comma-separated value, trimmed, each with its offset in `text` (for the error's column). */
function commaItems(text: string): { readonly item: string; readonly offset: number }[] {
  let itemStart = 0;
  return text.split(',').map((rawItem) => {
    const offset = itemStart + (rawItem.length - rawItem.trimStart().length);
    itemStart += rawItem.length + 1;
    return { item: rawItem.trim(), offset };
  });
}

// ---- resolver lists ---------------------------------------------------------------------------

const RESOLVER_HINT = 'expected IP[:PORT] items separated by commas, e.g. 127.0.0.53, [::1]:5353';

/**
 * Parses `resolver`: a comma-separated list of DNS servers, each an IPv4 address with an optional
 * `:PORT`, a bare IPv6 address, or `[IPv6]:PORT` (port 53 by default, as in `/etc/resolv.conf`).
 * Names are refused: the resolver is what turns names into addresses (nginx's `resolver` takes
 * names only because it reads them once from `/etc/hosts` at start-up). So are addresses no DNS
 * server can have (`unusableAddressReason`).
 *
 * @returns the servers in written order (the first is asked first), `source` keeping each item as
 *   written and `offset` where it starts in `text` (UTF-16 units, for the place of a message about it).
 * @throws InvalidValueError pointing at the bad item: empty, not an IP address, not a unicast
 *   address, bad port.
 */
export function parseResolverList(text: string): (ResolverAddress & { readonly source: string; readonly offset: number })[] {
  return commaItems(text).map(({ item, offset }) => {
    if (item === '') throw new InvalidValueError('empty item in resolver list', RESOLVER_HINT, offset);
    const server = parseResolverAddress(item, offset);
    const problem = unusableAddressReason(server.host);
    if (problem !== undefined) {
      throw new InvalidValueError(`invalid resolver '${server.host}'`, `${problem} cannot be a DNS server; expected a unicast address`, offset);
    }
    return { ...server, source: item, offset };
  });
}

function parseResolverAddress(item: string, offset: number): ResolverAddress {
  const invalid = (): never => {
    throw new InvalidValueError(`invalid resolver address '${item}'`, RESOLVER_HINT, offset);
  };
  if (item.includes('%')) {
    throw new InvalidValueError(`invalid resolver address '${item}'`, 'a zone id (%eth0) cannot be given: use a DNS server with a global or loopback address', offset);
  }
  if (item.startsWith('[')) {
    const close = item.indexOf(']');
    const host = close < 0 ? '' : item.slice(1, close).toLowerCase();
    if (!isIPv6(host) || host.includes('%')) invalid();
    if (close === item.length - 1) return { host, port: 53 };
    if (item[close + 1] !== ':') invalid();
    return { host, port: parsePort(item.slice(close + 2), 1, offset + close + 2) };
  }
  if (isIPv6(item) && !item.includes('%')) return { host: item.toLowerCase(), port: 53 };
  const colon = item.indexOf(':');
  const host = colon < 0 ? item : item.slice(0, colon);
  if (!isIPv4(host)) {
    if (isHostName(host)) {
      throw new InvalidValueError(`invalid resolver '${host}'`, 'a DNS server is given by its IP address, not a name', offset);
    }
    invalid();
  }
  return { host, port: colon < 0 ? 53 : parsePort(item.slice(colon + 1), 1, offset + colon + 1) };
}

/**
 * Why the IP literal `host` can never be a destination (a DNS server, or an upstream discovered from
 * DNS), or undefined when it can: the unspecified
 * address (`0.0.0.0`, `::`) and the rest of 0.0.0.0/8, which name no destination (RFC 1122 section
 * 3.2.1.3); multicast (224.0.0.0/4, ff00::/8; RFC 5771, RFC 4291 section 2.7); the limited broadcast
 * address 255.255.255.255 (RFC 919) and the rest of the reserved 240.0.0.0/4 (RFC 1112 section 4).
 * An IPv4-mapped address (`::ffff:224.0.0.1`) is judged as its IPv4 address. `resolver` refuses
 * these; DNS discovery leaves them out of its answers (src/discovery/line-answer.ts).
 */
export function unusableAddressReason(host: string): string | undefined {
  let bytes = isIPv4(host) ? ipv4Bytes(host) : ipv6Bytes(host);
  if (isIpv4Mapped(bytes)) bytes = bytes.slice(12);
  const isAll = (value: number): boolean => bytes.every((byte) => byte === value);
  const [first = 0] = bytes;
  if (bytes.length === 16) {
    if (isAll(0)) return 'the unspecified address';
    return first === 0xff ? 'a multicast address' : undefined;
  }
  if (isAll(0)) return 'the unspecified address';
  if (first === 0) return 'an address of 0.0.0.0/8, which names no destination,';
  if (isAll(255)) return 'the broadcast address';
  if (first >= 240) return 'a reserved address of 240.0.0.0/4';
  return first >= 224 ? 'a multicast address' : undefined;
}

// ---- CIDR lists ------------------------------------------------------------------------------------

const CIDR_HINT = 'expected IPs or CIDRs separated by commas, e.g. 10.0.0.0/8, ::1';

/**
 * Parses a comma-separated list of IPv4/IPv6 addresses and CIDR networks for `trusted_proxies`.
 * A bare address is a /32 (IPv4) or /128 (IPv6) network. Host bits below the prefix are cleared
 * (`10.1.2.3/8` is `10.0.0.0/8`, as nginx's `set_real_ip_from` does). An IPv4-mapped entry is the
 * IPv4 network it maps (`::ffff:10.0.0.0/104` is `10.0.0.0/8`), see `parseCidr`. An empty text is
 * an empty list.
 *
 * @returns networks in written order, `source` keeping each item as written and `offset` where it
 *   starts in `text` (UTF-16 units, for the place of a message about it).
 * @throws InvalidValueError pointing at the bad item: not an IP, prefix out of range or with a
 *   leading zero (`/08`), a mapped prefix shorter than /96, empty item; pointing at the space for
 *   a space inside an item (`10.0.0.0 /8`, or two items without their comma).
 */
export function parseCidrList(text: string): (Cidr & { readonly offset: number })[] {
  if (text.trim() === '') return [];
  return commaItems(text).map(({ item, offset }) => {
    if (item === '') throw new InvalidValueError('empty item in address list', CIDR_HINT, offset);
    const space = item.search(/\s/);
    if (space >= 0) {
      // `10.0.0.0 /8` is one network mistyped; `10.0.0.1 10.0.0.2`, two items without their comma.
      if (item[space - 1] === '/' || item.slice(space).trimStart().startsWith('/')) throw spaceInNetwork(item, offset + space);
      throw new InvalidValueError(`space inside the item '${item}'`, CIDR_HINT, offset + space);
    }
    return { ...parseCidr(item, offset), offset };
  });
}

/** `10.0.0.0 /8` (a network written with a space around its `/`), pointing at the space `offset`. */
function spaceInNetwork(network: string, offset: number): InvalidValueError {
  return new InvalidValueError(`space inside the network '${network}'`, 'an address/prefix is written without spaces, e.g. 10.0.0.0/8', offset);
}

/**
 * One IP or CIDR network (`trusted_proxies` items, `access` targets). An IPv4-mapped IPv6 address
 * (`::ffff:a.b.c.d`, RFC 4291 section 2.5.5.2) with a prefix of /96 or longer is returned as the
 * IPv4 network it maps, prefix − 96 (`::ffff:127.0.0.5` → 127.0.0.5/32): client IPs are read with
 * mapped addresses as IPv4 (src/gateway/client-address.ts), so a mapped network kept as IPv6 would
 * never match one. nginx reads a mapped client as IPv4 too (ngx_cidr_match, and the access module
 * checks it against the IPv4 `allow` / `deny` lines), where a mapped entry then silently never
 * matches; here it means the IPv4 network it names. A mapped address with a shorter prefix is
 * refused: it would reach beyond the mapped range into IPv6 addresses no IPv4 client has.
 */
function parseCidr(item: string, offset: number, hint = CIDR_HINT): Cidr {
  const slash = item.indexOf('/');
  const address = slash < 0 ? item : item.slice(0, slash);
  const family = isIPv4(address) ? 4 : isIPv6(address) && !address.includes('%') ? 6 : undefined;
  if (family === undefined) throw new InvalidValueError(`invalid IP address '${address}'`, hint, offset);
  const bits = family === 4 ? 32 : 128;
  const prefixText = slash < 0 ? String(bits) : item.slice(slash + 1);
  // Decimal without a leading zero, as the address itself (isIPv4 refuses `010.0.0.1`): `/08` would
  // read as octal to some tools (Go's netip.ParsePrefix refuses it too, golang/go#63850).
  const prefixLength = /^(?:0|[1-9]\d{0,2})$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefixLength <= bits)) {
    const hint = /^0\d/.test(prefixText) ? `expected /0 to /${bits} for IPv${family}, without a leading zero` : `expected /0 to /${bits} for IPv${family}`;
    throw new InvalidValueError(`invalid prefix length '/${prefixText}'`, hint, offset + slash);
  }
  const bytes = family === 4 ? ipv4Bytes(address) : ipv6Bytes(address);
  if (family === 6 && isIpv4Mapped(bytes)) {
    if (prefixLength < 96) {
      throw new InvalidValueError(
        `invalid prefix length '/${prefixText}' for the IPv4-mapped address '${address}'`,
        'a mapped network is an IPv4 network: expected /96 to /128 (::ffff:10.0.0.0/104 is 10.0.0.0/8), or write the IPv4 network',
        offset + slash,
      );
    }
    const ipv4 = bytes.slice(12);
    clearHostBits(ipv4, prefixLength - 96);
    return { family: 4, bytes: ipv4, prefixLength: prefixLength - 96, source: item };
  }
  clearHostBits(bytes, prefixLength);
  return { family, bytes, prefixLength, source: item };
}

const MAPPED_PREFIX = /^::ffff:/i;

/**
 * `::ffff:1.2.3.4` → `1.2.3.4` (an IPv4-mapped address, RFC 4291 section 2.5.5.2, as a dual-stack
 * socket or an AAAA record gives it, in any case); any other text unchanged.
 */
export function unmapIpv4(address: string): string {
  return MAPPED_PREFIX.test(address) && isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/** True for the 16 bytes of an IPv4-mapped address, `::ffff:a.b.c.d` (RFC 4291 section 2.5.5.2). */
export function isIpv4Mapped(bytes: Uint8Array): boolean {
  if (bytes.length !== 16 || bytes[10] !== 0xff || bytes[11] !== 0xff) return false;
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false;
  return true;
}

/** `10.1.2.3` → [10, 1, 2, 3]. The text must be a valid IPv4 address (`isIPv4`). */
export function ipv4Bytes(text: string): Uint8Array {
  return Uint8Array.from(text.split('.').map(Number));
}

/**
 * `2001:db8::1` → its 16 bytes (RFC 4291 section 2.2: `::` stands for enough zero groups to make
 * eight; the last 32 bits may be written as an IPv4 address). The text must satisfy `isIPv6`.
 */
export function ipv6Bytes(text: string): Uint8Array {
  let hex = text.toLowerCase();
  const lastColon = hex.lastIndexOf(':');
  const tail = hex.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a = 0, b = 0, c = 0, d = 0] = ipv4Bytes(tail);
    hex = `${hex.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = hex.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = rest === undefined || rest === '' ? [] : rest.split(':');
  const zeros = Array<string>(8 - headGroups.length - tailGroups.length).fill('0');
  const groups = rest === undefined ? headGroups : [...headGroups, ...zeros, ...tailGroups];
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    const value = parseInt(group, 16);
    bytes[i * 2] = value >> 8;
    bytes[i * 2 + 1] = value & 0xff;
  });
  return bytes;
}

function clearHostBits(bytes: Uint8Array, prefixLength: number): void {
  for (let i = 0; i < bytes.length; i++) {
    const networkBits = Math.min(8, Math.max(0, prefixLength - i * 8));
    bytes[i] = (bytes[i] ?? 0) & ((0xff << (8 - networkBits)) & 0xff);
  }
}

/**
 * The warning's reason when `network` (an `access` target or a `trusted_proxies` item, as `parseCidr`
 * returns it) was written with host bits below its prefix, whose bits `parseCidr` cleared:
 * `10.1.2.3/8` → `the bits below /8 are ignored, it means 10.0.0.0/8`; `::ffff:10.0.0.1/104` → `the
 * bits below /104 are ignored, it means 10.0.0.0/8`. Undefined when it was written as its network
 * address. nginx warns "low address bits of … are meaningless" for the same (ngx_ptocidr).
 */
export function ignoredHostBits(network: Cidr): string | undefined {
  const [written = '', writtenPrefix] = network.source.split('/');
  const writtenBytes = (isIPv4(written) ? ipv4Bytes(written) : ipv6Bytes(written)).slice(-network.bytes.length); // a mapped address: its IPv4 bytes
  if (writtenBytes.every((byte, i) => byte === network.bytes[i])) return undefined;
  return `the bits below /${writtenPrefix ?? network.prefixLength} are ignored, it means ${formatNetwork(network.bytes)}/${network.prefixLength}`;
}

/** The network address of 4 or 16 bytes as text (IPv6 in its canonical, compressed form). */
function formatNetwork(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return new SocketAddress({ address: groups.join(':'), family: 'ipv6' }).address;
}

// ---- access rules and limits ----------------------------------------------------------------------

const ACCESS_HINT = 'expected allow CIDR, allow all, deny CIDR or deny all, e.g. deny 10.0.0.0/8';

/**
 * Parses one `access` line: `allow` or `deny`, then `all` or one IP / CIDR network (host bits cleared,
 * as `trusted_proxies`), nginx's `allow` / `deny` directives.
 * @throws InvalidValueError pointing at the bad word: not allow/deny, a missing or bad network, a
 *   space around the network's `/` (`10.0.0.0 /8`, pointing at the space), extra words.
 */
export function parseAccessRule(text: string): { readonly isAllowed: boolean; readonly network: Cidr | undefined } {
  const words = Array.from(text.matchAll(/\S+/g), (match) => ({ word: match[0], offset: match.index ?? 0 }));
  const [action, target, extra] = words;
  if (action === undefined || (action.word !== 'allow' && action.word !== 'deny')) {
    throw new InvalidValueError(`invalid access rule '${text}'`, ACCESS_HINT, action?.offset ?? 0);
  }
  if (target === undefined) throw new InvalidValueError(`'${action.word}' needs a network or 'all'`, ACCESS_HINT, text.length);
  if (extra !== undefined && (extra.word.startsWith('/') || target.word.endsWith('/'))) {
    throw spaceInNetwork(text.slice(target.offset, extra.offset + extra.word.length), target.offset + target.word.length);
  }
  if (extra !== undefined) {
    throw new InvalidValueError(`one network per access line, '${extra.word}' is one too many`, 'write one line per network', extra.offset);
  }
  const network = target.word === 'all' ? undefined : parseCidr(target.word, target.offset, ACCESS_HINT);
  return { isAllowed: action.word === 'allow', network };
}

const RATE_HINT = 'expected N/s or N/m, optionally followed by burst=N, e.g. 10/s burst=20';
/** The largest N of `rate_limit` and `burst=` (far beyond any sane use, keeping token arithmetic exact). */
const MAX_RATE = 1_000_000;

/**
 * Parses `rate_limit`: `N/s` or `N/m` (N 1..1 000 000), then optionally `burst=N` (1..1 000 000);
 * the default burst is ⌈N/s⌉ (for `N/m`, ⌈N/60⌉), at least 1.
 * @returns the rate, its period and burst, and `source`, the normalised text (`10/s burst=10`).
 * @throws InvalidValueError pointing at the bad part.
 */
export function parseRateLimit(text: string): { readonly requests: number; readonly periodMs: 1_000 | 60_000; readonly burst: number; readonly source: string } {
  const words = Array.from(text.matchAll(/\S+/g), (match) => ({ word: match[0], offset: match.index ?? 0 }));
  const [rate, burstWord, extra] = words;
  const match = rate === undefined ? null : /^(\d{1,7})\/([sm])$/.exec(rate.word);
  const requests = Number(match?.[1]);
  if (match === null || !(requests >= 1 && requests <= MAX_RATE)) {
    throw new InvalidValueError(`invalid rate '${rate?.word ?? ''}'`, RATE_HINT, rate?.offset ?? 0);
  }
  const periodMs = match[2] === 's' ? 1_000 : 60_000;
  let burst = Math.max(1, Math.ceil(periodMs === 1_000 ? requests : requests / 60));
  if (burstWord !== undefined) {
    const burstMatch = /^burst=(\d{1,7})$/.exec(burstWord.word);
    burst = Number(burstMatch?.[1]);
    if (burstMatch === null || !(burst >= 1 && burst <= MAX_RATE)) {
      throw new InvalidValueError(`invalid burst '${burstWord.word}'`, `expected burst=N with N from 1 to ${MAX_RATE}`, burstWord.offset);
    }
  }
  if (extra !== undefined) throw new InvalidValueError(`unexpected '${extra.word}' after the rate`, RATE_HINT, extra.offset);
  return { requests, periodMs, burst, source: `${requests}/${match[2]} burst=${burst}` };
}

// ---- status ranges ---------------------------------------------------------------------------------

const STATUS_HINT = 'expected statuses or ranges from 100 to 599, e.g. 200-399 or 200,204,300-399';

/**
 * Parses HTTP status ranges for `health_status`: comma-separated statuses (`204`) and inclusive
 * ranges (`200-399`), each within 100..599 (RFC 9110 section 15), a range's start not after its end.
 *
 * @returns ranges in written order; a single status `s` becomes `{ from: s, to: s }`.
 * @throws InvalidValueError pointing at the bad item.
 */
export function parseStatusRanges(text: string): StatusRange[] {
  return commaItems(text).map(({ item, offset }) => {
    const match = /^(\d{3})(?:-(\d{3}))?$/.exec(item);
    const from = Number(match?.[1]);
    const to = Number(match?.[2] ?? match?.[1]);
    if (match === null || !(from >= 100 && to <= 599 && from <= to)) {
      throw new InvalidValueError(`invalid status range '${item}'`, STATUS_HINT, offset);
    }
    return { from, to };
  });
}

// ---- formatting back, for --check ------------------------------------------------------------------

/** 500 → `500ms`, 3000 → `3s`, 90 000 → `90s`, 60 000 → `1m`, 3 600 000 → `1h`, 86 400 000 → `1d`, 0 → `0s`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000}d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}

/** 16384 → `16k`, 1048576 → `1m`, 1000 → `1000`, 0 → `0`. */
export function formatSize(bytes: number): string {
  if (bytes === 0) return '0';
  if (bytes % 1024 ** 3 === 0) return `${bytes / 1024 ** 3}g`;
  if (bytes % 1024 ** 2 === 0) return `${bytes / 1024 ** 2}m`;
  if (bytes % 1024 === 0) return `${bytes / 1024}k`;
  return String(bytes);
}

/** `{ host: '::', port: 80 }` → `[::]:80`; `{ host: '0.0.0.0', port: 8080 }` → `0.0.0.0:8080`. */
export function formatListenAddress(address: ListenAddress): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}
