import {
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import {
  type CacheHint,
  CLIENT_CAPABILITIES_META_KEY,
  classifyInboundRequest,
  Server as ModernServer,
  type ServerContext,
  ProtocolError as WireError,
} from "@modelcontextprotocol/server";
import { z } from "zod";
import type { TraceFields } from "../logging/trace-context.js";
import { CAPABILITIES, callTool, INSTRUCTIONS, SERVER_INFO, TOOL_LIST } from "../server.js";
import type { ComposedDeps, Rounds } from "../tools/define.js";
import { getPrompt, PROMPT_LIST } from "./prompts.js";
import { invalidParams, ProtocolError } from "./protocol-error.js";
import { RESOURCE_LIST, RESOURCE_TEMPLATE_LIST, readResource } from "./resources.js";

/**
 * The MCP 2026-07-28 ("modern") side of the server, served by the official SDK v2: stateless,
 * `_meta` on every request, `server/discover`, and the buyer asked through `input_required`
 * results. The tools, prompt and resource are the same objects the 2025 side serves.
 */

// The listings never change within a process; the store directory is live but rarely changes.
const STATIC: CacheHint = { ttlMs: 3_600_000, cacheScope: "public" };
const CACHE_HINTS = {
  "server/discover": STATIC,
  "tools/list": STATIC,
  "prompts/list": STATIC,
  "resources/list": STATIC,
  "resources/templates/list": STATIC,
  "resources/read": { ttlMs: 300_000, cacheScope: "public" },
} as const;

/** Who a modern request comes from, as the entry that received it established. */
export interface ModernCaller {
  /** Binds confirmation state and keys the rate limit: HTTP identity, or the stdio connection. */
  caller: string;
  traceFields: TraceFields;
}

/** Our ProtocolError (code, message, data) as the SDK v2 puts it on the wire. */
async function wire<T>(run: () => T | Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ProtocolError) throw new WireError(error.code, error.message, error.data);
    throw error;
  }
}

/**
 * Registers a handler whose params are checked here, so malformed params answer -32602 with a
 * short message (the SDK's own parse answers -32603 with its whole issue list). The SDK v1
 * schemas describe the same params as the 2026-07-28 ones for these methods.
 */
function onModernRequest<T extends { params?: unknown }>(
  server: ModernServer,
  method: string,
  schema: {
    safeParse(value: unknown): { success: true; data: T } | { success: false; error: z.ZodError };
  },
  handler: (params: NonNullable<T["params"]>) => unknown,
): void {
  server.setRequestHandler(method, { params: LOOSE_PARAMS }, (params) =>
    wire(() => {
      const parsed = schema.safeParse({ method, params: params ?? {} });
      if (!parsed.success) throw invalidParams(method, parsed.error);
      return handler((parsed.data.params ?? {}) as NonNullable<T["params"]>) as never;
    }),
  );
}

const LOOSE_PARAMS = z.looseObject({}).optional();

/** Whether the request's client declared form elicitation in its `_meta` envelope. */
function canAskForm(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const caps = envelope?.[CLIENT_CAPABILITIES_META_KEY] as
    | { elicitation?: { form?: unknown; url?: unknown } }
    | undefined;
  const elicitation = caps?.elicitation;
  if (elicitation === null || typeof elicitation !== "object") return false;
  // `elicitation: {}` declares form mode (the spec's backwards-compatible reading).
  return elicitation.form !== undefined || elicitation.url === undefined;
}

function roundsOf(deps: ComposedDeps, ctx: ServerContext): Rounds | undefined {
  if (deps.confirmWrites === false || !canAskForm(ctx)) return undefined;
  const state = ctx.mcpReq.requestState();
  return {
    signer: deps.signer,
    state: typeof state === "string" ? state : undefined,
    responses: ctx.mcpReq.inputResponses,
  };
}

/**
 * A modern server for one request (HTTP) or one connection (stdio). Cheap: the listings, schemas
 * and dependencies are built once per process; this only registers handlers.
 */
export function createModernServer(deps: ComposedDeps, who: ModernCaller): ModernServer {
  const server = new ModernServer(SERVER_INFO, {
    capabilities: CAPABILITIES,
    instructions: INSTRUCTIONS,
    cacheHints: CACHE_HINTS,
    // A 2025 client never reaches this server: the 2025 side has its own dialog.
    inputRequired: { legacyShim: false },
  });
  onModernRequest(server, "tools/list", ListToolsRequestSchema, () => TOOL_LIST);
  server.setRequestHandler("tools/call", (request, ctx) =>
    wire(() =>
      callTool(deps, request.params.name, request.params.arguments, {
        signal: ctx.mcpReq.signal,
        rounds: roundsOf(deps, ctx),
        caller: who.caller,
        traceFields: who.traceFields,
      }),
    ),
  );
  onModernRequest(server, "prompts/list", ListPromptsRequestSchema, () => PROMPT_LIST);
  onModernRequest(server, "prompts/get", GetPromptRequestSchema, (params) => getPrompt(params));
  onModernRequest(server, "resources/list", ListResourcesRequestSchema, () => RESOURCE_LIST);
  onModernRequest(
    server,
    "resources/templates/list",
    ListResourceTemplatesRequestSchema,
    () => RESOURCE_TEMPLATE_LIST,
  );
  onModernRequest(server, "resources/read", ReadResourceRequestSchema, (params) =>
    readResource(deps, params.uri),
  );
  return server;
}

/**
 * Bodies that are not JSON-RPC at all claim no era: the 2025 side keeps answering them as it
 * always has. Everything else the classifier rejects carries a 2026-07-28 claim (a bad `_meta`, a
 * header that names 2026-07-28, a batch holding a modern request) and the SDK answers it.
 */
const CLAIMLESS = new Set(["invalid-json-rpc-body", "empty-batch", "batch-with-invalid-element"]);

/**
 * Whether a message (a stdio line, or a POST body with its headers) belongs to the 2026-07-28
 * side: the SDK's own classifier, so the routing never disagrees with the SDK.
 */
export function isModern(
  body: unknown,
  headers: { version?: string; method?: string; name?: string } = {},
): boolean {
  const route = classifyInboundRequest({
    httpMethod: "POST",
    body,
    ...(headers.version === undefined ? {} : { protocolVersionHeader: headers.version }),
    ...(headers.method === undefined ? {} : { mcpMethodHeader: headers.method }),
    ...(headers.name === undefined ? {} : { mcpNameHeader: headers.name }),
  });
  if (route.kind === "reject") return !CLAIMLESS.has(route.cell);
  return route.kind === "modern";
}
