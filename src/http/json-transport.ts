import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import { MAX_BATCH_SIZE } from "@modelcontextprotocol/sdk/server/requestBody.js";
import { isJsonContentType } from "@modelcontextprotocol/sdk/shared/mediaType.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CancelledNotificationSchema,
  isInitializeRequest,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  type MessageExtraInfo,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";
import { MAX_BODY_DEPTH, TOO_DEEP, tooDeep } from "./body-refusals.js";
import { endWithJson } from "./json-answer.js";

/** An answer slot of a request the same POST cancelled: it is not waited for, nor delivered. */
const CANCELLED = Symbol("cancelled");

/**
 * The stateless, JSON-response POST path of the SDK's streamable HTTP transport
 * (`StreamableHTTPServerTransport` with `sessionIdGenerator: undefined, enableJsonResponse: true`),
 * written straight onto Node's request and response, with no conversion to a WHATWG Request and
 * back (docs/performance.md says what that buys). The checks, status codes and bodies below
 * mirror the SDK's `handlePostRequest` (1.32) one for one (test/http/transport.test.ts holds
 * them), except that: a body nested deeper than MAX_BODY_DEPTH and a batch that repeats a request
 * id are refused; a request cancelled in its own batch is not waited for; and a client's
 * responses are not dispatched (see `handle`).
 *
 * A transport stays connected to its server and answers one POST at a time (`handle`, then `end`),
 * so the server is never reconnected per request (closing a `Protocol` builds an `McpError` with
 * a stack every time).
 */
export class NodeJsonTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;

  /** The response of the POST being answered, undefined between POSTs. */
  private res: ServerResponse | undefined;
  /**
   * That POST's request ids, in order, with their responses once sent. Reused across POSTs (one
   * at a time): a request's slot is found by id, which is why ids must be unique in a POST.
   */
  private readonly answers = new Map<RequestId, JSONRPCMessage | typeof CANCELLED | undefined>();
  /** Requests of that POST still to be answered before its response is written. */
  private pending = 0;
  /**
   * Requests handed to the server, and responses it sent, over the transport's life. Each request
   * the SDK's Protocol dispatches ends in exactly one sent response, unless it is cancelled or
   * the server closes, so equal counts prove that no handler of this server is still running.
   */
  private started = 0;
  private settled = 0;
  /** Set once the server holds state another POST must not see (an initialize) or a dispatch failed. */
  private spoiled = false;
  private closed = false;

  async start(): Promise<void> {}

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.res = undefined;
    this.onclose?.();
  }

  /** Validates and dispatches the already-parsed body of one POST. */
  handle(req: IncomingMessage, res: ServerResponse, body: unknown, authInfo?: AuthInfo): void {
    if (this.res || this.closed) throw new Error("transport is busy or closed");
    this.res = res;
    this.answers.clear();
    const accept = req.headers.accept;
    if (!accept?.includes("application/json") || !accept.includes("text/event-stream")) {
      this.fail(
        406,
        -32000,
        "Not Acceptable: Client must accept both application/json and text/event-stream",
      );
      return;
    }
    if (!isJsonContentType(req.headers["content-type"] ?? null)) {
      this.fail(415, -32000, "Unsupported Media Type: Content-Type must be application/json");
      return;
    }
    const batch = Array.isArray(body);
    if (batch && body.length > MAX_BATCH_SIZE) {
      this.fail(400, -32600, `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages`);
      return;
    }
    // Before anything else walks the body: every later walk is then bounded too.
    if (tooDeep(body, MAX_BODY_DEPTH)) {
      this.fail(400, -32600, TOO_DEEP);
      return;
    }
    let messages: JSONRPCMessage[];
    try {
      messages = batch ? body.map(parseMessage) : [parseMessage(body)];
    } catch {
      this.fail(400, -32700, "Parse error: Invalid JSON-RPC message");
      return;
    }
    // The method test first, so only an "initialize" pays for the full check (a failed zod parse
    // builds its issue list).
    let initialize = false;
    let cancels = false;
    for (const m of messages) {
      if (!("method" in m)) continue;
      if (m.method === "initialize" && isInitializeRequest(m)) initialize = true;
      else if (m.method === "notifications/cancelled" && !("id" in m)) cancels = true;
    }
    if (initialize) {
      if (messages.length > 1) {
        this.fail(400, -32600, "Invalid Request: Only one initialization request is allowed");
        return;
      }
    } else {
      const version = req.headers["mcp-protocol-version"];
      if (typeof version === "string" && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
        this.fail(
          400,
          -32000,
          `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")})`,
        );
        return;
      }
    }

    // Answers are matched to requests by id, and so is the Protocol's own bookkeeping (abort
    // controllers): a batch that repeats an id cannot be answered safely, so nothing of it runs.
    // Map keys compare as JSON-RPC ids do: 1 and "1" differ, 1 and 1.0 are the same number.
    const answers = this.answers;
    for (const m of messages) {
      // Parsed above (strict schemas): a request is the one kind of message with a method and an id.
      if (!("method" in m && "id" in m)) continue;
      if (answers.has(m.id)) {
        answers.clear();
        this.fail(400, -32600, "Invalid Request: a request id is repeated in the batch");
        return;
      }
      answers.set(m.id, undefined);
    }
    const requests = answers.size;
    let pending = requests;
    if (cancels) {
      // The SDK cancels a request named by a `notifications/cancelled` of the same POST (its
      // handler runs on, its answer is never sent): such a request is not waited for. Matched as
      // the SDK matches it (schema, then a truthy requestId), wherever it sits in the batch.
      for (const m of messages) {
        if (!("method" in m) || m.method !== "notifications/cancelled" || "id" in m) continue;
        const parsed = CancelledNotificationSchema.safeParse(m);
        const id = parsed.success ? parsed.data.params.requestId : undefined;
        if (id && answers.get(id) === undefined && answers.has(id)) {
          answers.set(id, CANCELLED);
          pending--;
        }
      }
    }
    this.pending = pending;
    if (pending === 0) {
      // Only notifications or responses (or only cancelled requests): accepted, nothing to answer.
      res.writeHead(202).end();
    }

    const extra: MessageExtraInfo = { authInfo, requestInfo: { headers: req.headers } };
    // Counted before dispatch: the SDK answers some requests (unknown methods) synchronously.
    this.started += requests;
    // Cleared only if every message was dispatched: a throw leaves the server unfit for reuse.
    this.spoiled = true;
    for (const m of messages) {
      // A client's response can answer nothing here: this transport never delivers a server
      // request. Not dispatched, so the Protocol does not stringify it into an error message.
      if (!("method" in m)) continue;
      this.onmessage?.(m, extra);
    }
    this.spoiled = initialize;
  }

  /**
   * Ends the current POST (call it once its response is closed) and tells whether the server may
   * serve another: only if every request it was ever handed has been answered (so no handler is
   * still running whose late answer could reach someone else's POST), and it holds no state of
   * this POST's client (an initialize).
   */
  end(): boolean {
    const had = this.res !== undefined;
    this.res = undefined;
    this.answers.clear();
    return had && !this.spoiled && !this.closed && this.started === this.settled;
  }

  async send(message: JSONRPCMessage): Promise<void> {
    // In JSON-response mode there is no stream for notifications or server requests: as in the
    // SDK, only responses to this POST's requests are delivered.
    // (Messages come from the SDK's Protocol, well formed: a response has an id and no method.)
    if ("method" in message || !("id" in message)) return;
    this.settled++;
    const id = message.id;
    const slot = id === undefined ? undefined : this.answers.get(id);
    const res = this.res;
    if (res === undefined || id === undefined || !this.answers.has(id) || slot !== undefined) {
      // Not a request of the POST being answered (or answered twice): never deliver it.
      if (slot === CANCELLED) return;
      throw new Error(`No connection established for request ID: ${String(id)}`);
    }
    this.answers.set(id, message);
    if (--this.pending > 0) return;
    if (res.headersSent || res.destroyed) return;
    let text: string;
    if (this.answers.size === 1) {
      text = JSON.stringify(message);
    } else {
      const responses: JSONRPCMessage[] = [];
      for (const answer of this.answers.values()) {
        if (answer !== undefined && answer !== CANCELLED) responses.push(answer);
      }
      text = JSON.stringify(responses.length === 1 ? responses[0] : responses);
    }
    endWithJson(res, 200, text);
  }

  private fail(status: number, code: number, message: string): void {
    this.onerror?.(new Error(message));
    const text = JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null });
    if (this.res) endWithJson(this.res, status, text);
  }
}

const parseMessage = (m: unknown): JSONRPCMessage => JSONRPCMessageSchema.parse(m);
