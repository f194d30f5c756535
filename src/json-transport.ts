import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import { MAX_BATCH_SIZE } from "@modelcontextprotocol/sdk/server/requestBody.js";
import { isJsonContentType } from "@modelcontextprotocol/sdk/shared/mediaType.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  isInitializeRequest,
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  type MessageExtraInfo,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";

/**
 * The stateless, JSON-response POST path of the SDK's streamable HTTP transport
 * (`StreamableHTTPServerTransport` with `sessionIdGenerator: undefined, enableJsonResponse: true`),
 * written straight onto Node's request and response. The SDK version converts every request to a
 * WHATWG Request and every answer back from a WHATWG Response (via @hono/node-server and undici),
 * which cost more CPU than the protocol work itself. The checks, status codes and bodies below
 * mirror the SDK's `handlePostRequest` (1.32) one for one; test/http-transport.test.ts holds them.
 * One instance serves exactly one HTTP request.
 */
export class NodeJsonTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;

  /** Request ids of this POST, in order, with their responses once sent. */
  private readonly answers = new Map<RequestId, JSONRPCMessage | undefined>();
  private closed = false;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly authInfo?: AuthInfo,
  ) {}

  async start(): Promise<void> {}

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }

  /** Validates and dispatches the already-parsed body of a POST. */
  handle(body: unknown): void {
    const accept = this.req.headers.accept;
    if (!accept?.includes("application/json") || !accept.includes("text/event-stream")) {
      this.fail(
        406,
        -32000,
        "Not Acceptable: Client must accept both application/json and text/event-stream",
      );
      return;
    }
    if (!isJsonContentType(this.req.headers["content-type"] ?? null)) {
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
    if (messages.some(isInitializeRequest)) {
      if (messages.length > 1) {
        this.fail(400, -32600, "Invalid Request: Only one initialization request is allowed");
        return;
      }
    } else {
      const version = this.req.headers["mcp-protocol-version"];
      if (typeof version === "string" && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
        this.fail(
          400,
          -32000,
          `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")})`,
        );
        return;
      }
    }

    const extra: MessageExtraInfo = {
      authInfo: this.authInfo,
      requestInfo: { headers: this.req.headers },
    };
    for (const message of messages) {
      if (isJSONRPCRequest(message)) this.answers.set(message.id, undefined);
    }
    if (this.answers.size === 0) {
      // Only notifications or responses: accepted, nothing to answer.
      this.res.writeHead(202).end();
    }
    for (const message of messages) this.onmessage?.(message, extra);
  }

  async send(message: JSONRPCMessage): Promise<void> {
    // In JSON-response mode there is no stream for notifications or server requests: as in the
    // SDK, only responses to this POST's requests are delivered.
    if (!isJSONRPCResultResponse(message) && !isJSONRPCErrorResponse(message)) return;
    const id = message.id;
    if (id === undefined || !this.answers.has(id)) {
      throw new Error(`No connection established for request ID: ${String(id)}`);
    }
    this.answers.set(id, message);
    const responses = [...this.answers.values()];
    if (responses.some((r) => r === undefined)) return;
    if (this.res.headersSent || this.res.destroyed) return;
    const text = JSON.stringify(responses.length === 1 ? responses[0] : responses);
    this.res
      .writeHead(200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
      })
      .end(text);
  }

  private fail(status: number, code: number, message: string): void {
    this.onerror?.(new Error(message));
    const text = JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null });
    this.res
      .writeHead(status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
      })
      .end(text);
  }
}
