import type { ToolError } from "../errors.js";
import { type CallRecord, callFieldsOf } from "../logging/call-record.js";
import type {
  AuditOutcome,
  AuditRecord,
  CallFields,
  Confirmer,
  IntentRecord,
  OrderFields,
  Resolution,
  SentOrder,
} from "../logging/records.js";

/**
 * The one place an audit record is built and its outcome decided: one builder per kind of line
 * (submitted, previewed, refused, refused for want of a scope, failed, abandoned at shutdown,
 * left by a killed process), used by the write tool, http/auth/gate.ts, lifecycle/inflight.ts and
 * lifecycle/recovery.ts; none of them names an outcome. What the line looks like on disk is logging/format.ts; what it records is this module.
 */

/**
 * An id from arguments that failed validation, for the trace and audit of the refusal: text as
 * sent, or a whole number as its decimal text (the form the schemas accept), else null.
 */
export function rawIdText(value: unknown): string | null {
  if (typeof value === "string") return value;
  return Number.isSafeInteger(value) && (value as number) >= 0 ? String(value) : null;
}

/** Ids as text (rawIdText), a numeric quantity, a string reason; anything else is null. */
export function orderFieldsOf(raw: unknown): OrderFields {
  const get = (key: string): unknown =>
    raw !== null && typeof raw === "object" ? (raw as Record<string, unknown>)[key] : undefined;
  const quantity = get("quantity");
  const reason = get("reason");
  return {
    store_id: rawIdText(get("store_id")),
    sku: rawIdText(get("sku")),
    quantity: typeof quantity === "number" ? quantity : null,
    reason: typeof reason === "string" ? reason : null,
  };
}

/**
 * How far a write got: `checking` until the order is handed to StoreLink's createOrder (store,
 * SKU, cap, confirmation, key lookup), `sent` from then on.
 */
export type Stage = "checking" | "sent";

/**
 * Refusals before submission are REJECTED; a write that may have landed is UNCERTAIN. An
 * unexpected error (`internal`) is UNCERTAIN only once the write was handed to createOrder:
 * before that nothing can have been written.
 */
function failedOutcome(error: ToolError, stage: Stage): AuditOutcome {
  if (error.type === "outcome_unknown") return "UNCERTAIN";
  if (error.type === "internal" && stage === "sent") return "UNCERTAIN";
  return "REJECTED";
}

/** Whether a failed write may have created an order (it then counts against the cap). */
export const mayHaveLanded = (error: ToolError, stage: Stage): boolean =>
  failedOutcome(error, stage) === "UNCERTAIN";

/** Why a write still running at StoreLink at the end of the shutdown grace is UNCERTAIN. */
export const ABANDONED_DETAIL =
  "the process stopped before StoreLink answered; the order may or may not have been created: " +
  "check get_replenishment_status before resubmitting";

/** Why a write stopped before it was sent (checks, the buyer's confirmation) is REJECTED. */
export const ABANDONED_UNSENT_DETAIL =
  "the process stopped before the order was sent to StoreLink; nothing was submitted";

/** Why a write whose process was killed while it was at StoreLink is UNCERTAIN. */
export const KILLED_DETAIL =
  "the server was stopped (killed) while the order was at StoreLink; it may or may not have been " +
  "created: check get_replenishment_status before resubmitting";

interface AuditExtras {
  orderId?: string | null;
  detail?: string;
  confirmed?: Confirmer;
  resolution?: Resolution;
}

/**
 * One audit record, stamped now: the order (with its idempotency key once it has one), the
 * call's own fields, the outcome.
 */
function auditRecord(
  outcome: AuditOutcome,
  { idempotency_key, ...fields }: OrderFields & CallFields & { idempotency_key?: string },
  { orderId = null, detail, confirmed, resolution }: AuditExtras = {},
): AuditRecord {
  return {
    ts: new Date().toISOString(),
    outcome,
    order_id: orderId,
    ...fields,
    ...(idempotency_key === undefined ? {} : { idempotency_key }),
    ...(detail === undefined ? {} : { detail }),
    ...(confirmed === undefined ? {} : { confirmed }),
    ...(resolution === undefined ? {} : { resolution }),
  };
}

/** The order of `call` and the call's own fields, as every line of it says them. */
const of = <F extends OrderFields>(call: CallRecord, fields: F): F & CallFields => ({
  ...fields,
  ...callFieldsOf(call),
});

/** Why a write whose answer was lost is CREATED all the same: StoreLink said so by its key. */
export const CONFIRMED_BY_KEY_DETAIL =
  "the answer to the create was lost; StoreLink confirmed the order by its idempotency key";

/** Why a retry is REPLAYED without a create: StoreLink already held its key's order. */
export const ANSWERED_BY_KEY_DETAIL =
  "a retry with this idempotency key; StoreLink already held its order (asked by key; no create was sent)";

/**
 * A write StoreLink answered: a new order, or the original one for a retry (never a second
 * CREATED). `detail` when the answer came from asking StoreLink by the key, not from the create.
 */
export const submittedWrite = (
  call: CallRecord,
  sent: SentOrder,
  orderId: string,
  replayed: boolean,
  confirmed: Confirmer,
  detail?: string,
) =>
  auditRecord(replayed ? "REPLAYED" : "CREATED", of(call, sent), {
    orderId,
    confirmed,
    ...(detail === undefined ? {} : { detail }),
  });

/** A dry run that passed every check: nothing was submitted. */
export const previewedWrite = (call: CallRecord, fields: OrderFields) =>
  auditRecord("PREVIEW", of(call, fields));

/** Arguments refused before the write ran (validation, the rate limit): nothing was sent. */
export const refusedWrite = (call: CallRecord, error: ToolError) =>
  auditRecord("REJECTED", of(call, orderFieldsOf(call.args)), { detail: error.message });

/**
 * A write the HTTP gate refused because the caller's token lacks `scope` (403
 * insufficient_scope): no tool ran, nothing was sent. One line per write of the request.
 */
export const unscopedWrite = (call: CallRecord, scope: string) =>
  auditRecord("REJECTED", of(call, orderFieldsOf(call.args)), {
    detail: `the caller's token lacks the ${scope} scope (403 insufficient_scope); nothing was submitted`,
  });

/** A write that failed at `stage`: REJECTED or UNCERTAIN by `failedOutcome`. */
export const failedWrite = (
  call: CallRecord,
  fields: OrderFields | SentOrder,
  error: ToolError,
  stage: Stage,
  dryRun: boolean,
) =>
  auditRecord(failedOutcome(error, stage), of(call, fields), {
    detail: dryRun ? `dry_run: ${error.message}` : error.message,
  });

/** A write abandoned at the end of the shutdown grace: UNCERTAIN once sent, else REJECTED. */
export const abandonedWrite = (call: CallRecord, fields: OrderFields | SentOrder, sent: boolean) =>
  auditRecord(sent ? "UNCERTAIN" : "REJECTED", of(call, fields), {
    detail: sent ? ABANDONED_DETAIL : ABANDONED_UNSENT_DETAIL,
  });

/** The intent a write leaves as it is handed to StoreLink: the order as sent, and the call. */
export const intentOf = (call: CallRecord, sent: SentOrder): IntentRecord => ({
  ts: new Date().toISOString(),
  ...of(call, sent),
});

/** A write a killed process had sent without recording its outcome: its intent, as recovered. */
export const killedWrite = ({ ts: sentAt, ...fields }: IntentRecord) =>
  auditRecord("UNCERTAIN", fields, { detail: `${KILLED_DETAIL} (sent at ${sentAt})` });

/**
 * The one line that settles an earlier UNCERTAIN (or a write whose process died before its line):
 * the attempt as it was sent, its request id, its key, and what StoreLink holds for the key.
 */
export const resolvedWrite = (
  { ts: _sentAt, ...attempt }: IntentRecord & { idempotency_key: string },
  resolution: Resolution,
  orderId: string | null,
  detail: string,
) => auditRecord("RESOLVED", attempt, { orderId, detail, resolution });
