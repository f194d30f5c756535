import type { AuditRecord, IntentFields, TraceRecord } from "./records.js";
import { capText, redact, redactCapped, redactText } from "./redact.js";

/**
 * Every character some reader takes as the end of a line (Python's `str.splitlines()`, the widest
 * common set): LF, VT, FF, CR, FS, GS, RS, NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR. JSON escapes
 * the ASCII ones; these three it leaves raw.
 */
const RAW_AFTER_JSON = /[\u0085\u2028\u2029]/;
const RAW_AFTER_JSON_ALL = /[\u0085\u2028\u2029]/g;
const escapeCode = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

/**
 * Escapes the line terminators JSON.stringify leaves raw, inside serialized JSON (where they can
 * only sit in strings, so `\u0085` is the same text to a JSON reader). One test, no copy, for
 * the usual line that has none.
 */
export function escapeLineTerminators(json: string): string {
  return RAW_AFTER_JSON.test(json) ? json.replace(RAW_AFTER_JSON_ALL, escapeCode) : json;
}

/**
 * The trace record as it is written: redacted, fields in the spec's order, `store_id` a string
 * or null whatever the caller passed, so the column has one type on every line. A failed call's
 * strings and arguments are capped (FAILED_LIMITS): they were never validated.
 */
export function redactTrace(record: TraceRecord): TraceRecord {
  const failed = record.status !== "ok";
  const text = failed ? capText : redactText;
  return {
    ts: String(record.ts),
    request_id: text(String(record.request_id)),
    tool: text(String(record.tool)),
    store_id: typeof record.store_id === "string" ? text(record.store_id) : null,
    status: record.status === "ok" || record.status === "input_required" ? record.status : "error",
    error: typeof record.error === "string" ? text(record.error) : null,
    duration_ms: Number.isFinite(record.duration_ms) ? record.duration_ms : 0,
    args: (failed ? redactCapped(record.args) : redact(record.args)) ?? null,
  };
}

/**
 * The audit record as it is written: every free-text field stripped of credential shapes, and
 * for a REJECTED line (unvalidated input) capped to FAILED_LIMITS.text characters each.
 */
export function redactAudit(record: AuditRecord): AuditRecord {
  const cut = record.outcome === "REJECTED" ? capText : redactText;
  const text = (value: unknown): string | null => (typeof value === "string" ? cut(value) : null);
  return {
    ts: String(record.ts),
    outcome: record.outcome,
    order_id: text(record.order_id),
    store_id: text(record.store_id),
    sku: text(record.sku),
    quantity: typeof record.quantity === "number" ? record.quantity : null,
    request_id: cut(String(record.request_id)),
    reason: text(record.reason),
    ...(typeof record.detail === "string" ? { detail: cut(record.detail) } : {}),
    ...(record.confirmed === "buyer" || record.confirmed === "agent"
      ? { confirmed: record.confirmed }
      : {}),
  };
}

/** One line of trace.jsonl (no newline). Input is redacted here. */
export function formatTraceLine(record: TraceRecord): string {
  return escapeLineTerminators(JSON.stringify(redactTrace(record)));
}

// Values that read unambiguously without quotes: ids, SKUs, numbers.
const BARE = /^[A-Za-z0-9._:/+-]+$/;

/**
 * Quotes a value for the audit line so it stays one `key=value` token on one line: JSON string
 * escaping (quotes, backslashes, control characters) plus the Unicode line terminators JSON
 * leaves raw (NEL, U+2028, U+2029), which Python's splitlines() and others break lines on.
 */
export function quote(value: string): string {
  return escapeLineTerminators(JSON.stringify(value));
}

const bareOrQuoted = (value: string | number | null): string => {
  if (value === null) return "-";
  const s = String(value);
  // A bare "-" would read as "absent".
  return BARE.test(s) && s !== "-" ? s : quote(s);
};

/**
 * One line of audit.log (no newline), as the spec shows:
 * `<ts> <OUTCOME> <order_id|-> store=.. sku=.. qty=.. req=.. [confirmed=..] [detail="…"] reason="…"`.
 * Input is redacted here. A missing reason is written as `reason=-`.
 */
export function formatAuditLine(record: AuditRecord): string {
  const r = redactAudit(record);
  return formatAuditFields(r);
}

/** The audit line of an already redacted record. */
export function formatAuditFields(r: AuditRecord): string {
  return `${bareOrQuoted(r.ts)} ${r.outcome} ${bareOrQuoted(r.order_id)} ${formatOrderFields(r)}`;
}

/** The audit line's `key=value` part: the order, who asked, and why (already redacted). */
export function formatOrderFields(
  r: Pick<AuditRecord, "store_id" | "sku" | "quantity" | "request_id" | "reason"> &
    Partial<Pick<AuditRecord, "confirmed" | "detail">>,
): string {
  const parts = [
    `store=${bareOrQuoted(r.store_id)}`,
    `sku=${bareOrQuoted(r.sku)}`,
    `qty=${bareOrQuoted(r.quantity)}`,
    `req=${bareOrQuoted(r.request_id)}`,
  ];
  if (r.confirmed !== undefined) parts.push(`confirmed=${r.confirmed}`);
  if (r.detail !== undefined) parts.push(`detail=${quote(r.detail)}`);
  parts.push(`reason=${r.reason === null ? "-" : quote(r.reason)}`);
  return parts.join(" ");
}

/** An intent's fields as written: redacted as the audit line of a sent write is. */
export function redactIntent(
  requestId: string,
  fields: IntentFields,
): IntentFields & { request_id: string } {
  const text = (value: unknown): string | null =>
    typeof value === "string" ? redactText(value) : null;
  return {
    request_id: redactText(String(requestId)),
    store_id: text(fields.store_id),
    sku: text(fields.sku),
    quantity: typeof fields.quantity === "number" ? fields.quantity : null,
    reason: text(fields.reason),
  };
}
