/**
 * Argument names that are not data: `__proto__`, `constructor`, `prototype`. A parser that builds
 * objects by assignment drops `__proto__` without a word (the SDKs' schemas do), so an order with
 * `"__proto__": {"dry_run": true}` would lose the flag and be placed. Before any parser after
 * JSON.parse sees a tools/call, each such own key in its arguments is renamed to a name the tools'
 * strict schemas refuse, and that says why: every path and era answers `invalid_arguments`.
 */
const NOT_DATA = new Set(["__proto__", "constructor", "prototype"]);
const MARK = " (not an argument name)";

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null;

/** Renames in place; true if anything was renamed. A batch is a list of messages (one level). */
export function markNonDataNames(body: unknown): boolean {
  if (!Array.isArray(body)) return markMessage(body);
  let marked = false;
  for (const message of body) marked = markMessage(message) || marked;
  return marked;
}

function markMessage(message: unknown): boolean {
  if (!isObject(message) || message.method !== "tools/call" || !isObject(message.params)) {
    return false;
  }
  return renameIn(message.params.arguments, 0);
}

function renameIn(value: unknown, depth: number): boolean {
  // Bodies are depth-limited before this runs; the bound keeps a line of stdio safe too.
  if (!isObject(value) || depth > 64) return false;
  let marked = false;
  for (const key of Object.keys(value)) {
    const inner = Object.getOwnPropertyDescriptor(value, key)?.value;
    marked = renameIn(inner, depth + 1) || marked;
    if (!NOT_DATA.has(key)) continue;
    delete value[key];
    Object.defineProperty(value, `${key}${MARK}`, {
      value: inner,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    marked = true;
  }
  return marked;
}
