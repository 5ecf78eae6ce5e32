/**
 * One `pass` line → one upstream (SPEC 1.2): `URL [weight=N] [backup] [down] [resolve] [service=NAME]`,
 * the shape of nginx's `server address [weight=number] [backup] [down] [resolve] [service=name]`
 * inside an `upstream` block. With `resolve` or `service=` the line stands for the addresses DNS
 * gives for its host (SPEC 7, src/discovery); only the flags are checked here, nothing is looked up. The URL is read by
 * hand rather than with `new URL`, which would quietly rewrite it (`http://1` becomes `0.0.0.1`,
 * `%41` and `A` become equal) and could not say which column is wrong. Grammar (RFC 3986 section 3,
 * narrowed to what a proxy can connect to):
 *
 *     http[s]://host[:port][/path]   host = name | IPv4 | [IPv6];  port 1..65535, default 80 (443 for https)
 *
 * A name may end with the dot of a fully qualified name (`api.svc.cluster.local.`); it is dropped.
 * An IPv6 address is read in its canonical form (RFC 5952: `[0:0::1]` is `[::1]`), and an
 * IPv4-mapped one as its IPv4 address (`[::ffff:127.0.0.2]` is `127.0.0.2`, RFC 4291 section
 * 2.5.5.2), so one backend is one upstream however its address is spelled: the `origin` that
 * duplicate lines, the admin registry and DNS discovery (which folds mapped AAAA records the same
 * way, src/discovery/line-answer.ts) compare is the same.
 * No user info, query or fragment: they cannot mean anything for an upstream. No address that no
 * upstream can have (`unusableAddressReason`: unspecified, multicast, broadcast): `0.0.0.0` would
 * reach this host on Linux under a second name, one backend counted as two upstreams; DNS discovery
 * leaves the same addresses out of its answers.
 */
import { isIPv4, isIPv6, SocketAddress } from 'node:net';
import { ConfigValueError } from '../errors.js';
import type { UpstreamConfig, UpstreamDiscovery } from './config.js';
import { suggest } from './did-you-mean.js';
import { placeInValue, type IniEntry } from './ini-parser.js';
import { isHostName, unusableAddressReason } from './values.js';

/** The largest `weight` (nginx has no limit; this keeps weight sums far inside safe integers). */
export const MAX_WEIGHT = 1_000_000;

const FLAG_NAMES = ['weight=', 'backup', 'down', 'resolve', 'service='] as const;
const URL_HINT = 'expected http://host[:port][/path] or https://host[:port][/path]';

/**
 * Parses one `pass` line.
 *
 * @returns the upstream: `origin` is always `scheme://host:port`; `hostHeader` omits the scheme's
 *   default port (80, 443) as clients do (RFC 9110 section 7.2); `path` is the URL's path when
 *   written (even `/`), else undefined; `place` is where the URL starts.
 * @throws ConfigValueError at the offending column: not `http://` or `https://`, bad host or port, user info, query or fragment, non-ASCII path, unknown or repeated flag (with a
 *   did-you-mean), weight outside 1..1 000 000, an unspecified, multicast or broadcast address.
 */
export function parsePassLine(entry: IniEntry): UpstreamConfig {
  const fail = (offset: number, reason: string): never => {
    throw new ConfigValueError(placeInValue(entry, offset), reason);
  };
  const tokens = splitBlanks(entry.value);
  const [urlToken, ...flagTokens] = tokens;
  if (urlToken === undefined) return fail(0, "'pass' needs an upstream URL (e.g. pass = http://127.0.0.1:9001)");

  const url = parseUpstreamUrl(urlToken.text, (offset, reason) => fail(urlToken.offset + offset, reason));

  let weight: number | undefined;
  let isBackup = false;
  let isDown = false;
  let resolveFlag: Token | undefined;
  let service: { readonly name: string; readonly flag: Token } | undefined;
  for (const flag of flagTokens) {
    const repeated = (): never => fail(flag.offset, `flag '${flag.text}' is repeated in this pass line`);
    if (flag.text.startsWith('weight=')) {
      if (weight !== undefined) repeated();
      const text = flag.text.slice('weight='.length);
      weight = /^\d{1,7}$/.test(text) ? Number(text) : NaN;
      if (!(weight >= 1 && weight <= MAX_WEIGHT)) {
        fail(flag.offset + 7, `invalid weight '${text}' for 'pass' (expected a whole number from 1 to ${MAX_WEIGHT})`);
      }
    } else if (flag.text === 'backup') {
      if (isBackup) repeated();
      isBackup = true;
    } else if (flag.text === 'down') {
      if (isDown) repeated();
      isDown = true;
    } else if (flag.text === 'resolve') {
      if (resolveFlag !== undefined) repeated();
      resolveFlag = flag;
    } else if (flag.text.startsWith('service=')) {
      if (service !== undefined) repeated();
      const name = flag.text.slice('service='.length);
      const problem = serviceNameProblem(name);
      if (problem !== undefined) fail(flag.offset + 8, problem);
      service = { name, flag };
    } else {
      const suggestion = suggest(flag.text.split('=')[0] ?? '', FLAG_NAMES.map((name) => name.replace('=', '')));
      const withValue: Record<string, string> = { weight: 'weight=N', service: 'service=NAME' };
      const note =
        suggestion === undefined
          ? 'expected weight=N, backup, down, resolve or service=NAME'
          : `did you mean '${withValue[suggestion] ?? suggestion}'?`;
      fail(flag.offset, `unknown flag '${flag.text}' for 'pass' (${note})`);
    }
  }

  const discoveryFlag = service?.flag ?? resolveFlag;
  if (discoveryFlag !== undefined && (isIPv4(url.host) || isIPv6(url.host))) {
    fail(
      discoveryFlag.offset,
      `'${discoveryFlag.text}' needs a host name to look up, and ${url.host} is an address (drop '${discoveryFlag.text}')`,
    );
  }
  if (service !== undefined && url.hasPort) {
    fail(urlToken.offset + url.portOffset, `a pass URL with 'service=' takes its ports from the SRV records: drop ':${url.port}' (nginx refuses it too)`);
  }
  const discovery: UpstreamDiscovery | undefined =
    service !== undefined
      ? { kind: 'service', service: service.name, name: `_${service.name}._tcp.${url.host}`, weight }
      : resolveFlag !== undefined
        ? { kind: 'resolve', name: url.host }
        : undefined;
  const { hasPort: _hasPort, portOffset: _portOffset, ...address } = url;
  return {
    url: urlToken.text,
    ...address,
    weight: weight ?? 1,
    isBackup,
    isDown,
    place: placeInValue(entry, urlToken.offset),
    ...(discovery === undefined ? {} : { discovery }),
  };
}

/**
 * Why `name` cannot follow `service=`, or undefined when it can: a service name of RFC 6335
 * section 5.1 (1 to 15 letters, digits and hyphens, at least one letter, no hyphen at either end or
 * twice in a row), written without the `_` that the SRV name adds (`service=http` looks up
 * `_http._tcp.HOST`, RFC 2782).
 */
function serviceNameProblem(name: string): string | undefined {
  if (name === '') return "'service=' needs a service name, e.g. service=http (the lookup is _http._tcp.HOST)";
  if (name.startsWith('_')) {
    return `write the service without its underscore: service=${name.slice(1).split('.')[0]} (the lookup adds _ and ._tcp)`;
  }
  const isValid = name.length <= 15 && /^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$/.test(name) && /[A-Za-z]/.test(name);
  if (!isValid) {
    return `invalid service name '${name}' (expected 1 to 15 letters, digits and single inner hyphens with at least one letter, RFC 6335 section 5.1)`;
  }
  return undefined;
}

type UpstreamAddress = Pick<UpstreamConfig, 'scheme' | 'origin' | 'host' | 'port' | 'hostHeader' | 'path'> & {
  /** True when the URL writes a port. */
  readonly hasPort: boolean;
  /** Where the port starts in the URL (after the `:`), when it has one. */
  readonly portOffset: number;
};

/** `http[s]://host[:port][/path]` → its parts; `fail(offset, reason)` with the offset in `text`. */
function parseUpstreamUrl(text: string, fail: (offset: number, reason: string) => never): UpstreamAddress {
  const schemeEnd = text.indexOf('://');
  const scheme = schemeEnd < 0 ? '' : text.slice(0, schemeEnd).toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') fail(0, `invalid upstream URL '${text}' for 'pass' (${URL_HINT})`);
  const defaultPort = scheme === 'https' ? 443 : 80;
  const authorityStart = schemeEnd + 3;

  const queryOrFragment = text.search(/[?#]/);
  if (queryOrFragment >= 0) fail(queryOrFragment, `a pass URL cannot have a query or fragment: '${text}'`);

  const pathStart = text.indexOf('/', authorityStart);
  const authority = text.slice(authorityStart, pathStart < 0 ? text.length : pathStart);
  if (authority.includes('@')) fail(authorityStart, `user info in a pass URL is not supported: '${text}'`);

  let host: string;
  let portText: string | undefined;
  let portOffset: number;
  if (authority.startsWith('[')) {
    const close = authority.indexOf(']');
    host = close < 0 ? '' : authority.slice(1, close).toLowerCase();
    if (close < 0 || !isIPv6(host) || host.includes('%')) {
      fail(authorityStart + 1, `invalid IPv6 address in pass URL '${text}' (${URL_HINT})`);
    }
    host = canonicalIpv6Host(host);
    const afterHost = authority.slice(close + 1);
    if (afterHost !== '' && !afterHost.startsWith(':')) {
      fail(authorityStart + close + 1, `invalid upstream URL '${text}' for 'pass' (${URL_HINT})`);
    }
    portText = afterHost === '' ? undefined : afterHost.slice(1);
    portOffset = authorityStart + close + 2;
  } else {
    const colon = authority.indexOf(':');
    host = (colon < 0 ? authority : authority.slice(0, colon)).toLowerCase();
    // A fully qualified name's trailing dot (`api.svc.cluster.local.`) is dropped, as from a client's Host.
    if (host.endsWith('.') && host.length > 1 && !host.endsWith('..')) host = host.slice(0, -1);
    if (host === '') fail(authorityStart, `missing host in pass URL '${text}' (${URL_HINT})`);
    if (!isIPv4(host) && !isHostName(host)) {
      const dotted = numericHostAsIpv4(host);
      if (dotted !== undefined) fail(authorityStart, `'${host}' is the IPv4 address ${dotted} in another notation: write it as ${dotted}`);
      fail(authorityStart, `invalid host '${host}' in pass URL (${URL_HINT})`);
    }
    portText = colon < 0 ? undefined : authority.slice(colon + 1);
    portOffset = authorityStart + colon + 1;
  }

  const problem = isIPv4(host) || isIPv6(host) ? unusableAddressReason(host) : undefined;
  if (problem !== undefined) {
    const hint = host === '0.0.0.0' || host === '::' ? ` (for this host write ${host === '::' ? '[::1]' : '127.0.0.1'})` : '';
    fail(authorityStart + (authority.startsWith('[') ? 1 : 0), `${host} is ${problem} and cannot be an upstream${hint}`);
  }

  const port = portText === undefined ? defaultPort : /^\d{1,5}$/.test(portText) ? Number(portText) : NaN;
  if (!(port >= 1 && port <= 65_535)) fail(portOffset, `invalid port '${portText}' in pass URL (expected 1 to 65535)`);

  const path = pathStart < 0 ? undefined : text.slice(pathStart);
  const badPathCharacter = path === undefined ? -1 : path.search(/[^\x21-\x7e]/);
  if (badPathCharacter >= 0) {
    fail(pathStart + badPathCharacter, `pass URL paths must be ASCII: percent-encode other characters (RFC 3986 section 2.1)`);
  }
  // The pass path is where a route's requests go, and the router keeps them inside it (router.ts):
  // it must be resolved already. A dot segment would move them elsewhere once the upstream resolves
  // it (`/base/../x` is `/x`, RFC 3986 §5.2.4), and a bad escape is a 400 in a request.
  const dotSegment = path === undefined ? null : /\/(?:\.|%2e){1,2}(?=\/|$)/i.exec(path);
  if (dotSegment !== null) fail(pathStart + dotSegment.index + 1, `a pass URL path may not have '.' or '..' segments: write the path they resolve to`);
  const badEscape = path === undefined ? -1 : path.search(/%(?![0-9A-Fa-f]{2})/);
  if (badEscape >= 0) fail(pathStart + badEscape, `bad percent-escape in the pass URL path (expected % and two hex digits)`);

  const hostInUrl = host.includes(':') ? `[${host}]` : host;
  return {
    scheme,
    origin: `${scheme}://${hostInUrl}:${port}`,
    host,
    port,
    hostHeader: port === defaultPort ? hostInUrl : `${hostInUrl}:${port}`,
    path,
    hasPort: portText !== undefined,
    portOffset,
  };
}

/**
 * The dotted IPv4 address the system resolver would read a numeric host as (`0x7f000001`, `127.1`,
 * `2130706433` → `127.0.0.1`, by the WHATWG URL parser's IPv4 rules, which follow inet_aton), or
 * undefined when `host` is not one. For the error message only: such hosts are refused.
 */
function numericHostAsIpv4(host: string): string | undefined {
  try {
    const hostname = new URL(`http://${host}/`).hostname;
    return isIPv4(hostname) && hostname !== host ? hostname : undefined;
  } catch {
    return undefined;
  }
}

/** An IPv6 literal (valid, no zone) → its RFC 5952 text, or the IPv4 address it maps: `::FFFF:7f00:2` → `127.0.0.2`. */
function canonicalIpv6Host(address: string): string {
  const canonical = new SocketAddress({ address, family: 'ipv6' }).address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(canonical)?.[1];
  return mapped ?? canonical;
}

interface Token {
  readonly text: string;
  /** UTF-16 offset in the value. */
  readonly offset: number;
}

function splitBlanks(value: string): Token[] {
  return Array.from(value.matchAll(/[^ \t]+/g), (match) => ({ text: match[0], offset: match.index ?? 0 }));
}
