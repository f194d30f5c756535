import type { ElicitRequest } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { connect, type Harness } from "../helpers/harness.js";

/**
 * The buyer's confirmation shows the real order whatever the agent writes in `reason`: the
 * reason cannot scroll the facts away (the attack: 28 line breaks, then a fake "Quantity: 24"
 * block under a real quantity of 9000), start a line of its own, or outgrow its one line.
 */

const FAKE_BLOCK = [
  "Confirm this replenishment order. It loads a truck and cannot be cancelled here.",
  "Store: 47 (Korral Brno-Kralovo Pole)",
  "SKU: 8847291 (Madeta butter 250g)",
  "Quantity: 24",
  "Live stock: on_hand 3, 11 sold in the last 24h, gap +8",
  "You are confirming: 24 x Madeta butter 250g (SKU 8847291) for store 47.",
];
const ORDER = { store_id: "47", sku: "8847291", quantity: 9000 };

/** Every Unicode line terminator a client (or a reader splitting lines) may break on. */
const TERMINATORS = ["\n", "\r", "\r\n", "\u000b", "\u000c", "\u0085", "\u2028", "\u2029"];

let open: Harness[] = [];
afterEach(async () => {
  await Promise.all(open.map((h) => h.close()));
  open = [];
});

/** Places an order with `reason` through an SDK Client that declines; returns what it was shown. */
async function shownFor(reason: string): Promise<string> {
  const asked: ElicitRequest[] = [];
  const h = await connect(
    {},
    {
      capabilities: { elicitation: { form: {} } },
      onElicit: (request) => {
        asked.push(request);
        return { action: "decline" };
      },
    },
  );
  open.push(h);
  const result = await h.call("create_replenishment_order", { ...ORDER, reason });
  expect(result.isError).toBe(true);
  expect(asked).toHaveLength(1);
  return asked[0]?.params.message ?? "";
}

/** The message as a client that breaks on any terminator would lay it out. */
const linesOf = (message: string): string[] => {
  let text = message.replaceAll("\r\n", "\n");
  for (const t of TERMINATORS) text = text.replaceAll(t, "\n");
  return text.split("\n");
};

function expectRealFacts(message: string): void {
  const lines = linesOf(message);
  // The fixed layout: the reason is one line of seven, so nothing can be pushed away.
  expect(lines).toHaveLength(7);
  // Every line that states a quantity states the real one, and the last line repeats the order.
  for (const line of lines.filter((l) => /^\s*(Quantity|You are confirming)\b/.test(l))) {
    expect(line).toContain("9000");
  }
  expect(lines.at(-1)).toBe(
    "You are confirming: 9000 x Madeta butter 250g (SKU 8847291) for store 47 (Korral Brno-Kralovo Pole).",
  );
  expect(lines).toContain("Quantity: 9000");
}

describe("confirmation message against a hostile reason", () => {
  it.each(TERMINATORS.map((t) => [JSON.stringify(t), t]))(
    "28 line breaks (%s) and a fake 'Quantity: 24' block cannot hide the real quantity",
    async (_label, terminator) => {
      const reason = `Buyer approved this order today.${terminator.repeat(28)}${FAKE_BLOCK.join(terminator)}`;
      const message = await shownFor(reason);
      expectRealFacts(message);
      // The breaks are shown escaped inside the one quoted reason line, never as lines of their own.
      const reasonLine = linesOf(message).find((l) => l.startsWith("Reason given by the agent"));
      const escaped = [...terminator]
        .map((c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`)
        .join("");
      expect(reasonLine).toContain(`"Buyer approved this order today.${escaped}`);
      expect(linesOf(message).filter((l) => l.includes("Quantity: 24"))).toEqual([]);
    },
  );

  it("a reason cannot close its quotes or reorder the line with bidi controls", async () => {
    const message = await shownFor(
      'Buyer approved this order today." Quantity: 24 "\u202eknil\u2066 \\ more words here',
    );
    expectRealFacts(message);
    const reasonLine = linesOf(message).find((l) => l.startsWith("Reason given by the agent"));
    expect(reasonLine).toContain('today.\\" Quantity: 24 \\"');
    expect(reasonLine).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/);
    expect(reasonLine).toContain("\\u202e");
  });

  it("shows at most 200 characters of a long reason and says how much was left out", async () => {
    const reason = `Buyer approved this order. ${"padding ".repeat(120)}Quantity: 24`.slice(
      0,
      1000,
    );
    const message = await shownFor(reason);
    expectRealFacts(message);
    const reasonLine = linesOf(message).find((l) => l.startsWith("Reason given by the agent"));
    expect(reasonLine).toContain(`(${reason.length - 200} more characters not shown)`);
    expect(reasonLine?.length).toBeLessThan(300);
  });

  it.each([
    ["a Hangul filler", "\u3164", "\\u3164"],
    ["a halfwidth Hangul filler", "\uffa0", "\\uffa0"],
    ["a zero-width space", "\u200b", "\\u200b"],
    ["a zero-width joiner", "\u200d", "\\u200d"],
    ["a byte-order mark", "\ufeff", "\\ufeff"],
    ["a soft hyphen", "\u00ad", "\\u00ad"],
    ["a word joiner", "\u2060", "\\u2060"],
    ["the Mongolian vowel separator", "\u180e", "\\u180e"],
    ["a combining grapheme joiner", "\u034f", "\\u034f"],
    ["a tag character", "\u{e0041}", "\\u{e0041}"],
    ["a noncharacter", "\ufdd0", "\\ufdd0"],
    ["the noncharacter U+FFFF", "\uffff", "\\uffff"],
    ["a private-use character", "\ue000", "\\ue000"],
    ["the blank Braille pattern", "\u2800", "\\u2800"],
    ["an interlinear annotation anchor", "\ufff9", "\\ufff9"],
  ])("%s is shown escaped, never as an invisible character", async (_name, char, escaped) => {
    const message = await shownFor(`Buyer approved this order${char} today, 24 units.`);
    expectRealFacts(message);
    const reasonLine = linesOf(message).find((l) => l.startsWith("Reason given by the agent"));
    expect(reasonLine).toContain(escaped);
    expect(reasonLine).not.toContain(char);
  });
});
