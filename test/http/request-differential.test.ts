/**
 * Differential test of the fast lane's request parser against node:http's own server parser
 * (llhttp, strict mode). The rule: whenever parseSimpleRequestHead says `request`, a real
 * node:http server given the same bytes must emit `request` with the same method, url and
 * rawHeaders, HTTP/1.1, and the same keep-alive decision. (The converse need not hold: "other" only
 * means the bytes go to node:http, which is always correct.) The corpus is test/http/request-corpus.ts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseSimpleRequestHead } from '../../src/http/request-parser.js';
import type { RequestHeadParse } from '../../src/http/request-parser.js';
import { startNodeRequestOracle } from './node-request-oracle.js';
import type { NodeRequestOracle, NodeRequestVerdict } from './node-request-oracle.js';
import { requestCorpus } from './request-corpus.js';
import type { RequestCase } from './request-corpus.js';

/** node:http's default maxHeaderSize. */
const MAX_HEAD_BYTES = 16384;
/** Connections in flight at once. */
const CONCURRENCY = 16;

describe('request parser vs node:http', () => {
  let oracle: NodeRequestOracle;
  before(async () => {
    oracle = await startNodeRequestOracle();
  });
  after(async () => {
    await oracle.close();
  });

  it('takes only heads node:http accepts, and reads them exactly as node does', async () => {
    const corpus = requestCorpus();
    const verdicts: NodeRequestVerdict[] = new Array(corpus.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < corpus.length) {
        const index = next++;
        verdicts[index] = await oracle.parse((corpus[index] as RequestCase).bytes);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    const problems: string[] = [];
    let oursAccepted = 0;
    let nodeAccepted = 0;
    let timeouts = 0;
    for (let i = 0; i < corpus.length; i++) {
      const testCase = corpus[i] as RequestCase;
      const node = verdicts[i] as NodeRequestVerdict;
      const ours: RequestHeadParse = parseSimpleRequestHead(testCase.bytes, 0, MAX_HEAD_BYTES);
      if (node.event === 'request') nodeAccepted++;
      if (node.error === 'timeout') timeouts++;
      const isOurs = ours.kind === 'request';
      if (testCase.isSimple !== undefined && isOurs !== testCase.isSimple) {
        problems.push(`${testCase.name}: got ${ours.kind}, want ${testCase.isSimple ? 'request' : 'not request'}`);
      }
      if (ours.kind !== 'request') continue;
      oursAccepted++;
      const { head } = ours;
      // the head ends at the first CRLF CRLF; later bytes (a mutation may leave some) are the next message's
      const wantEnd = testCase.bytes.indexOf('\r\n\r\n') + 4;
      const want = `node ${node.event} ${node.error ?? ''} ${node.method} ${JSON.stringify(node.url)} ${node.httpVersion} ${JSON.stringify(node.rawHeaders)} keepAlive=${node.shouldKeepAlive}`;
      const got = `request ${head.method} ${JSON.stringify(head.target)} ${JSON.stringify(head.rawHeaders)} close=${head.isCloseRequested}`;
      const isSame =
        node.event === 'request' &&
        node.method === head.method &&
        node.url === head.target &&
        node.httpVersion === '1.1' &&
        JSON.stringify(node.rawHeaders) === JSON.stringify(head.rawHeaders) &&
        node.shouldKeepAlive === !head.isCloseRequested &&
        ours.end === wantEnd;
      if (!isSame) problems.push(`${testCase.name}: got ${got} end=${ours.end}, want ${want} end=${wantEnd}`);
    }
    console.log(`request differential: ${corpus.length} cases, parser took ${oursAccepted}, node:http emitted 'request' for ${nodeAccepted}`);

    assert.equal(timeouts, 0, `got ${timeouts} cases where node:http did not close the connection, want 0`);
    assert.ok(corpus.length >= 200, `got ${corpus.length} cases, want at least 200`);
    assert.ok(oursAccepted >= 30, `got ${oursAccepted} cases taken by the parser, want at least 30`);
    assert.deepEqual(problems.slice(0, 20), [], `got ${problems.length} disagreements, want none`);
  });
});
