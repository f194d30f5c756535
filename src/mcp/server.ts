import {
  type CacheHint,
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  type ClientCapabilities,
  type RequestId,
  Server,
  type ServerContext,
  type Transport,
} from "@modelcontextprotocol/server";
import { z } from "zod";
import { type CallOrigin, unverifiedOrigin } from "../logging/call-record.js";
import { type TraceParent, traceParentOf } from "../telemetry/api.js";
import type { Deps, Rounds } from "../tools/define.js";
import { CALL_SEQUENCE, TOOL_COUNT } from "../tools/names.js";
import { callTool, TOOL_LIST } from "./call-tool.js";
import { LIST_PARAMS } from "./list-params.js";
import { registerPrompts } from "./prompts.js";
import { forTheWire, onRequest } from "./protocol-error.js";
import { registerResources } from "./resources.js";

export const SERVER_NAME = "korral-storelink";
export const SERVER_VERSION = "0.1.0";
export const SERVER_INFO = { name: SERVER_NAME, version: SERVER_VERSION };

/** What the server offers, in both protocol eras: nothing in it ever changes at run time. */
export const CAPABILITIES = {
  tools: { listChanged: false },
  prompts: { listChanged: false },
  resources: { listChanged: false },
};

export const INSTRUCTIONS =
  `Korral StoreLink gives a category buyer's replenishment agent ${TOOL_COUNT}: ${CALL_SEQUENCE}. ` +
  "Resolve the product, read stock across stores and quote the raw numbers with gap (gap 0 is a " +
  "knife edge, never fine), and only with the buyer's explicit approval of store, SKU and " +
  "quantity submit one order, then read its status back. Orders load real trucks and cannot be " +
  "cancelled here.";

// The listings never change within a process; the store directory is live but rarely changes.
// Sent to 2026-07-28 clients only (the 2025 revisions have no cache hints).
const STATIC: CacheHint = { ttlMs: 3_600_000, cacheScope: "public" };
const CACHE_HINTS = {
  "server/discover": STATIC,
  "tools/list": STATIC,
  "prompts/list": STATIC,
  "resources/list": STATIC,
  "resources/templates/list": STATIC,
  "resources/read": { ttlMs: 300_000, cacheScope: "public" },
} as const;

/** A buyer reading an order before approving it gets longer than the protocol's 60 s default. */
const CONFIRMATION_TIMEOUT_MS = 5 * 60_000;

/** The era a server instance serves, as the SDK's entries (createMcpHandler, serveStdio) say. */
export type Era = "legacy" | "modern";

/** The protocol revision of the 2026-07-28 era, as a span names it. */
export const MODERN_REVISION = "2026-07-28";

/** Who a server instance serves, as the entry that built it established. */
export interface Caller extends CallOrigin {
  era: Era;
  /**
   * Whether a 2025 client that declared form elicitation can be asked (the SDK's legacy shim sends
   * it `elicitation/create`): over stdio, yes. Stateless 2025 HTTP answers one POST with one
   * JSON body and can carry no question, so it never asks (`confirmed=agent`, or refused under
   * KORRAL_REQUIRE_CONFIRMATION).
   */
  asks2025: boolean;
  /** The transport, as the request's span says it: `pipe` (stdio) or `tcp` (HTTP). */
  transport: "pipe" | "tcp";
  /** The HTTP request's trace context (`traceparent` header), the parent when `_meta` has none. */
  httpTrace?: TraceParent | undefined;
}

/** The caller of a server built without one: one 2025 client on a transport of its own (stdio). */
export const DIRECT_CALLER: Caller = {
  ...unverifiedOrigin("local:direct", "stdio"),
  era: "legacy",
  asks2025: true,
  transport: "pipe",
};

/** Whether client capabilities declare form elicitation (`elicitation: {}` declares form mode). */
function declaresForm(capabilities: ClientCapabilities | undefined): boolean {
  const elicitation = capabilities?.elicitation as { form?: unknown; url?: unknown } | undefined;
  if (elicitation === null || typeof elicitation !== "object") return false;
  return elicitation.form !== undefined || elicitation.url === undefined;
}

/**
 * A tools/call request's rounds (the buyer asked through input_required), or undefined when the
 * buyer cannot be asked: confirmation is off, or this client declared no form elicitation (a
 * 2026-07-28 client in its request's envelope, a 2025 one in its `initialize`).
 */
function roundsOf(deps: Deps, who: Caller, server: Server, ctx: ServerContext): Rounds | undefined {
  if (!deps.confirmWrites) return undefined;
  if (who.era === "modern") {
    const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
    if (!declaresForm(envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities)) return;
  } else if (!who.asks2025 || !declaresForm(server.getClientCapabilities())) {
    return undefined;
  }
  const state = ctx.mcpReq.requestState();
  return {
    signer: deps.signer,
    state: typeof state === "string" ? state : undefined,
    responses: ctx.mcpReq.inputResponses,
  };
}

/**
 * tools/call params. The arguments are checked for being an object and passed on as they came
 * (a parsed record would be rebuilt by assignment, losing an own `__proto__` key the trace keeps).
 */
const CALL_PARAMS = z.looseObject({
  name: z.string(),
  arguments: z
    .custom<Record<string, unknown>>(
      (value) => value !== null && typeof value === "object" && !Array.isArray(value),
      "expected an object",
    )
    .optional(),
});

/**
 * The SDK v2's Server with two rules of ours on what it sends: error messages leave without a
 * parser's issue dump (`forTheWire`), and a 2025 write whose buyer was asked by the SDK's legacy
 * shim but never answered (the client went away, the question timed out, the call was
 * cancelled) still leaves its one audit line, REJECTED, before its answer.
 */
class KorralServer extends Server {
  /** 2025 tools/call requests asked of the buyer, whose second round has not begun. */
  readonly unanswered = new Map<RequestId, () => Promise<CallToolResult>>();

  override async connect(transport: Transport): Promise<void> {
    const send = transport.send.bind(transport);
    transport.send = async (message, options) => {
      const id = "method" in message || !("id" in message) ? undefined : message.id;
      const settle = id === undefined ? undefined : this.unanswered.get(id);
      if (settle && id !== undefined) {
        this.unanswered.delete(id);
        return send({ jsonrpc: "2.0", id, result: await settle() }, options);
      }
      return send(forTheWire(message), options);
    };
    await super.connect(transport);
  }
}

/**
 * The one MCP server: tools, prompt and resource registered once, for both protocol eras and
 * both transports. The SDK's entries build one per HTTP request (`http/mcp-handler.ts`) and one
 * per stdio connection (`stdio.ts`). Cheap: the listings, schemas and dependencies are built
 * once per process; this only registers handlers.
 */
export function createServer(deps: Deps, who: Caller = DIRECT_CALLER): Server {
  const server = new KorralServer(SERVER_INFO, {
    capabilities: CAPABILITIES,
    instructions: INSTRUCTIONS,
    cacheHints: CACHE_HINTS,
    inputRequired: { roundTimeoutMs: CONFIRMATION_TIMEOUT_MS },
  });
  onRequest(server, "tools/list", LIST_PARAMS, () => TOOL_LIST);
  onRequest(server, "tools/call", CALL_PARAMS, (params, ctx) => {
    const id = ctx.mcpReq.id;
    // A second round of the legacy shim: its outcome is the call's own, audited by the tool.
    server.unanswered.delete(id);
    return callTool(deps, params.name, params.arguments, who, {
      signal: ctx.mcpReq.signal,
      trace: {
        parent: traceParentOf(params._meta) ?? who.httpTrace,
        transport: who.transport,
        protocolVersion: who.era === "modern" ? MODERN_REVISION : undefined,
        jsonrpcId: id,
      },
      rounds: roundsOf(deps, who, server, ctx),
      // A 2025 buyer asked by the shim: if no second round comes, the answer (or the abort of a
      // cancelled call) settles the write as not confirmed.
      ...(who.era === "legacy" && {
        onUnanswered: (settle: () => Promise<CallToolResult>) => {
          let settled: Promise<CallToolResult> | undefined;
          const once = () => {
            settled ??= settle();
            return settled;
          };
          server.unanswered.set(id, once);
          ctx.mcpReq.signal.addEventListener("abort", () => {
            if (server.unanswered.get(id) !== once) return;
            server.unanswered.delete(id);
            void once();
          });
        },
      }),
    });
  });
  registerPrompts(server);
  registerResources(server, deps);
  return server;
}
