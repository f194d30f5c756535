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
 * What a failed call may write. A refused call is not validated, so its arguments can be as big
 * as the transport allows (a 240 kB reason, thousands of keys); written in full, a caller could
 * fill the disk and stdout with refused calls. Valid values fit well inside these limits, so
 * successful calls are never cut.
 */
export const FAILED_LIMITS = {
  /** Characters kept of one string (a valid reason is at most 1,000). */
  text: 1_000,
  /** Characters kept of all strings and keys of one record's `args`, together. */
  totalText: 4_000,
  /** Values kept of one record's `args`, counted over every level. */
  values: 200,
  /** Nesting kept in `args`; deeper values become "[Truncated]". */
  depth: 8,
} as const;

// A cut string is redacted with this much text past the cut, so a credential straddling the cut
// is still recognised (every shape above matches on a prefix of this length) and never half-kept.
const CUT_SLACK = 256;

/**
 * Redacts `text` and keeps at most `max` characters of it, saying how long it was:
 * `abc…[truncated, 240000 chars]`. Only the kept part (plus a little) is redacted, so a huge
 * string costs no more than a short one.
 */
export function capText(text: string, max: number = FAILED_LIMITS.text): string {
  if (text.length <= max) return redactText(text);
  const redacted = redactText(text.slice(0, max + CUT_SLACK));
  let end = Math.min(max, redacted.length);
  // Never keep half of a surrogate pair.
  const last = redacted.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${redacted.slice(0, end)}…[truncated, ${text.length} chars]`;
}

/** What is left to write of one failed record's `args`. */
interface Budget {
  text: number;
  values: number;
}

/**
 * Returns a JSON-safe copy of `value` with both redaction rules applied. Cycles become
 * "[Circular]", depth beyond MAX_DEPTH "[Truncated]", and anything that throws while being read
 * (a hostile getter, a revoked proxy) "[Unreadable]". Keys are kept as sent, `__proto__`,
 * `constructor` and `toString` included.
 */
export function redact(value: unknown): unknown {
  try {
    return walk(value, new WeakSet(), 0, undefined);
  } catch {
    return "[Unreadable]";
  }
}

/**
 * `redact`, bounded for a failed call's arguments (see FAILED_LIMITS): long strings cut with
 * their original length, and past the budget, the rest of a list or object replaced by a count.
 */
export function redactCapped(value: unknown): unknown {
  try {
    return walk(value, new WeakSet(), 0, {
      text: FAILED_LIMITS.totalText,
      values: FAILED_LIMITS.values,
    });
  } catch {
    return "[Unreadable]";
  }
}

function cutText(text: string, budget: Budget): string {
  const max = Math.max(0, Math.min(FAILED_LIMITS.text, budget.text));
  budget.text -= Math.min(text.length, max);
  return capText(text, max);
}

/**
 * Sets an own, enumerable property. Plain assignment of `__proto__` would set the prototype
 * instead, and the key would vanish from the log.
 */
function setOwn(out: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(out, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    out[key] = value;
  }
}

function walk(value: unknown, seen: WeakSet<object>, depth: number, budget?: Budget): unknown {
  switch (typeof value) {
    case "string":
      return budget ? cutText(value, budget) : redactText(value);
    case "number":
      return Number.isFinite(value) ? value : String(value);
    case "boolean":
      return value;
    case "bigint":
      return budget ? cutText(value.toString(), budget) : value.toString();
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
  }
  if (value === null) return null;
  const object = value as object;
  if (seen.has(object)) return "[Circular]";
  if (depth >= (budget ? FAILED_LIMITS.depth : MAX_DEPTH)) return "[Truncated]";
  seen.add(object);
  try {
    if (object instanceof Date) {
      return Number.isNaN(object.getTime()) ? null : object.toISOString();
    }
    if (object instanceof Error) {
      const text = budget ? (t: string) => cutText(t, budget) : redactText;
      return { name: text(object.name), message: text(object.message) };
    }
    if (Array.isArray(object)) {
      if (budget) return walkCappedArray(object, seen, depth, budget);
      return object.map((item) => {
        const out = safeWalk(item, seen, depth + 1, undefined);
        return out === undefined ? null : out;
      });
    }
    // Objects that choose their own JSON form (ApiKey prints "[api key]") keep it, redacted.
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") {
      return safeWalk(toJSON.call(object), seen, depth + 1, budget);
    }
    const out: Record<string, unknown> = {};
    const keys = Object.keys(object);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      if (budget && budget.values-- <= 0) {
        out["[truncated]"] = `${keys.length - i} more keys`;
        break;
      }
      const outKey = budget ? cutText(key, budget) : redactText(key);
      if (SENSITIVE_KEY.test(key)) {
        setOwn(out, outKey, REDACTED);
        continue;
      }
      let child: unknown;
      try {
        child = (object as Record<string, unknown>)[key];
      } catch {
        setOwn(out, outKey, "[Unreadable]");
        continue;
      }
      const redacted = safeWalk(child, seen, depth + 1, budget);
      if (redacted !== undefined) setOwn(out, outKey, redacted);
    }
    return out;
  } finally {
    // Only ancestors count as cycles; a shared (non-cyclic) object may appear twice.
    seen.delete(object);
  }
}

function walkCappedArray(
  items: unknown[],
  seen: WeakSet<object>,
  depth: number,
  budget: Budget,
): unknown[] {
  const out: unknown[] = [];
  for (let i = 0; i < items.length; i++) {
    if (budget.values-- <= 0) {
      out.push(`[truncated, ${items.length - i} more items]`);
      break;
    }
    const item = safeWalk(items[i], seen, depth + 1, budget);
    out.push(item === undefined ? null : item);
  }
  return out;
}

function safeWalk(
  value: unknown,
  seen: WeakSet<object>,
  depth: number,
  budget: Budget | undefined,
): unknown {
  try {
    return walk(value, seen, depth, budget);
  } catch {
    return "[Unreadable]";
  }
}
