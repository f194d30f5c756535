/** The spec's rules for `reason` and for order quantity, as pure functions. */

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

const normalise = (text: string): string =>
  text
    .toLowerCase()
    .replace(/\s+/g, " ")
    .replace(/^[\s.!?,;:]+|[\s.!?,;:]+$/g, "");

/** Returns why `reason` is unacceptable, or null when it is acceptable. */
export function reasonProblem(reason: string): string | null {
  const trimmed = reason.trim();
  if (trimmed === "") return "reason is empty";
  const normalised = normalise(trimmed);
  const words = normalised.split(" ").filter((w) => w !== "");
  if (
    REASON_PLACEHOLDERS.has(normalised) ||
    REASON_PLACEHOLDERS.has(trimmed) ||
    words.every((w) => REASON_PLACEHOLDERS.has(w.replace(/[.!?,;:]+$/, "")))
  ) {
    return "reason is placeholder text";
  }
  if (!/\p{L}/u.test(trimmed)) return "reason contains no letters (a bare number is not a reason)";
  if (trimmed.length < REASON_MIN_CHARS) {
    return `reason is shorter than ${REASON_MIN_CHARS} characters`;
  }
  if (words.length < REASON_MIN_WORDS) return `reason has fewer than ${REASON_MIN_WORDS} words`;
  if (trimmed.length > REASON_MAX_CHARS) {
    return `reason is longer than ${REASON_MAX_CHARS} characters`;
  }
  return null;
}

export type GapReading = "shortfall" | "knife_edge" | "covered";

/** `gap = units_sold_last_24h - on_hand`: a 24-hour arithmetic signal, not a forecast. */
export function gapOf(onHand: number, soldLast24h: number): { gap: number; reading: GapReading } {
  const gap = soldLast24h - onHand;
  return { gap, reading: gap > 0 ? "shortfall" : gap === 0 ? "knife_edge" : "covered" };
}
