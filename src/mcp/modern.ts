import type { IncomingMessage, ServerResponse } from "node:http";
import {
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  type JSONRPCMessage as WireMessage,
} from "@modelcontextprotocol/sdk/types.js";
import {
  type AuthInfo,
  type CacheHint,
  CLIENT_CAPABILITIES_META_KEY,
  classifyInboundRequest,
  createMcpHandler,
  type JSONRPCMessage,
  Server as ModernServer,
  type RequestId,
  type ServerContext,
  type Transport,
  ProtocolError as WireError,
} from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { z } from "zod";
import { STDIO_CALLER } from "../http/caller.js";
import { opsLog } from "../logging/ops.js";
import type { TraceFields } from "../logging/trace-context.js";
import { type StateSigner, stateSigner } from "../policy/request-state.js";
import { CAPABILITIES, callTool, INSTRUCTIONS, SERVER_INFO, TOOL_LIST } from "../server.js";
import type { Rounds, ServerDeps } from "../tools/define.js";
import { getPrompt, PROMPT_LIST } from "./prompts.js";
import { forTheWire, invalidParams, ProtocolError } from "./protocol-error.js";
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

/** For dependencies built without a signer: asking must never be skipped for want of one. */
let processSigner: StateSigner | undefined;
const signerOf = (deps: ServerDeps): StateSigner => {
  if (deps.signer) return deps.signer;
  processSigner ??= stateSigner(undefined);
  return processSigner;
};

function roundsOf(deps: ServerDeps, ctx: ServerContext): Rounds | undefined {
  if (deps.confirmWrites === false || !canAskForm(ctx)) return undefined;
  const state = ctx.mcpReq.requestState();
  return {
    signer: signerOf(deps),
    state: typeof state === "string" ? state : undefined,
    responses: ctx.mcpReq.inputResponses,
  };
}

/**
 * A modern server for one request (HTTP) or one connection (stdio). Cheap: the listings, schemas
 * and dependencies are built once per process; this only registers handlers.
 */
export function createModernServer(deps: ServerDeps, who: ModernCaller): ModernServer {
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

/** The request headers the SDK's modern path reads; nothing else is copied per request. */
const FORWARDED_HEADERS = [
  "content-type",
  "accept",
  "mcp-protocol-version",
  "mcp-method",
  "mcp-name",
] as const;

/**
 * The SDK's stateless handler for 2026-07-28 requests (2025 ones never reach it), mounted on
 * Node's request and response. It hands the SDK the body Express already parsed (the SDK then
 * never reads the Request's body), copies only the headers it reads (and any `Mcp-Param-*`), and
 * rewrites error messages as every other answer of the server is (`forTheWire`).
 */
export function modernHttpHandler(deps: ServerDeps) {
  const handler = createMcpHandler(
    ({ authInfo }) =>
      createModernServer(deps, {
        caller: authInfo?.clientId ?? "unknown",
        traceFields: (authInfo?.extra?.traceFields as TraceFields | undefined) ?? {},
      }),
    { legacy: "reject" },
  );
  return async (
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    authInfo: AuthInfo,
  ): Promise<void> => {
    const abort = new AbortController();
    res.once("close", () => abort.abort());
    const headers = new Headers();
    for (const name of FORWARDED_HEADERS) {
      const value = req.headers[name];
      if (typeof value === "string") headers.set(name, value);
    }
    for (const name in req.headers) {
      const value = req.headers[name];
      if (name.startsWith("mcp-param-") && typeof value === "string") headers.set(name, value);
    }
    const request = new Request(`http://localhost${req.url ?? "/mcp"}`, {
      method: "POST",
      headers,
      signal: abort.signal,
    });
    const response = await handler.fetch(request, { authInfo, parsedBody: body });
    const type = response.headers.get("content-type") ?? "";
    if (!type.startsWith("application/json")) {
      // An event stream (or nothing): passed on as it comes.
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) {
        for await (const chunk of response.body) {
          if (abort.signal.aborted) break;
          res.write(chunk);
        }
      }
      res.end();
      return;
    }
    let text = await response.text();
    if (text.includes(": [")) {
      try {
        text = JSON.stringify(forTheWire(JSON.parse(text) as WireMessage));
      } catch {
        // Not one JSON-RPC message: as it is.
      }
    }
    res
      .writeHead(response.status, {
        "content-type": type,
        "content-length": Buffer.byteLength(text),
      })
      .end(text);
  };
}

export const STDIO_MODERN_CALLER: ModernCaller = { caller: STDIO_CALLER, traceFields: {} };

/** Where the stdio leg writes its answers: the connection's own transport. */
interface Wire {
  send(message: JSONRPCMessage): Promise<void>;
}

/**
 * The transport `serveStdio` owns for the modern leg of a stdio connection: it receives only the
 * lines the router hands it and writes through the connection's transport (which keeps the line
 * limit, the answered-before-exit count and the broken-stdout handling for both eras).
 */
class ModernStdioChannel implements Transport {
  onmessage?: Transport["onmessage"];
  onclose?: () => void;
  onerror?: (error: Error) => void;
  constructor(
    private readonly wire: Wire,
    private readonly answered: (id: RequestId) => void,
  ) {}
  async start(): Promise<void> {}
  async send(message: JSONRPCMessage): Promise<void> {
    if (!("method" in message) && "id" in message && message.id !== undefined) {
      this.answered(message.id);
    }
    // The connection's transport: its sends already pass forTheWire (WireServer), as the 2025
    // server's do.
    await this.wire.send(message as never);
  }
  async close(): Promise<void> {
    this.onclose?.();
  }
  deliver(message: JSONRPCMessage): void {
    this.onmessage?.(message);
  }
}

/**
 * The modern leg of a stdio connection. The era is read from every line, never assumed from
 * earlier ones: `divert` takes a line that is a 2026-07-28 request (or the cancellation of one)
 * and serves it through the SDK v2's `serveStdio`; every other line stays with the 2025 server.
 */
export function modernStdio(deps: ServerDeps, wire: Wire) {
  const open = new Set<RequestId>();
  const channel = new ModernStdioChannel(wire, (id) => open.delete(id));
  const handle = serveStdio(() => createModernServer(deps, STDIO_MODERN_CALLER), {
    transport: channel,
    legacy: "reject",
    onerror: (error) => opsLog.warn({ err: error }, "MCP 2026-07-28 stdio request failed"),
  });
  return {
    divert(message: JSONRPCMessage): boolean {
      if (!("method" in message)) return false;
      if (!("id" in message)) {
        const cancelled = (message.params as { requestId?: RequestId } | undefined)?.requestId;
        if (message.method !== "notifications/cancelled" || cancelled === undefined) return false;
        if (!open.has(cancelled)) return false;
      } else if (isModern(message)) {
        open.add(message.id);
      } else {
        return false;
      }
      channel.deliver(message);
      return true;
    },
    close: () => handle.close(),
  };
}
