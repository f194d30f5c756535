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

/**
 * The credential shapes people paste, in one place (test/logging/redact.test.ts has a case per
 * shape). Each is matched as a whole token, and none can backtrack over a run it failed on: every
 * pattern either cannot fail once its prefix matched, or has a bounded run before its suffix. JWTs,
 * whose run is unbounded and must be followed by a dot, are found by `redactJwts` below instead.
 */
export const CREDENTIAL_VALUES: readonly RegExp[] = [
  // `Bearer <token>` (HTTP Authorization values pasted into text), also "bearer token X" and
  // "Bearer Bearer X": the words between are skipped, never taken for the token.
  /\bBearer(?:\s+(?:bearer|token)\b)*(?:\s*:\s*|\s+)[A-Za-z0-9\-._~+/]+=*/gi,
  // `Authorization: Basic <base64>` (and a bare `Basic <base64>` holding a digit, + / or =).
  /\bAuthorization\s*:\s*Basic\s+[A-Za-z0-9+/]+=*/gi,
  /\bBasic\s+(?=[A-Za-z0-9+/]{0,200}[0-9+/=])[A-Za-z0-9+/]{8,}=*/g,
  // `password=…`, `api_key: …`, Azure's `AccountKey=…` / `SharedAccessKey=…` and the like inside
  // free text (a JSON pair's quotes too): the value, to the next separator.
  /\b(?:password|passwd|pwd|api[_-]?key|apikey|access[_-]?token|client[_-]?secret|account[_-]?key|shared[_-]?access[_-]?key)["']?\s*[=:]\s*["']?[^\s&,;"'<>]+/gi,
  // `secret=…` (also `jwt_secret`, `SECRET_KEY`): the value, whatever it is. `secret: …` is prose
  // as often as YAML ("the secret: we ran out"), so after a colon only a value shaped like a
  // credential goes: 8 characters or more, holding a digit, one of _ + / =, or a lower-case letter
  // before a capital. The shape is looked for within 200 characters, so a run of `secret:` costs
  // a bounded look each, not the rest of the run.
  /(?<![A-Za-z0-9])secret(?:[_-]?key)?["']?\s*=\s*["']?[^\s&,;"'<>]+/gi,
  // (Case-sensitive for that last test, so the word's three spellings are listed.)
  /(?<![A-Za-z0-9])(?:secret|Secret|SECRET)(?:[_-]?(?:key|Key|KEY))?["']?\s*:\s*["']?(?=[^\s&,;"'<>]{8})(?=[^\s&,;"'<>]{0,200}?(?:[0-9_+/=]|[a-z][A-Z]))[^\s&,;"'<>]+/g,
  // URL userinfo (`rediss://:AUTH@host`, `https://user:pass@host`, `https://TOKEN@host`): only the
  // userinfo goes, the scheme and host stay. It runs to the last `@` before the authority ends
  // (a password with a bare `@`, as URL parsers read it), and can start only right after `://`,
  // which its run cannot hold, so runs are disjoint and each is read once.
  /(?<=[A-Za-z0-9]:\/\/)[^\s/?#]+(?=@)/g,
  // Slack incoming-webhook and workflow URLs: the path is the secret.
  /\bhttps?:\/\/hooks\.slack\.com\/(?:services|workflows|triggers)\/[A-Za-z0-9/_-]+/gi,
  // OpenAI / Stripe style secret keys: sk-live-…, sk-proj-…; Stripe's sk_live_…, rk_test_….
  /\bsk-[A-Za-z0-9_-]{8,}/g,
  /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{8,}/g,
  // GitHub tokens: ghp_ (classic), gho_, ghu_, ghs_, ghr_, and fine-grained github_pat_.
  /\bgh[pousr]_[A-Za-z0-9]{16,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{22,}/g,
  // AWS access key ids (long-term AKIA, temporary ASIA).
  /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g,
  // Google API keys.
  /\bAIza[0-9A-Za-z_-]{30,}/g,
  // Slack tokens: xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxe- (refresh), and app-level xapp-.
  /\b(?:xox[a-z]\.)?xox[bparse]-[A-Za-z0-9-]{10,}/g,
  /\bxapp-[A-Za-z0-9-]{10,}/g,
  // PEM private key blocks, to their END line, or to the end of the text when it was cut off.
  /-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----(?:[^-]|-(?!----END ))*(?:-----END [A-Z ]{0,40}PRIVATE KEY-----)?/g,
  // GitLab personal access tokens (glpat-, with the newer `.01.…` tail).
  /\bglpat-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*/g,
  // npm tokens: npm_ and 36 base62 characters (npm_config_… and other words are not that).
  /\bnpm_[A-Za-z0-9]{36,}/g,
  // StoreLink's own per-store keys (slk_<store>_…): this server's key material.
  /\bslk_[A-Za-z0-9_-]{6,}/g,
];

/**
 * Every shape above and a JWT contains one of these (matched case-insensitively, a superset): a
 * string without any cannot hold a credential and is returned as is. Most strings in a record
 * (ids, SKUs, tool names) take this one test instead of a dozen replace passes, on every call.
 */
const MAY_HOLD_CREDENTIAL =
  /bearer|basic|eyJ|sk-|sk_|rk_|gh[pousr]_|github_pat_|AKIA|ASIA|AIza|xox[bparse]-|xapp-|PRIVATE KEY|slk_|passw|pwd|api[_-]?key|apikey|access[_-]?token|secret|account[_-]?key|shared[_-]?access[_-]?key|:\/\/|glpat-|npm_|hooks\.slack/i;

/**
 * The JWT shape `redactJwts` finds, as a regex: the tests' reference for it. Not used on input:
 * it backtracks over every `eyJ` of a long dot-less run (quadratic).
 */
export const JWT_SHAPE = /\beyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}(?:\.[A-Za-z0-9_-]*)?/g;

const isJwtChar = (code: number): boolean =>
  (code >= 0x30 && code <= 0x39) || // 0-9
  (code >= 0x41 && code <= 0x5a) || // A-Z
  (code >= 0x61 && code <= 0x7a) || // a-z
  code === 0x5f || // _
  code === 0x2d; // -
const isWordChar = (code: number): boolean => isJwtChar(code) && code !== 0x2d;

/** End of the run of JWT characters starting at `from`. */
function runEnd(text: string, from: number): number {
  let i = from;
  while (i < text.length && isJwtChar(text.charCodeAt(i))) i++;
  return i;
}

/**
 * Replaces JWTs (`eyJ<header>.<payload>[.<signature>]`, header and payload at least 2 characters
 * of base64url, starting at a word boundary) in one left-to-right pass. A regex for this shape
 * rescans the rest of a long dot-less run from every `eyJ` in it (quadratic); here a run that
 * holds no JWT is skipped as a whole, since every `eyJ` inside it ends at the same place.
 */
function redactJwts(text: string): string {
  let out = "";
  let copied = 0;
  let i = text.indexOf("eyJ");
  while (i !== -1) {
    // Not at a word boundary: not a start, but a later `eyJ` in this run may be (after a hyphen).
    let next = i + 3;
    if (i === 0 || !isWordChar(text.charCodeAt(i - 1))) {
      // A start: every later `eyJ` of this run shares its header's end, so the run is done with.
      next = runEnd(text, i + 3);
      if (next - (i + 3) >= 2 && text.charCodeAt(next) === 0x2e) {
        const payloadEnd = runEnd(text, next + 1);
        if (payloadEnd - (next + 1) >= 2) {
          next = text.charCodeAt(payloadEnd) === 0x2e ? runEnd(text, payloadEnd + 1) : payloadEnd;
          out += `${text.slice(copied, i)}${REDACTED}`;
          copied = next;
        }
      }
    }
    i = text.indexOf("eyJ", next);
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** Strips credential-shaped substrings from one string. */
export function redactText(text: string): string {
  if (!MAY_HOLD_CREDENTIAL.test(text)) return text;
  // Bearer first: a JWT after "Bearer" goes with it.
  const [bearer, ...rest] = CREDENTIAL_VALUES;
  let out = text;
  if (bearer) {
    bearer.lastIndex = 0;
    out = out.replace(bearer, REDACTED);
  }
  out = redactJwts(out);
  for (const pattern of rest) {
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
    if (object instanceof Error) return walkError(object, budget);
    if (Array.isArray(object)) {
      if (budget) return walkCappedArray(object, seen, depth, budget);
      return walkArray(object, seen, depth);
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

// The walk's closures live in these helpers, not in walk(): a closure capturing walk's
// parameters would make V8 allocate their context on every call of walk, for every value.

function walkError(error: Error, budget: Budget | undefined): { name: string; message: string } {
  if (budget) return { name: cutText(error.name, budget), message: cutText(error.message, budget) };
  return { name: redactText(error.name), message: redactText(error.message) };
}

function walkArray(items: unknown[], seen: WeakSet<object>, depth: number): unknown[] {
  return items.map((item) => {
    const out = safeWalk(item, seen, depth + 1, undefined);
    return out === undefined ? null : out;
  });
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
