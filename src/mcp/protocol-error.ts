import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ErrorCode,
  type JSONRPCMessage,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

/**
 * A JSON-RPC error for the wire, with its message exactly as written. The SDK's `McpError` bakes
 * "MCP error <code>: " into its message; the server sends that message as is and every client
 * (the SDK's, Inspector's, Python's) adds the prefix again, so users read it twice. The SDK's
 * request handling only reads `code`, `message` and `data` from what a handler throws.
 */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** Removes the "MCP error <code>: " prefixes an McpError put in front of a wire message. */
function withoutMcpPrefix(code: number, message: string): string {
  const prefix = `MCP error ${code}: `;
  let text = message;
  while (text.startsWith(prefix)) text = text.slice(prefix.length);
  return text;
}

/**
 * An error message that embeds a zod issue list (the SDKs' "Invalid tools/call request: [ {...} ]")
 * as one short line naming each bad field; any other message as it is.
 */
export function withoutIssueDump(code: number, message: string): string {
  const at = message.indexOf(": [");
  if (code !== ErrorCode.InvalidParams || at === -1) return message;
  try {
    const issues = JSON.parse(message.slice(at + 2)) as unknown;
    if (!Array.isArray(issues)) return message;
    return `${message.slice(0, at)}: ${shortDetail(issues as z.core.$ZodIssue[])}`;
  } catch {
    return message;
  }
}

function shortDetail(
  issues: readonly { path?: readonly PropertyKey[]; message?: string }[],
): string {
  const detail = issues
    .map((issue) => {
      const path = (issue.path ?? []).filter((p) => p !== "params").map(String);
      return `${path.join(".") || "params"}: ${issue.message ?? "invalid"}`;
    })
    .join("; ");
  return detail.length > MAX_PARAMS_DETAIL ? `${detail.slice(0, MAX_PARAMS_DETAIL)}…` : detail;
}

/**
 * An error answer as it leaves, from either SDK: without the doubled "MCP error <code>:" prefix
 * and with an embedded issue list as one short line.
 */
export function forTheWire<M extends JSONRPCMessage>(message: M): M {
  if (!("error" in message)) return message;
  const { code, message: text } = message.error;
  const clean = withoutIssueDump(code, withoutMcpPrefix(code, text));
  return clean === text ? message : { ...message, error: { ...message.error, message: clean } };
}

/**
 * The SDK's Server, except that error answers leave without the McpError prefix. Our own
 * handlers throw ProtocolError; this catches the McpErrors the SDK throws itself (for example
 * "Invalid tools/call request" for malformed tools/call params), so no wire message is doubled
 * whatever threw it.
 */
export class WireServer extends Server {
  override async connect(transport: Transport): Promise<void> {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => send(forTheWire(message), options);
    await super.connect(transport);
  }
}

/** The longest description of bad params a protocol error carries. */
const MAX_PARAMS_DETAIL = 300;

/** -32602 for malformed params: which fields, briefly; never the parser's whole issue dump. */
export function invalidParams(method: string, error: z.ZodError): ProtocolError {
  return new ProtocolError(
    ErrorCode.InvalidParams,
    `Invalid params for ${method}: ${shortDetail(error.issues)}`,
  );
}

interface RequestSchema<T> {
  shape: { method: { value: string } };
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: z.ZodError };
}

/**
 * Registers `handler` for the method of the SDK's `schema`, answering malformed params with
 * -32602 and a short message naming what is wrong. The SDK parses with the schema itself and
 * answers a failure -32603 with the parser's whole issue list as the message.
 */
export function onRequest<T>(
  server: Server,
  schema: RequestSchema<T>,
  handler: (request: T, extra: RequestHandlerExtra<ServerRequest, ServerNotification>) => unknown,
): void {
  const method = schema.shape.method.value;
  const loose = z.object({ method: z.literal(method), params: z.unknown().optional() });
  server.setRequestHandler(loose, (request, extra) => {
    const parsed = schema.safeParse(request);
    if (!parsed.success) throw invalidParams(method, parsed.error);
    return handler(parsed.data, extra) as never;
  });
}
