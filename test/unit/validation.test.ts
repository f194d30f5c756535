import { describe, expect, it } from "vitest";
import { REASON_PLACEHOLDERS, reasonProblem } from "../../src/policy/order-rules.js";
import { gapOf } from "../../src/tools/gap.js";

describe("reason validation (the spec's five rules)", () => {
  it.each([
    ["", "empty"],
    ["    \t ", "empty"],
    ["1234567890123 456 789", "no letters"],
    ["Low stock!", "shorter than 12"],
    ["Restocking47now", "fewer than 3 words"],
    ["butter-shortfall-restock", "fewer than 3 words"],
    ["n/a", "placeholder"],
    ["-", "placeholder"],
    ["TEST", "placeholder"],
    ["asap", "placeholder"],
    ["tbd", "placeholder"],
    ["asap asap asap asap", "placeholder"],
    ["Test test test.", "placeholder"],
  ])("rejects %j (%s)", (reason, why) => {
    expect(reasonProblem(reason)).toContain(why);
  });

  it("accepts a reason citing the numbers", () => {
    expect(
      reasonProblem("Gap of 8 at store 47: on_hand 3 vs 11 sold. Buyer approved 24."),
    ).toBeNull();
  });

  it("accepts the shortest reason the rules allow (12 chars, 3 words)", () => {
    expect(reasonProblem("Gap of eight")).toBeNull();
    expect(reasonProblem("Gap of eigh")).toContain("shorter than 12");
  });

  it("rejects an over-long reason", () => {
    expect(reasonProblem(`Buyer approved this ${"x".repeat(1000)}`)).toContain("longer than");
  });

  it("keeps the spec's examples in the placeholder list", () => {
    for (const p of ["n/a", "-", "test", "asap", "tbd"])
      expect(REASON_PLACEHOLDERS.has(p)).toBe(true);
  });
});

describe("gap", () => {
  it.each([
    [3, 11, 8, "shortfall"],
    [14, 12, -2, "covered"],
    [9, 5, -4, "covered"],
    [6, 9, 3, "shortfall"],
    [7, 7, 0, "knife_edge"],
  ] as const)("on_hand %i, sold %i -> gap %i (%s)", (onHand, sold, gap, reading) => {
    expect(gapOf(onHand, sold)).toEqual({ gap, reading });
  });
});
