/**
 * Test helper: runs a ResponseParser over a list of chunks and records everything it reported, in
 * one plain object that tests compare with deepEqual. Also a small seeded PRNG (mulberry32) so
 * random splits and generated corpora are the same on every run.
 *
 * A head's `fieldLines` (the lines as received, present or not depending on how the bytes were
 * cut) is checked here and left out of the record: every line it gives must be its field written
 * again (`name ": " value CRLF`), or the helper throws, so each test that parses a head also tests
 * that promise.
 */
import { ResponseParser, type ResponseHead } from '../../src/wire/response-parser.js';
import { seededRandom } from '../helpers/seeded-random.js';
export { seededRandom };

/** A head as recorded: without `fieldLines` (see the file comment). */
export type RecordedHead = Omit<ResponseHead, 'fieldLines'>;

export interface CollectedResponse {
  informational: RecordedHead[];
  head: RecordedHead | undefined;
  /** The body as latin1, so failures print readably. */
  body: string;
  trailers: string[] | undefined;
  isComplete: boolean;
  /** Bytes consumed by `execute`, summed over all chunks; 0 when an error was thrown (it depends on the split then). */
  consumed: number;
  /** `code: message` of the error thrown, if any. */
  error: string | undefined;
  /** Order of callbacks, e.g. ['info', 'head', 'body', 'trailers', 'complete']. */
  events: string[];
}

export interface CollectOptions {
  method?: string;
  maxHeaderSize?: number;
  /** Call `finish()` after the last chunk (the upstream closed). Default true. */
  isEof?: boolean;
}

/** Feeds `chunks` in order; stops feeding once the response is complete (the rest is left unconsumed). */
export function collectResponse(chunks: readonly Buffer[], options: CollectOptions = {}): CollectedResponse {
  lineProblem = undefined;
  const result: CollectedResponse = {
    informational: [],
    head: undefined,
    body: '',
    trailers: undefined,
    isComplete: false,
    consumed: 0,
    error: undefined,
    events: [],
  };
  const bodyParts: Buffer[] = [];
  const parser = new ResponseParser({
    method: options.method ?? 'GET',
    ...(options.maxHeaderSize !== undefined ? { maxHeaderSize: options.maxHeaderSize } : {}),
    onInformational(head) {
      result.events.push('info');
      result.informational.push(recorded(head));
    },
    onHead(head) {
      result.events.push('head');
      result.head = recorded(head);
    },
    onBody(chunk) {
      if (result.events[result.events.length - 1] !== 'body') result.events.push('body');
      bodyParts.push(Buffer.from(chunk));
    },
    onTrailers(rawTrailers) {
      result.events.push('trailers');
      result.trailers = rawTrailers;
    },
    onComplete() {
      result.events.push('complete');
      result.isComplete = true;
    },
  });
  try {
    for (const chunk of chunks) {
      result.consumed += parser.execute(chunk);
      if (parser.isComplete) break;
    }
    if (options.isEof ?? true) parser.finish();
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    result.error = `${code}: ${message}`;
    result.consumed = 0;
  }
  if (lineProblem !== undefined) throw new Error(lineProblem);
  result.body = Buffer.concat(bodyParts).toString('latin1');
  return result;
}

/** The first head whose `fieldLines` broke their promise, said how; thrown once the parser is done. */
let lineProblem: string | undefined;

/** `head` without `fieldLines`, once they are checked against `rawHeaders`. */
function recorded(head: ResponseHead): RecordedHead {
  const { fieldLines, ...rest } = head;
  if (fieldLines !== undefined) {
    const { text, lineStarts } = fieldLines;
    const raw = head.rawHeaders;
    if (lineStarts.length !== raw.length / 2 + 1) lineProblem ??= `fieldLines has ${lineStarts.length} line starts for ${raw.length / 2} fields`;
    for (let i = 0; i < raw.length; i += 2) {
      const line = text.slice(lineStarts[i / 2], lineStarts[i / 2 + 1]);
      const want = `${raw[i]}: ${raw[i + 1]}\r\n`;
      if (line !== want) lineProblem ??= `fieldLines gives field ${i / 2} as ${JSON.stringify(line)}, want ${JSON.stringify(want)}`;
    }
  }
  return rest;
}

/** Splits `data` into pieces at the given cut points. */
export function splitAt(data: Buffer, cuts: readonly number[]): Buffer[] {
  const pieces: Buffer[] = [];
  let start = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    pieces.push(data.subarray(start, cut));
    start = cut;
  }
  pieces.push(data.subarray(start));
  return pieces;
}

/** Every single byte as its own chunk (each a copy, so no chunk shares memory with another). */
export function bytewise(data: Buffer): Buffer[] {
  return [...data].map((byte) => Buffer.from([byte]));
}


export function latin1(text: string): Buffer {
  return Buffer.from(text, 'latin1');
}
