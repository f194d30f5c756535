/** The spec's rules for a write's `reason` and quantity, as pure functions. */

export const REASON_MIN_CHARS = 12;
export const REASON_MIN_WORDS = 3;
export const REASON_MAX_CHARS = 1000;
export const MAX_ORDER_QUANTITY = 10_000;

/** Text that says nothing a buyer could audit weeks later. Compared after normalising. */
export const REASON_PLACEHOLDERS: ReadonlySet<string> = new Set([
  "n/a",
  "na",
  "-",
  "--",
  "...",
  "test",
  "testing",
  "asap",
  "tbd",
  "tba",
  "todo",
  "none",
  "null",
  "undefined",
  "xxx",
  "placeholder",
  "reason",
  "restock",
  "replenish",
  "urgent",
  "lorem ipsum",
  "see above",
  "as discussed",
  "as agreed",
  "no reason",
  "per buyer",
]);

// Every rule below runs in time linear in the reason: no regex that can backtrack over a run of
// characters (an anchored `[...]+$` rescans the run from every position of it).
const PUNCTUATION = new Set([".", "!", "?", ",", ";", ":"]);
const isPunctuation = (c: string): boolean => PUNCTUATION.has(c);
const isEdge = (c: string): boolean => c === " " || PUNCTUATION.has(c);

/** `text` without the characters `strip` accepts at its start (`both`) and end. */
function trimWhere(text: string, strip: (c: string) => boolean, both: boolean): string {
  let start = 0;
  let end = text.length;
  while (both && start < end && strip(text.charAt(start))) start++;
  while (end > start && strip(text.charAt(end - 1))) end--;
  return text.slice(start, end);
}

/**
 * Lower case, runs of whitespace as one space, no spaces or punctuation at either end. Exported
 * for the linear-time test, which must reach it with inputs longer than a reason may be.
 */
export const normaliseReason = (text: string): string =>
  trimWhere(text.toLowerCase().replace(/\s+/g, " "), isEdge, true);

/** Returns why `reason` is unacceptable, or null when it is acceptable. */
export function reasonProblem(reason: string): string | null {
  const trimmed = reason.trim();
  if (trimmed === "") return "reason is empty";
  // Checked first: a reason already too long is refused without running the other rules.
  if (trimmed.length > REASON_MAX_CHARS) {
    return `reason is longer than ${REASON_MAX_CHARS} characters`;
  }
  const normalised = normaliseReason(trimmed);
  const words = normalised.split(" ").filter((w) => w !== "");
  if (
    REASON_PLACEHOLDERS.has(normalised) ||
    REASON_PLACEHOLDERS.has(trimmed) ||
    words.every((w) => REASON_PLACEHOLDERS.has(trimWhere(w, isPunctuation, false)))
  ) {
    return "reason is placeholder text";
  }
  if (!/\p{L}/u.test(trimmed)) return "reason contains no letters (a bare number is not a reason)";
  if (trimmed.length < REASON_MIN_CHARS) {
    return `reason is shorter than ${REASON_MIN_CHARS} characters`;
  }
  if (words.length < REASON_MIN_WORDS) return `reason has fewer than ${REASON_MIN_WORDS} words`;
  return null;
}
