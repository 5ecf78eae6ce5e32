/**
 * V8's young generation, kept at its initial size for a proxy process (issue 5: peak RSS).
 *
 * V8 allocates every new object in the young generation: two semi-spaces, 1 MiB each at start.
 * When many objects survive a collection, it doubles them (`semi_space_growth_factor`, 2) up to
 * 16 MiB each. A proxy under load keeps objects alive across collections — the state of every
 * request in flight — so the semi-spaces soon reach 16 MiB: 30 MiB more resident memory. Worse,
 * larger semi-spaces are collected less often, and the buffers node allocates for each socket read
 * (64 KiB outside the V8 heap, freed only when their young `Buffer` objects are collected) pile up
 * between collections: tens of MiB more during a stream of request bodies.
 *
 * A growth factor of 1 keeps the semi-spaces at 1 MiB. Measured with `npm run bench`'s workloads
 * (docs/performance.md): peak RSS 71–75 MiB instead of about 125, within the runs' noise in
 * requests per second (the collector's share of the time goes from 2% to 4%). V8 reads
 * this flag each time it would grow the young generation, so setting it after start-up works (it
 * is one of the few; `--max-semi-space-size` is read only when the heap is created).
 *
 * An operator's own setting wins: nothing is changed when node was started with a semi-space flag
 * (on its command line or in NODE_OPTIONS).
 */
import v8 from 'node:v8';

const OPERATOR_SETTING = /--(?:max[-_]|min[-_])?semi[-_]space[-_]/;

/**
 * Stops V8 from growing the young generation past its initial size; see the file comment.
 * Returns false, changing nothing, when the operator set the semi-spaces themselves.
 */
export function keepYoungGenerationSmall(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  if (execArgv.some((arg) => OPERATOR_SETTING.test(arg)) || OPERATOR_SETTING.test(nodeOptions)) return false;
  v8.setFlagsFromString('--semi-space-growth-factor=1');
  return true;
}
