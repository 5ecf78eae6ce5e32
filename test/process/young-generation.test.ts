/**
 * keepYoungGenerationSmall (src/process/young-generation.ts): the young generation of a process that
 * keeps many objects alive stays at its initial size, and an operator's own semi-space flag wins.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { keepYoungGenerationSmall } from '../../src/process/young-generation.js';

const MODULE = new URL('../../src/process/young-generation.ts', import.meta.url).href;

/**
 * Runs a child node that keeps ~40 MiB of young objects alive; returns its new space's size (MiB)
 * when the setting was (or would have been) applied, and after the load.
 */
function newSpaceMiB(isTuned: boolean): { before: number; after: number } {
  const script = `
    import v8 from 'node:v8';
    const newSpace = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 2 ** 20;
    const { keepYoungGenerationSmall } = await import(${JSON.stringify(MODULE)});
    if (${isTuned}) keepYoungGenerationSmall([], '');
    const before = newSpace();
    const kept = [];
    for (let i = 0; i < 400_000; i++) kept.push({ i, text: 'request ' + i, list: [i, i + 1] });
    console.log(JSON.stringify({ before, after: newSpace(), kept: kept.length }));
  `;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(out) as { before: number; after: number };
}

test('the young generation keeps its size under load; without the setting it grows', () => {
  const tuned = newSpaceMiB(true);
  const untuned = newSpaceMiB(false);
  assert.equal(tuned.after, tuned.before, `got a new space of ${tuned.after} MiB after the load, ${tuned.before} MiB before; want no growth`);
  assert.ok(untuned.after >= 4 * untuned.before, `got ${untuned.after} MiB after the load without the setting (${untuned.before} before), want it grown at least 4×`);
});

test("an operator's own semi-space flag, on the command line or in NODE_OPTIONS, is left alone", () => {
  assert.equal(keepYoungGenerationSmall(['--max-semi-space-size=8'], ''), false);
  assert.equal(keepYoungGenerationSmall(['--inspect'], '--max-semi-space-size=4'), false);
  assert.equal(keepYoungGenerationSmall(['--max_semi_space_size=4'], ''), false);
});
