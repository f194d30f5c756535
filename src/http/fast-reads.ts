import type { IncomingHttpHeaders } from "node:http";
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  isJsonContentType,
  isSpecType,
  PROTOCOL_VERSION_META_KEY,
  SERVER_INFO_META_KEY,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/server";
import { type Era, MODERN_REVISION, SERVER_INFO } from "../mcp/server.js";
import { TOOLS } from "../tools/index.js";
import { eraOf } from "./era.js";

/**
 * The hot request of both eras, answered without the SDK's per-request machinery (what that
 * buys: docs/performance.md): a `tools/call` of a read-only tool, valid in every respect the SDK
 * checks, in its era. A 2025 one carries no envelope and no 2026-07-28 header (so the SDK's
 * classifier could only say 2025); a 2026-07-28 one is confirmed by that classifier. This only
 * recognises that request; anything else (the write, whose confirmation needs the SDK's
 * input_required handling, any other method, any header, envelope or params that is not exactly
 * the plain form, a batch) goes to the SDK, which owns every error answer and every other shape.
 *
 * The SDK's path is this one's reference: test/http/fast-reads.test.ts sends generated requests
 * of both eras through both and requires the same answers and trace lines.
 */

const REVISION = MODERN_REVISION;
const READ_TOOLS = new Set(
  TOOLS.filter((tool) => tool.listing.annotations.readOnlyHint === true).map((tool) => tool.name),
);
const ENVELOPE_KEYS = new Set([
  PROTOCOL_VERSION_META_KEY,
  CLIENT_INFO_META_KEY,
  CLIENT_CAPABILITIES_META_KEY,
]);

/**
 * The trace keys the MCP semantic conventions put in `params._meta` (W3C trace context and
 * baggage): a read that carries them, as a traced agent sends every call, stays on this path.
 */
const TRACE_KEYS = new Set(["traceparent", "tracestate", "baggage"]);

/** A read the fast path answers: its era, JSON-RPC id, tool name, arguments and `_meta`. */
export interface FastRead {
  era: Era;
  id: string | number;
  name: string;
  args: Record<string, unknown> | undefined;
  /** `params._meta` as sent (its trace keys parent the call's span). */
  meta: Record<string, unknown> | undefined;
}

/** Whether `key` of `meta` is a trace key with a string value (as the SDK passes it through). */
const isTraceKey = (meta: Record<string, unknown>, key: string): boolean =>
  TRACE_KEYS.has(key) && typeof meta[key] === "string";

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/** The 2025 revisions the SDK serves: a 2025 POST may name one in its header, or none. */
const LEGACY_REVISIONS = new Set(SUPPORTED_PROTOCOL_VERSIONS.filter((v) => v < REVISION));
const REQUEST_KEYS = new Set(["jsonrpc", "id", "method", "params"]);

/** The read in `body` if the fast path may answer it, else undefined. */
export function fastReadOf(body: unknown, headers: IncomingHttpHeaders): FastRead | undefined {
  if (!isPlainObject(body) || body.jsonrpc !== "2.0" || body.method !== "tools/call") return;
  for (const key in body) if (!REQUEST_KEYS.has(key)) return;
  const { id, params } = body;
  if (typeof id !== "string" && !(typeof id === "number" && Number.isSafeInteger(id))) return;
  if (!isPlainObject(params)) return;
  const { name, arguments: args, _meta: meta } = params;
  if (typeof name !== "string" || !READ_TOOLS.has(name)) return;
  if (args !== undefined && !isPlainObject(args)) return;
  if (!isJsonContentType(headers["content-type"] ?? null)) return;
  const accept = headers.accept;
  if (!accept?.includes("application/json")) return;
  for (const header in headers) if (header.startsWith("mcp-param-")) return;
  if (meta === undefined || (isPlainObject(meta) && !(PROTOCOL_VERSION_META_KEY in meta))) {
    // The 2025 transport requires both types in Accept (406 otherwise).
    if (!accept.includes("text/event-stream")) return;
    // No envelope, no MCP headers but a 2025 revision: the plain 2025 stateless call, with at
    // most the trace keys in `_meta`.
    for (const key in params) if (key !== "name" && key !== "arguments" && key !== "_meta") return;
    if (meta !== undefined) for (const key in meta) if (!isTraceKey(meta, key)) return;
    const version = headers["mcp-protocol-version"];
    if (version !== undefined && (typeof version !== "string" || !LEGACY_REVISIONS.has(version))) {
      return;
    }
    if (headers["mcp-method"] !== undefined || headers["mcp-name"] !== undefined) return;
    return { era: "legacy", id, name, args, meta };
  }
  for (const key in params) if (key !== "name" && key !== "arguments" && key !== "_meta") return;
  if (!isPlainObject(meta) || meta[PROTOCOL_VERSION_META_KEY] !== REVISION) return;
  for (const key in meta) if (!ENVELOPE_KEYS.has(key) && !isTraceKey(meta, key)) return;
  // The standard headers present and equal to the body.
  if (headers["mcp-protocol-version"] !== REVISION) return;
  if (headers["mcp-method"] !== "tools/call" || headers["mcp-name"] !== name) return;
  const info = meta[CLIENT_INFO_META_KEY];
  const capabilities = meta[CLIENT_CAPABILITIES_META_KEY];
  if (isPlainEnvelope(info, capabilities)) return { era: "modern", id, name, args, meta };
  // The envelope as the SDK's own spec types have it: capabilities required, clientInfo optional.
  if (info !== undefined && !isSpecType.Implementation(info)) return;
  if (!isSpecType.ClientCapabilities(capabilities)) return;
  if (eraOf(body, headers) !== "modern") return;
  return { era: "modern", id, name, args, meta };
}

/**
 * The envelope most agents send: a clientInfo of exactly a name and a version (or none), and no
 * optional capabilities. The SDK's spec types and classifier accept every such envelope on a
 * request that passed the checks above (held by test/http/fast-reads.test.ts over generated
 * ones), so a read carrying one skips them: they cost a 2026-07-28 read about 15 µs.
 */
function isPlainEnvelope(info: unknown, capabilities: unknown): boolean {
  if (!isPlainObject(capabilities)) return false;
  for (const _ in capabilities) return false;
  if (info === undefined) return true;
  if (!isPlainObject(info)) return false;
  let keys = 0;
  for (const key in info) {
    if (key !== "name" && key !== "version") return false;
    keys++;
  }
  return keys === 2 && typeof info.name === "string" && typeof info.version === "string";
}

/** The JSON-RPC answer to a fast read, shaped as the SDK shapes a result of `era`. */
export function fastReadAnswer(id: string | number, result: object, era: Era): string {
  if (era === "legacy") return JSON.stringify({ result, jsonrpc: "2.0", id });
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
