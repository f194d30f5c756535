import { randomUUID } from "node:crypto";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  type CallToolRequest,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import type { InputRequiredResult } from "@modelcontextprotocol/server";
import { z } from "zod";
import { defaultDeps } from "./deps.js";
import { toToolError } from "./errors.js";
import { InflightCall, inflightCalls } from "./lifecycle/inflight.js";
import { opsLog } from "./logging/ops.js";
import { type TraceFields, traceFieldsOf } from "./logging/trace-context.js";
import { elicitorFor } from "./mcp/elicit.js";
import { registerPrompts } from "./mcp/prompts.js";
import { onRequest, ProtocolError, WireServer } from "./mcp/protocol-error.js";
import { registerResources } from "./mcp/resources.js";
import {
  AskBuyer,
  type Elicit,
  type Rounds,
  type ServerDeps,
  type ToolContext,
} from "./tools/define.js";
import { TOOLS } from "./tools/index.js";
import { CALL_SEQUENCE, TOOL_COUNT } from "./tools/names.js";

/** The one client of a stdio process (a 2025 session over stdio has no other identity). */
export const STDIO_CALLER = "stdio";

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

// Built once per process: the tool listing and the validator the SDK would otherwise build per server.
export const TOOL_LIST = { tools: TOOLS.map((tool) => tool.listing) };
const TOOLS_BY_NAME = new Map(TOOLS.map((tool) => [tool.name, tool]));
// Only elicitation responses are checked with it (a write on a client that can elicit), so Ajv
// is built on first use, never at startup.
let ajv: AjvJsonSchemaValidator | undefined;
const SHARED_VALIDATOR: jsonSchemaValidator = {
  getValidator(schema) {
    ajv ??= new AjvJsonSchemaValidator();
    return ajv.getValidator(schema);
  },
};

/**
 * tools/call with `params` of any shape. With the SDK's own schema, malformed params (no name,
 * array arguments) fail a parse that runs before the SDK's InvalidParams check and come back as
 * -32603 Internal error; with this one the SDK's check runs and answers -32602. The handler
 * below is reached only once that check has passed.
 */
const CallToolAnyParamsSchema = z.object({
  method: z.literal("tools/call"),
  params: z.unknown().optional(),
});

export const newRequestId = (): string => `req_${randomUUID().replaceAll("-", "")}`;

/**
 * Runs one tool call. This is the one place where failures become `isError` results and where
 * every call, success or failure, is traced. The per-caller rate limit is applied by each tool
 * before anything else (tools/define.ts).
 */
export interface CallOptions {
  signal: AbortSignal;
  elicit?: Elicit;
  /** A 2026-07-28 request whose client can be asked through input_required. */
  rounds?: Rounds;
  /** Keys the rate limit: the identity the HTTP app derived (http/caller.ts), else the stdio client. */
  caller?: string;
  /** The HTTP request's Cloud Trace fields, carried onto its log lines. */
  traceFields?: TraceFields;
}

export async function callTool(
  deps: ServerDeps,
  name: string,
  args: unknown,
  { signal, elicit, rounds, caller = STDIO_CALLER, traceFields = {} }: CallOptions,
): Promise<CallToolResult | InputRequiredResult> {
  const tool = TOOLS_BY_NAME.get(name);
  if (!tool) {
    // Every call is traced, one the server cannot run too (its name and arguments are capped).
    deps.recorder.trace(
      {
        ts: new Date().toISOString(),
        request_id: newRequestId(),
        tool: name,
        store_id: null,
        status: "error",
        error: `unknown_tool: no tool named ${name}`,
        duration_ms: 0,
        args: args ?? {},
      },
      traceFields,
    );
    throw new ProtocolError(
      ErrorCode.InvalidParams,
      `Unknown tool: ${name}. Available: ${[...TOOLS_BY_NAME.keys()].join(", ")}`,
    );
  }
  const requestId = newRequestId();
  const started = performance.now();
  const ts = new Date().toISOString();
  // Registered until the call returns, so a stop waits for it (and audits an abandoned write);
  // it is the call's recorder, to know whether the call already wrote its audit line.
  const inflight = new InflightCall(
    requestId,
    name,
    tool.listing.annotations.readOnlyHint === false,
    args,
    deps.recorder,
    traceFields,
    ts,
    started,
  );
  inflightCalls.begin(inflight);
  let result: CallToolResult | InputRequiredResult;
  let storeId: string | null;
  let error: string | null = null;
  let asking = false;
  try {
    // Spelled out rather than spread (one fixed shape per call); the type makes every field of
    // ToolContext required here, so a new one cannot be forgotten.
    const ctx: { [K in keyof Required<ToolContext>]: ToolContext[K] } = {
      storelink: deps.storelink,
      keys: deps.keys,
      recorder: inflight,
      orderCap: deps.orderCap,
      confirmWrites: deps.confirmWrites,
      limiter: deps.limiter,
      signer: deps.signer,
      requireConfirmation: deps.requireConfirmation,
      requestId,
      signal,
      elicit,
      rounds,
      onSend: () => inflight.markSent(),
      caller,
      traceFields,
    };
    const outcome = await tool.call(args, ctx);
    storeId = outcome.storeId;
    result = {
      content: [{ type: "text", text: JSON.stringify(outcome.structured) }],
      structuredContent: outcome.structured,
    };
  } catch (thrown) {
    if (thrown instanceof AskBuyer) {
      storeId = tool.storeIdOfRaw(args);
      asking = true;
      result = thrown.result;
    } else {
      ({ result, storeId, error } = failedCall(thrown, requestId, name, tool, args, traceFields));
    }
  }
  inflightCalls.end(inflight);
  deps.recorder.trace(
    {
      ts,
      request_id: requestId,
      tool: name,
      store_id: storeId,
      status: asking ? "input_required" : error === null ? "ok" : "error",
      error,
      duration_ms: Math.round((performance.now() - started) * 100) / 100,
      args: args ?? {},
    },
    traceFields,
  );
  return result;
}

/** A failed call as the model reads it: a safe message, a next step, never a stack. */
function failedCall(
  thrown: unknown,
  requestId: string,
  name: string,
  tool: { storeIdOfRaw(raw: unknown): string | null },
  args: unknown,
  traceFields: TraceFields,
): { result: CallToolResult; storeId: string | null; error: string } {
  const toolError = toToolError(thrown, requestId);
  if (toolError.type === "internal") {
    opsLog.error(
      // The cause survives a tool's own conversion (the write converts to audit it).
      { err: toolError.cause ?? thrown, request_id: requestId, tool: name, ...traceFields },
      "tool call failed unexpectedly",
    );
  }
  return {
    storeId: tool.storeIdOfRaw(args),
    error: `${toolError.type}: ${toolError.message}`,
    result: {
      content: [{ type: "text", text: `${toolError.message} Next step: ${toolError.nextStep}` }],
      structuredContent: { ...toolError.extra, error: toolError.toBody() },
      isError: true,
    },
  };
}

/**
 * Builds an MCP server over the given StoreLink, key provider and recorder. Cheap by design: the
 * tool listing, schemas and validator are module-level, so the HTTP pool can add one whenever
 * concurrency peaks.
 */
export function createServer(overrides: Partial<ServerDeps> = {}): Server {
  const deps = defaultDeps(overrides);
  const server = new WireServer(SERVER_INFO, {
    capabilities: CAPABILITIES,
    instructions: INSTRUCTIONS,
    jsonSchemaValidator: SHARED_VALIDATOR,
  });
  onRequest(server, ListToolsRequestSchema, () => TOOL_LIST);
  server.setRequestHandler(CallToolAnyParamsSchema, (request, extra) => {
    const params = request.params as CallToolRequest["params"];
    // No rounds on a 2025 session, so never input_required.
    return callTool(deps, params.name, params.arguments, {
      signal: extra.signal,
      elicit: elicitorFor(server, deps.confirmWrites !== false, extra),
      caller: extra.authInfo?.clientId ?? STDIO_CALLER,
      // Only the HTTP transport passes request headers; stdio has no trace context.
      traceFields: extra.requestInfo ? traceFieldsOf(extra.requestInfo.headers) : {},
    });
  });
  registerPrompts(server);
  registerResources(server, deps);
  return server;
}
