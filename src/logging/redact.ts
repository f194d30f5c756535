/**
 * Redaction for trace and audit records. Two rules, applied to both logs:
 *   - a value under a key matching SENSITIVE_KEY is replaced wholesale (a tripwire: no tool takes
 *     such an argument today);
 *   - credential-shaped substrings are stripped from every string, whatever key it sits under,
 *     which matters most for `reason`, the only free-text field.
 * Never throws: a log record that cannot be redacted must not fail the call it describes.
 */

export const REDACTED = "[REDACTED]";

export const SENSITIVE_KEY =
  /api_key|token|secret|password|auth|bearer|credential|cookie|session_id|signature|private_key/i;

/** Credential shapes, each matched as a whole token. Order matters: Bearer before JWT. */
export const CREDENTIAL_VALUES: readonly RegExp[] = [
  // `Bearer <token>` (HTTP Authorization values pasted into text).
  /\bBearer\s+[A-Za-z0-9\-._~+/]+=*/gi,
  // JWTs: base64url header starting `eyJ` ({"...), payload, optional signature.
  /\beyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}(?:\.[A-Za-z0-9_-]*)?/g,
  // Stripe / OpenAI style secret keys: sk-live-…, sk-test-…, sk-proj-…, sk-….
  /\bsk-[A-Za-z0-9_-]{8,}/g,
  // GitHub tokens: ghp_ (classic), gho_, ghu_, ghs_, ghr_, and fine-grained github_pat_.
  /\bgh[pousr]_[A-Za-z0-9]{16,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{22,}/g,
  // AWS access key ids (long-term AKIA, temporary ASIA).
  /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g,
  // Slack tokens: xoxb-, xoxp-, xoxa-, xoxr-, xoxs-.
  /\bxox[bpars]-[A-Za-z0-9-]{10,}/g,
  // StoreLink's own per-store keys (slk_<store>_…): this server's key material.
  /\bslk_[A-Za-z0-9_-]{6,}/g,
];

/**
 * Every shape above contains one of these (matched case-insensitively, a superset): a string
 * without any cannot hold a credential and is returned as is. Most strings in a record (ids, SKUs,
 * tool names) take this one test instead of eight replace passes, on every call.
 */
const MAY_HOLD_CREDENTIAL = /bearer|eyJ|sk-|gh[pousr]_|github_pat_|AKIA|ASIA|xox[bpars]-|slk_/i;

/** Strips credential-shaped substrings from one string. */
export function redactText(text: string): string {
  if (!MAY_HOLD_CREDENTIAL.test(text)) return text;
  let out = text;
  for (const pattern of CREDENTIAL_VALUES) {
    pattern.lastIndex = 0;
    out = out.replace(pattern, REDACTED);
  }
  return out;
}

const MAX_DEPTH = 16;

/**
 * Returns a JSON-safe copy of `value` with both redaction rules applied. Cycles become
 * "[Circular]", depth beyond MAX_DEPTH "[Truncated]", and anything that throws while being read
 * (a hostile getter, a revoked proxy) "[Unreadable]".
 */
export function redact(value: unknown): unknown {
  try {
    return walk(value, new WeakSet(), 0);
  } catch {
    return "[Unreadable]";
  }
}

function walk(value: unknown, seen: WeakSet<object>, depth: number): unknown {
  switch (typeof value) {
    case "string":
      return redactText(value);
    case "number":
      return Number.isFinite(value) ? value : String(value);
    case "boolean":
      return value;
    case "bigint":
      return value.toString();
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
  }
  if (value === null) return null;
  const object = value as object;
  if (seen.has(object)) return "[Circular]";
  if (depth >= MAX_DEPTH) return "[Truncated]";
  seen.add(object);
  try {
    if (object instanceof Date) {
      return Number.isNaN(object.getTime()) ? null : object.toISOString();
    }
    if (object instanceof Error) {
      return { name: redactText(object.name), message: redactText(object.message) };
    }
    if (Array.isArray(object)) {
      return object.map((item) => {
        const out = safeWalk(item, seen, depth + 1);
        return out === undefined ? null : out;
      });
    }
    // Objects that choose their own JSON form (ApiKey prints "[api key]") keep it, redacted.
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") {
      return safeWalk(toJSON.call(object), seen, depth + 1);
    }
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(object)) {
      if (SENSITIVE_KEY.test(key)) {
        out[key] = REDACTED;
        continue;
      }
      let child: unknown;
      try {
        child = (object as Record<string, unknown>)[key];
      } catch {
        out[key] = "[Unreadable]";
        continue;
      }
      const redacted = safeWalk(child, seen, depth + 1);
      if (redacted !== undefined) out[redactText(key)] = redacted;
    }
    return out;
  } finally {
    // Only ancestors count as cycles; a shared (non-cyclic) object may appear twice.
    seen.delete(object);
  }
}

function safeWalk(value: unknown, seen: WeakSet<object>, depth: number): unknown {
  try {
    return walk(value, seen, depth);
  } catch {
    return "[Unreadable]";
  }
}
