/**
 * From DNS answers to the addresses of one discovery line (SPEC 7): the rules that turn an A/AAAA
 * pair (`resolve`) or an SRV answer with its targets (`service=`) into one list of address:port,
 * one result and one refresh time. Pure: the DNS part is a `DnsLookup`, the memory of the last good
 * answer of each family is passed in and out.
 *
 * Families (`resolve`): a family that fails (timeout, SERVFAIL, …) while the other answers
 * addresses contributes its last good addresses, so a broken AAAA never drops the IPv4 set (nor a
 * timed-out A the IPv4 set); both families without records → an empty answer (`nxdomain` when both
 * said NXDOMAIN); no addresses and a failure → that failure (the schedule keeps the last good set).
 *
 * SRV (RFC 2782): records of the lowest priority number among those whose target has an address
 * are primaries, all others backups (nginx `service=`); target "." (service not offered) and port
 * 0 are dropped with a note; each target's A/AAAA is combined as above; a target that does not
 * resolve is left out with a note. node gives no SRV TTL,
 * so the refresh is the lowest TTL of the targets' address answers, 5 s when none gave one (SPEC 7).
 *
 * Garbage is dropped: duplicate address:port (the first kept; an IPv4-mapped IPv6 address counts as
 * its IPv4 address), more than `MAX_LINE_ADDRESSES`. The
 * list is sorted (primaries first, then by address, then port) so a reordered answer is no change.
 */
import { isIP } from 'node:net';
import type { UpstreamDiscovery } from '../config/config.js';
import { unmapIpv4, unusableAddressReason } from '../config/values.js';
import type { DiscoveredAddress, LookupResult } from './discovered-line.js';
import { MAX_SRV_TARGETS, type AddressAnswer, type DnsLookup, type FamilyAnswer, type LookupFailure, type ServiceRecord, type TtlAddress } from './dns-lookup.js';

/** The most addresses one line stands for (a huge answer is cut, with a note): HAProxy's `server-template` count is a cap too. */
export const MAX_LINE_ADDRESSES = 512;

/** Refresh of an SRV line whose targets gave no TTL (all IP literals), seconds. */
export const SRV_DEFAULT_TTL_SECONDS = 5;

/** The last good records of each family, per looked-up name (the line's, or each SRV target in the latest SRV answer). */
export type FamilyMemory = Map<string, { v4?: readonly TtlAddress[]; v6?: readonly TtlAddress[] }>;

/** How one lookup of a line ended. */
export type LineAnswer =
  | {
      readonly result: 'ok';
      /** At least one, sorted, at most MAX_LINE_ADDRESSES. */
      readonly addresses: readonly DiscoveredAddress[];
      /** Lowest TTL of the records used, seconds (unclamped). */
      readonly ttlSeconds: number;
      /** Things left out (a target that did not resolve, a cut answer), one line each. */
      readonly notes: readonly string[];
    }
  | LookupFailure;

/** True for the results that are failures (timeout, servfail, refused, error), not answers. */
export function isFailure(result: LookupResult): boolean {
  return result !== 'ok' && result !== 'nxdomain' && result !== 'empty';
}

/**
 * Looks up one line: `discovery` of a `pass` line whose port is `linePort` (used for `resolve`).
 * `memory` is read and updated with the families that answered.
 */
export async function lookupLineAnswer(discovery: UpstreamDiscovery, linePort: number, lookup: DnsLookup, memory: FamilyMemory): Promise<LineAnswer> {
  try {
    if (discovery.kind === 'resolve') {
      const combined = combineFamilies(discovery.name, await lookup.resolveAddresses(discovery.name), memory);
      if ('reason' in combined) return combined;
      const addresses = combined.records.map((record) => ({ address: record.address, port: linePort }));
      return finish(addresses, combined.ttlSeconds, []);
    }
    return serviceAnswer(discovery.name, await lookup.resolveService(discovery.name), memory);
  } catch (error) {
    return { result: 'error', reason: `lookup of ${discovery.name} failed: ${(error as Error).message}` };
  }
}

/** The family rules of the file's opening paragraph, for one name. */
export function combineFamilies(name: string, answer: AddressAnswer, memory: FamilyMemory): { readonly records: readonly TtlAddress[]; readonly ttlSeconds: number } | LookupFailure {
  const fresh = { v4: recordsOf(answer.v4), v6: recordsOf(answer.v6) };
  if (fresh.v4 !== undefined || fresh.v6 !== undefined) {
    // A family that failed stands for its last good records; one that answered (even "none") for its answer.
    const remembered = memory.get(name) ?? {};
    const v4 = fresh.v4 ?? (isFailure(answer.v4.result) ? remembered.v4 : undefined);
    const v6 = fresh.v6 ?? (isFailure(answer.v6.result) ? remembered.v6 : undefined);
    memory.set(name, { v4, v6 });
    const freshTtls = [...(fresh.v4 ?? []), ...(fresh.v6 ?? [])].map((record) => record.ttlSeconds);
    return { records: [...(v4 ?? []), ...(v6 ?? [])], ttlSeconds: Math.min(...freshTtls) };
  }
  const v4 = answer.v4 as LookupFailure;
  const v6 = answer.v6 as LookupFailure;
  if (isFailure(v4.result)) return v4;
  if (isFailure(v6.result)) return v6;
  memory.delete(name);
  if (v4.result === 'nxdomain' && v6.result === 'nxdomain') return { result: 'nxdomain', reason: v4.reason };
  return { result: 'empty', reason: `no A or AAAA record for ${name}` };
}

function recordsOf(answer: FamilyAnswer): readonly TtlAddress[] | undefined {
  return answer.result === 'ok' && answer.records.length > 0 ? answer.records : undefined;
}

function serviceAnswer(name: string, answer: Awaited<ReturnType<DnsLookup['resolveService']>>, memory: FamilyMemory): LineAnswer {
  if ('reason' in answer) return answer;
  const usable = answer.records.filter((record) => record.port > 0 && record.target !== '' && record.target !== '.');
  const targets = new Set(usable.map((record) => record.target));
  for (const target of memory.keys()) if (!targets.has(target)) memory.delete(target); // targets that left (pods come and go)
  const notes: string[] = [];
  const dropped = answer.records.length - usable.length;
  if (dropped > 0) notes.push(`${dropped} SRV record(s) of ${name} left out: port 0 or target "." (RFC 2782: service not offered there)`);
  if (usable.length === 0) return { result: 'empty', reason: `no usable SRV record for ${name}` };
  const ttls: number[] = [];
  let targetFailure: LookupFailure | undefined;
  const resolved = [...usable]
    .sort((a, b) => a.priority - b.priority)
    .map((record) => ({ record, found: targetAddresses(record, memory, ttls, notes, (failure) => (targetFailure ??= failure)) }));
  // The primaries are the lowest priority number among the records whose target has an address:
  // a priority-5 target that does not resolve must not turn the priority-10 ones into backups.
  const withAddresses = resolved.filter(({ found }) => found.length > 0);
  const lowestPriority = Math.min(...withAddresses.map(({ record }) => record.priority));
  const addresses: DiscoveredAddress[] = [];
  for (const { record, found } of withAddresses) {
    const isBackupByPriority = record.priority !== lowestPriority;
    for (const address of found) addresses.push({ address, port: record.port, srvWeight: record.weight, isBackupByPriority });
  }
  if (addresses.length === 0) return targetFailure ?? { result: 'empty', reason: `no SRV target of ${name} has an address` };
  return finish(addresses, ttls.length > 0 ? Math.min(...ttls) : SRV_DEFAULT_TTL_SECONDS, notes);
}

/** The addresses of one SRV record's target; pushes its TTLs and a note when it did not resolve. */
function targetAddresses(record: ServiceRecord, memory: FamilyMemory, ttls: number[], notes: string[], onFailure: (failure: LookupFailure) => void): string[] {
  if (isIP(record.target) !== 0) return [record.target];
  if (record.addresses === undefined) {
    notes.push(`SRV target ${record.target} left out: more than ${MAX_SRV_TARGETS} targets`);
    return [];
  }
  const combined = combineFamilies(record.target, record.addresses, memory);
  if ('reason' in combined) {
    notes.push(`SRV target ${record.target} left out: ${combined.reason}`);
    if (isFailure(combined.result)) onFailure(combined);
    return [];
  }
  ttls.push(combined.ttlSeconds);
  return combined.records.map((r) => r.address);
}

/**
 * False for an address no upstream can have (`unusableAddressReason`: 0.0.0.0/8 and `::`, which on
 * Linux reach this very host, multicast, 240.0.0.0/4 and the broadcast address). A DNS answer decides
 * where traffic goes; these would only turn a bad record into a loop or a hang.
 */
export function isUsableAddress(address: string): boolean {
  return unusableAddressReason(address) === undefined;
}

/** Drops unusable addresses (with a note), dedupes, sorts and caps the addresses of an `ok` answer. */
function finish(answered: readonly DiscoveredAddress[], ttlSeconds: number, notes: readonly string[]): LineAnswer {
  // An AAAA record of an IPv4-mapped address (`::ffff:127.0.0.2`) is that IPv4 address: one upstream, not two.
  const found = answered.map((entry) => ({ ...entry, address: unmapIpv4(entry.address) }));
  const unusable = found.filter((entry) => !isUsableAddress(entry.address)).map((entry) => entry.address);
  const allNotes = [...notes];
  if (unusable.length > 0) allNotes.push(`left out ${[...new Set(unusable)].join(', ')}: not an address an upstream can have (unspecified, multicast or broadcast)`);
  const seen = new Set<string>();
  const unique = found.filter((entry) => {
    if (!isUsableAddress(entry.address)) return false;
    const key = `${entry.address}|${entry.port}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  unique.sort(compareAddresses);
  if (unique.length > MAX_LINE_ADDRESSES) allNotes.push(`${unique.length} addresses, only the first ${MAX_LINE_ADDRESSES} are used`);
  if (unique.length === 0) return { result: 'empty', reason: allNotes.join('; ') };
  return { result: 'ok', addresses: unique.slice(0, MAX_LINE_ADDRESSES), ttlSeconds, notes: allNotes };
}

/** Primaries before backups, IPv4 before IPv6, IPv4 numerically, IPv6 by text, then port. */
export function compareAddresses(a: DiscoveredAddress, b: DiscoveredAddress): number {
  return (
    Number(a.isBackupByPriority === true) - Number(b.isBackupByPriority === true) ||
    isIP(a.address) - isIP(b.address) ||
    (isIP(a.address) === 4 ? ipv4Number(a.address) - ipv4Number(b.address) : a.address < b.address ? -1 : a.address > b.address ? 1 : 0) ||
    a.port - b.port
  );
}

function ipv4Number(address: string): number {
  return address.split('.').reduce((sum, octet) => sum * 256 + Number(octet), 0);
}
