/**
 * The `X-Proxy-Trace` response header (`trace = on`, SPEC 1.2): one ASCII line that explains a
 * balancing decision — the route, the strategy, every candidate with its state, the pick and the
 * attempt number — so an operator can see why a request went where it did without reading logs.
 *
 *   route=a; strategy=smooth-weighted-round-robin; attempt=1;
 *   candidates=http://h:1{cw=-2,ew=5,active=0},http://h:2{cw=1,ew=1,active=0}; pick=http://h:1
 *
 * (one line in reality). States are the strategy's `describeState()` after the pick, plus the
 * upstream's active requests, plus `backup=yes` and `skip=REASON` (down, unhealthy, ejected,
 * draining, tried) where they apply. Header values must be visible ASCII (RFC 9110 §5.5), so any
 * other character becomes `?`; very large groups list the first MAX_TRACE_CANDIDATES candidates
 * (and the pick) and then `+N more`, to stay well under clients' header size limits.
 */
import type { RouteConfig } from '../../config/config.js';
import type { Balancer } from './balancer.js';
import type { Upstream } from '../upstream.js';

/** Candidates listed before `+N more`. */
export const MAX_TRACE_CANDIDATES = 16;

/** What formatTrace needs of a route (the proxy's Route has these). */
export interface TraceRoute {
  readonly config: Pick<RouteConfig, 'name' | 'strategy'>;
  /** In config order, the order of `balancer.describeState()`. */
  readonly upstreams: readonly Upstream[];
  readonly balancer: Balancer;
}

/** Optional facts for the `skip=` reasons. */
export interface TraceOptions {
  /** The clock (ms) the pick used; without it ejection is not reported. */
  readonly nowMs?: number;
  /** Upstreams this request had tried before this attempt. */
  readonly tried?: ReadonlySet<Upstream>;
}

/**
 * The X-Proxy-Trace value for one attempt.
 *
 * @param route the route (config name and strategy, upstreams in config order, balancer)
 * @param picked the upstream picked for this attempt, or undefined (`pick=none`)
 * @param attempt 1 for the first try, 2 for the first retry, …
 * @param options `nowMs` and `tried`, to explain skipped candidates
 * @returns one line of visible ASCII, e.g. `route=a; strategy=round-robin; attempt=1; candidates=…; pick=http://h:1`
 */
export function formatTrace(route: TraceRoute, picked: Upstream | undefined, attempt: number, options: TraceOptions = {}): string {
  const states = route.balancer.describeState();
  const listed = route.upstreams
    .map((upstream, i) => ({ upstream, i }))
    .filter(({ upstream, i }) => i < MAX_TRACE_CANDIDATES || upstream === picked);
  const candidates = listed.map(({ upstream, i }) => {
    const state: Record<string, number | string> = { ...states[i] };
    if (!('active' in state)) state['active'] = upstream.activeRequests;
    if (upstream.config.isBackup) state['backup'] = 'yes';
    const skip = skipReason(upstream, options);
    if (skip !== undefined) state['skip'] = skip;
    const fields = Object.entries(state).map(([key, value]) => `${key}=${value}`);
    return `${upstream.origin}{${fields.join(',')}}`;
  });
  const more = route.upstreams.length - listed.length;
  if (more > 0) candidates.push(`+${more} more`);
  const line =
    `route=${route.config.name}; strategy=${route.config.strategy}; attempt=${attempt}; ` +
    `candidates=${candidates.join(',')}; pick=${picked?.origin ?? 'none'}`;
  return line.replace(/[^\x20-\x7e]/g, '?');
}

/** Why a balancer would skip this upstream now, or undefined if it may be picked. */
function skipReason(upstream: Upstream, options: TraceOptions): string | undefined {
  if (upstream.config.isDown) return 'down';
  if (upstream.healthState !== 'up') return 'unhealthy';
  if (options.nowMs !== undefined && options.nowMs < upstream.ejectedUntilMs) return 'ejected';
  if (upstream.isDraining) return 'draining';
  if (upstream.hasLeft) return 'left';
  if (options.tried?.has(upstream) === true) return 'tried';
  return undefined;
}
