import type { AuditRecord, IntentRecord, TraceRecord } from "./records.js";
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
    // Who, after the spec's fields.
    by: text(String(record.by)),
    ...(typeof record.client === "string" ? { client: text(record.client) } : {}),
  };
}

type Cut = (text: string) => string;

/**
 * How each field of an audit record is written. Typed over every key of AuditRecord, so a field
 * added there without a rule here is a compile error, never a field silently dropped or written
 * unredacted. The order is the structured line's.
 */
const AUDIT_FIELDS: {
  [K in keyof Required<AuditRecord>]: (record: AuditRecord, cut: Cut) => AuditRecord[K] | undefined;
} = {
  ts: (r) => String(r.ts),
  outcome: (r) => r.outcome,
  order_id: (r, cut) => textOrNull(r.order_id, cut),
  store_id: (r, cut) => textOrNull(r.store_id, cut),
  sku: (r, cut) => textOrNull(r.sku, cut),
  quantity: (r) => (typeof r.quantity === "number" ? r.quantity : null),
  request_id: (r, cut) => cut(String(r.request_id)),
  by: (r, cut) => cut(String(r.by)),
  // Redacted like any text the agent sent: a real key (a UUID, a server-made one) reads unchanged.
  idempotency_key: (r, cut) =>
    typeof r.idempotency_key === "string" ? cut(r.idempotency_key) : undefined,
  client: (r, cut) => (typeof r.client === "string" ? cut(r.client) : undefined),
  resolution: (r) =>
    r.resolution === "CREATED" || r.resolution === "NOT_CREATED" ? r.resolution : undefined,
  reason: (r, cut) => textOrNull(r.reason, cut),
  detail: (r, cut) => (typeof r.detail === "string" ? cut(r.detail) : undefined),
  confirmed: (r) => (r.confirmed === "buyer" || r.confirmed === "agent" ? r.confirmed : undefined),
};
const AUDIT_KEYS = Object.keys(AUDIT_FIELDS) as (keyof AuditRecord)[];

const textOrNull = (value: unknown, cut: Cut): string | null =>
  typeof value === "string" ? cut(value) : null;

/**
 * The audit record as it is written: every free-text field stripped of credential shapes, and
 * for a REJECTED line (unvalidated input) capped to FAILED_LIMITS.text characters each.
 */
export function redactAudit(record: AuditRecord): AuditRecord {
  const cut = record.outcome === "REJECTED" ? capText : redactText;
  const written: Partial<Record<keyof AuditRecord, unknown>> = {};
  for (const key of AUDIT_KEYS) {
    const value = AUDIT_FIELDS[key](record, cut);
    if (value !== undefined) written[key] = value;
  }
  return written as AuditRecord;
}

/** One line of trace.jsonl (no newline). Input is redacted here. */
export function formatTraceLine(record: TraceRecord): string {
  return escapeLineTerminators(JSON.stringify(redactTrace(record)));
}

// Values that read unambiguously without quotes: ids, SKUs, numbers.
const BARE = /^[A-Za-z0-9._:/+@-]+$/;

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
 * How each field of an audit record reads on its line, in the line's order (the spec's:
 * `<ts> <OUTCOME> <order_id|-> store=.. sku=.. qty=.. req=.. by=.. [key=..] [client=..]
 * [confirmed=..] [outcome=..] [detail="…"] reason="…"`).
 * Typed over every key of AuditRecord, so a new field must be given its place here; a field a
 * record does not carry (undefined) is left out. A missing reason reads `reason=-`.
 */
const AUDIT_LINE: {
  [K in keyof Required<AuditRecord>]: (value: NonNullable<AuditRecord[K]> | null) => string;
} = {
  ts: (v) => bareOrQuoted(v),
  outcome: (v) => String(v),
  order_id: (v) => bareOrQuoted(v),
  store_id: (v) => `store=${bareOrQuoted(v)}`,
  sku: (v) => `sku=${bareOrQuoted(v)}`,
  quantity: (v) => `qty=${bareOrQuoted(v)}`,
  request_id: (v) => `req=${bareOrQuoted(v)}`,
  by: (v) => `by=${bareOrQuoted(v)}`,
  idempotency_key: (v) => `key=${bareOrQuoted(v)}`,
  client: (v) => `client=${bareOrQuoted(v)}`,
  confirmed: (v) => `confirmed=${v}`,
  resolution: (v) => `outcome=${v}`,
  detail: (v) => `detail=${quote(String(v))}`,
  reason: (v) => `reason=${v === null ? "-" : quote(v)}`,
};
const AUDIT_LINE_KEYS = Object.keys(AUDIT_LINE) as (keyof AuditRecord)[];

/** The line of an already redacted record, or of the fields of one that it carries. */
function lineOf(r: Partial<AuditRecord>): string {
  const parts: string[] = [];
  for (const key of AUDIT_LINE_KEYS) {
    const value = r[key];
    if (value !== undefined) parts.push((AUDIT_LINE[key] as (v: unknown) => string)(value));
  }
  return parts.join(" ");
}

/** One line of audit.log (no newline). Input is redacted here. */
export function formatAuditLine(record: AuditRecord): string {
  return lineOf(redactAudit(record));
}

/** The audit line of an already redacted record. */
export const formatAuditFields = (r: AuditRecord): string => lineOf(r);

/**
 * An intent as the structured log copies it: redacted as the audit line of a sent write is, by
 * the audit line's own field rules.
 */
export function redactIntent(intent: IntentRecord): IntentRecord {
  const written: Partial<Record<keyof IntentRecord, unknown>> = {};
  for (const key of Object.keys(intent) as (keyof IntentRecord)[]) {
    if (key in AUDIT_FIELDS) written[key] = AUDIT_FIELDS[key](intent as AuditRecord, redactText);
  }
  return written as IntentRecord;
}

/** The intent's `key=value` part (without its time), as its audit line would read. */
export function formatIntentFields({ ts: _sentAt, ...fields }: IntentRecord): string {
  return lineOf(fields);
}
