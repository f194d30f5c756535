/** Raw JSON-RPC bodies for HTTP and stdio tests that speak the wire protocol directly. */

export const PROTOCOL_VERSION = "2025-06-18";

export const initialize = (id = 1) => ({
  jsonrpc: "2.0",
  id,
  method: "initialize",
  params: {
    protocolVersion: PROTOCOL_VERSION,
    capabilities: {},
    clientInfo: { name: "test", version: "1" },
  },
});

export const toolCall = (id: number, name: string, args: Record<string, unknown>) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args },
});

/** The headers a streamable HTTP client must send. */
export const MCP_HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
} as const;

export const MODERN_VERSION = "2026-07-28";

/** The `_meta` envelope a 2026-07-28 client puts on every request. */
export const modernMeta = (capabilities: Record<string, unknown> = {}, client = "test") => ({
  "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
  "io.modelcontextprotocol/clientInfo": { name: client, version: "1" },
  "io.modelcontextprotocol/clientCapabilities": capabilities,
});

/** The headers of a 2026-07-28 POST: the era, the method, and the `Mcp-Name` a call carries. */
export const modernHeaders = (method: string, name?: string): Record<string, string> => ({
  ...MCP_HEADERS,
  "mcp-protocol-version": MODERN_VERSION,
  "mcp-method": method,
  ...(name === undefined ? {} : { "mcp-name": name }),
});
