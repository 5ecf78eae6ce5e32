/**
 * The DNS questions discovery asks (SPEC 7), behind a two-method interface so the rules above it are
 * tested with a fake: `resolveAddresses` (A and AAAA, RFC 1035 §3.4.1 / RFC 3596) and
 * `resolveService` (SRV, RFC 2782, then the A/AAAA of each target). The real one is node's
 * `dns.Resolver` (c-ares): it asks only the configured DNS servers and never reads `/etc/hosts`,
 * which is what SPEC 7 wants for these lines (plain `pass` lines keep `dns.lookup`, `localhost` included).
 *
 * Every answer is classified into a `LookupResult` with a one-line reason, never thrown: node's
 * ENOTFOUND → nxdomain, ENODATA → empty, ESERVFAIL → servfail, EREFUSED → refused, ETIMEOUT (or our
 * own guard) → timeout, anything else (EBADRESP for a malformed answer, ECONNREFUSED, …) → error.
 */
import { getServers, Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { ResolverAddress, ServerConfig } from '../config/config.js';
import type { LookupResult } from './discovered-line.js';

/** A result other than `ok`, with its one-line reason (`SERVFAIL for api.test A from 127.0.0.1:5353`). */
export interface LookupFailure {
  readonly result: Exclude<LookupResult, 'ok'>;
  readonly reason: string;
}

/** One address record with its TTL, seconds (as answered: 0 is possible, Consul sends it). */
export interface TtlAddress {
  readonly address: string;
  readonly ttlSeconds: number;
}

/** The answer of one family: `ok` with at least one record, or how it failed. */
export type FamilyAnswer = { readonly result: 'ok'; readonly records: readonly TtlAddress[] } | LookupFailure;

/** The A and AAAA answers of one name, asked in parallel. */
export interface AddressAnswer {
  readonly v4: FamilyAnswer;
  readonly v6: FamilyAnswer;
}

/** One SRV record (RFC 2782) with the addresses of its target. */
export interface ServiceRecord {
  /** Lower is preferred, 0..65535. */
  readonly priority: number;
  /** Relative weight among records of one priority, 0..65535. */
  readonly weight: number;
  readonly port: number;
  /** The target host name as answered (an IP literal is possible: then `addresses` is undefined). */
  readonly target: string;
  /** The target's A/AAAA answer; undefined when the target is an IP literal (used as it is) or beyond MAX_SRV_TARGETS. */
  readonly addresses: AddressAnswer | undefined;
}

/** The SRV answer of one name: `ok` with its records, or how it failed. */
export type ServiceAnswer = { readonly result: 'ok'; readonly records: readonly ServiceRecord[] } | LookupFailure;

/**
 * The most distinct SRV targets looked up for one answer (an answer over TCP can carry ~1 500
 * records); records of the targets beyond it come back with `addresses` undefined and are left out.
 */
export const MAX_SRV_TARGETS = 128;

/** What discovery asks DNS. Implementations never reject: every outcome is an answer value. */
export interface DnsLookup {
  /** A and AAAA of `name`, each with its TTLs. */
  resolveAddresses(name: string): Promise<AddressAnswer>;
  /** SRV of `name` (`_http._tcp.web.test`), then the A/AAAA of each distinct target (at most MAX_SRV_TARGETS), in parallel. */
  resolveService(name: string): Promise<ServiceAnswer>;
  /**
   * Shutdown: ends every query in flight now (it answers `error`) and every later one at once, so
   * no DNS query, nor its timeout timer, keeps the process alive once the proxy has stopped.
   */
  close(): void;
}

/**
 * `DnsLookup` on node's `dns.Resolver`, asking `server.resolvers` (empty = the system's servers from
 * /etc/resolv.conf), each query bounded by `server.resolverTimeoutMs`.
 *
 * The bound, twice: c-ares tries each server in turn, `tries` times, `timeout` ms each (and its
 * newer versions adapt the per-try timeout), so its own limit is only roughly servers × tries ×
 * timeout. We set `tries: 1` (the line schedule retries with backoff, so c-ares need not) and
 * `timeout` = resolverTimeoutMs ÷ servers, so one sweep over all servers fits the budget; and a timer
 * of resolverTimeoutMs of our own ends the wait whatever c-ares does (its late answer is dropped).
 * nginx's `resolver_timeout` and HAProxy's `timeout resolve` are likewise one limit per lookup.
 */
export class NodeDnsLookup implements DnsLookup {
  readonly #timeoutMs: number;
  /** c-ares's per-try timeout, ms: resolverTimeoutMs ÷ servers. */
  readonly #tryTimeoutMs: number;
  /** `setServers` arguments; empty = the system's. */
  readonly #serverList: readonly string[];
  /** `127.0.0.1:5353`, or `127.0.0.1:5353, 127.0.0.2:53`: named in failure reasons. */
  readonly #servers: string;
  /** The channels of the lookups in flight: `close` cancels their queries. */
  readonly #channels = new Set<Resolver>();
  #isClosed = false;

  constructor(server: { readonly resolvers: readonly ResolverAddress[] } & Pick<ServerConfig, 'resolverTimeoutMs'>) {
    const serverCount = Math.max(1, server.resolvers.length > 0 ? server.resolvers.length : getServers().length);
    this.#timeoutMs = server.resolverTimeoutMs;
    this.#tryTimeoutMs = Math.max(1, Math.floor(server.resolverTimeoutMs / serverCount));
    this.#serverList = server.resolvers.map(serverString);
    this.#servers = this.#newResolver().getServers().join(', ');
  }

  /**
   * A c-ares channel for one name's questions. Each lookup gets its own: c-ares fails every query
   * outstanding on a channel when one malformed reply arrives (EBADRESP), so a name answered with
   * garbage would fail the lookups of every other line that shared it. One channel per lookup, once
   * per TTL, is cheap.
   */
  #newResolver(): Resolver {
    const resolver = new Resolver({ timeout: this.#tryTimeoutMs, tries: 1 });
    if (this.#serverList.length > 0) resolver.setServers(this.#serverList);
    return resolver;
  }

  async resolveAddresses(name: string): Promise<AddressAnswer> {
    const resolver = this.#newResolver();
    this.#channels.add(resolver);
    try {
      const [v4, v6] = await Promise.all([this.#family(resolver, name, 'A'), this.#family(resolver, name, 'AAAA')]);
      return { v4, v6 };
    } finally {
      this.#channels.delete(resolver);
    }
  }

  async resolveService(name: string): Promise<ServiceAnswer> {
    const resolver = this.#newResolver();
    this.#channels.add(resolver);
    let srv: Awaited<ReturnType<Resolver['resolveSrv']>> | LookupFailure;
    try {
      srv = await this.#bounded(name, 'SRV', () => resolver.resolveSrv(name));
    } finally {
      this.#channels.delete(resolver);
    }
    if ('result' in srv) return srv;
    const targets = [...new Set(srv.map((record) => record.name).filter((target) => target !== '' && isIP(target) === 0))].slice(0, MAX_SRV_TARGETS);
    const answers = new Map(await Promise.all(targets.map(async (target) => [target, await this.resolveAddresses(target)] as const)));
    const records = srv.map((record) => ({
      priority: record.priority,
      weight: record.weight,
      port: record.port,
      target: record.name,
      addresses: answers.get(record.name),
    }));
    return { result: 'ok', records };
  }

  async #family(resolver: Resolver, name: string, type: 'A' | 'AAAA'): Promise<FamilyAnswer> {
    const query = type === 'A' ? () => resolver.resolve4(name, { ttl: true }) : () => resolver.resolve6(name, { ttl: true });
    const answer = await this.#bounded(name, type, query);
    if ('result' in answer) return answer;
    const family = type === 'A' ? 4 : 6;
    // node (c-ares) gives the TTLs of the first 256 records only; the others get the lowest TTL given.
    const givenTtls = answer.map((record) => record.ttl).filter((ttl) => Number.isFinite(ttl));
    const fallbackTtl = givenTtls.length > 0 ? Math.min(...givenTtls) : 0;
    const records = answer
      .filter((record) => isIP(record.address) === family)
      .map((record) => ({ address: record.address, ttlSeconds: Number.isFinite(record.ttl) ? record.ttl : fallbackTtl }));
    return records.length > 0 ? { result: 'ok', records } : { result: 'empty', reason: `no ${type} record for ${name} from ${this.#servers}` };
  }

  /**
   * c-ares cancels the queries of every channel in flight (they reject with ECANCELLED, an `error`
   * answer) and their guards are cleared; a query asked afterwards fails at once. Without it a
   * query to a silent server held the process up to resolver_timeout after its `shut down` line,
   * and c-ares's own retry timer a while longer.
   */
  close(): void {
    this.#isClosed = true;
    for (const resolver of this.#channels) resolver.cancel();
  }

  /** Runs one query with our own timeout guard; a node error becomes a classified `LookupFailure`. */
  async #bounded<T>(name: string, type: string, query: () => Promise<T>): Promise<T | LookupFailure> {
    if (this.#isClosed) return this.#failure('ECANCELLED', name, type);
    let guard: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<LookupFailure>((resolve) => {
      guard = setTimeout(() => resolve(this.#failure('ETIMEOUT', name, type)), this.#timeoutMs);
    });
    try {
      return await Promise.race([query(), timeout]);
    } catch (error) {
      return this.#failure((error as NodeJS.ErrnoException).code ?? String(error), name, type);
    } finally {
      clearTimeout(guard);
    }
  }

  #failure(code: string, name: string, type: string): LookupFailure {
    const result = classifyDnsError(code);
    const what = result === 'timeout' ? `no answer within ${this.#timeoutMs}ms` : (RESULT_WORDS[result] ?? (code === 'EBADRESP' ? 'malformed answer (EBADRESP)' : code));
    return { result, reason: `${what} for ${name} ${type} from ${this.#servers}` };
  }
}

const RESULT_WORDS: Partial<Record<LookupResult, string>> = {
  nxdomain: 'NXDOMAIN',
  empty: 'no records',
  servfail: 'SERVFAIL',
  refused: 'REFUSED',
};

/** node's (c-ares') error code → `LookupResult`; see the file's opening paragraph. */
export function classifyDnsError(code: string): Exclude<LookupResult, 'ok'> {
  switch (code) {
    case 'ENOTFOUND':
      return 'nxdomain';
    case 'ENODATA':
      return 'empty';
    case 'ESERVFAIL':
      return 'servfail';
    case 'EREFUSED':
      return 'refused';
    case 'ETIMEOUT':
      return 'timeout';
    default:
      return 'error';
  }
}

/** `IP:PORT` as `setServers` takes it (IPv6 in brackets). */
function serverString(address: ResolverAddress): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}
