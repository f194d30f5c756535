import { randomUUID } from "node:crypto";
import {
  type CallToolResult,
  type InputRequiredResult,
  ProtocolError,
  ProtocolErrorCode,
} from "@modelcontextprotocol/server";
import { isToolError, toToolError } from "../errors.js";
import { InflightCall, inflightCalls } from "../lifecycle/inflight.js";
import { type CallOrigin, type CallRecord, callRecord, traceOf } from "../logging/call-record.js";
import { opsLog } from "../logging/ops.js";
import { traceFieldsOfSpan } from "../logging/trace-context.js";
import { NO_SPAN, type Span, type TraceParent } from "../telemetry/api.js";
import { ATTR, OPERATION_EXECUTE_TOOL } from "../telemetry/conventions.js";
import { AskBuyer, type Deps, type Rounds, type ToolContext } from "../tools/define.js";
import { TOOLS } from "../tools/index.js";
import { tracedStoreLink } from "./traced-storelink.js";

/** The tool listing, built once per process. */
export const TOOL_LIST = { tools: TOOLS.map((tool) => tool.listing) };
const TOOLS_BY_NAME = new Map(TOOLS.map((tool) => [tool.name, tool]));

export const newRequestId = (): string => `req_${randomUUID().replaceAll("-", "")}`;

/** How one call is made: its signal, and how its buyer can be asked. */
export interface CallOptions {
  /**
   * Aborted when the call's client is gone. A function makes it only when first asked for: an
   * AbortSignal costs microseconds, and a read never asks (only the write's order lookup does).
   */
  signal: AbortSignal | (() => AbortSignal);
  /** A request whose client can be asked through input_required (either era; see mcp/server.ts). */
  rounds?: Rounds;
  /**
   * Given a call that asked the buyer (input_required) a way to settle it should no second round
   * come: the write's own not-confirmed outcome, audited and traced, as a tool result.
   */
  onUnanswered?: (settle: () => Promise<CallToolResult>) => void;
  /** What the call's SERVER span says of its request (telemetry on only). */
  trace?: CallTrace;
}

/** The request around a tool call, as its span says it. */
export interface CallTrace {
  /** The client's trace context: `params._meta` first, else the HTTP headers. */
  parent?: TraceParent | undefined;
  transport: "tcp" | "pipe";
  protocolVersion?: string | undefined;
  jsonrpcId?: string | number | undefined;
}

/**
 * Runs one tool call. This is where a call enters: its record (call-record.ts) is built here,
 * once, and it is the one place where failures become `isError` results and where every call,
 * success or failure, is traced. The per-caller rate limit is applied by each tool before
 * anything else (tools/define.ts).
 */
export async function callTool(
  deps: Deps,
  name: string,
  args: unknown,
  origin: CallOrigin,
  { signal, rounds, onUnanswered, trace }: CallOptions,
): Promise<CallToolResult | InputRequiredResult> {
  const tool = TOOLS_BY_NAME.get(name);
  const span = deps.telemetry.enabled
    ? requestSpan(deps, name, trace, tool?.listing.annotations.readOnlyHint === false)
    : NO_SPAN;
  // With a span, the call's log lines name it: "show trace" from a line lands on this span.
  const spanFields = traceFieldsOfSpan(span);
  const traced = spanFields ? { ...origin, traceFields: spanFields } : origin;
  const call = callRecord(traced, newRequestId(), name, args, signal);
  span.set({ [ATTR.requestId]: call.requestId });
  if (!tool) {
    span.fail("unknown_tool");
    span.end();
    // Every call is traced, one the server cannot run too (its name and arguments are capped).
    deps.recorder.trace(
      traceOf(call, {
        store_id: null,
        status: "error",
        error: `unknown_tool: no tool named ${name}`,
      }),
      call.traceFields,
    );
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Unknown tool: ${name}. Available: ${[...TOOLS_BY_NAME.keys()].join(", ")}`,
    );
  }
  // Registered until the call returns, so a stop waits for it (and audits an abandoned write);
  // it is the call's recorder, to know whether the call already wrote its audit line.
  const inflight = new InflightCall(
    call,
    tool.listing.annotations.readOnlyHint === false,
    deps.recorder,
  );
  inflightCalls.begin(inflight);
  /** The call's trace line: one per call, and one more for an asked call settled unanswered. */
  const traceAs = (storeId: string | null, error: string | null, asking = false): void =>
    deps.recorder.trace(
      traceOf(call, {
        store_id: storeId,
        status: asking ? "input_required" : error === null ? "ok" : "error",
        error,
      }),
      call.traceFields,
    );
  let result: CallToolResult | InputRequiredResult;
  let storeId: string | null;
  let error: string | null = null;
  let asking = false;
  try {
    // Spelled out rather than spread (one fixed shape per call); the type makes every field of
    // ToolContext required here, so a new one cannot be forgotten.
    const ctx: { [K in keyof Required<ToolContext>]: ToolContext[K] } = {
      storelink: deps.telemetry.enabled
        ? tracedStoreLink(deps.storelink, deps.telemetry, span)
        : deps.storelink,
      keys: deps.keys,
      recorder: inflight,
      orderCap: deps.orderCap,
      confirmWrites: deps.confirmWrites,
      limiter: deps.limiter,
      signer: deps.signer,
      requireConfirmation: deps.requireConfirmation,
      policy: deps.policy,
      telemetry: deps.telemetry,
      call,
      rounds,
      onSend: (order) => inflight.markSent(order),
      limits:
        span !== NO_SPAN && deps.orderCap.shared
          ? (operation, run) => limitsSpan(deps, span, operation, run)
          : (_operation, run) => run(),
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
      onUnanswered?.(async () => {
        const settled = failedCall(await thrown.unanswered(), call, tool);
        traceAs(settled.storeId, settled.error);
        return settled.result;
      });
    } else {
      ({ result, storeId, error } = failedCall(thrown, call, tool));
    }
  }
  inflightCalls.end(inflight);
  traceAs(storeId, error, asking);
  if (span !== NO_SPAN) {
    const audited = inflight.auditLine;
    span.set({
      [ATTR.storeId]: storeId ?? undefined,
      [ATTR.auditOutcome]: audited?.outcome,
      [ATTR.idempotencyKey]: audited?.idempotency_key,
    });
    if (error !== null) span.fail(error.slice(0, error.indexOf(":")));
    span.end();
  }
  return result;
}

/** One call to the shared limits store as a CLIENT span of the tool call's span. */
async function limitsSpan<T>(
  deps: Deps,
  parent: Span,
  operation: string,
  run: () => Promise<T>,
): Promise<T> {
  const span = deps.telemetry.client(parent, {
    name: `limits ${operation}`,
    system: "limits",
    attributes: { [ATTR.dbSystem]: "redis", [ATTR.dbOperation]: operation },
  });
  try {
    return await run();
  } catch (error) {
    span.fail(isToolError(error) ? error.type : "internal");
    throw error;
  } finally {
    span.end();
  }
}

/** The SERVER span of a tools/call request: a write is always recorded. */
function requestSpan(deps: Deps, name: string, trace: CallTrace | undefined, write: boolean) {
  return deps.telemetry.request({
    method: "tools/call",
    target: name,
    parent: trace?.parent,
    write,
    attributes: {
      [ATTR.toolName]: name,
      [ATTR.operationName]: OPERATION_EXECUTE_TOOL,
      [ATTR.jsonrpcId]: trace?.jsonrpcId === undefined ? undefined : String(trace.jsonrpcId),
      [ATTR.protocolVersion]: trace?.protocolVersion,
      [ATTR.transport]: trace?.transport,
    },
  });
}

/** A failed call as the model reads it: a safe message, a next step, never a stack. */
function failedCall(
  thrown: unknown,
  call: CallRecord,
  tool: { storeIdOfRaw(raw: unknown): string | null },
): { result: CallToolResult; storeId: string | null; error: string } {
  const toolError = toToolError(thrown, call.requestId);
  if (toolError.type === "internal") {
    opsLog.error(
      // The cause survives a tool's own conversion (the write converts to audit it).
      {
        err: toolError.cause ?? thrown,
        request_id: call.requestId,
        tool: call.tool,
        ...call.traceFields,
      },
      "tool call failed unexpectedly",
    );
  }
  return {
    storeId: tool.storeIdOfRaw(call.args),
    error: `${toolError.type}: ${toolError.message}`,
    result: {
      content: [{ type: "text", text: `${toolError.message} Next step: ${toolError.nextStep}` }],
      structuredContent: { ...toolError.extra, error: toolError.toBody() },
      isError: true,
    },
  };
}
