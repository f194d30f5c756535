import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { escapeLineTerminators, quote } from "../../src/logging/format.js";
import { capText, redact, redactText } from "../../src/logging/redact.js";
import { normaliseReason, reasonProblem } from "../../src/policy/order-rules.js";
import {
  canonicalPrincipalId,
  osPrincipal,
  PRINCIPAL_KINDS,
  PRINCIPAL_MAX_LENGTH,
} from "../../src/policy/principal.js";
import { isValidId } from "../../src/storelink/ids.js";
import { quotedLine } from "../../src/tools/create-replenishment-order/confirmation.js";
import { createOrderInput } from "../../src/tools/create-replenishment-order/schema.js";

/**
 * Every check a request's text goes through is linear in its length. An input crafted against a
 * backtracking regex (a long run of one class, then a character that breaks the match) costs
 * quadratic time or worse: at this length, billions of steps, seconds to minutes of CPU. Each
 * check runs once on each adversarial shape, and the CPU time this process spent on it (not the
 * wall clock, which a busy machine stretches) must stay under a ceiling a hundred times what a
 * linear check takes here (a few milliseconds).
 */

const LENGTH = 64_000;
const CEILING_CPU_MS = 1_000;

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
  "://",
  "a://",
  "a:a:",
  "a:a:a:@",
  "@",
  "glpat-",
  "npm_",
  "AccountKey=",
  "secret:",
  "Secret: a",
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
  ["principal ids", (t) => canonicalPrincipalId(t)],
  [
    "principal ids of each kind (below the length rule that guards them)",
    (t) =>
      PRINCIPAL_KINDS.map((kind) =>
        canonicalPrincipalId(`${kind}:${t.slice(-(PRINCIPAL_MAX_LENGTH - kind.length - 1))}`),
      ),
  ],
  ["OS account names", (t) => osPrincipal(t, t)],
];

/** The CPU time (user and system, this process) one run of `check` takes, in ms. */
function cpuTimeOf(check: (text: string) => unknown, text: string): number {
  const before = process.cpuUsage();
  check(text);
  const spent = process.cpuUsage(before);
  return (spent.user + spent.system) / 1_000;
}

const run = (piece: string, end: string, length: number): string =>
  piece.repeat(Math.ceil(length / piece.length)).slice(0, length) + end;

/**
 * The credential shapes that read a run up to a late anchor (a URL's userinfo to its `@`, a
 * `secret:` value to its credential-shaped character): each of their runs, after every opening,
 * before every end, none left to the sampling above, and twice as long, so a quadratic pattern
 * with a cheap step still costs seconds.
 */
const REDACTION_LENGTH = 2 * LENGTH;
const REDACTION_RUNS = [
  "://",
  "a://",
  "a:",
  "a:a:a:@",
  "@",
  "a@",
  "a:/",
  "a://a:",
  "a://a:@",
  "https://u:p@",
  "secret:",
  "secret: ",
  "Secret:a",
  "secret:a1",
  "secret=",
  "glpat-",
  "glpat-a.",
  "npm_",
  "npm_a",
  "AccountKey=",
];
const REDACTION_OPENINGS = ["", "x://", "secret: "];
const REDACTION_ENDS = ["", "@", " "];

describe("no input costs more than linear time", () => {
  it("credential redaction, on every run of the late-anchored shapes", () => {
    for (const piece of REDACTION_RUNS) {
      for (const start of REDACTION_OPENINGS) {
        for (const end of REDACTION_ENDS) {
          const text = start + run(piece, end, REDACTION_LENGTH);
          expect(cpuTimeOf(redactText, text), JSON.stringify(start + piece + end)).toBeLessThan(
            CEILING_CPU_MS,
          );
        }
      }
    }
  });

  it.each(CHECKS)("%s", (_name, check) => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PIECES),
        fc.constantFrom(...PIECES),
        fc.constantFrom(...ENDS),
        fc.constantFrom("a", "", "ab "),
        (a, b, end, start) => {
          const piece = a === b ? a : a + b;
          const text = start + run(piece, end, LENGTH);
          expect(cpuTimeOf(check, text), `${JSON.stringify(piece)} x ${LENGTH}`).toBeLessThan(
            CEILING_CPU_MS,
          );
        },
      ),
      { numRuns: 40 },
    );
  });
});
