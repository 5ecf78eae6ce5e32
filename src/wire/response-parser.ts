/**
 * A strict, incremental HTTP/1.1 response parser: bytes from an upstream socket go in, a response
 * head, zero-copy body chunks, trailers and "complete" come out. It follows RFC 9112 (HTTP/1.1
 * message syntax): section 4 (status line), 5 (field lines), 6.3 (how the body length is decided),
 * 7.1 (chunked transfer coding, with extensions and trailers). It is the piece that lets the proxy
 * talk to upstreams over raw `node:net` sockets instead of node:http's client (issue 5).
 *
 * Why strict: a proxy that frames a response differently from the next hop is the root of response
 * smuggling and cache poisoning. So anything ambiguous is an error, never a guess: repeated
 * Content-Length (even with equal values, as llhttp does), Content-Length together with
 * Transfer-Encoding, a Transfer-Encoding other than exactly `chunked`, Transfer-Encoding in an
 * HTTP/1.0 response (RFC 9112 6.1), bad chunk sizes, bare LF or bare CR, obs-fold, whitespace before
 * the colon, control characters in values. The differential test (test/wire/differential.test.ts)
 * checks that whatever node's own parser (llhttp) rejects, this parser rejects too.
 *
 * The parser is a small state machine over named states. A head is read one of two ways, with the
 * same result:
 * - the common case, a whole well-formed head in one read (`readWholeHead`): one JS pass over the
 *   bytes, each checked against the lookup tables of field-bytes.ts, field offsets kept in a reused
 *   scratch array, then one latin1 decode of the head and the names and values sliced from it (the
 *   way request-parser.ts reads request heads; about twice as fast as line by line through
 *   strings, for heads of 3 to 20 fields, issue 12); when every line is `name ": " value CRLF`,
 *   the decoded lines and where each starts go with the head too (`fieldLines`), for the writer
 *   of the client's response to copy;
 * - everything else (a head split across reads, a byte that does not fit, a head over the limit,
 *   very many fields): line by line (`readLines`), which finds line ends with `Buffer.indexOf`,
 *   decodes the head's lines, keeps a line split across reads as the string decoded so far, and is
 *   where every syntax error comes from. The one pass changes nothing until it knows the head is
 *   well formed, so falling back to the lines costs only the wasted pass.
 * Both hand the three framing fields to the same readings (`readContentLength`,
 * `readTransferEncoding`, `readConnection`; the lines find them by name string, the one pass by
 * name bytes) and end in the one decision on the body (`onHeadEnd`). Body bytes are handed out as
 * `subarray`s of the input, never copied. A chunked body is read by chunked-decoder.ts, the decoder request bodies
 * use too.
 */
import { UpstreamProtocolError, UpstreamResetError } from '../errors.js';
import { ChunkedDecoder } from './chunked-decoder.js';
import { COLON, CR, CRLF_CRLF, equalsIgnoringCase, HTAB, isNameAt, listElements, IS_FIELD_CHAR, IS_TOKEN, LF, parseFieldLine, quoteLine, SP } from './field-bytes.js';

/** How the body of a response is delimited (RFC 9112 6.3). */
export type BodyKind = 'none' | 'length' | 'chunked' | 'close';

/** A parsed status line plus header section. */
export interface ResponseHead {
  /** 100..999, three digits on the wire. */
  readonly statusCode: number;
  /** The reason phrase, latin1, possibly empty. */
  readonly statusMessage: string;
  readonly httpVersion: '1.0' | '1.1';
  /** `[name, value, name, value, …]`, latin1 strings, wire order and case kept, values trimmed of OWS. */
  readonly rawHeaders: string[];
  /**
   * True when the connection may carry another request after this response: HTTP/1.1 without
   * `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`; never for a close-delimited body
   * or an upgrade (RFC 9112 9.3), nor for a response to HEAD, a 204 or a 304 whose head announces a
   * body (Transfer-Encoding, Content-Length above 0; for HEAD, no framing at all, as the same GET's
   * body would run to the close) that a careless backend may send anyway.
   */
  readonly isKeepAlive: boolean;
  readonly bodyKind: BodyKind;
  /** The Content-Length value when the header is present (also for HEAD/204/304, where no body follows). */
  readonly contentLength?: number;
  /**
   * The field lines as received, when each is written the one way a writer would write it again
   * (`name ": " value CRLF`, one space, no trailing whitespace) and the head came in one read
   * (`readWholeHead`); undefined otherwise. A writer that keeps runs of these fields copies the
   * runs instead of joining every name and value again (buildClientResponseFields).
   */
  readonly fieldLines: FieldLines | undefined;
}

/**
 * A head's field lines as one string: field `i` (the `i`-th pair of `rawHeaders`) is
 * `text.slice(lineStarts[i], lineStarts[i + 1])`, its CRLF included; `lineStarts` has one entry
 * more than there are fields, the end of the last line.
 */
export interface FieldLines {
  readonly text: string;
  readonly lineStarts: readonly number[];
}

export interface ResponseParserOptions {
  /** Method of the request this response answers; `HEAD` means no body, `CONNECT` + 2xx means a tunnel. */
  readonly method: string;
  /**
   * Largest accepted head, in bytes, counting every byte of the status line, the field lines and
   * their CRLFs. Default 16384, node's `--max-http-header-size`; node counts only the field names,
   * values and reason phrase, so at the same number this limit is slightly stricter. The same limit
   * applies to one chunk-size line and to the whole trailer section.
   */
  readonly maxHeaderSize?: number;
  /** A 1xx response other than 101 (100 Continue, 103 Early Hints). Parsing continues with the next head. */
  onInformational?(head: ResponseHead): void;
  /** The final response head. */
  onHead(head: ResponseHead): void;
  /** A piece of the body (de-chunked), a `subarray` of the buffer given to `execute`: copy it to keep it. */
  onBody(chunk: Buffer): void;
  /** Trailer fields of a chunked body, `[name, value, …]`, latin1; called only when there is at least one. */
  onTrailers?(rawTrailers: string[]): void;
  /** The response is complete. Called exactly once, after `onHead` (and after all `onBody` / `onTrailers`). */
  onComplete(): void;
}

/** The parser's position in the message. */
type State =
  | 'status-line' // waiting for `HTTP/1.1 200 OK`
  | 'header-line' // field lines until the empty line
  | 'body-length' // `remaining` bytes of a Content-Length body
  | 'body-close' // everything until the connection closes
  | 'body-chunked' // a chunked body, read by `chunked`
  | 'complete' // done; further bytes are not consumed
  | 'failed'; // an error was thrown; further bytes throw it again

export const DEFAULT_MAX_HEADER_SIZE = 16384;

/** More 1xx responses than this before the final one is an error (Go's transport allows 5, too). */
const MAX_INFORMATIONAL_RESPONSES = 5;

/** The most fields `readWholeHead` takes; a head with more is read line by line. */
const MAX_FAST_FIELDS = 128;

/**
 * Scratch space of `readWholeHead`: per field, the offsets (from the head's start) of name start,
 * name end, value start, value end. Shared by all parsers (safe: it is read to the end before any
 * callback runs, and a pass runs to completion synchronously).
 */
const fieldOffsets = new Int32Array(4 * MAX_FAST_FIELDS);

/** `HTTP/1.`, the status line's first bytes before the minor version (RFC 9112 2.3). */
const HTTP_1_DOT = Buffer.from('HTTP/1.', 'latin1');
/** The framing field names, lower-case, for `readWholeHead`'s comparison of name bytes. */
const CONTENT_LENGTH = Buffer.from('content-length', 'latin1');
const TRANSFER_ENCODING = Buffer.from('transfer-encoding', 'latin1');
const CONNECTION = Buffer.from('connection', 'latin1');
const DIGIT_0 = 0x30;
const DIGIT_1 = 0x31;
const DIGIT_9 = 0x39;

/**
 * Push parser for one HTTP/1.x response (plus any 1xx before it).
 *
 * Usage: create one per request, call `execute(chunk)` for each chunk read from the socket and
 * `finish()` when the socket ends. Errors are thrown, not returned:
 * - `UpstreamProtocolError` from `execute`: malformed or ambiguous framing. The parser is then dead
 *   (later calls throw the same error); the caller answers 502 and closes the connection.
 * - `UpstreamResetError` from `finish`: the connection closed before the response was complete;
 *   its reason says how far it got (`… (10 of 100 body bytes)`).
 * Exceptions thrown by the callbacks propagate out of `execute` unchanged.
 *
 * Bytes after the end of the response are not consumed: `execute` returns how many bytes of `data`
 * it used. After a 101 Switching Protocols (or a 2xx to CONNECT) the rest belongs to the tunnel
 * (`data.subarray(consumed)`). After any other response the upstream had no business sending more
 * before the next request, so the caller should deliver this response and then close the connection
 * instead of reusing it; that is not an error for the current response.
 */
export class ResponseParser {
  private readonly options: ResponseParserOptions;
  private readonly maxHeaderSize: number;
  private readonly isHeadRequest: boolean;
  private readonly isConnectRequest: boolean;

  private state: State = 'status-line';
  private error: Error | undefined;
  private receivedBytes = 0;

  // line assembly
  /** The start of a line that continues in the next chunk, latin1. */
  private partialLine = '';
  /** Bytes still allowed in the current head. */
  private lineBudget: number;

  // the head being parsed
  private statusCode = 0;
  private statusMessage = '';
  private httpVersion: '1.0' | '1.1' = '1.1';
  private rawHeaders: string[] = [];
  private contentLength: number | undefined;
  private transferEncoding: string | undefined;
  private hasConnectionClose = false;
  private hasConnectionKeepAlive = false;
  private fieldLines: FieldLines | undefined;

  // the body
  private remaining = 0;
  private chunked: ChunkedDecoder | undefined;
  private readonly onBody = (chunk: Buffer): void => this.options.onBody(chunk);
  private isUpgradeResponse = false;
  private informationalCount = 0;

  /**
   * @param options callbacks, the request method and `maxHeaderSize` (bytes, default 16384).
   */
  constructor(options: ResponseParserOptions) {
    this.options = options;
    this.maxHeaderSize = options.maxHeaderSize ?? DEFAULT_MAX_HEADER_SIZE;
    this.isHeadRequest = equalsIgnoringCase(options.method, 'head');
    this.isConnectRequest = equalsIgnoringCase(options.method, 'connect');
    this.lineBudget = this.maxHeaderSize;
  }

  /** True once `onComplete` has been called. */
  get isComplete(): boolean {
    return this.state === 'complete';
  }

  /** True when the final response was 101 Switching Protocols or a 2xx to CONNECT: later bytes are the tunnel's. */
  get isUpgrade(): boolean {
    return this.isUpgradeResponse;
  }

  /** True once any byte was given to `execute`: a reset before that is the "stale pooled connection" case. */
  get hasReceivedBytes(): boolean {
    return this.receivedBytes > 0;
  }

  /**
   * Parses the next bytes of the response.
   *
   * @param data bytes read from the upstream socket; body chunks handed out are subarrays of it.
   * @returns the number of bytes of `data` consumed; less than `data.length` only when the response
   *   completed inside `data` (see the class comment for what the rest means).
   * @throws UpstreamProtocolError on malformed or ambiguous input.
   */
  execute(data: Buffer): number {
    if (this.state === 'failed') throw this.error;
    if (this.state === 'complete') return 0;
    this.receivedBytes += data.length;
    try {
      return this.run(data);
    } catch (error) {
      this.state = 'failed';
      this.error = error as Error;
      throw error;
    }
  }

  /**
   * Tells the parser the connection was closed by the upstream (EOF). Completes a close-delimited
   * body; a no-op when the response is already complete or parsing already failed.
   *
   * @throws UpstreamResetError when the response was not complete.
   */
  finish(): void {
    if (this.state === 'complete' || this.state === 'failed') return;
    if (this.state === 'body-close') {
      this.complete();
      return;
    }
    const error = new UpstreamResetError(this.closedReason(), 'upstream');
    this.state = 'failed';
    this.error = error;
    throw error;
  }

  /**
   * How far an incomplete response got when the connection closed, as the reason of the
   * `UpstreamResetError`: nothing, part of the head, or `n of m` body bytes (a Content-Length body;
   * a chunked body says how many data bytes came).
   */
  private closedReason(): string {
    if (this.receivedBytes === 0) return 'closed the connection before sending a response';
    if (this.state === 'body-length') {
      const length = this.contentLength as number;
      return `closed the connection before the response was complete (${length - this.remaining} of ${length} body bytes)`;
    }
    if (this.state === 'body-chunked') {
      return `closed the connection before the response was complete (${(this.chunked as ChunkedDecoder).bytesRead} body bytes of a chunked body)`;
    }
    return 'closed the connection before the response head was complete';
  }

  /** The state machine: each state consumes what it can and says where to go next. */
  private run(data: Buffer): number {
    let pos = 0;
    while (pos < data.length) {
      switch (this.state) {
        case 'status-line':
        case 'header-line': {
          const headEnd = this.state === 'status-line' && this.partialLine === '' ? this.readWholeHead(data, pos) : -1;
          pos = headEnd === -1 ? this.readLines(data, pos) : headEnd;
          if (this.isComplete) return pos; // a head without body
          break;
        }
        case 'body-length': {
          const end = Math.min(data.length, pos + this.remaining);
          this.remaining -= end - pos;
          this.options.onBody(data.subarray(pos, end));
          pos = end;
          if (this.remaining === 0) {
            this.complete();
            return pos;
          }
          break;
        }
        case 'body-chunked': {
          const chunked = this.chunked as ChunkedDecoder;
          pos = chunked.execute(data, pos, this.onBody);
          if (chunked.isComplete) {
            if (chunked.rawTrailers.length > 0) this.options.onTrailers?.([...chunked.rawTrailers]);
            this.complete();
            return pos;
          }
          break;
        }
        case 'body-close':
          this.options.onBody(pos === 0 ? data : data.subarray(pos));
          return data.length;
        case 'complete':
          return pos;
        case 'failed':
          throw this.error;
      }
    }
    return pos;
  }

  // ---- a whole head in one pass -------------------------------------------------------------------

  /**
   * Reads a head that starts at `start` and ends (CRLF CRLF) in `data`, when it is the common
   * case: `HTTP/1.0` or `HTTP/1.1`, a status code of 100 to 999, a reason of field characters, at
   * most {@link MAX_FAST_FIELDS} fields `token ":" OWS field-chars CRLF`, and no more than
   * `maxHeaderSize` bytes. Then it does what `readLines` would: fills in the status line and the
   * fields (the framing ones through the same readings, in wire order, so a bad Content-Length
   * fails with the same message) and calls `onHeadEnd`.
   *
   * Otherwise it returns -1 having changed nothing, and `readLines` reads the head (and, if the
   * head is malformed, says why). In a head that reaches here, every line ends in CRLF and holds
   * no CR or LF, so the lines are the ones `readLines` would find and the first CRLF CRLF is the end.
   *
   * @returns the position after the head's CRLF CRLF, or -1.
   */
  private readWholeHead(data: Buffer, start: number): number {
    const limit = Math.min(data.length, start + this.maxHeaderSize); // a head of maxHeaderSize bytes ends before it

    // ---- status line: "HTTP/1." ("0" / "1") SP 3DIGIT [SP reason-phrase] CRLF ----
    if (limit - start < 16) return -1; // "HTTP/1.1 200" CRLF CRLF
    for (let i = 0; i < HTTP_1_DOT.length; i++) {
      if (data[start + i] !== HTTP_1_DOT[i]) return -1;
    }
    const minor = data[start + 7];
    if ((minor !== DIGIT_0 && minor !== DIGIT_1) || data[start + 8] !== SP) return -1;
    const hundreds = data[start + 9] as number;
    const tens = data[start + 10] as number;
    const ones = data[start + 11] as number;
    if (hundreds < DIGIT_1 || hundreds > DIGIT_9 || tens < DIGIT_0 || tens > DIGIT_9 || ones < DIGIT_0 || ones > DIGIT_9) return -1;
    let pos = start + 12;
    let reasonStart = pos;
    if (data[pos] === SP) {
      reasonStart = ++pos;
      while (pos < limit && IS_FIELD_CHAR[data[pos] as number] === 1) pos++;
    }
    const reasonEnd = pos;
    if (pos + 1 >= limit || data[pos] !== CR || data[pos + 1] !== LF) return -1;
    pos += 2;

    // ---- field lines: name ":" OWS value OWS CRLF, then the empty line ----
    const offsets = fieldOffsets;
    let fieldCount = 0;
    let isCanonical = true;
    for (;;) {
      if (pos + 1 >= limit) return -1;
      if (data[pos] === CR) {
        if (data[pos + 1] !== LF) return -1;
        pos += 2;
        break; // the empty line: end of head
      }
      if (fieldCount === MAX_FAST_FIELDS) return -1;
      const nameStart = pos;
      while (pos < limit && IS_TOKEN[data[pos] as number] === 1) pos++;
      if (pos === nameStart || pos >= limit || data[pos] !== COLON) return -1;
      const nameEnd = pos++;
      while (pos < limit && (data[pos] === SP || data[pos] === HTAB)) pos++;
      const valueStart = pos;
      while (pos < limit && IS_FIELD_CHAR[data[pos] as number] === 1) pos++;
      if (pos + 1 >= limit || data[pos] !== CR || data[pos + 1] !== LF) return -1;
      let valueEnd = pos;
      while (valueEnd > valueStart && (data[valueEnd - 1] === SP || data[valueEnd - 1] === HTAB)) valueEnd--;
      if (valueStart !== nameEnd + 2 || data[nameEnd + 1] !== SP || valueEnd !== pos) isCanonical = false; // not `name ": " value CRLF`
      pos += 2;
      const slot = 4 * fieldCount++;
      offsets[slot] = nameStart - start;
      offsets[slot + 1] = nameEnd - start;
      offsets[slot + 2] = valueStart - start;
      offsets[slot + 3] = valueEnd - start;
    }

    // ---- the head is well formed: one decode (up to the empty line), then the same steps as the lines ----
    const text = data.toString('latin1', start, pos - 2);
    this.httpVersion = minor === DIGIT_1 ? '1.1' : '1.0';
    this.statusCode = (hundreds - DIGIT_0) * 100 + (tens - DIGIT_0) * 10 + (ones - DIGIT_0);
    this.statusMessage = text.slice(reasonStart - start, reasonEnd - start);
    this.state = 'header-line';
    const rawHeaders = this.rawHeaders;
    if (isCanonical) {
      const lineStarts = new Array<number>(fieldCount + 1);
      for (let field = 0; field < fieldCount; field++) lineStarts[field] = offsets[4 * field]!;
      lineStarts[fieldCount] = text.length;
      this.fieldLines = { text, lineStarts };
    }
    for (let slot = 0; slot < 4 * fieldCount; slot += 4) {
      const nameAt = start + offsets[slot]!;
      const name = text.slice(offsets[slot], offsets[slot + 1]);
      const value = text.slice(offsets[slot + 2], offsets[slot + 3]);
      rawHeaders.push(name, value);
      // The framing names, told apart by length and then by their bytes: cheaper than comparing the
      // sliced strings (readFramingField, the lines' way), for the same three fields.
      switch (name.length) {
        case 14:
          if (isNameAt(data, nameAt, CONTENT_LENGTH)) this.readContentLength(value);
          break;
        case 17:
          if (isNameAt(data, nameAt, TRANSFER_ENCODING)) this.readTransferEncoding(value);
          break;
        case 10:
          if (isNameAt(data, nameAt, CONNECTION)) this.readConnection(value);
          break;
      }
    }
    this.onHeadEnd();
    return pos;
  }

  // ---- lines ------------------------------------------------------------------------------------

  /**
   * Reads complete head lines from `start` and hands each (CRLF removed) to the current state's
   * line handler, until the head ends or the decoded text runs out. Decodes only bytes that are
   * surely the head's: up to its empty line when that is in sight, never much beyond the byte
   * budget. A line without its LF yet is kept for the next chunk. Every LF must follow a CR
   * (RFC 9112 2.2: no bare LF).
   *
   * It stops at the end of one head, also when a 1xx head ends and another head follows: that
   * one is read by the next call, with its own budget and a decode of its own bytes. (Reading on
   * in the same text once cut the next head at the 1xx's budget and dropped the bytes after the
   * cut, when the 1xx's last LF came in a later read than the rest of it.)
   *
   * @returns the position after the last byte used (`data.length` when a partial line was kept).
   */
  private readLines(data: Buffer, start: number): number {
    const headEnd = data.indexOf(CRLF_CRLF, start);
    const end = Math.min(headEnd === -1 ? data.length : headEnd + CRLF_CRLF.length, start + this.lineBudget + 1);
    const text = data.toString('latin1', start, end);
    let i = 0;
    while (i < text.length) {
      const lf = text.indexOf('\n', i);
      this.spendLineBudget((lf === -1 ? text.length : lf + 1) - i);
      if (lf === -1) {
        this.partialLine += text.slice(i); // the line continues in the next chunk
        return data.length;
      }
      let line: string;
      if (this.partialLine === '') {
        if (lf === i || text.charCodeAt(lf - 1) !== CR) throw protocolError('bare LF in response head');
        line = text.slice(i, lf - 1);
      } else {
        line = this.partialLine + text.slice(i, lf);
        this.partialLine = '';
        if (line.charCodeAt(line.length - 1) !== CR) throw protocolError('bare LF in response head');
        line = line.slice(0, -1);
      }
      i = lf + 1;
      if (this.state === 'status-line') {
        this.onStatusLine(line);
      } else if (line.length > 0) {
        this.onHeaderLine(line);
      } else {
        this.onHeadEnd(); // the empty line
        return start + i;
      }
    }
    return start + i;
  }

  /** Counts `bytes` against the limit of the head. */
  private spendLineBudget(bytes: number): void {
    this.lineBudget -= bytes;
    if (this.lineBudget < 0) throw protocolError(`response head larger than ${this.maxHeaderSize} bytes`);
  }

  // ---- head -------------------------------------------------------------------------------------

  /** `HTTP-version SP 3DIGIT [SP reason-phrase]` (RFC 9112 4); llhttp also accepts no reason, so do we. */
  private onStatusLine(line: string): void {
    // "HTTP/1.x 200" is 12 characters
    if (line.length < 12 || !line.startsWith('HTTP/1.') || (line[7] !== '0' && line[7] !== '1') || line[8] !== ' ') {
      throw protocolError(`invalid status line ${quoteLine(line)}`);
    }
    this.httpVersion = line[7] === '1' ? '1.1' : '1.0';
    let statusCode = 0;
    for (let i = 9; i < 12; i++) {
      const digit = line.charCodeAt(i) - 0x30;
      if (digit < 0 || digit > 9) throw protocolError(`invalid status code in ${quoteLine(line)}`);
      statusCode = statusCode * 10 + digit;
    }
    if (statusCode < 100) throw protocolError(`invalid status code ${statusCode}`);
    if (line.length > 12 && line.charCodeAt(12) !== SP) throw protocolError(`invalid status line ${quoteLine(line)}`);
    for (let i = 13; i < line.length; i++) {
      if (IS_FIELD_CHAR[line.charCodeAt(i)] === 0) throw protocolError('control character in reason phrase');
    }
    this.statusCode = statusCode;
    this.statusMessage = line.length > 13 ? line.slice(13) : '';
    this.state = 'header-line';
  }

  /** One `name: value` line. */
  private onHeaderLine(line: string): void {
    const name = parseFieldLine(line, this.rawHeaders, protocolError);
    this.readFramingField(name, this.rawHeaders[this.rawHeaders.length - 1] as string);
  }

  /**
   * The one reading of the fields that frame the body: Content-Length (one, 1*DIGIT),
   * Transfer-Encoding (several fields are one list), Connection (`close`, `keep-alive`). Other
   * names are ignored. `onHeadEnd` decides from what is read here.
   */
  private readFramingField(name: string, value: string): void {
    // only three names matter for framing (equalsIgnoringCase compares lengths first: they rarely match)
    if (equalsIgnoringCase(name, 'content-length')) this.readContentLength(value);
    else if (equalsIgnoringCase(name, 'transfer-encoding')) this.readTransferEncoding(value);
    else if (equalsIgnoringCase(name, 'connection')) this.readConnection(value);
  }

  private readContentLength(value: string): void {
    if (this.contentLength !== undefined) throw protocolError('repeated Content-Length');
    this.contentLength = parseContentLength(value);
  }

  private readTransferEncoding(value: string): void {
    this.transferEncoding = this.transferEncoding === undefined ? value : `${this.transferEncoding}, ${value}`;
  }

  private readConnection(value: string): void {
    for (const token of listElements(value)) {
      if (equalsIgnoringCase(token, 'close')) this.hasConnectionClose = true;
      else if (equalsIgnoringCase(token, 'keep-alive')) this.hasConnectionKeepAlive = true;
    }
  }

  /** Decides the body length (RFC 9112 6.3, in its order) and reports the head. */
  private onHeadEnd(): void {
    const statusCode = this.statusCode;
    if (this.transferEncoding !== undefined) {
      // RFC 9112 6.1: TE in HTTP/1.0 is faulty framing; TE with CL is a smuggling attempt (6.3 rule 3)
      if (this.httpVersion === '1.0') throw protocolError('Transfer-Encoding in an HTTP/1.0 response');
      if (this.contentLength !== undefined) throw protocolError('both Content-Length and Transfer-Encoding');
      // we forward the body de-chunked, so any other coding would reach the client undecoded
      if (this.transferEncoding.trim().toLowerCase() !== 'chunked') {
        throw protocolError(`unsupported Transfer-Encoding ${JSON.stringify(this.transferEncoding)}`);
      }
    }
    const isInformational = statusCode < 200 && statusCode !== 101;
    this.isUpgradeResponse = statusCode === 101 || (this.isConnectRequest && statusCode >= 200 && statusCode < 300);

    let bodyKind: BodyKind;
    if (isInformational || this.isUpgradeResponse || this.isHeadRequest || statusCode === 204 || statusCode === 304) {
      bodyKind = 'none'; // rules 1 and 2
    } else if (this.transferEncoding !== undefined) {
      bodyKind = 'chunked'; // rule 4
    } else if (this.contentLength !== undefined) {
      bodyKind = 'length'; // rule 6
    } else {
      bodyKind = 'close'; // rule 8
    }
    // A response without a body by rule (to a HEAD, a 204, a 304) whose head still announces one
    // (Transfer-Encoding, a Content-Length above 0, or for HEAD no framing at all, as the same
    // GET's body would run to the close): a backend that sends that body anyway sends bytes nothing
    // reads. In the same read they are caught (extra bytes close the connection), but bytes that
    // come after the connection carried its next request would be read as that request's
    // response, another client's. So the connection is not reused (break tests; nginx and Go reuse
    // it). A HEAD's Content-Length is common and lawful (RFC 9110 §9.3.2): each HEAD then costs a
    // new upstream connection.
    const hasFraming = this.transferEncoding !== undefined || this.contentLength !== undefined;
    const announcesBody = this.transferEncoding !== undefined || (this.contentLength ?? 0) > 0 || (this.isHeadRequest && !hasFraming);
    const isBodyWithheld = bodyKind === 'none' && !isInformational && !this.isUpgradeResponse && announcesBody;
    const isKeepAlive =
      bodyKind !== 'close' &&
      !isBodyWithheld &&
      !this.isUpgradeResponse &&
      !this.hasConnectionClose &&
      (this.httpVersion === '1.1' || this.hasConnectionKeepAlive);

    const head: ResponseHead = {
      statusCode,
      statusMessage: this.statusMessage,
      httpVersion: this.httpVersion,
      rawHeaders: this.rawHeaders,
      isKeepAlive,
      bodyKind,
      ...(this.contentLength !== undefined ? { contentLength: this.contentLength } : {}),
      fieldLines: this.fieldLines,
    };

    if (isInformational) {
      if (++this.informationalCount > MAX_INFORMATIONAL_RESPONSES) throw protocolError('too many 1xx responses');
      this.resetHead();
      this.options.onInformational?.(head);
      return;
    }
    this.options.onHead(head);
    switch (bodyKind) {
      case 'none':
        this.complete();
        break;
      case 'length':
        this.remaining = this.contentLength as number;
        if (this.remaining === 0) this.complete();
        else this.state = 'body-length';
        break;
      case 'chunked':
        this.chunked = new ChunkedDecoder(this.maxHeaderSize, protocolError);
        this.state = 'body-chunked';
        break;
      case 'close':
        this.state = 'body-close';
        break;
    }
  }

  /** Forgets an informational head so the next status line starts fresh. */
  private resetHead(): void {
    this.state = 'status-line';
    this.lineBudget = this.maxHeaderSize;
    this.rawHeaders = [];
    this.fieldLines = undefined;
    this.contentLength = undefined;
    this.transferEncoding = undefined;
    this.hasConnectionClose = false;
    this.hasConnectionKeepAlive = false;
  }

  private complete(): void {
    this.state = 'complete';
    this.options.onComplete();
  }
}

// ---- pure helpers -------------------------------------------------------------------------------

/** `1*DIGIT` and at most 2^53 - 1 (RFC 9110 8.6); no sign, no list, no spaces (the caller trimmed OWS). */
function parseContentLength(value: string): number {
  if (value.length === 0) throw protocolError('empty Content-Length');
  let length = 0;
  for (let i = 0; i < value.length; i++) {
    const digit = value.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) throw protocolError(`invalid Content-Length ${JSON.stringify(value)}`);
    length = length * 10 + digit;
    if (length > Number.MAX_SAFE_INTEGER) throw protocolError('Content-Length too large');
  }
  return length;
}

function protocolError(reason: string): UpstreamProtocolError {
  return new UpstreamProtocolError(`malformed upstream response: ${reason}`);
}
