import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import { MAX_BATCH_SIZE } from "@modelcontextprotocol/sdk/server/requestBody.js";
import { isJsonContentType } from "@modelcontextprotocol/sdk/shared/mediaType.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  isInitializeRequest,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  type MessageExtraInfo,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";

/** The one POST a transport is answering. */
interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** Request ids of this POST, in order, with their responses once sent. */
  answers: Map<RequestId, JSONRPCMessage | undefined>;
}

/**
 * The stateless, JSON-response POST path of the SDK's streamable HTTP transport
 * (`StreamableHTTPServerTransport` with `sessionIdGenerator: undefined, enableJsonResponse: true`),
 * written straight onto Node's request and response. The SDK version converts every request to a
 * WHATWG Request and every answer back from a WHATWG Response (via @hono/node-server and undici),
 * which cost more CPU than the protocol work itself. The checks, status codes and bodies below
 * mirror the SDK's `handlePostRequest` (1.32) one for one; test/http/transport.test.ts holds them.
 *
 * A transport stays connected to its server and answers one POST at a time (`handle`, then `end`),
 * so the server is not reconnected per request: connecting and closing a `Protocol` cost about a
 * tenth of the request path (closing builds an `McpError` with a stack every time).
 */
export class NodeJsonTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;

  private exchange: Exchange | undefined;
  private closed = false;

  async start(): Promise<void> {}

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.exchange = undefined;
    this.onclose?.();
  }

  /** Validates and dispatches the already-parsed body of one POST. */
  handle(req: IncomingMessage, res: ServerResponse, body: unknown, authInfo?: AuthInfo): void {
    if (this.exchange || this.closed) throw new Error("transport is busy or closed");
    const exchange: Exchange = { req, res, answers: new Map() };
    this.exchange = exchange;
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
    if (Array.isArray(body) && body.length > MAX_BATCH_SIZE) {
      this.fail(400, -32600, `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages`);
      return;
    }
    let messages: JSONRPCMessage[];
    try {
      messages = (Array.isArray(body) ? body : [body]).map((m) => JSONRPCMessageSchema.parse(m));
    } catch {
      this.fail(400, -32700, "Parse error: Invalid JSON-RPC message");
      return;
    }
    // The method test first: a failed zod parse builds its issues, which cost more than the rest
    // of this function; only an "initialize" can pass the full check.
    if (
      messages.some((m) => "method" in m && m.method === "initialize" && isInitializeRequest(m))
    ) {
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

    const extra: MessageExtraInfo = { authInfo, requestInfo: { headers: req.headers } };
    for (const message of messages) {
      // Parsed above: a request is the one kind of message with both a method and an id.
      if ("method" in message && "id" in message) exchange.answers.set(message.id, undefined);
    }
    if (exchange.answers.size === 0) {
      // Only notifications or responses: accepted, nothing to answer.
      res.writeHead(202).end();
    }
    for (const message of messages) this.onmessage?.(message, extra);
  }

  /**
   * Ends the current POST (call it once its response is closed) and tells whether every request
   * in it was answered. Only then may the server serve another POST: otherwise a handler may
   * still be running, and its late answer must never reach someone else's request.
   */
  end(): boolean {
    const answers = this.exchange?.answers;
    this.exchange = undefined;
    if (!answers) return false;
    for (const answer of answers.values()) if (answer === undefined) return false;
    return true;
  }

  async send(message: JSONRPCMessage): Promise<void> {
    // In JSON-response mode there is no stream for notifications or server requests: as in the
    // SDK, only responses to this POST's requests are delivered.
    // (Messages come from the SDK's Protocol, well formed: a response has an id and no method.)
    if ("method" in message || !("id" in message)) return;
    const id = message.id;
    const exchange = this.exchange;
    if (id === undefined || !exchange?.answers.has(id)) {
      throw new Error(`No connection established for request ID: ${String(id)}`);
    }
    exchange.answers.set(id, message);
    const responses = [...exchange.answers.values()];
    if (responses.some((r) => r === undefined)) return;
    const { res } = exchange;
    if (res.headersSent || res.destroyed) return;
    const text = JSON.stringify(responses.length === 1 ? message : responses);
    res
      .writeHead(200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
      })
      .end(text);
  }

  private fail(status: number, code: number, message: string): void {
    this.onerror?.(new Error(message));
    const text = JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null });
    this.exchange?.res
      .writeHead(status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
      })
      .end(text);
  }
}
