import type { IncomingHttpHeaders } from "node:http";
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  isSpecType,
  PROTOCOL_VERSION_META_KEY,
  SERVER_INFO_META_KEY,
} from "@modelcontextprotocol/server";
import { SERVER_INFO } from "../server.js";
import { TOOLS } from "../tools/index.js";

/**
 * The hot 2026-07-28 request, answered without the SDK's per-request machinery (what that buys:
 * docs/performance.md): a `tools/call` of a read-only tool that the SDK's classifier has
 * already accepted as modern and that is valid in every other respect the SDK checks. This only
 * recognises that request; anything else (the write, whose confirmation needs the SDK's
 * input_required handling, any other method, any header, envelope or params that is not exactly
 * the plain form) goes to the SDK, which owns every error answer and every other shape.
 *
 * The SDK's path is this one's reference: test/modern/fast-reads.test.ts sends the same requests
 * through both and requires the same answers, so a difference is a failing test.
 */

const REVISION = "2026-07-28";
const READ_TOOLS = new Set(
  TOOLS.filter((tool) => tool.listing.annotations.readOnlyHint === true).map((tool) => tool.name),
);
const ENVELOPE_KEYS = new Set([
  PROTOCOL_VERSION_META_KEY,
  CLIENT_INFO_META_KEY,
  CLIENT_CAPABILITIES_META_KEY,
]);

/** A read the fast path answers: its JSON-RPC id, tool name and arguments. */
export interface FastRead {
  id: string | number;
  name: string;
  args: Record<string, unknown> | undefined;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * The read in `body` if the fast path may answer it, else undefined. Call it only for a body the
 * SDK's classifier routed to the modern path (the envelope is then well formed).
 */
export function fastReadOf(body: unknown, headers: IncomingHttpHeaders): FastRead | undefined {
  if (!isPlainObject(body) || body.jsonrpc !== "2.0" || body.method !== "tools/call") return;
  const { id, params } = body;
  if (typeof id !== "string" && !(typeof id === "number" && Number.isInteger(id))) return;
  if (!isPlainObject(params)) return;
  const { name, arguments: args, _meta: meta } = params;
  if (typeof name !== "string" || !READ_TOOLS.has(name)) return;
  if (args !== undefined && !isPlainObject(args)) return;
  for (const key in params) if (key !== "name" && key !== "arguments" && key !== "_meta") return;
  if (!isPlainObject(meta) || meta[PROTOCOL_VERSION_META_KEY] !== REVISION) return;
  for (const key in meta) if (!ENVELOPE_KEYS.has(key)) return;
  // The envelope as the SDK's own spec types have it: capabilities required, clientInfo optional.
  const info = meta[CLIENT_INFO_META_KEY];
  if (info !== undefined && !isSpecType.Implementation(info)) return;
  if (!isSpecType.ClientCapabilities(meta[CLIENT_CAPABILITIES_META_KEY])) return;
  // The standard headers present and equal to the body; no parameter headers to cross-check.
  if (headers["mcp-protocol-version"] !== REVISION) return;
  if (headers["mcp-method"] !== "tools/call" || headers["mcp-name"] !== name) return;
  if (!headers["content-type"]?.startsWith("application/json")) return;
  if (!headers.accept?.includes("application/json")) return;
  for (const header in headers) if (header.startsWith("mcp-param-")) return;
  return { id, name, args };
}

/** The JSON-RPC answer to a fast read, shaped as the SDK shapes a 2026-07-28 result. */
export function fastReadAnswer(id: string | number, result: object): string {
  return JSON.stringify({
    result: {
      ...result,
      resultType: "complete",
      _meta: { [SERVER_INFO_META_KEY]: SERVER_INFO },
    },
    jsonrpc: "2.0",
    id,
  });
}
