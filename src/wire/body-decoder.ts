/**
 * Request bodies off the wire: given the framing the request head decided (request-parser.ts,
 * RFC 9112 §6.3), a decoder reads exactly the body's bytes from what the client connection
 * delivers and says where the body ended, so that bytes after it are read as the next pipelined
 * request. Two framings carry a body:
 *
 * - `length`: exactly Content-Length bytes (RFC 9112 §6.2), passed through as they come;
 * - `chunked`: the chunked transfer coding (RFC 9112 §7.1), de-chunked by the same decoder the
 *   response parser uses (chunked-decoder.ts), with extensions checked and ignored and trailer
 *   fields kept.
 *
 * Both hand body bytes out as `subarray`s of the buffer given to `execute`, never copied.
 */
import { RequestFramingError } from '../errors.js';
import { ChunkedDecoder } from './chunked-decoder.js';
import type { BodyFraming } from './request-parser.js';

/** Reads one request body, piece by piece, from the bytes a connection delivers. */
export interface BodyDecoder {
  /**
   * Reads body bytes from `buffer[start…]`; calls `onData(view)` with each piece of body payload
   * (de-chunked; a subarray of `buffer`, valid only during the call unless copied). Returns the
   * offset just after the last byte that belonged to this body (bytes after it are the next
   * request). Throws `RequestFramingError` (src/errors.ts, status 400) on bad chunked framing.
   */
  execute(buffer: Buffer, start: number, onData: (chunk: Buffer) => void): number;
  /** The whole body (last chunk and trailers included) was read. */
  readonly isComplete: boolean;
  /** Trailer fields after a chunked body, `[name, value, …]`; empty when none. */
  readonly rawTrailers: readonly string[];
  /** Payload bytes delivered so far (for max_body_size). */
  readonly bytesRead: number;
}

/** Default bound of a chunk-size line and of the trailer section, bytes. */
export const DEFAULT_MAX_LINE_BYTES = 16384;

/**
 * A decoder for a body framed as `framing`; undefined for framing `none` (nothing to read).
 *
 * @param options.maxLineBytes longest chunk-size line, and longest trailer section, in bytes
 *   (default 16384); longer is a `RequestFramingError`.
 */
export function createBodyDecoder(framing: BodyFraming, options?: { maxLineBytes?: number }): BodyDecoder | undefined {
  switch (framing.kind) {
    case 'none':
      return undefined;
    case 'length':
      return new LengthDecoder(framing.length);
    case 'chunked':
      return new ChunkedDecoder(options?.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES, requestFramingError);
  }
}

const NO_TRAILERS: readonly string[] = Object.freeze([]);

/** A Content-Length body: the next `length` bytes, whatever they are. Never throws. */
class LengthDecoder implements BodyDecoder {
  readonly rawTrailers = NO_TRAILERS;
  #remaining: number;
  #bytesRead = 0;

  constructor(length: number) {
    this.#remaining = length;
  }

  get isComplete(): boolean {
    return this.#remaining === 0;
  }

  get bytesRead(): number {
    return this.#bytesRead;
  }

  execute(buffer: Buffer, start: number, onData: (chunk: Buffer) => void): number {
    const end = Math.min(buffer.length, start + this.#remaining);
    if (end === start) return start;
    this.#remaining -= end - start;
    this.#bytesRead += end - start;
    onData(buffer.subarray(start, end));
    return end;
  }
}

function requestFramingError(reason: string): RequestFramingError {
  return new RequestFramingError(`malformed request body: ${reason}`);
}
