import type { IncomingHttpHeaders } from "node:http";
import { classifyInboundRequest } from "@modelcontextprotocol/server";
import type { Era } from "../mcp/server.js";

/**
 * Bodies that are not JSON-RPC at all claim no era: the 2025 side answers them (a parse error,
 * as it always has). Everything else the classifier rejects carries a 2026-07-28 claim (a bad
 * `_meta`, a header that names 2026-07-28, a batch holding a modern request) and the SDK's
 * modern path answers it.
 */
const CLAIMLESS = new Set(["invalid-json-rpc-body", "empty-batch", "batch-with-invalid-element"]);

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name];
  return typeof value === "string" ? value : undefined;
};

/**
 * The era of a POST, read from its body and MCP headers by the SDK v2's own classifier, so the
 * routing never disagrees with the SDK.
 */
export function eraOf(body: unknown, headers: IncomingHttpHeaders): Era {
  const version = header(headers, "mcp-protocol-version");
  const method = header(headers, "mcp-method");
  const name = header(headers, "mcp-name");
  const route = classifyInboundRequest({
    httpMethod: "POST",
    body,
    ...(version === undefined ? {} : { protocolVersionHeader: version }),
    ...(method === undefined ? {} : { mcpMethodHeader: method }),
    ...(name === undefined ? {} : { mcpNameHeader: name }),
  });
  if (route.kind === "reject") return CLAIMLESS.has(route.cell) ? "legacy" : "modern";
  return route.kind === "modern" ? "modern" : "legacy";
}
