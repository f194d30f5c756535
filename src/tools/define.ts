import type { InputRequiredResult, ToolAnnotations } from "@modelcontextprotocol/server";
import { z } from "zod";
import { errorResultSchema, rateLimited, ToolError } from "../errors.js";
import type { StoreKeyProvider } from "../keys/provider.js";
import type { CallRecord } from "../logging/call-record.js";
import type { CallRecorder, SentOrder } from "../logging/records.js";
import { rawIdText } from "../policy/audit.js";
import type { OrderCap } from "../policy/order-cap.js";
import type { PolicySource } from "../policy/policy-source.js";
import type { CallLimiter } from "../policy/rate-limit.js";
import type { StateSigner } from "../policy/request-state.js";
import type { StoreLinkClient } from "../storelink/client.js";
import type { Telemetry } from "../telemetry/api.js";
import type { ToolName } from "./names.js";

/**
 * What every tool handler may use: built once per process by the composition root (deps.ts, from
 * the entries or the test harness) and shared by all calls. Every part is present: a switched-off
 * limit is one that never limits (NO_LIMIT, a cap of 0), never a missing one.
 */
export interface Deps {
  storelink: StoreLinkClient;
  keys: StoreKeyProvider;
  recorder: CallRecorder;
  /** The loop guard on writes (per process, or the fleet's). */
  orderCap: OrderCap;
  /** Ask the buyer to confirm each order when the client can elicit. */
  confirmWrites: boolean;
  /** The per-caller tool-call backstop (checked before each tool runs). */
  limiter: CallLimiter;
  /** Signs the 2026-07-28 confirmation state (one per process, or shared by a fleet's key). */
  signer: StateSigner;
  /** Refuse a write the buyer cannot be asked to confirm, instead of writing `confirmed=agent`. */
  requireConfirmation: boolean;
  /** Which stores each principal may read and order for (NO_POLICY: every store, for all). */
  policy: PolicySource;
  /** Spans and metrics (telemetry/api.ts); NO_TELEMETRY unless OTEL_EXPORTER_OTLP_ENDPOINT is set. */
  telemetry: Telemetry;
}

/**
 * A request from a client that declared form elicitation: the buyer is asked by answering
 * `input_required` (round 1) and the client (or, for a 2025 client, the SDK's legacy shim)
 * retries with the answer (round 2).
 */
export interface Rounds {
  signer: StateSigner;
  /** The echoed `requestState`: undefined on round 1. Attacker-controlled until verified. */
  state: string | undefined;
  /** The client's answers to round 1's requests. Attacker-controlled. */
  responses: Record<string, unknown> | undefined;
}

/**
 * Thrown by a handler that needs the buyer's answer first: the call answers `input_required`
 * with `result`, nothing is written and nothing is audited (the outcome comes with round 2).
 * `unanswered` audits the write as not confirmed, where the server knows that no round 2 will
 * come (a 2025 client's question failed), and returns the error to answer with.
 */
export class AskBuyer {
  constructor(
    readonly result: InputRequiredResult,
    readonly unanswered: () => Promise<ToolError>,
  ) {}
}

/** Per-call context: the shared dependencies plus the record of this call. */
export interface ToolContext extends Deps {
  call: CallRecord;
  /** Present only when the client declared form elicitation and confirmation is on. */
  rounds: Rounds | undefined;
  /**
   * Called with the order as it is handed to StoreLink: an abandoned write is uncertain from then
   * on, and its intent is journalled.
   */
  onSend(order: SentOrder): void;
  /**
   * Runs one call to the limits store (a slot take or peek, the rate limit) as a CLIENT span of
   * the call when telemetry is on and the store is shared; else just runs it.
   */
  limits<T>(operation: string, call: () => Promise<T>): Promise<T>;
}

export interface ToolSpec<I extends z.ZodObject, O extends z.ZodObject> {
  /** One of TOOL_NAMES (names.ts), which declares the tools and their order once. */
  name: ToolName;
  title: string;
  description: string;
  input: I;
  output: O;
  annotations: Required<
    Pick<ToolAnnotations, "readOnlyHint" | "destructiveHint" | "idempotentHint" | "openWorldHint">
  >;
  /** The single store a call concerns, for the trace's `store_id` column (null if several). */
  storeIdOf(args: z.infer<I>): string | null;
  handler(args: z.infer<I>, ctx: ToolContext): Promise<z.infer<O>>;
  /** Called when arguments fail validation, before the error is returned (the write audits it). */
  onRefused?(error: ToolError, ctx: ToolContext): Promise<void>;
}

/** The JSON a client sees in tools/list. */
export interface ToolListing {
  name: string;
  title: string;
  description: string;
  inputSchema: { type: "object"; [key: string]: unknown };
  outputSchema: { type: "object"; [key: string]: unknown };
  annotations: ToolAnnotations;
}

/** A tool with its types erased, ready for the dispatcher in server.ts. */
export interface Tool {
  name: string;
  listing: ToolListing;
  /** Parses `raw` and returns the validated structured result; throws on any failure. */
  call(
    raw: unknown,
    ctx: ToolContext,
  ): Promise<{ structured: Record<string, unknown>; storeId: string | null }>;
  /** Best-effort store id from unvalidated arguments, for the trace of a rejected call. */
  storeIdOfRaw(raw: unknown): string | null;
}

function jsonSchemaOf(schema: z.ZodType, io: "input" | "output"): ToolListing["inputSchema"] {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any" });
  return { ...rest, type: "object" };
}

/** Formats zod issues as one line the model can act on: `quantity: must be at most 10000`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.length > 0 ? issue.path.join(".") : "arguments";
      return `${path}: ${issue.message}`;
    })
    .join("; ");
}

export function invalidArguments(toolName: string, detail: string): ToolError {
  return new ToolError(
    "invalid_arguments",
    `Invalid arguments for ${toolName}: ${detail}.`,
    "Fix the arguments named above and call again; nothing was done.",
    false,
  );
}

/**
 * A refusal before the handler runs, through the tool's one hook (the write audits each). Not a
 * closure in `call`: that would allocate its context on every call, refused or not.
 */
async function refused<I extends z.ZodObject, O extends z.ZodObject>(
  spec: ToolSpec<I, O>,
  error: ToolError,
  ctx: ToolContext,
): Promise<ToolError> {
  await spec.onRefused?.(error, ctx);
  return error;
}

/**
 * Declares a tool once: schemas, annotations, description and handler. The JSON listing is built
 * here, at module load, so nothing about a tool is rebuilt per request.
 */
export function defineTool<I extends z.ZodObject, O extends z.ZodObject>(
  spec: ToolSpec<I, O>,
): Tool {
  const listing: ToolListing = {
    name: spec.name,
    title: spec.title,
    description: spec.description,
    inputSchema: jsonSchemaOf(spec.input, "input"),
    outputSchema: jsonSchemaOf(z.union([spec.output, errorResultSchema]), "output"),
    annotations: { title: spec.title, ...spec.annotations },
  };
  return {
    name: spec.name,
    listing,
    storeIdOfRaw(raw) {
      if (raw === null || typeof raw !== "object") return null;
      return rawIdText((raw as Record<string, unknown>).store_id);
    },
    async call(raw, ctx) {
      const limited = await ctx.limits("rate limit", () => ctx.limiter.take(ctx.call.caller));
      if (limited) throw await refused(spec, rateLimited(limited.retryAfterSeconds), ctx);
      const parsed = spec.input.safeParse(raw ?? {});
      if (!parsed.success) {
        throw await refused(spec, invalidArguments(spec.name, describeIssues(parsed.error)), ctx);
      }
      const result = await spec.handler(parsed.data, ctx);
      // A result that breaks its own schema is a bug here, not something to hand the model.
      const checked = spec.output.safeParse(result);
      if (!checked.success) {
        throw new Error(
          `${spec.name} produced output outside its schema: ${describeIssues(checked.error)}`,
        );
      }
      return {
        structured: checked.data as Record<string, unknown>,
        storeId: spec.storeIdOf(parsed.data),
      };
    },
  };
}
