import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

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

function unprefixed(message: JSONRPCMessage): JSONRPCMessage {
  if (!("error" in message)) return message;
  const { code, message: text } = message.error;
  const clean = withoutMcpPrefix(code, text);
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
    transport.send = (message, options) => send(unprefixed(message), options);
    await super.connect(transport);
  }
}
