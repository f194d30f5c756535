import type { Readable, Writable } from "node:stream";
import { Transform, type TransformCallback } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { markNonDataNamesInLine } from "../mcp/argument-names.js";

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
  /** The line last passed on: the transport parses it synchronously, so an error is about it. */
  lastLine: Buffer | undefined;
  /** Bytes of the oversize line being discarded, or -1 when not discarding. */
  #discarded = -1;

  constructor(
    readonly maxBytes: number,
    private readonly onOversize: (bytes: number) => void,
    /** Applied to each whole line before it is passed on. */
    private readonly rewrite: (line: Buffer) => Buffer = (line) => line,
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
    const line = this.rewrite(Buffer.concat(parts, size + 1));
    this.lastLine = line;
    this.push(line);
  }
}

type RequestId = string | number;

const errorLine = (code: number, message: string, id: RequestId | null = null): string =>
  `${JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })}\n`;

/** The id of a request line that is JSON but not a valid message, so its answer can name it. */
function idOfLine(line: Buffer | undefined): RequestId | null {
  if (line === undefined) return null;
  try {
    const message = JSON.parse(line.toString("utf8")) as { id?: unknown; method?: unknown };
    const id = message?.id;
    if (typeof message?.method !== "string") return null;
    return typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) ? id : null;
  } catch {
    return null;
  }
}

/**
 * The SDK's stdio transport behind a `LineLimiter` (its own buffer throws past 10 MB, and the
 * transport then closes itself without a word: the server stopped answering), that also:
 * - answers a line that is not JSON (-32700) or not a JSON-RPC message (-32600), where the SDK
 *   only reports it to `onerror` and the client would wait forever;
 * - counts the requests read and not yet answered, so that the end of stdin can wait for every
 *   request already read before the process exits (`whenAnswered`);
 * - at the end of stdin, fails its own requests to the client still unanswered (elicitation).
 */
export class LineLimitedStdioTransport extends StdioServerTransport {
  readonly lines: LineLimiter;
  readonly #in: Readable;
  readonly #out: Writable;
  readonly #pending = new Map<RequestId, number>();
  /** Our requests to the client (elicitation) still waiting for its answer. */
  readonly #asked = new Set<RequestId>();
  #answered: (() => void)[] = [];
  #broken = false;
  /**
   * Takes a line away from the connected server (true: it was served elsewhere, the 2026-07-28
   * leg). It is counted as read either way, so the end of stdin still waits for its answer.
   */
  divert?: (message: JSONRPCMessage) => boolean;

  constructor(
    stdin: Readable = process.stdin,
    stdout: Writable = process.stdout,
    {
      maxLineBytes = MAX_LINE_BYTES,
      onOversize = () => {},
    }: { maxLineBytes?: number; onOversize?: (bytes: number) => void } = {},
  ) {
    const lines = new LineLimiter(
      maxLineBytes,
      (bytes) => {
        onOversize(bytes);
        stdout.write(
          errorLine(
            -32600,
            `Invalid Request: message of ${bytes} bytes is longer than the ${maxLineBytes}-byte limit; it was discarded`,
          ),
        );
      },
      markNonDataNamesInLine,
    );
    stdin.pipe(lines);
    // A read error ends the input like EOF does: what was read is still answered.
    stdin.once("error", () => {
      if (!lines.writableEnded) lines.end();
    });
    // The limiter hands over one whole line per chunk: the SDK's buffer never holds more.
    super(lines, stdout, { maxBufferSize: maxLineBytes + 2 });
    this.lines = lines;
    this.#in = stdin;
    this.#out = stdout;
    // Once input has ended, the client can answer nothing more: fail our open requests to it
    // now (a confirmation then counts as not given, and nothing is sent) rather than let the
    // calls waiting on them run into the shutdown grace.
    lines.once("end", () => {
      for (const id of [...this.#asked]) {
        this.#asked.delete(id);
        this.onmessage?.({
          jsonrpc: "2.0",
          id,
          error: { code: -32000, message: "Connection closed: stdin ended before the answer" },
        });
      }
    });
    // The client gone (EPIPE): no answer can be delivered any more, so none is waited for; the
    // tool calls still finish and are audited. Without a listener the error would kill the
    // process in the middle of a write.
    stdout.on("error", (error) => {
      this.#broken = true;
      this.#pending.clear();
      for (const resolve of this.#answered.splice(0)) resolve();
      this.onerror?.(error);
    });
  }

  /** The Protocol has set its handlers by now (connect() calls start() last): wrap them. */
  override async start(): Promise<void> {
    const dispatch = this.onmessage;
    this.onmessage = (message) => {
      this.#track(message);
      if (this.divert?.(message)) return;
      dispatch?.(message);
    };
    const report = this.onerror;
    this.onerror = (error) => {
      if (this.#broken) {
        // Nothing more can be answered.
      } else if (error instanceof SyntaxError) {
        this.#out.write(errorLine(-32700, "Parse error: the line is not valid JSON."));
      } else if (error.name === "ZodError") {
        // A request whose envelope is malformed (a bad `_meta`, params that are no object) is
        // answered under its own id, so the client waiting on it learns why.
        const id = idOfLine(this.lines.lastLine);
        this.#out.write(
          id === null
            ? errorLine(-32600, "Invalid Request: not a JSON-RPC 2.0 message.")
            : errorLine(-32602, "Invalid params: the request's params or _meta are malformed.", id),
        );
      }
      report?.(error);
    };
    return super.start();
  }

  override async send(message: JSONRPCMessage): Promise<void> {
    // A broken stdout never drains: do not wait for it.
    if (this.#broken) return;
    if ("method" in message && "id" in message) this.#asked.add(message.id);
    await super.send(message);
    if (!("method" in message) && "id" in message && message.id !== undefined) {
      this.#settle(message.id);
    }
  }

  /**
   * Reads no more input (SIGTERM): a line half read is dropped, the lines already read are
   * handled, and the input ends as at EOF.
   */
  stopReading(): void {
    this.#in.unpipe(this.lines);
    this.#in.pause();
    if (this.lines.writableEnded) return;
    this.lines.dropPartial();
    this.lines.end();
  }

  /** Resolves once every request read so far has been answered (or cancelled by the client). */
  whenAnswered(): Promise<void> {
    if (this.#pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#answered.push(resolve));
  }

  #track(message: JSONRPCMessage): void {
    if (!("method" in message)) {
      if ("id" in message && message.id !== undefined) this.#asked.delete(message.id);
      return;
    }
    if (this.#broken) return;
    if ("id" in message) {
      this.#pending.set(message.id, (this.#pending.get(message.id) ?? 0) + 1);
    } else if (message.method === "notifications/cancelled") {
      // The SDK does not answer a cancelled request.
      const id = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof id === "string" || typeof id === "number") this.#settle(id);
    }
  }

  #settle(id: RequestId): void {
    const count = this.#pending.get(id);
    if (count === undefined) return;
    if (count > 1) this.#pending.set(id, count - 1);
    else this.#pending.delete(id);
    if (this.#pending.size === 0) for (const resolve of this.#answered.splice(0)) resolve();
  }
}
