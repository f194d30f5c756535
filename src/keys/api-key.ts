import { inspect } from "node:util";
import { formsPattern, keyForms } from "./key-forms.js";

/**
 * A key travels in the `X-StoreLink-Key` header, so it must be a string every hop carries byte
 * for byte: visible ASCII (0x21-0x7E), nothing else. fetch refuses CR, LF, NUL and anything above
 * U+00FF outright (it throws before connecting); U+0080-U+00FF would go out as single Latin-1
 * bytes, i.e. not the UTF-8 the operator saved; spaces and tabs are legal but trimmed or folded
 * by proxies, and inside a key they are a paste error. StoreLink keys are tokens (slk_<store>_..).
 * Sources trim surrounding whitespace first (a secret saved with a trailing newline is fine).
 */
const SENDABLE_KEY = /^[\x21-\x7e]+$/;

export const isSendableKey = (value: string): boolean => SENDABLE_KEY.test(value);

/** What a scrub looks for: every form of one or more keys, and the shortest form's length. */
export interface Scrubber {
  readonly pattern: RegExp | undefined;
  readonly shortest: number;
}

/** The scrubber of `values` (keys): all their forms, longest first, in one pattern. */
export function scrubberOf(values: readonly string[]): Scrubber {
  const forms = values.flatMap((value) => keyForms(value)).sort((a, b) => b.length - a.length);
  return { pattern: formsPattern(forms), shortest: forms.at(-1)?.length ?? 0 };
}

/**
 * The scrubber of each key value seen lately: keys are re-read on every call (a new ApiKey each
 * time) but change rarely, and building the pattern (every form, one RegExp) costs more than the
 * scrub. Bounded: a churn of values only rebuilds.
 */
const SCRUBBERS = new Map<string, Scrubber>();
const SCRUBBERS_KEPT = 256;

function scrubberOfKey(value: string): Scrubber {
  let found = SCRUBBERS.get(value);
  if (found === undefined) {
    found = scrubberOf([value]);
    if (SCRUBBERS.size >= SCRUBBERS_KEPT) SCRUBBERS.clear();
    SCRUBBERS.set(value, found);
  }
  return found;
}

/**
 * `value` with every match of `scrubber` taken out (key-forms.ts: raw, escaped, hex, base64 and
 * base64url at every alignment, any case), recursively through arrays and plain objects. Returns
 * `value` itself when it holds no copy (the usual answer): nothing is rebuilt then.
 */
export function scrubWith<T>({ pattern, shortest }: Scrubber, value: T): T {
  return pattern === undefined ? value : (cleaned(value, 0, pattern, shortest) as T);
}

/** scrubWith's walk: nothing is allocated while nothing matches (no closure, no key list). */
function cleaned(v: unknown, depth: number, pattern: RegExp, shortest: number): unknown {
  if (typeof v === "string") {
    // A string shorter than every form cannot hold one.
    return v.length < shortest ? v : v.replace(pattern, "[REDACTED]");
  }
  if (depth > 32 || typeof v !== "object" || v === null) return v;
  if (Array.isArray(v)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const item = cleaned(v[i], depth + 1, pattern, shortest);
      if (item !== v[i]) {
        out ??= v.slice();
        out[i] = item;
      }
    }
    return out ?? v;
  }
  if (Object.getPrototypeOf(v) !== Object.prototype) return v;
  const record = v as Record<string, unknown>;
  for (const name in record) {
    if (!Object.hasOwn(record, name)) continue;
    const item = record[name];
    if (cleaned(item, depth + 1, pattern, shortest) !== item) {
      return rebuilt(record, depth, pattern, shortest);
    }
  }
  return v;
}

/**
 * `record` with each value cleaned, by definition (fromEntries), never by assignment: an own
 * `__proto__` stays data. Apart from `cleaned` so that its closure's context is made only here:
 * in `cleaned` it would be allocated on every call, rebuilding or not.
 */
function rebuilt(
  record: Record<string, unknown>,
  depth: number,
  pattern: RegExp,
  shortest: number,
): Record<string, unknown> {
  return Object.fromEntries(
    Object.keys(record).map((key) => [key, cleaned(record[key], depth + 1, pattern, shortest)]),
  );
}

/**
 * An opaque wrapper around one store's StoreLink API key.
 *
 * The value is only reachable through `reveal()`, which StoreLink clients call at the moment they
 * authenticate. Every accidental path to text (string templates, JSON.stringify, util.inspect,
 * pino serialisation) prints a placeholder, so key material cannot slip into a message or a log.
 */
export class ApiKey {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  /**
   * `value` with every copy of this key taken out, in any of the forms an echo takes (key-forms.ts:
   * raw, escaped, hex, base64 and base64url at every alignment, any case), recursively through
   * arrays and plain objects: what StoreLink answers never carries the key it was sent back into a
   * result or a log.
   */
  scrub<T>(value: T): T {
    return scrubWith(scrubberOfKey(this.#value), value);
  }

  toString(): string {
    return "[api key]";
  }

  toJSON(): string {
    return "[api key]";
  }

  [inspect.custom](): string {
    return "[api key]";
  }
}
