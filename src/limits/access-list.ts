/**
 * A route's `access` lines (SPEC 8): `allow CIDR|all` / `deny CIDR|all` checked in order against
 * the client IP, the first match decides, no match allows — nginx's `allow` / `deny` of
 * ngx_http_access_module, and the same as HAProxy's `http-request deny if { src … }` lines read top
 * to bottom. A denied request gets 403.
 *
 * The matching is node's `net.BlockList`, compiled once per route when the config is built or
 * reloaded, never per request: runs of consecutive lines with the same verdict share one BlockList
 * (`allow A; allow B; deny C; allow all` is three checks at most), and `all` ends the list (nothing
 * after it can match first). An IPv4 client is checked against the IPv4 lines (and `all`) only, an
 * IPv6 client against the IPv6 lines, as nginx's access module keeps its IPv4 and IPv6 rules
 * apart: a BlockList alone would let `deny ::/0` match every IPv4 client too (it matches an IPv4
 * address against IPv6 networks in its `::ffff:`-mapped form). A client seen as `::ffff:a.b.c.d`
 * is IPv4, and a mapped network in a line is its IPv4 network (values.ts `parseCidr`).
 *
 * A BlockList check of a string costs a few microseconds (node builds a SocketAddress for it), so
 * verdicts are remembered per client IP in a bounded map, emptied when it reaches
 * VERDICT_CACHE_SIZE entries (amortised O(1); the rules never change under a list, a reload makes
 * a new one).
 */
import { BlockList, isIP } from 'node:net';
import type { AccessRule, RouteConfig } from '../config/config.js';
import { ignoredHostBits } from '../config/values.js';
import { normalizeClientIp } from '../gateway/client-address.js';

/** Most client IPs whose verdict is remembered before the memory is emptied. */
const VERDICT_CACHE_SIZE = 10_000;

/** A run of consecutive lines with one verdict; `networks` undefined = `all`. */
interface Segment {
  readonly isAllowed: boolean;
  readonly networks: BlockList | undefined;
}

export class AccessList {
  /** The lines that can match an IPv4 client (its networks and `all`), then those of an IPv6 client. */
  readonly #ipv4Segments: readonly Segment[];
  readonly #ipv6Segments: readonly Segment[];
  readonly #verdicts = new Map<string, boolean>();

  /** @param rules the route's `access` lines in order (at least one: a route without any has no AccessList) */
  constructor(rules: readonly AccessRule[]) {
    this.#ipv4Segments = compileSegments(rules, 4);
    this.#ipv6Segments = compileSegments(rules, 6);
  }

  /**
   * True when `clientIp` may pass: the verdict of the first line that matches it, or true when none
   * does. A client IP that is not an IP literal (a socket already gone) matches only `all`.
   */
  isAllowed(clientIp: string): boolean {
    const known = this.#verdicts.get(clientIp);
    if (known !== undefined) return known;
    if (this.#verdicts.size >= VERDICT_CACHE_SIZE) this.#verdicts.clear();
    const verdict = this.#judge(clientIp);
    this.#verdicts.set(clientIp, verdict);
    return verdict;
  }

  #judge(clientIp: string): boolean {
    const ip = normalizeClientIp(clientIp);
    const family = isIP(ip);
    for (const segment of family === 6 ? this.#ipv6Segments : this.#ipv4Segments) {
      if (segment.networks === undefined) return segment.isAllowed;
      if (family !== 0 && segment.networks.check(ip, family === 4 ? 'ipv4' : 'ipv6')) return segment.isAllowed;
    }
    return true;
  }
}

/** The segments of the lines of one address family (and `all`), in order, ending at the first `all`. */
function compileSegments(rules: readonly AccessRule[], family: 4 | 6): Segment[] {
  const segments: Segment[] = [];
  for (const rule of rules) {
    if (rule.network === undefined) {
      segments.push({ isAllowed: rule.isAllowed, networks: undefined });
      break;
    }
    if (rule.network.family !== family) continue;
    let last = segments.at(-1);
    if (last === undefined || last.isAllowed !== rule.isAllowed) {
      last = { isAllowed: rule.isAllowed, networks: new BlockList() };
      segments.push(last);
    }
    const { network } = rule;
    last.networks!.addSubnet(formatAddress(network.bytes), network.prefixLength, family === 4 ? 'ipv4' : 'ipv6');
  }
  return segments;
}

/** 4 or 16 network bytes as the text BlockList takes (`10.0.0.0`, `2001:db8:0:0:0:0:0:0`). */
function formatAddress(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return groups.join(':');
}

/**
 * What `--check` warns about in the routes' `access` lines, one line each with the rule's
 * file:line:column: a network written with host bits below its prefix (`allow 10.1.2.3/8` means
 * `10.0.0.0/8`, which is rarely what was meant: values.ts `ignoredHostBits`, as for `trusted_proxies`),
 * and lines after an `all`, which can never match first.
 */
export function accessRuleWarnings(routes: readonly RouteConfig[]): string[] {
  const warnings: string[] = [];
  for (const route of routes) {
    let allAt: AccessRule | undefined;
    for (const rule of route.access) {
      const where = `${rule.place.file}:${rule.place.line}:${rule.place.column}`;
      const verb = rule.isAllowed ? 'allow' : 'deny';
      if (allAt !== undefined) {
        warnings.push(`${where}: [proxy.${route.name}] this access line can never decide: '${allAt.isAllowed ? 'allow' : 'deny'} all' on line ${allAt.place.line} matches every client first`);
      }
      if (rule.network === undefined) {
        allAt ??= rule;
        continue;
      }
      const hostBits = ignoredHostBits(rule.network);
      if (hostBits !== undefined) warnings.push(`${where}: [proxy.${route.name}] access ${verb} ${rule.network.source}: ${hostBits}`);
    }
    // A list of allows only ends, as every list does, in "no match: allowed", so it keeps no one out
    // (nginx's allow/deny end the same way); and a route's own list replaces an inherited one, so
    // `[proxy] access = deny all` does not close it either.
    const first = route.access[0];
    if (first !== undefined && route.access.every((rule) => rule.isAllowed)) {
      warnings.push(
        `${first.place.file}:${first.place.line}:${first.place.column}: [proxy.${route.name}] every access line is an allow, and a client no line matches is allowed too: this list lets every client in (end it with 'access = deny all' to allow only these; a route's own access lines replace the [proxy] ones)`,
      );
    }
  }
  return warnings;
}
