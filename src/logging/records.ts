import type { TraceFields } from "./trace-context.js";

/** One line of log/trace.jsonl: every tool call, read or write, success or failure. */
export interface TraceRecord {
  ts: string;
  request_id: string;
  tool: string;
  /** Always a string or null; multi-store calls keep `store_ids` inside `args`. */
  store_id: string | null;
  /** input_required: the buyer is being asked (round 1 of a 2026-07-28 write); nothing written. */
  status: "ok" | "error" | "input_required";
  /** `<type>: <message>` of a failed call, else null. */
  error: string | null;
  duration_ms: number;
  args: unknown;
}

export type AuditOutcome = "CREATED" | "REPLAYED" | "REJECTED" | "UNCERTAIN" | "PREVIEW";

/** One line of log/audit.log: every write attempt, always with its reason. */
export interface AuditRecord {
  ts: string;
  outcome: AuditOutcome;
  order_id: string | null;
  store_id: string | null;
  sku: string | null;
  quantity: number | null;
  request_id: string;
  reason: string | null;
  /** Why it was rejected or uncertain. */
  detail?: string;
  /**
   * Who confirmed a CREATED order: `buyer` (the client's dialog was accepted) or `agent` (the
   * client could not ask the buyer; the agent was told to confirm first).
   */
  confirmed?: Confirmer;
}

export type Confirmer = "buyer" | "agent";

/** The facts of an order an intent line keeps (as the audit line would show them). */
export type IntentFields = Pick<AuditRecord, "store_id" | "sku" | "quantity" | "reason">;

/**
 * Where the server sends trace and audit records. Implementations never throw: a broken log
 * directory must not fail a replenishment order.
 */
export interface CallRecorder {
  /** `context`: the request's Cloud Trace fields, for the structured line (HTTP mode). */
  trace(record: TraceRecord, context?: TraceFields): void;
  /**
   * Resolves once the record is durable (for CREATED: on disk) or has been given up on; a
   * recorder that writes files says whether the line is whole on disk (see Recorder).
   */
  audit(record: AuditRecord, context?: TraceFields): Promise<boolean | void>;
  /**
   * A write is being handed to StoreLink (synchronously durable, before it is sent): its audit
   * line, keyed by the same request id, is its outcome. See logging/intents.ts.
   */
  intend?(requestId: string, fields: IntentFields, context?: TraceFields): void;
}

/** Records nothing; for tests that do not look at logs. */
export const nullRecorder: CallRecorder = {
  trace() {},
  async audit() {},
};
