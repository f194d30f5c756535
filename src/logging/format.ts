import type { AuditRecord, TraceRecord } from "./records.js";
import { redact, redactText } from "./redact.js";

/**
 * The trace record as it is written: redacted, fields in the spec's order, `store_id` a string
 * or null whatever the caller passed, so the column has one type on every line.
 */
export function redactTrace(record: TraceRecord): TraceRecord {
  return {
    ts: String(record.ts),
    request_id: redactText(String(record.request_id)),
    tool: redactText(String(record.tool)),
    store_id: typeof record.store_id === "string" ? redactText(record.store_id) : null,
    status: record.status === "ok" ? "ok" : "error",
    error: typeof record.error === "string" ? redactText(record.error) : null,
    duration_ms: Number.isFinite(record.duration_ms) ? record.duration_ms : 0,
    args: redact(record.args) ?? null,
  };
}

const text = (value: unknown): string | null =>
  typeof value === "string" ? redactText(value) : null;

/** The audit record as it is written: every free-text field stripped of credential shapes. */
export function redactAudit(record: AuditRecord): AuditRecord {
  return {
    ts: String(record.ts),
    outcome: record.outcome,
    order_id: text(record.order_id),
    store_id: text(record.store_id),
    sku: text(record.sku),
    quantity: typeof record.quantity === "number" ? record.quantity : null,
    request_id: redactText(String(record.request_id)),
    reason: text(record.reason),
    ...(typeof record.detail === "string" ? { detail: redactText(record.detail) } : {}),
  };
}

/** One line of trace.jsonl (no newline). Input is redacted here. */
export function formatTraceLine(record: TraceRecord): string {
  return JSON.stringify(redactTrace(record));
}

// Values that read unambiguously without quotes: ids, SKUs, numbers.
const BARE = /^[A-Za-z0-9._:/+-]+$/;

/**
 * Quotes a value for the audit line so it stays one `key=value` token on one line: JSON string
 * escaping (quotes, backslashes, control characters) plus the two Unicode line separators,
 * which JSON leaves raw but some readers break lines on.
 */
export function quote(value: string): string {
  return JSON.stringify(value)
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

const bareOrQuoted = (value: string | number | null): string => {
  if (value === null) return "-";
  const s = String(value);
  return BARE.test(s) ? s : quote(s);
};

/**
 * One line of audit.log (no newline), as the spec shows:
 * `<ts> <OUTCOME> <order_id|-> store=.. sku=.. qty=.. req=.. [detail="…"] reason="…"`.
 * Input is redacted here. A missing reason is written as `reason=-`.
 */
export function formatAuditLine(record: AuditRecord): string {
  const r = redactAudit(record);
  return formatAuditFields(r);
}

/** The audit line of an already redacted record. */
export function formatAuditFields(r: AuditRecord): string {
  const parts = [
    bareOrQuoted(r.ts),
    r.outcome,
    bareOrQuoted(r.order_id),
    `store=${bareOrQuoted(r.store_id)}`,
    `sku=${bareOrQuoted(r.sku)}`,
    `qty=${bareOrQuoted(r.quantity)}`,
    `req=${bareOrQuoted(r.request_id)}`,
  ];
  if (r.detail !== undefined) parts.push(`detail=${quote(r.detail)}`);
  parts.push(`reason=${r.reason === null ? "-" : quote(r.reason)}`);
  return parts.join(" ");
}
