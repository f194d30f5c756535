import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { escapeLineTerminators, quote } from "../../src/logging/format.js";
import { capText, redact, redactText } from "../../src/logging/redact.js";
import { normaliseReason, reasonProblem } from "../../src/policy/order-rules.js";
import { isValidId } from "../../src/storelink/ids.js";
import { quotedLine } from "../../src/tools/create-replenishment-order/confirmation.js";
import { createOrderInput } from "../../src/tools/create-replenishment-order/schema.js";

/**
 * Every check a request's text goes through is linear in its length. An input crafted against a
 * backtracking regex (a long run of one class, then a character that breaks the match) costs
 * quadratic time or worse: at 16 times the length, 256 times the time. Each check is timed on
 * the same adversarial shape at two lengths; the ratio, not a wall-clock figure, is asserted,
 * with room for a noisy machine (linear is about 16, quadratic about 256), plus a ceiling no
 * linear check comes near (a quadratic one takes seconds to minutes at this size).
 */

const SMALL = 4_000;
const BIG = SMALL * 16;
const MAX_RATIO = 64;
const CEILING_MS = 1_000;

/** The characters and tokens the code's patterns match on: runs of these are the attack. */
const PIECES = [
  ".",
  " ",
  " .",
  ". ",
  "!",
  "?",
  ",",
  ";",
  ":",
  "-",
  "_",
  "a",
  "A1",
  "/",
  "=",
  "\\",
  '"',
  "\t",
  "\n",
  "\u2028",
  "\u0085",
  "\u00a0",
  "Bearer ",
  "Bearer",
  "eyJ",
  "eyJa.",
  "sk-",
  "sk-a",
  "ghp_",
  "github_pat_",
  "AKIA",
  "xoxb-",
  "slk_",
  "slk_4",
  "\ud83d",
  "\u200e",
  "\u3164",
];
/** What may end a run, so that a pattern that matched the run so far fails at the end. */
const ENDS = ["", "a", "!", " ", "\u0000", "é", "$", "."];

const CHECKS: [string, (text: string) => unknown][] = [
  ["reason rules", (t) => reasonProblem(t)],
  ["reason normalising (below the length rule that guards it)", (t) => normaliseReason(t)],
  [
    "the write's argument schema",
    (t) => createOrderInput.safeParse({ store_id: "47", sku: "8847291", quantity: 1, reason: t }),
  ],
  ["credential redaction", (t) => redactText(t)],
  ["capped redaction", (t) => capText(t, 900)],
  ["record redaction", (t) => redact({ reason: t, nested: [t] })],
  ["the confirmation's quoted line", (t) => quotedLine(t)],
  ["audit quoting", (t) => quote(t)],
  ["line-terminator escaping", (t) => escapeLineTerminators(JSON.stringify(t))],
  ["id rule", (t) => isValidId(t)],
];

/** The best of `reps` runs; stops after the first when that is already over the ceiling. */
function timeOf(check: (text: string) => unknown, text: string, reps = 5): number {
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < reps && (i === 0 || best < CEILING_MS); i++) {
    const started = performance.now();
    check(text);
    best = Math.min(best, performance.now() - started);
  }
  return best;
}

const run = (piece: string, end: string, length: number): string =>
  piece.repeat(Math.ceil(length / piece.length)).slice(0, length) + end;

describe("no input costs more than linear time", () => {
  it.each(CHECKS)("%s", (_name, check) => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PIECES),
        fc.constantFrom(...PIECES),
        fc.constantFrom(...ENDS),
        fc.constantFrom("a", "", "ab "),
        (a, b, end, start) => {
          const piece = a === b ? a : a + b;
          const small = start + run(piece, end, SMALL);
          const big = start + run(piece, end, BIG);
          const tSmall = Math.max(timeOf(check, small), 0.05);
          const tBig = timeOf(check, big);
          expect(tBig, `${JSON.stringify(piece)} x ${BIG}`).toBeLessThan(CEILING_MS);
          expect(
            tBig / tSmall,
            `${JSON.stringify(piece)}: ${tSmall} ms -> ${tBig} ms`,
          ).toBeLessThan(MAX_RATIO);
        },
      ),
      { numRuns: 40 },
    );
  });
});
