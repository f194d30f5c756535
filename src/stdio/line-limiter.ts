import { Transform, type TransformCallback } from "node:stream";

/**
 * The longest stdio line (one JSON-RPC message, without its newline) the server reads: 4 MiB.
 * A real message is a few kB (HTTP bodies are capped at 256 kB). Longer lines are discarded as
 * they arrive, never buffered, and answered with an Invalid Request error.
 */
export const MAX_LINE_BYTES = 4 * 1024 * 1024;

const NEWLINE = 0x0a;
const NL = Buffer.from("\n");

/**
 * Splits a byte stream into lines of at most `maxBytes` (the newline excluded, a CR before it
 * included) and passes each on as one chunk ending in "\n". A longer line is dropped while it
 * streams in (memory stays bounded by `maxBytes`) and reported through `onOversize` once its
 * newline (or the end of input) arrives; the lines after it go on as usual. Lines are cut on the
 * byte 0x0A, which never occurs inside a multi-byte UTF-8 character, so characters split across
 * chunks stay whole. Empty lines (or a lone CR) are skipped. A last line without a newline is
 * passed on with one.
 */
export class LineLimiter extends Transform {
  #parts: Buffer[] = [];
  #size = 0;
  /** Bytes of the oversize line being discarded, or -1 when not discarding. */
  #discarded = -1;

  constructor(
    readonly maxBytes: number,
    private readonly onOversize: (bytes: number) => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let start = 0;
    while (start <= chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      const end = newline === -1 ? chunk.length : newline;
      this.#take(chunk.subarray(start, end));
      if (newline === -1) break;
      this.#endLine();
      start = newline + 1;
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.#discarded >= 0 || this.#size > 0) this.#endLine();
    done();
  }

  /** Forgets a line half read (input is being cut off, e.g. on SIGTERM); no report. */
  dropPartial(): void {
    this.#parts = [];
    this.#size = 0;
    this.#discarded = -1;
  }

  #take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.#discarded >= 0) {
      this.#discarded += piece.length;
    } else if (this.#size + piece.length > this.maxBytes) {
      this.#discarded = this.#size + piece.length;
      this.#parts = [];
      this.#size = 0;
    } else {
      this.#parts.push(piece);
      this.#size += piece.length;
    }
  }

  #endLine(): void {
    if (this.#discarded >= 0) {
      const bytes = this.#discarded;
      this.#discarded = -1;
      this.onOversize(bytes);
      return;
    }
    const parts = this.#parts;
    const size = this.#size;
    this.#parts = [];
    this.#size = 0;
    if (size === 0 || (size === 1 && parts[0]?.[0] === 0x0d)) return;
    parts.push(NL);
    this.push(Buffer.concat(parts, size + 1));
  }
}
