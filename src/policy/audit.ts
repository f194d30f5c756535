import type { ToolError } from "../errors.js";
import type { AuditOutcome, AuditRecord, Confirmer } from "../logging/records.js";

/**
 * The one place an audit record is built and its outcome decided: one builder per kind of line
 * (submitted, previewed, refused, failed, abandoned at shutdown, left by a killed process), used
 * by the write tool, lifecycle/inflight.ts and lifecycle/recovery.ts; none of them names an
 * outcome. What the line looks like on disk is logging/format.ts; what it records is this module.
 */

/** The audited fields of a write, read from arguments that may not have been validated. */
export interface OrderFields {
  store_id: string | null;
  sku: string | null;
  quantity: number | null;
  reason: string | null;
}

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
}

/** One audit record, stamped now. */
function auditRecord(
  outcome: AuditOutcome,
  fields: OrderFields,
  requestId: string,
  { orderId = null, detail, confirmed }: AuditExtras = {},
): AuditRecord {
  return {
    ts: new Date().toISOString(),
    outcome,
    order_id: orderId,
    ...fields,
    request_id: requestId,
    ...(detail === undefined ? {} : { detail }),
    ...(confirmed === undefined ? {} : { confirmed }),
  };
}

/** A write StoreLink answered: a new order, or the original one for a retry (never a second CREATED). */
export const submittedWrite = (
  fields: OrderFields,
  requestId: string,
  orderId: string,
  replayed: boolean,
  confirmed: Confirmer,
) => auditRecord(replayed ? "REPLAYED" : "CREATED", fields, requestId, { orderId, confirmed });

/** A dry run that passed every check: nothing was submitted. */
export const previewedWrite = (fields: OrderFields, requestId: string) =>
  auditRecord("PREVIEW", fields, requestId);

/** Arguments refused before the write ran (validation, the rate limit): nothing was sent. */
export const refusedWrite = (fields: OrderFields, requestId: string, error: ToolError) =>
  auditRecord("REJECTED", fields, requestId, { detail: error.message });

/** A write that failed at `stage`: REJECTED or UNCERTAIN by `failedOutcome`. */
export const failedWrite = (
  fields: OrderFields,
  requestId: string,
  error: ToolError,
  stage: Stage,
  dryRun: boolean,
) =>
  auditRecord(failedOutcome(error, stage), fields, requestId, {
    detail: dryRun ? `dry_run: ${error.message}` : error.message,
  });

/** A write abandoned at the end of the shutdown grace: UNCERTAIN once sent, else REJECTED. */
export const abandonedWrite = (fields: OrderFields, requestId: string, sent: boolean) =>
  auditRecord(sent ? "UNCERTAIN" : "REJECTED", fields, requestId, {
    detail: sent ? ABANDONED_DETAIL : ABANDONED_UNSENT_DETAIL,
  });

/** A write a killed process had sent without recording its outcome (`sentAt`: its intent). */
export const killedWrite = (fields: OrderFields, requestId: string, sentAt: string) =>
  auditRecord("UNCERTAIN", fields, requestId, { detail: `${KILLED_DETAIL} (sent at ${sentAt})` });
