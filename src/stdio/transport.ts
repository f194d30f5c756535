import type { Readable, Writable } from "node:stream";
import {
  type JSONRPCMessage,
  parseJSONRPCMessage,
  type RequestId,
  serializeMessage,
  type Transport,
} from "@modelcontextprotocol/server";
import { markNonDataNames } from "../mcp/argument-names.js";
import { LineLimiter, MAX_LINE_BYTES } from "./line-limiter.js";

const errorLine = (code: number, message: string, id: RequestId | null = null): string =>
  `${JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })}\n`;

/**
 * Told of each request read (after it is parsed, before it is handled); what it returns is told
 * of the request's answer once written.
 */
export type Observe = (
  request: JSONRPCMessage & { method: string; id: RequestId },
) => ((answer: JSONRPCMessage) => void) | undefined;

/** The id of a request that is JSON but not a valid message, so its answer can name it. */
function idOf(value: unknown): RequestId | null {
  const { id, method } = (value ?? {}) as { id?: unknown; method?: unknown };
  if (typeof method !== "string") return null;
  return typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) ? id : null;
}

/**
 * The stdio transport `serveStdio` is given (the SDK's own reads an unbounded buffer, answers no
 * bad line, and closes at the end of stdin, aborting the requests still running). This one:
 * - reads lines of at most `maxLineBytes` through a `LineLimiter`, answering a longer one;
 * - answers a line that is not JSON (-32700) or not a JSON-RPC message (-32600, or -32602 under
 *   the request's own id when it has one), so no client waits forever;
 * - parses with the SDK's own message schema, after renaming non-data argument names;
 * - counts the requests read and not yet answered, so the end of stdin can wait for every
 *   request already read (`whenAnswered`), and is never a close: the entry closes it then;
 * - at the end of stdin, fails its own requests to the client still unanswered (the buyer's
 *   confirmation), since nothing can answer them any more;
 * - once stdout is broken (EPIPE), waits for no answer and reports the error once.
 */
export class LineStdioTransport implements Transport {
  onmessage?: Transport["onmessage"];
  onerror?: (error: Error) => void;
  onclose?: () => void;

  readonly lines: LineLimiter;
  readonly #in: Readable;
  readonly #out: Writable;
  readonly #pending = new Map<RequestId, number>();
  /** Our requests to the client (the confirmation) still waiting for its answer. */
  readonly #asked = new Set<RequestId>();
  #answered: (() => void)[] = [];
  /** What `observe` asked to be told of an answer, by the request's id. */
  readonly #observed = new Map<RequestId, (answer: JSONRPCMessage) => void>();
  readonly #observe: Observe | undefined;
  #broken = false;
  #closed = false;

  constructor(
    stdin: Readable = process.stdin,
    stdout: Writable = process.stdout,
    {
      maxLineBytes = MAX_LINE_BYTES,
      onOversize = () => {},
      observe,
    }: { maxLineBytes?: number; onOversize?: (bytes: number) => void; observe?: Observe } = {},
  ) {
    this.#observe = observe;
    this.#in = stdin;
    this.#out = stdout;
    this.lines = new LineLimiter(maxLineBytes, (bytes) => {
      onOversize(bytes);
      this.#write(
        errorLine(
          -32600,
          `Invalid Request: message of ${bytes} bytes is longer than the ${maxLineBytes}-byte limit; it was discarded`,
        ),
      );
    });
    stdin.pipe(this.lines);
    // A read error ends the input like EOF does: what was read is still answered.
    stdin.once("error", () => {
      if (!this.lines.writableEnded) this.lines.end();
    });
    this.lines.once("end", () => {
      for (const id of [...this.#asked]) {
        this.#asked.delete(id);
        this.onmessage?.({
          jsonrpc: "2.0",
          id,
          error: { code: -32000, message: "Connection closed: stdin ended before the answer" },
        });
      }
    });
    // Without a listener the error would kill the process in the middle of a write.
    stdout.on("error", (error) => {
      if (this.#broken) return;
      this.#broken = true;
      this.#pending.clear();
      for (const resolve of this.#answered.splice(0)) resolve();
      this.onerror?.(error);
    });
  }

  /** Reading begins here, once the entry has set `onmessage`: no line is read before. */
  async start(): Promise<void> {
    this.lines.on("data", (line: Buffer) => this.#read(line));
  }

  async send(message: JSONRPCMessage): Promise<void> {
    // A broken stdout never drains: do not wait for it.
    if (this.#broken || this.#closed) return;
    if ("method" in message && "id" in message) this.#asked.add(message.id);
    await this.#write(serializeMessage(message));
    if (!("method" in message) && "id" in message && message.id !== undefined) {
      this.#settle(message.id);
      const told = this.#observed.get(message.id);
      if (told) {
        this.#observed.delete(message.id);
        told(message);
      }
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.onclose?.();
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

  #read(line: Buffer): void {
    let value: unknown;
    try {
      value = JSON.parse(line.toString("utf8"));
    } catch {
      this.#write(errorLine(-32700, "Parse error: the line is not valid JSON."));
      return;
    }
    markNonDataNames(value);
    let message: JSONRPCMessage;
    try {
      message = parseJSONRPCMessage(value);
    } catch {
      // A request whose envelope is malformed (params that are no object, say) is answered
      // under its own id, so the client waiting on it learns why.
      const id = idOf(value);
      this.#write(
        id === null
          ? errorLine(-32600, "Invalid Request: not a JSON-RPC 2.0 message.")
          : errorLine(-32602, "Invalid params: the request's params or _meta are malformed.", id),
      );
      return;
    }
    this.#track(message);
    if (this.#observe && "method" in message && "id" in message && message.id !== undefined) {
      const told = this.#observe(message);
      if (told) this.#observed.set(message.id, told);
    }
    this.onmessage?.(message);
  }

  /** Writes one line; resolves once stdout has taken it (or is broken). */
  #write(text: string): Promise<void> {
    if (this.#broken) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.#out.write(text)) {
        resolve();
        return;
      }
      const done = () => {
        this.#out.off("drain", done);
        this.#out.off("error", done);
        resolve();
      };
      this.#out.once("drain", done);
      this.#out.once("error", done);
    });
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
