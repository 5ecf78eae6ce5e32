/**
 * Differential test of the request parser and body decoder (src/wire/request-parser.ts,
 * src/wire/body-decoder.ts) against node:http's own server parser (llhttp, strict mode): the same
 * bytes go to both, message after message on one connection, and
 *
 * 1. ours never accepts a message llhttp rejects: every message we read whole (head and body),
 *    node read whole too, and
 * 2. where both accept, they read the same method, target, version, rawHeaders, keep-alive, body
 *    bytes and trailers (and so end each message at the same byte: a pipelined second message is
 *    read the same too);
 * 3. where we reject what llhttp accepts, the reason is one of {@link STRICTER}: stricter on
 *    purpose, each with why; where we accept what llhttp rejects, the message is one of
 *    {@link LENIENT}. Any other disagreement fails the test.
 *
 * Cases: the hand-written heads of test/wire/request-corpus.ts and thousands of generated messages
 * (test/wire/request-generator.ts, seeded). Our side reads each case in the pieces the generator
 * chose, as the server's connection loop does (heads parsed again from the bytes kept, bodies
 * decoded piece by piece); node gets the bytes at once on one connection each, many in parallel.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { METHODS } from 'node:http';
import { createBodyDecoder } from '../../src/wire/body-decoder.js';
import type { BodyDecoder } from '../../src/wire/body-decoder.js';
import { parseRequestHead } from '../../src/wire/request-parser.js';
import type { RequestHead } from '../../src/wire/request-parser.js';
import { RequestFramingError } from '../../src/errors.js';
import { startNodeRequestOracle } from './node-request-oracle.js';
import type { NodeConnectionVerdict, NodeRequest, NodeRequestOracle } from './node-request-oracle.js';
import { requestCorpus } from './request-corpus.js';
import { generateRequests } from './request-generator.js';

/** Our head limit; node's default maxHeaderSize is the same number, counted on fewer bytes (cases near it are skipped). */
const MAX_HEAD_BYTES = 16384;
const SEED = 0x5eed12;
const GENERATED = 4000;
/** Connections in flight at once. */
const CONCURRENCY = 48;

/**
 * Where we refuse what llhttp accepts, on purpose: our reason (a fragment of it) → why. (What
 * both refuse is not listed: bare LF and CR, obs-fold, whitespace before a colon, controls and
 * non-ASCII bytes in targets and names, repeated Content-Length, Content-Length with
 * Transfer-Encoding, bad chunk sizes…)
 */
const STRICTER: readonly (readonly [string, string])[] = [
  ['HTTP version not supported', 'llhttp serves HTTP/2.0 and HTTP/0.9 as HTTP/1; RFC 9110 §2.5 and §15.6.6: another major version is 505'],
  ['transfer coding not implemented', 'RFC 9112 §6.1: a coding the proxy cannot decode before chunked is a 501 (nginx too); llhttp de-chunks and passes the gzip bytes on'],
  ['Transfer-Encoding in an HTTP/1.0 request', 'RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing (MUST treat as such); nginx refuses it'],
  ['invalid Transfer-Encoding', 'a Transfer-Encoding list must be clean tokens (no empty element, no parameters) with chunked once and last (RFC 9112 §6.3 rule 4, §7); llhttp takes `, chunked` and `chunked;q=1` when chunked ends the list'],
  ['not separated by exactly one space', 'RFC 9112 §3: one SP between the parts (a lenient split is where two readers disagree on the target; Go refuses too); llhttp skips extra spaces'],
  ['CONNECT needs an authority-form target', 'RFC 9112 §3.2.3: a CONNECT target is host:port; llhttp takes any URL'],
  ['chunk size too large', 'more than 16 hex digits in a chunk size, leading zeros included: a size line is bounded (the response parser too); llhttp bounds only the value'],
  ['chunk extension with an empty value', 'RFC 9112 §7.1.1: chunk-ext-val is a token or a quoted-string, never empty; llhttp takes `;a=`'],
  ['no HTTP version', 'RFC 9112 §2.3: the HTTP/0.9 simple request is gone (request-line-version.ts); llhttp reads `GET /x` as HTTP/0.9'],
];

/**
 * Where both accept but the keep-alive decision differs, on purpose: a test on (ours, node's
 * request) → why.
 */
const KEEP_ALIVE_DIFFERENCES: readonly (readonly [string, (ours: RequestHead, theirs: NodeRequest) => boolean, string])[] = [
  [
    'we close where llhttp keeps',
    (ours, theirs) => !ours.isKeepAlive && theirs.shouldKeepAlive === true,
    'a `close` llhttp misses (`close\\t,`; `keep-alive, close` in HTTP/1.0, where llhttp checks only keep-alive): closing is the safe reading',
  ],
  [
    'Proxy-Connection ignored',
    (ours, theirs) => ours.isKeepAlive && theirs.shouldKeepAlive === false && ours.rawHeaders.some((name, i) => i % 2 === 0 && name.toLowerCase() === 'proxy-connection'),
    'Proxy-Connection is no standard field (RFC 9110 §7.6.1 names only Connection); nginx and Go ignore it, llhttp reads it as Connection',
  ],
];

/** Where we accept what llhttp rejects, on purpose: a test on the message → why. */
const LENIENT: readonly (readonly [string, (head: RequestHead, version: string) => boolean, string])[] = [
  ['HTTP/1.2 … HTTP/1.9', (_head, version) => /^HTTP\/1\.[2-9]$/.test(version), 'RFC 9110 §2.5: a higher minor version is served as the highest we conform to (1.1); llhttp refuses them'],
  ['extension methods', (head) => !NODE_METHODS.has(head.method), 'RFC 9110 §9.1: a method is any token (nginx takes any A–Z, _ and -; Go any token); llhttp knows a fixed list'],
];

/** Where both accept but only llhttp reads an upgrade, on purpose. */
const UPGRADE_IN_HTTP_1_0 = [
  'upgrade in HTTP/1.0 ignored',
  'RFC 9110 §7.8: Upgrade is an HTTP/1.1 mechanism (a 1.0 intermediary may have passed the field on); nginx ignores it in 1.0 too, llhttp upgrades',
] as const;

/** The methods llhttp knows (node's http.METHODS). */
const NODE_METHODS: ReadonlySet<string> = new Set(METHODS);

/** One message as our side read it. */
interface OurMessage {
  head: RequestHead;
  /** The version as sent (for {@link LENIENT}). */
  version: string;
  body: string;
  trailers: string[];
  isComplete: boolean;
}

interface OurReading {
  messages: OurMessage[];
  /** The reason of our refusal, or undefined. */
  refusal: string | undefined;
}

/**
 * Our connection loop in miniature: the bytes arrive in the pieces `cuts` make; a head is parsed
 * from the bytes kept, a body decoded from each piece. Stops after a message that does not keep the
 * connection alive, an upgrade or a CONNECT (the rest is not HTTP), or a refusal.
 */
function readOurs(bytes: Buffer, cuts: readonly number[]): OurReading {
  const messages: OurMessage[] = [];
  const bounds = [0, ...cuts, bytes.length];
  let kept = Buffer.alloc(0);
  let decoder: BodyDecoder | undefined;
  let current: OurMessage | undefined;
  for (let i = 0; i + 1 < bounds.length; i++) {
    kept = Buffer.concat([kept, Buffer.from(bytes.subarray(bounds[i], bounds[i + 1]))]);
    for (;;) {
      if (current === undefined) {
        const parse = parseRequestHead(kept, 0, { maxHeadBytes: MAX_HEAD_BYTES });
        if (parse.kind === 'incomplete') break;
        if (parse.kind === 'invalid') return { messages, refusal: `${parse.status} ${parse.reason}` };
        current = { head: parse.head, version: versionSent(kept), body: '', trailers: [], isComplete: false };
        messages.push(current);
        kept = kept.subarray(parse.end);
        if (parse.head.upgrade !== undefined || parse.head.method === 'CONNECT') {
          current.isComplete = true;
          return { messages, refusal: undefined };
        }
        decoder = createBodyDecoder(parse.head.body);
      }
      if (decoder !== undefined) {
        const message: OurMessage = current;
        try {
          kept = kept.subarray(decoder.execute(kept, 0, (chunk) => (message.body += chunk.toString('latin1'))));
        } catch (error) {
          assert.ok(error instanceof RequestFramingError, `got ${String(error)}, want a RequestFramingError`);
          return { messages, refusal: `400 ${error.message}` };
        }
        if (!decoder.isComplete) break;
        message.trailers = [...decoder.rawTrailers];
      }
      current.isComplete = true;
      if (!current.head.isKeepAlive) return { messages, refusal: undefined };
      current = undefined;
      decoder = undefined;
      if (kept.length === 0) break;
    }
  }
  return { messages, refusal: undefined };
}

/** The version as sent on the request line at the start of `bytes` (after any empty lines). */
function versionSent(bytes: Buffer): string {
  let start = 0;
  while (bytes[start] === 0x0d || bytes[start] === 0x0a) start++;
  const line = bytes.toString('latin1', start, bytes.indexOf('\r\n', start, 'latin1'));
  return line.slice(line.lastIndexOf(' ') + 1);
}

/** The fields both sides read, as one comparable string. */
function describeOurs(message: OurMessage): string {
  const { head } = message;
  const keepAlive = head.upgrade !== undefined || head.method === 'CONNECT' ? '-' : String(head.isKeepAlive);
  return JSON.stringify([head.method, head.target, head.httpVersion, head.rawHeaders, keepAlive, message.body, message.trailers]);
}

function describeNode(request: NodeRequest): string {
  const keepAlive = request.shouldKeepAlive === undefined ? '-' : String(request.shouldKeepAlive);
  return JSON.stringify([request.method, request.url, request.httpVersion, request.rawHeaders, keepAlive, request.body, request.rawTrailers]);
}

interface Tally {
  cases: number;
  oursAccepted: number;
  nodeAccepted: number;
  stricter: Map<string, number>;
  lenient: Map<string, number>;
  problems: string[];
}

/** Applies the three rules of the file comment to one case; adds to `tally`. */
function compare(name: string, bytes: Buffer, ours: OurReading, node: NodeConnectionVerdict, tally: Tally): void {
  const show = (): string => JSON.stringify(bytes.toString('latin1').slice(0, 300));
  tally.cases++;
  for (let i = 0; ; i++) {
    const mine = ours.messages[i];
    const theirs = node.requests[i];
    const isMineWhole = mine?.isComplete === true;
    const isTheirsWhole = theirs?.isComplete === true;
    if (isMineWhole) tally.oursAccepted++;
    if (isTheirsWhole) tally.nodeAccepted++;
    if (mine !== undefined && (mine.version !== 'HTTP/1.1' && mine.version !== 'HTTP/1.0' || !NODE_METHODS.has(mine.head.method))) {
      const lenient = LENIENT.find(([, applies]) => applies(mine.head, mine.version));
      if (lenient !== undefined) {
        tally.lenient.set(lenient[0], (tally.lenient.get(lenient[0]) ?? 0) + 1);
        return; // node stops here; we read on, by design
      }
    }
    if (isMineWhole && !isTheirsWhole) {
      tally.problems.push(`${name}: message ${i}: we accepted ${describeOurs(mine)}, node ${theirs === undefined ? `did not (${node.error})` : 'read it incompletely'}; bytes ${show()}`);
      return;
    }
    if (isTheirsWhole && !isMineWhole) {
      if (ours.refusal !== undefined) {
        const stricter = STRICTER.find(([fragment]) => (ours.refusal as string).includes(fragment));
        if (stricter !== undefined) {
          tally.stricter.set(stricter[0], (tally.stricter.get(stricter[0]) ?? 0) + 1);
          return;
        }
      }
      tally.problems.push(`${name}: message ${i}: node accepted ${describeNode(theirs)}, we ${ours.refusal ?? 'did not finish it'}; bytes ${show()}`);
      return;
    }
    if (!isMineWhole || theirs === undefined) return; // neither read this message whole: both refused or both wait for more
    // upgrade / CONNECT on one side only: the head was read differently
    if ((theirs.event === 'upgrade' || theirs.event === 'connect') !== (mine.head.upgrade !== undefined || mine.head.method === 'CONNECT')) {
      if (theirs.event === 'upgrade' && mine.head.httpVersion === '1.0') {
        tally.lenient.set(UPGRADE_IN_HTTP_1_0[0], (tally.lenient.get(UPGRADE_IN_HTTP_1_0[0]) ?? 0) + 1);
        return;
      }
      tally.problems.push(`${name}: message ${i}: node event ${theirs.event}, ours upgrade=${mine.head.upgrade}; bytes ${show()}`);
      return;
    }
    let got = describeOurs(mine);
    const want = describeNode(theirs);
    const keepAliveDifference = KEEP_ALIVE_DIFFERENCES.find(([, applies]) => applies(mine.head, theirs));
    if (got !== want && keepAliveDifference !== undefined) {
      got = describeOurs({ ...mine, head: { ...mine.head, isKeepAlive: !mine.head.isKeepAlive } });
      if (got === want) {
        tally.lenient.set(keepAliveDifference[0], (tally.lenient.get(keepAliveDifference[0]) ?? 0) + 1);
        return; // one side reads no further

      }
    }
    if (got !== want) {
      tally.problems.push(`${name}: message ${i}: got ${got}, want (node) ${want}; bytes ${show()}`);
      return;
    }
  }
}

describe('request parser and body decoder vs node:http (llhttp)', () => {
  let oracle: NodeRequestOracle;
  before(async () => {
    oracle = await startNodeRequestOracle();
  });
  after(async () => {
    await oracle.close();
  });

  it('never accepts what llhttp rejects, and reads what both accept the same way', async () => {
    const corpus = [
      ...requestCorpus()
        .filter((testCase) => testCase.bytes.length < MAX_HEAD_BYTES - 200) // node counts its limit on fewer bytes
        .map((testCase) => ({ name: testCase.name, bytes: testCase.bytes, cuts: [] as number[] })),
      ...generateRequests(SEED, GENERATED),
    ];
    const verdicts: NodeConnectionVerdict[] = new Array(corpus.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < corpus.length) {
        const index = next++;
        verdicts[index] = await oracle.parse(corpus[index]!.bytes);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    const tally: Tally = { cases: 0, oursAccepted: 0, nodeAccepted: 0, stricter: new Map(), lenient: new Map(), problems: [] };
    let timeouts = 0;
    for (let i = 0; i < corpus.length; i++) {
      const { name, bytes, cuts } = corpus[i]!;
      const node = verdicts[i]!;
      if (node.error === 'timeout') timeouts++;
      compare(name, bytes, readOurs(bytes, cuts), node, tally);
    }
    console.log(
      `request differential: ${tally.cases} cases; messages read whole: ours ${tally.oursAccepted}, node ${tally.nodeAccepted}; ` +
        `stricter ${JSON.stringify([...tally.stricter])}; lenient ${JSON.stringify([...tally.lenient])}`,
    );

    assert.equal(timeouts, 0, `got ${timeouts} cases where node:http did not close the connection, want 0`);
    assert.ok(tally.oursAccepted >= 2000, `got ${tally.oursAccepted} messages we read whole, want at least 2000`);
    assert.deepEqual(tally.problems.slice(0, 15), [], `got ${tally.problems.length} disagreements, want none`);
    // every listed difference is one the cases show (so the lists say exactly where we differ)
    const listed = [...STRICTER, ...LENIENT, ...KEEP_ALIVE_DIFFERENCES, UPGRADE_IN_HTTP_1_0].map(([name]) => name);
    const seen = new Set([...tally.stricter.keys(), ...tally.lenient.keys()]);
    assert.deepEqual(listed.filter((name) => !seen.has(name)), [], 'got listed differences no case showed, want none');
  });
});
