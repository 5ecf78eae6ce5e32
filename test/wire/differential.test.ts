/**
 * Differential test (issue 5): a seeded corpus of valid and malformed upstream responses goes
 * through both our ResponseParser and node:http's client parser (llhttp). The rules:
 * 1. never more permissive: whenever node:http rejects a response, we reject it too;
 * 2. when both accept, status line, raw headers, body bytes, trailers and 1xx heads are identical,
 *    and for a 101 the bytes left for the tunnel are identical;
 * 3. bytes after a complete response that node:http chokes on are bytes we leave unconsumed (the
 *    proxy then closes the upstream connection instead of reusing it);
 * 4. every unmutated response is accepted by both (so rule 1 cannot pass by rejecting everything).
 * The diagnostics list, per mutation, how many each side accepted and where we are stricter.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { collectResponse, seededRandom, splitAt, type CollectedResponse } from './collect-response.js';
import { generateResponseCorpus, type CorpusCase } from './response-corpus.js';
import { startNodeOracle, type NodeOracle, type NodeVerdict } from './node-response-oracle.js';

const SEED = 20240605;
const CORPUS = generateResponseCorpus(SEED, 220, 440, 16);
const CONCURRENCY = 32;

interface Outcome {
  testCase: CorpusCase;
  node: NodeVerdict;
  ours: CollectedResponse;
}

/** Runs `work` over `items` with at most `limit` in flight. */
async function mapConcurrently<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: limit }, worker));
  return results;
}

/** Our side: the same bytes cut at 0-3 random places, the method of the case, EOF at the end. */
function parseWithOurs(testCase: CorpusCase): CollectedResponse {
  const random = seededRandom(SEED + testCase.id);
  const cuts = Array.from({ length: Math.floor(random() * 4) }, () => Math.floor(random() * (testCase.raw.length + 1)));
  return collectResponse(splitAt(testCase.raw, cuts), { method: testCase.method });
}

function describeCase(testCase: CorpusCase): string {
  const text = testCase.raw.toString('latin1');
  return `case ${testCase.id} (${testCase.label}, ${testCase.method}): ${JSON.stringify(text.length > 300 ? `${text.slice(0, 300)}…` : text)}`;
}

describe('ResponseParser against node:http (differential)', () => {
  let oracle: NodeOracle;
  let outcomes: Outcome[];

  before(async () => {
    oracle = await startNodeOracle((id) => (CORPUS[id] as CorpusCase).raw);
    outcomes = await mapConcurrently(CORPUS, CONCURRENCY, async (testCase) => ({
      testCase,
      node: await oracle.parse(testCase.id, testCase.method, testCase.isUpgrade),
      ours: parseWithOurs(testCase),
    }));
  });
  after(() => oracle.close());

  it(`runs a corpus of ${CORPUS.length} responses and reports per mutation`, (t) => {
    assert.ok(CORPUS.length >= 600, `got ${CORPUS.length} cases, want at least 600`);
    const hung = outcomes.filter(({ node }) => node.error === 'timeout');
    assert.equal(hung.length, 0, `got node:http hanging on ${hung.map(({ testCase }) => testCase.id).join(', ')}, want none`);

    const byLabel = new Map<string, { total: number; nodeAccepted: number; oursAccepted: number; stricter: Set<string> }>();
    for (const { testCase, node, ours } of outcomes) {
      const row = byLabel.get(testCase.label) ?? { total: 0, nodeAccepted: 0, oursAccepted: 0, stricter: new Set<string>() };
      byLabel.set(testCase.label, row);
      row.total++;
      if (node.isAccepted) row.nodeAccepted++;
      if (ours.isComplete) row.oursAccepted++;
      if (node.isAccepted && !ours.isComplete) row.stricter.add((ours.error ?? '').replace(/^.*malformed upstream response: /, '').slice(0, 60));
    }
    const totals = { node: outcomes.filter((o) => o.node.isAccepted).length, ours: outcomes.filter((o) => o.ours.isComplete).length };
    t.diagnostic(`corpus ${CORPUS.length}: node:http accepted ${totals.node}, rejected ${CORPUS.length - totals.node}; ours accepted ${totals.ours}, rejected ${CORPUS.length - totals.ours}`);
    for (const [label, row] of [...byLabel].sort()) {
      const stricter = row.stricter.size > 0 ? ` — stricter: ${[...row.stricter].join(' | ')}` : '';
      t.diagnostic(`${label}: ${row.total} cases, node accepts ${row.nodeAccepted}, ours ${row.oursAccepted}${stricter}`);
    }
  });

  it('never accepts what node:http rejects', () => {
    const morePermissive = outcomes.filter(({ node, ours }) => !node.isAccepted && ours.isComplete);
    assert.deepEqual(
      morePermissive.map(({ testCase, node }) => `${describeCase(testCase)} — node: ${node.error}`),
      [],
      'got responses node:http rejects and we accept, want none',
    );
  });

  it('reads exactly what node:http reads when both accept', () => {
    for (const { testCase, node, ours } of outcomes) {
      if (!node.isAccepted || !ours.isComplete || ours.head === undefined) continue;
      const where = describeCase(testCase);
      assert.equal(ours.head.statusCode, node.statusCode, `status: ${where}`);
      assert.equal(ours.head.statusMessage, node.statusMessage, `status message: ${where}`);
      assert.equal(ours.head.httpVersion, node.httpVersion, `version: ${where}`);
      assert.deepEqual(ours.head.rawHeaders, node.rawHeaders, `headers: ${where}`);
      assert.deepEqual(
        ours.informational.map((head) => [head.statusCode, head.rawHeaders]),
        node.informational,
        `1xx heads: ${where}`,
      );
      if (testCase.isUpgrade) {
        assert.equal(testCase.raw.subarray(ours.consumed).toString('latin1'), node.upgradeRest, `tunnel bytes: ${where}`);
      } else {
        assert.equal(ours.body, node.body, `body: ${where}`);
        assert.deepEqual(ours.trailers ?? [], node.rawTrailers, `trailers: ${where}`);
      }
    }
  });

  it('leaves unconsumed whatever node:http fails to parse after a complete response', () => {
    let checked = 0;
    for (const { testCase, node, ours } of outcomes) {
      if (!(node.isAccepted && node.hasLaterError && ours.isComplete)) continue;
      assert.ok(ours.consumed < testCase.raw.length, `got all ${testCase.raw.length} bytes consumed, want extra bytes left: ${describeCase(testCase)}`);
      checked++;
    }
    assert.ok(checked > 0, 'got no case with bytes after the response, want some (the corpus has trailing-garbage mutations)');
  });

  it('accepts every unmutated response, as node:http does', () => {
    const valid = outcomes.filter(({ testCase }) => testCase.isValid);
    assert.ok(valid.length >= 200, `got ${valid.length} valid cases, want at least 200`);
    for (const { testCase, node, ours } of valid) {
      assert.equal(node.isAccepted, true, `got node:http rejecting (${node.error}) a valid ${describeCase(testCase)}`);
      assert.equal(ours.isComplete, true, `got ours rejecting (${ours.error}) a valid ${describeCase(testCase)}`);
    }
  });

  it('rejects most mutated responses (the corpus really probes framing)', () => {
    const mutated = outcomes.filter(({ testCase }) => !testCase.isValid);
    const rejectedByNode = mutated.filter(({ node }) => !node.isAccepted).length;
    assert.ok(rejectedByNode >= mutated.length / 2, `got node:http rejecting ${rejectedByNode} of ${mutated.length} mutated cases, want at least half`);
  });
});
