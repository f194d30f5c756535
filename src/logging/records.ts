import type { TraceFields } from "./trace-context.js";

/**
 * What every line about a call says of the call itself (the trace's, the audit line's, the
 * intent's): built from the record of the call by `callFieldsOf` (call-record.ts) alone, so a
 * field added here reaches every line, and the compiler names each place that must write it.
 */
export interface CallFields {
  request_id: string;
  /** Who the call acted for: a principal id (`user:…`, `svc:…`, `client:…`, `os:…`, `local:…`). */
  by: string;
  /** The OAuth client the caller's token names, when it names one. */
  client?: string;
}

/** One line of log/trace.jsonl: every tool call, read or write, success or failure. */
export interface TraceRecord extends CallFields {
  ts: string;
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

export type AuditOutcome =
  | "CREATED"
  | "REPLAYED"
  | "REJECTED"
  | "UNCERTAIN"
  | "PREVIEW"
  /** The truth of an earlier UNCERTAIN (same `req`), found by the reconciler: see `resolution`. */
  | "RESOLVED";

/** What a RESOLVED line found: StoreLink holds an order for the key, or the key is fenced. */
export type Resolution = "CREATED" | "NOT_CREATED";

/** The audited facts of an order: as sent, or as read from arguments that may be invalid. */
export interface OrderFields {
  store_id: string | null;
  sku: string | null;
  quantity: number | null;
  reason: string | null;
}

/** An order as handed to StoreLink: every create carries an idempotency key. */
export interface SentOrder extends OrderFields {
  idempotency_key: string;
}

/** One line of log/audit.log: every write attempt, always with its reason. */
export interface AuditRecord extends OrderFields, CallFields {
  ts: string;
  outcome: AuditOutcome;
  order_id: string | null;
  /** The key the create was sent with: on every CREATED, REPLAYED, UNCERTAIN and RESOLVED line. */
  idempotency_key?: string;
  /** A RESOLVED line's finding (`outcome=` on the line). */
  resolution?: Resolution;
  /** Why it was rejected or uncertain. */
  detail?: string;
  /**
   * Who confirmed a CREATED order: `buyer` (the client's dialog was accepted) or `agent` (the
   * client could not ask the buyer; the agent was told to confirm first).
   */
  confirmed?: Confirmer;
}

export type Confirmer = "buyer" | "agent";

/**
 * A write being handed to StoreLink, as the intent journal keeps it: the order, the call's own
 * fields, and when it was sent. Recovery turns it back into the call's UNCERTAIN audit line.
 */
export interface IntentRecord extends OrderFields, CallFields {
  ts: string;
  /** The create's key (absent only in a journal of an earlier release). */
  idempotency_key?: string;
}

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
  audit(record: AuditRecord, context?: TraceFields): Promise<boolean | undefined>;
  /**
   * A write is being handed to StoreLink (synchronously durable, before it is sent): its audit
   * line, keyed by the same request id, is its outcome. See logging/intents.ts.
   */
  intend(intent: IntentRecord, context?: TraceFields): void;
}

/** Records nothing; for tests that do not look at logs. */
export const nullRecorder: CallRecorder = {
  trace() {},
  async audit() {
    return undefined;
  },
  intend() {},
};
