/**
 * The discovery manager (SPEC 7): one `LineSchedule` per discovery line of the config (every `pass`
 * line with `resolve` or `service=`, in every route), each line's set turned into member upstream
 * configs and pushed per route to a `DiscoveryTarget` when it changes. Across a reload nginx's new
 * workers resolve every `server … resolve` afresh; we keep the schedule and last answer of a line
 * whose route, origin and name stay, so a reload asks DNS nothing new and drops no address.
 *
 * Lookups happen on timers, never per request; the request path reads only what was pushed.
 */
import type { Config, ServerConfig, UpstreamConfig } from '../config/config.js';
import { plural } from '../log/plural.js';
import { unrefTimers, type Timers } from '../timers.js';
import { upstreamAddress } from '../upstream/upstream.js';
import {
  discoveredUpstreamConfig,
  type DiscoveredLine,
  type DiscoveryLineStatus,
  type DiscoveryTarget,
  type LookupCount,
  type LookupResult,
} from './discovered-line.js';
import { NodeDnsLookup, type DnsLookup } from './dns-lookup.js';
import { isFailure, lookupLineAnswer, type FamilyMemory, type LineAnswer } from './line-answer.js';
import { HOLD_NX_MS, LineSchedule, type LookupEnd } from './line-schedule.js';

export interface DiscoveryOptions {
  /** Where each route's new sets go. */
  readonly target: DiscoveryTarget;
  /** Makes the DnsLookup of a server config; default `NodeDnsLookup`. Called again when `resolver` / `resolver_timeout` change at reload. */
  readonly lookup?: (server: ServerConfig) => DnsLookup;
  /** Default node's timers, unref()ed (a pending lookup never keeps the process alive). */
  readonly timers?: Timers;
  /** Monotonic clock, ms; default `performance.now`. */
  readonly now?: () => number;
  /** Wall clock, ms since the epoch, for `lastAnswerAtMs`; default `Date.now`. */
  readonly epochNow?: () => number;
  /** One line per set change, failure episode and emptied line; default nowhere. */
  readonly log?: (line: string) => void;
}

/** One discovery line being followed. */
interface LineEntry {
  readonly key: string;
  readonly routeName: string;
  /** The pass line as in the current config (flags may change at reload). */
  line: UpstreamConfig;
  readonly schedule: LineSchedule;
  readonly memory: FamilyMemory;
  /** Member configs last pushed for this line (empty before one). */
  pushed: readonly UpstreamConfig[];
  lastAnswerAtMs: number | undefined;
  lastResult: LookupResult | undefined;
  lastError: string | undefined;
  /** The notes of the last `ok` answer (a cut answer, a target left out), logged only when they change. */
  lastNotes: string;
}

export class Discovery {
  readonly #target: DiscoveryTarget;
  readonly #makeLookup: (server: ServerConfig) => DnsLookup;
  readonly #timers: Timers;
  readonly #now: () => number;
  readonly #epochNow: () => number;
  readonly #log: (line: string) => void;
  #server: ServerConfig;
  #lookup: DnsLookup;
  /** By `lineKey`, in config order. */
  #entries = new Map<string, LineEntry>();
  readonly #counts = new Map<string, LookupCount>();
  #isStarted = false;
  #isStopped = false;

  constructor(config: Config, options: DiscoveryOptions) {
    this.#target = options.target;
    this.#makeLookup = options.lookup ?? ((server) => new NodeDnsLookup(server));
    this.#timers = options.timers ?? unrefTimers;
    this.#now = options.now ?? (() => performance.now());
    this.#epochNow = options.epochNow ?? Date.now;
    this.#log = options.log ?? (() => {});
    this.#server = config.server;
    this.#lookup = this.#makeLookup(config.server);
    this.#entries = this.#entriesOf(config, new Map());
  }

  /** Starts the first lookup of every line now; later calls do nothing. */
  start(): void {
    if (this.#isStarted || this.#isStopped) return;
    this.#isStarted = true;
    for (const entry of this.#entries.values()) entry.schedule.start();
  }

  /**
   * Follows `config` from now on: a line whose route name, pass origin and discovery (kind + name)
   * stay keeps its schedule and last answer (no extra query), and is re-pushed at once when
   * anything else of the line changed (flags, path, its place in the file); new lines are looked up at once;
   * removed lines stop. New `resolver` / `resolver_timeout` settings make every kept line look up
   * again at once (its schedule could be an hour away, or a 30 s backoff against a dead server).
   */
  reload(config: Config): void {
    if (this.#isStopped) return;
    const isNewResolver = !sameResolverSettings(this.#server, config.server);
    if (isNewResolver) this.#lookup = this.#makeLookup(config.server);
    this.#server = config.server;
    const previous = this.#entries;
    const previousLines = new Map([...previous].map(([key, entry]) => [key, entry.line]));
    this.#entries = this.#entriesOf(config, previous);
    for (const [key, entry] of previous) if (!this.#entries.has(key)) entry.schedule.stop();
    const routesToPush = new Set<string>();
    for (const [key, entry] of this.#entries) {
      if (!previous.has(key)) {
        if (this.#isStarted) entry.schedule.start();
      } else if (!sameMembers(entry.pushed, this.#members(entry)) || !isSameLine(previousLines.get(key)!, entry.line)) {
        routesToPush.add(entry.routeName);
      }
    }
    for (const routeName of routesToPush) this.#push(routeName);
    if (isNewResolver && this.#isStarted && previous.size > 0) {
      this.#log(`discovery: new resolver settings, every line is looked up again now`);
      for (const [key, entry] of this.#entries) if (previous.has(key)) entry.schedule.lookupNow();
    }
  }

  /** Stops every schedule and ends the lookups still running (DnsLookup.close); their answers are ignored. */
  stop(): void {
    this.#isStopped = true;
    for (const entry of this.#entries.values()) entry.schedule.stop();
    this.#lookup.close();
  }

  /** Every discovery line, in config order, as /status shows it. */
  get lines(): readonly DiscoveryLineStatus[] {
    return [...this.#entries.values()].map((entry) => ({
      routeName: entry.routeName,
      lineOrigin: entry.line.origin,
      kind: entry.line.discovery!.kind,
      name: entry.line.discovery!.name,
      place: entry.line.place,
      upstreamCount: entry.schedule.addresses.length,
      lastAnswerAtMs: entry.lastAnswerAtMs,
      lastResult: entry.lastResult,
      lastError: entry.lastError,
    }));
  }

  /** Lookups so far by (route, name, result), in first-seen order; kept across reloads. */
  get lookupCounts(): readonly LookupCount[] {
    return [...this.#counts.values()];
  }

  /** The entries of `config`, reusing those of `previous` with the same key. */
  #entriesOf(config: Config, previous: Map<string, LineEntry>): Map<string, LineEntry> {
    const entries = new Map<string, LineEntry>();
    for (const route of config.routes) {
      for (const line of route.upstreams) {
        if (line.discovery === undefined) continue;
        const key = lineKey(route.name, line);
        if (entries.has(key)) continue;
        const kept = previous.get(key);
        if (kept !== undefined) {
          kept.line = line;
          entries.set(key, kept);
        } else {
          entries.set(key, this.#newEntry(key, route.name, line));
        }
      }
    }
    return entries;
  }

  #newEntry(key: string, routeName: string, line: UpstreamConfig): LineEntry {
    const memory: FamilyMemory = new Map();
    const entry: LineEntry = {
      key,
      routeName,
      line,
      memory,
      pushed: [],
      lastAnswerAtMs: undefined,
      lastResult: undefined,
      lastError: undefined,
      lastNotes: '',
      schedule: new LineSchedule({
        lookup: () => lookupLineAnswer(entry.line.discovery!, entry.line.port, this.#lookup, memory),
        onLookupEnd: (end) => this.#onLookupEnd(entry, end),
        timers: this.#timers,
        now: this.#now,
      }),
    };
    return entry;
  }

  #onLookupEnd(entry: LineEntry, end: LookupEnd): void {
    if (this.#entries.get(entry.key) !== entry) return;
    const { answer } = end;
    const name = entry.line.discovery!.name;
    this.#count(entry.routeName, name, answer.result);
    const wasFailing = entry.lastResult !== undefined && entry.lastResult !== 'ok';
    entry.lastResult = answer.result;
    entry.lastError = 'reason' in answer ? answer.reason : undefined;
    if (answer.result === 'ok' || answer.result === 'nxdomain' || answer.result === 'empty') entry.lastAnswerAtMs = this.#epochNow();
    const where = `discovery: route ${entry.routeName}, ${name}`;
    const next = `next lookup in ${formatDelay(end.nextLookupInMs)}`;
    if (answer.result === 'ok' && answer.notes.join('\n') !== entry.lastNotes) {
      entry.lastNotes = answer.notes.join('\n');
      for (const note of answer.notes) this.#log(`${where}: ${note}`);
    }
    if (end.isEpisodeStart && 'reason' in answer) {
      const held = entry.schedule.addresses.length;
      const keeping = held === 0 ? 'no addresses yet' : `${isFailure(answer.result) ? 'keeping' : `keeping for up to ${HOLD_NX_MS / 1000}s`} ${plural(held, 'address')}`;
      const hint = answer.result === 'nxdomain' && (name === 'localhost' || name.endsWith('.localhost')) ? ' (resolve lines ask the resolver, never /etc/hosts)' : '';
      this.#log(`${where}: ${answer.result}: ${answer.reason}${hint}; ${keeping}, ${next}`);
    }
    const members = this.#members(entry);
    if (sameMembers(entry.pushed, members)) {
      if (answer.result === 'ok' && wasFailing) this.#log(`${where}: answered again, ${plural(members.length, 'address')} as before, ${next}`);
      return;
    }
    const change = describeChange(entry.pushed, members, entry.line.discovery!.kind === 'service');
    if (end.isHoldExpired) this.#log(`${where}: ${answer.result} for ${HOLD_NX_MS / 1000}s, line emptied (${change}), ${next}`);
    else this.#log(`${where}: ${plural(members.length, 'address')} (${change}), ${next}`);
    this.#push(entry.routeName);
  }

  /** Pushes every discovery line of `routeName`, recording what was pushed. */
  #push(routeName: string): void {
    const lines: DiscoveredLine[] = [];
    for (const entry of this.#entries.values()) {
      if (entry.routeName !== routeName) continue;
      entry.pushed = this.#members(entry);
      lines.push({ lineOrigin: entry.line.origin, upstreams: entry.pushed });
    }
    this.#target.setDiscoveredUpstreams(routeName, lines);
  }

  #members(entry: LineEntry): readonly UpstreamConfig[] {
    return entry.schedule.addresses.map((found) => discoveredUpstreamConfig(entry.line, found));
  }

  #count(routeName: string, name: string, result: LookupResult): void {
    const key = `${routeName}\n${name}\n${result}`;
    const count = this.#counts.get(key);
    this.#counts.set(key, { routeName, name, result, count: (count?.count ?? 0) + 1 });
  }
}

/**
 * One lookup of `line` now, for `simulate`: its member upstream configs, or why there are none.
 * `lookup` defaults to a `NodeDnsLookup` on `server`.
 */
export async function lookupLineOnce(
  line: UpstreamConfig,
  server: ServerConfig,
  lookup: DnsLookup = new NodeDnsLookup(server),
): Promise<{ readonly upstreams: readonly UpstreamConfig[] } | { readonly error: string }> {
  if (line.discovery === undefined) return { error: `${line.origin} is not a discovery line` };
  const answer: LineAnswer = await lookupLineAnswer(line.discovery, line.port, lookup, new Map());
  if (answer.result !== 'ok') return { error: `${answer.result}: ${answer.reason}` };
  return { upstreams: answer.addresses.map((found) => discoveredUpstreamConfig(line, found)) };
}

function lineKey(routeName: string, line: UpstreamConfig): string {
  return `${routeName}\n${line.origin}\n${line.discovery!.kind}\n${line.discovery!.name}`;
}

function sameResolverSettings(a: ServerConfig, b: ServerConfig): boolean {
  return (
    a.resolverTimeoutMs === b.resolverTimeoutMs &&
    a.resolvers.length === b.resolvers.length &&
    a.resolvers.every((resolver, i) => resolver.host === b.resolvers[i]!.host && resolver.port === b.resolvers[i]!.port)
  );
}

/** True when two configs of one pass line say the same (members made from them would be equal). */
function isSameLine(a: UpstreamConfig, b: UpstreamConfig): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Same member set: origin, weight, backup and down of each, in order. */
function sameMembers(a: readonly UpstreamConfig[], b: readonly UpstreamConfig[]): boolean {
  return (
    a.length === b.length &&
    a.every((x, i) => {
      const y = b[i]!;
      return x.origin === y.origin && x.weight === y.weight && x.isBackup === y.isBackup && x.isDown === y.isDown;
    })
  );
}

/**
 * `+127.0.0.4 −127.0.0.2` (by host:port), or `weights or flags changed` when the same addresses stay. A resolve
 * line's addresses share the line's port, so they are named by address; an SRV line's records carry their own
 * ports, so each is named by address and port (`+127.0.0.1:22007 +[fd00::7]:21002`).
 */
function describeChange(before: readonly UpstreamConfig[], after: readonly UpstreamConfig[], isService: boolean): string {
  const label = (u: UpstreamConfig) => (isService ? upstreamAddress(u) : u.host);
  const beforeKeys = new Set(before.map((u) => u.origin));
  const afterKeys = new Set(after.map((u) => u.origin));
  const added = after.filter((u) => !beforeKeys.has(u.origin)).map((u) => `+${label(u)}`);
  const removed = before.filter((u) => !afterKeys.has(u.origin)).map((u) => `\u2212${label(u)}`);
  const change = [...added, ...removed].join(' ');
  return change === '' ? 'weights or flags changed' : change;
}

/** `1s`, `1.5s`, `250ms`. */
function formatDelay(ms: number): string {
  return ms < 1000 ? `${ms}ms` : `${Number((ms / 1000).toFixed(1))}s`;
}
