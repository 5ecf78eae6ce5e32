/**
 * The chunked transfer coding (RFC 9112 §7.1), decoded incrementally: the one decoder for both
 * directions, request bodies (body-decoder.ts) and response bodies (response-parser.ts).
 *
 *     chunked-body = *chunk last-chunk trailer-section CRLF
 *     chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
 *     last-chunk   = 1*("0") [ chunk-ext ] CRLF
 *     chunk-ext    = *( ";" chunk-ext-name [ "=" chunk-ext-val ] )   ; token, token / quoted-string
 *
 * Strict, as llhttp is: no whitespace around `;` and `=` (the grammar's BWS is for senders that
 * used to add it; accepting it is how request smuggling through chunk extensions works), at most
 * 16 hex digits (llhttp's uint64; the value must also fit 2^53 - 1), every line ended by CRLF,
 * chunk data followed by exactly CRLF, trailer fields with the field-line syntax of heads. The
 * extensions are checked and then ignored (RFC 9112 §7.1.1: a recipient ignores ones it does not
 * understand); the trailer fields are kept for the caller.
 *
 * Chunk data is handed out as `subarray`s of the input, not copied, but for small chunks: those
 * of one read under SMALL_CHUNK_BYTES each are handed out together, copied into fresh buffers of
 * up to SMALL_CHUNK_BYTES (as Go's `io.Copy` through its 32 KiB buffer merges them). A body of
 * one-byte chunks then costs a write downstream per 4 KiB instead of one per chunk (a break test:
 * 1,000,000 one-byte chunks took 1.36 s through the proxy against 0.04 s direct, and each 512 KiB
 * read of them held the event loop for about 100 ms). A chunk-size line that is all in the read
 * and has no extension (`1A` CRLF, the common case) is read from its bytes; other chunk-size
 * lines, and the trailer section, as latin1 strings (one that continues into the next read is
 * kept as the string read so far).
 */
import type { BodyDecoder } from './body-decoder.js';
import { byteTable, CR, HTAB, IS_TOKEN, LF, parseFieldLine, quoteLine, SP } from './field-bytes.js';

/** Where the decoder is in the chunked body. */
type ChunkedState =
  | 'size-line' // `1A;ext=value` CRLF
  | 'data' // `remaining` bytes of one chunk
  | 'data-cr' // the CR after a chunk's data
  | 'data-lf' // the LF after a chunk's data
  | 'trailer-line' // trailer field lines until the empty line
  | 'complete' // done: later bytes are not this body's
  | 'failed'; // an error was thrown; later calls throw it again

const SEMICOLON = 0x3b;
const EQUALS = 0x3d;
const DQUOTE = 0x22;
const BACKSLASH = 0x5c;

/** qdtext (RFC 9110 §5.6.4): HTAB / SP / 0x21 / 0x23-0x5B / 0x5D-0x7E / obs-text. */
const IS_QDTEXT = byteTable((b) => b === HTAB || b === SP || b === 0x21 || (b >= 0x23 && b <= 0x5b) || (b >= 0x5d && b <= 0x7e) || b >= 0x80);
/** What may follow a backslash in a quoted-pair: HTAB / SP / VCHAR / obs-text. */
const IS_QUOTED_PAIR_CHAR = byteTable((b) => b === HTAB || (b >= 0x20 && b !== 0x7f));
/** Value of a hex digit, or -1. */
const HEX_VALUE = new Int8Array(256).fill(-1);
for (let digit = 0; digit < 16; digit++) {
  HEX_VALUE[digit.toString(16).charCodeAt(0)] = digit;
  HEX_VALUE[digit.toString(16).toUpperCase().charCodeAt(0)] = digit;
}

/** More hex digits than this in a chunk size is an error, even with leading zeros (llhttp's uint64 holds 16). */
const MAX_CHUNK_SIZE_DIGITS = 16;

/**
 * Chunk data pieces shorter than this, bytes, are merged with the other small pieces of the same
 * read (see the file comment); longer ones are handed out as views of the input.
 */
export const SMALL_CHUNK_BYTES = 4096;

/**
 * Decoder of one chunked body. `execute` is called with each read; errors are thrown, made by the
 * `fail` the creator gives (each direction has its own error class and status).
 */
export class ChunkedDecoder implements BodyDecoder {
  readonly #maxLineBytes: number;
  readonly #fail: (reason: string) => Error;
  #state: ChunkedState = 'size-line';
  #error: Error | undefined;
  /** Bytes left in the current chunk's data. */
  #remaining = 0;
  /** The start of a line that continues in the next read, latin1. */
  #partialLine = '';
  /** Bytes still allowed in the current chunk-size line or in the trailer section. */
  #lineBudget: number;
  readonly #rawTrailers: string[] = [];
  #bytesRead = 0;
  /** The small data pieces of the current read not handed out yet: `[start, end, start, end, …]` in the input. */
  readonly #smallPieces: number[] = [];
  /** Their bytes, at most SMALL_CHUNK_BYTES. */
  #smallBytes = 0;

  /**
   * @param maxLineBytes longest chunk-size line (CRLF included), and longest trailer section (all
   *   its lines and the final CRLF), in bytes.
   * @param fail makes the error thrown for a framing fault, from a reason such as
   *   `invalid chunk size line "zz"`.
   */
  constructor(maxLineBytes: number, fail: (reason: string) => Error) {
    this.#maxLineBytes = maxLineBytes;
    this.#fail = fail;
    this.#lineBudget = maxLineBytes;
  }

  get isComplete(): boolean {
    return this.#state === 'complete';
  }

  /** Trailer fields `[name, value, …]`, latin1, wire order; complete once `isComplete`. */
  get rawTrailers(): readonly string[] {
    return this.#rawTrailers;
  }

  /** Chunk-data bytes handed to `onData` so far. */
  get bytesRead(): number {
    return this.#bytesRead;
  }

  /**
   * Decodes `buffer[start…]`, handing each piece of chunk data to `onData` (a subarray of
   * `buffer`).
   *
   * @returns the offset just after the last byte of this body: `buffer.length` unless the body
   *   completed inside `buffer` (the rest is the next message's). After completion, returns `start`.
   * @throws what `fail` makes, on bad framing; the decoder is then dead (later calls throw the same
   *   error). Errors thrown by `onData` propagate unchanged (and also end the decoder).
   */
  execute(buffer: Buffer, start: number, onData: (chunk: Buffer) => void): number {
    if (this.#state === 'failed') throw this.#error;
    try {
      return this.#run(buffer, start, onData);
    } catch (error) {
      this.#state = 'failed';
      this.#error = error as Error;
      throw error;
    }
  }

  #run(buffer: Buffer, start: number, onData: (chunk: Buffer) => void): number {
    try {
      const end = this.#decode(buffer, start, onData);
      this.#handOutSmallPieces(buffer, onData);
      return end;
    } catch (error) {
      // The data before a framing fault still goes out, as it did piece by piece.
      if (this.#smallPieces.length > 0) this.#handOutSmallPieces(buffer, onData);
      throw error;
    }
  }

  /**
   * Hands out the small pieces kept so far: one as a view, more copied into one fresh buffer of at
   * most SMALL_CHUNK_BYTES (a holder of the pieces copies small ones and holds larger ones in place,
   * UpstreamExchange's PENDING_COPY_MAX_BYTES: the merged ones stay of the kind it copies).
   */
  #handOutSmallPieces(buffer: Buffer, onData: (chunk: Buffer) => void): void {
    const pieces = this.#smallPieces;
    if (pieces.length === 0) return;
    const total = this.#smallBytes;
    this.#smallBytes = 0;
    if (pieces.length === 2) {
      const [from, to] = pieces as [number, number];
      pieces.length = 0;
      onData(buffer.subarray(from, to));
      return;
    }
    const merged = Buffer.allocUnsafe(total);
    let offset = 0;
    for (let i = 0; i < pieces.length; i += 2) offset += buffer.copy(merged, offset, pieces[i], pieces[i + 1]);
    pieces.length = 0;
    onData(merged);
  }

  #decode(buffer: Buffer, start: number, onData: (chunk: Buffer) => void): number {
    let pos = start;
    while (pos < buffer.length) {
      switch (this.#state) {
        case 'size-line':
          pos = this.#partialLine === '' ? this.#readSizeBytes(buffer, pos) : this.#readLine(buffer, pos);
          break;
        case 'trailer-line':
          pos = this.#readLine(buffer, pos);
          break;
        case 'data': {
          const end = Math.min(buffer.length, pos + this.#remaining);
          this.#remaining -= end - pos;
          this.#bytesRead += end - pos;
          if (end - pos < SMALL_CHUNK_BYTES) {
            if (this.#smallBytes + (end - pos) > SMALL_CHUNK_BYTES) this.#handOutSmallPieces(buffer, onData);
            this.#smallPieces.push(pos, end);
            this.#smallBytes += end - pos;
          } else {
            this.#handOutSmallPieces(buffer, onData);
            onData(buffer.subarray(pos, end));
          }
          pos = end;
          if (this.#remaining === 0) this.#state = 'data-cr';
          break;
        }
        case 'data-cr':
          if (buffer[pos] !== CR) throw this.#fail('missing CRLF after chunk data');
          pos++;
          this.#state = 'data-lf';
          break;
        case 'data-lf':
          if (buffer[pos] !== LF) throw this.#fail('missing LF after CR after chunk data');
          pos++;
          this.#state = 'size-line';
          this.#lineBudget = this.#maxLineBytes;
          break;
        default: // 'complete' ('failed' was thrown before the loop)
          return pos;
      }
    }
    return pos;
  }

  /**
   * Reads one chunk-size or trailer line from `start`, or keeps its start for the next read. Every
   * LF must follow a CR (RFC 9112 §2.2: no bare LF); a bare LF fails at once, without waiting for
   * more bytes.
   *
   * @returns the offset after the line's LF, or `buffer.length` when the line continues.
   */
  #readLine(buffer: Buffer, start: number): number {
    const lf = buffer.indexOf(LF, start);
    const end = lf === -1 ? buffer.length : lf + 1;
    this.#lineBudget -= end - start;
    if (this.#lineBudget < 0) throw this.#fail(`${this.#lineKind()} larger than ${this.#maxLineBytes} bytes`);
    if (lf === -1) {
      this.#partialLine += buffer.toString('latin1', start, end);
      return end;
    }
    let line = buffer.toString('latin1', start, lf);
    if (this.#partialLine !== '') {
      line = this.#partialLine + line;
      this.#partialLine = '';
    }
    if (line.length === 0 || line.charCodeAt(line.length - 1) !== CR) throw this.#fail(`bare LF in ${this.#lineKind()}`);
    line = line.slice(0, -1);
    if (this.#state === 'size-line') this.#onSizeLine(line);
    else this.#onTrailerLine(line);
    return end;
  }

  /**
   * A chunk-size line read from its bytes when it is `1*HEXDIG CRLF`, all in `buffer` from `start`,
   * with at most MAX_CHUNK_SIZE_DIGITS digits: the same result as `#readLine` for such a line, with
   * no string made. Anything else (an extension, a line that continues in the next read, a fault)
   * goes to `#readLine`, which reads it, or says what is wrong with it.
   */
  #readSizeBytes(buffer: Buffer, start: number): number {
    let size = 0;
    let pos = start;
    const limit = Math.min(buffer.length, start + MAX_CHUNK_SIZE_DIGITS);
    while (pos < limit) {
      const digit = HEX_VALUE[buffer[pos]!]!;
      if (digit === -1) break;
      size = size * 16 + digit;
      pos++;
    }
    if (pos === start || pos + 1 >= buffer.length || buffer[pos] !== CR || buffer[pos + 1] !== LF || size > Number.MAX_SAFE_INTEGER) {
      return this.#readLine(buffer, start);
    }
    const end = pos + 2;
    if (this.#lineBudget < end - start) return this.#readLine(buffer, start); // over the budget: its fault, said there
    this.#lineBudget -= end - start;
    this.#onSize(size);
    return end;
  }

  #lineKind(): string {
    return this.#state === 'size-line' ? 'chunk size line' : 'trailer section';
  }

  /** `1*HEXDIG *( ";" token [ "=" ( token / quoted-string ) ] )`, no whitespace. */
  #onSizeLine(line: string): void {
    let size = 0;
    let i = 0;
    while (i < line.length) {
      const digit = HEX_VALUE[line.charCodeAt(i)] as number;
      if (digit === -1) break;
      size = size * 16 + digit;
      i++;
    }
    if (i === 0) throw this.#fail(`invalid chunk size line ${quoteLine(line)}`);
    if (i > MAX_CHUNK_SIZE_DIGITS || size > Number.MAX_SAFE_INTEGER) throw this.#fail('chunk size too large');
    const extensionFault = i < line.length ? chunkExtensionFault(line, i) : undefined;
    if (extensionFault !== undefined) throw this.#fail(`${extensionFault} in ${quoteLine(line)}`);
    this.#onSize(size);
  }

  /** After a chunk-size line: the data of a chunk of `size` bytes, or the trailer section after the last chunk. */
  #onSize(size: number): void {
    if (size === 0) {
      this.#state = 'trailer-line';
      this.#lineBudget = this.#maxLineBytes;
    } else {
      this.#remaining = size;
      this.#state = 'data';
    }
  }

  /** A trailer field line, or the empty line that ends the body (RFC 9112 §7.1.2). */
  #onTrailerLine(line: string): void {
    if (line.length === 0) this.#state = 'complete';
    else parseFieldLine(line, this.#rawTrailers, this.#fail);
  }
}

/**
 * What is wrong with the chunk extensions `line[i…]`, which must be
 * `1*( ";" token [ "=" ( token / quoted-string ) ] )`; undefined when nothing is.
 */
function chunkExtensionFault(line: string, i: number): string | undefined {
  while (i < line.length) {
    if (line.charCodeAt(i) !== SEMICOLON) return 'invalid byte in a chunk size or chunk extension';
    i++;
    const nameStart = i;
    while (i < line.length && IS_TOKEN[line.charCodeAt(i)] === 1) i++;
    if (i === nameStart) return 'chunk extension without a name';
    if (i === line.length || line.charCodeAt(i) === SEMICOLON) continue;
    if (line.charCodeAt(i) !== EQUALS) return 'invalid byte in a chunk extension';
    i++;
    if (line.charCodeAt(i) === DQUOTE) {
      i++;
      for (;;) {
        if (i >= line.length) return 'unterminated quoted chunk extension value';
        const code = line.charCodeAt(i);
        if (code === DQUOTE) {
          i++;
          break;
        }
        if (code === BACKSLASH) {
          if (i + 1 >= line.length || IS_QUOTED_PAIR_CHAR[line.charCodeAt(i + 1)] === 0) return 'invalid quoted-pair in a chunk extension';
          i += 2;
        } else if (IS_QDTEXT[code] === 1) {
          i++;
        } else {
          return 'invalid byte in a quoted chunk extension value';
        }
      }
    } else {
      const valueStart = i;
      while (i < line.length && IS_TOKEN[line.charCodeAt(i)] === 1) i++;
      if (i === valueStart) return 'chunk extension with an empty value';
    }
  }
  return undefined;
}
