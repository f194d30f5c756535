import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERROR_TYPES } from "../../src/errors.js";
import { MAX_ORDER_QUANTITY, reasonProblem } from "../../src/policy/order-rules.js";
import { SEED_STOCK, SEED_STORES } from "../../src/storelink/seed.js";
import {
  arbitraryArgs,
  nearValidOrder,
  pollutedKeys,
  RUNS,
  TOOL_NAMES,
  type ToolName,
  validOrder,
} from "../helpers/arbitraries.js";
import { connect, type Harness } from "../helpers/harness.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * Every tool, fed arbitrary arguments through the real protocol (SDK Client over
 * InMemoryTransport). Whatever arrives, the answer is an isError result, a protocol-level
 * InvalidParams, or a valid success; never an internal error, never a write from bad input.
 */

let h: Harness;
let storelink: ScriptedStoreLink;

beforeAll(async () => {
  storelink = new ScriptedStoreLink();
  h = await connect({ storelink });
});
afterAll(async () => {
  await h.close();
});

/** An independent statement of what a valid order is, so a success can be checked against it. */
function isValidOrder(args: unknown): boolean {
  if (args === null || typeof args !== "object" || Array.isArray(args)) return false;
  const a = args as Record<string, unknown>;
  const allowed = ["store_id", "sku", "quantity", "reason"];
  if (Object.keys(a).some((k) => !allowed.includes(k))) return false;
  const { quantity, reason } = a;
  // An id may be text or a non-negative safe integer (its decimal text).
  const text = (v: unknown): string | null =>
    typeof v === "string"
      ? v.trim()
      : typeof v === "number" && Number.isSafeInteger(v) && v >= 0
        ? String(v)
        : null;
  const store = text(a.store_id);
  const sku = text(a.sku);
  if (store === null || sku === null || typeof reason !== "string") return false;
  const ranged = SEED_STOCK[sku]?.[store] !== undefined;
  return (
    SEED_STORES.some((s) => s.store_id === store) &&
    ranged &&
    typeof quantity === "number" &&
    Number.isInteger(quantity) &&
    quantity >= 1 &&
    quantity <= MAX_ORDER_QUANTITY &&
    reasonProblem(reason) === null
  );
}

type Outcome = { kind: "result"; result: CallToolResult } | { kind: "protocol"; code: number };

async function callSafely(tool: string, args: unknown): Promise<Outcome> {
  try {
    return { kind: "result", result: await h.call(tool, args) };
  } catch (error) {
    // A protocol fault is acceptable only as "your params are invalid", never an internal error.
    if (error instanceof McpError) return { kind: "protocol", code: error.code };
    throw error;
  }
}

/** The invariants every single call must satisfy, whatever its arguments. */
async function checkCall(tool: ToolName, args: unknown): Promise<Outcome> {
  const landedBefore = storelink.landed.length;
  const outcome = await callSafely(tool, args);
  if (outcome.kind === "protocol") {
    expect(outcome.code).toBe(ErrorCode.InvalidParams);
  } else if (outcome.result.isError) {
    const error = (outcome.result.structuredContent as { error: { type: string } }).error;
    expect(ERROR_TYPES).toContain(error.type);
    expect(error.type).not.toBe("internal");
    const text = JSON.stringify(outcome.result);
    expect(text).not.toMatch(/\n\s+at /);
  }
  const wrote = storelink.landed.length - landedBefore;
  const succeeded = outcome.kind === "result" && outcome.result.isError !== true;
  if (tool === "create_replenishment_order") {
    expect(wrote).toBe(succeeded ? 1 : 0);
    if (succeeded) expect(isValidOrder(args)).toBe(true);
  } else {
    expect(wrote).toBe(0);
  }
  expect(pollutedKeys()).toEqual([]);
  return outcome;
}

describe("tool arguments: property-based, through the protocol", () => {
  for (const tool of TOOL_NAMES) {
    it(`${tool}: any arguments give isError, InvalidParams or a valid success`, async () => {
      await fc.assert(
        fc.asyncProperty(arbitraryArgs(tool), async (args) => {
          await checkCall(tool, args);
        }),
        RUNS,
      );
    });
  }

  it("near-valid orders (exactly one thing wrong) are all refused and nothing is written", async () => {
    await fc.assert(
      fc.asyncProperty(nearValidOrder, async (order) => {
        const outcome = await checkCall("create_replenishment_order", order);
        const refused =
          outcome.kind === "protocol" ||
          (outcome.kind === "result" && outcome.result.isError === true);
        expect(refused).toBe(true);
      }),
      { numRuns: 150 },
    );
  });

  it("an own __proto__ key never pollutes; the SDK drops it, so the order written is the valid one", async () => {
    // JSON.parse makes "__proto__" an own key, exactly as express.json does with a request body.
    const args = JSON.parse(
      JSON.stringify({ ...validOrder("63"), sku: "8847315" }).replace(
        /^\{/,
        '{"__proto__":{"polluted":"yes","quantity":9999},',
      ),
    ) as Record<string, unknown>;
    expect(Object.hasOwn(args, "__proto__")).toBe(true);
    const landedBefore = storelink.landed.length;
    const result = await h.call("create_replenishment_order", args);
    expect(pollutedKeys()).toEqual([]);
    if (result.isError !== true) {
      // Documented SDK behaviour (its z.record parse of `arguments` drops the key): the order is
      // exactly the valid part, and nothing from the payload reached it.
      expect(storelink.landed.slice(landedBefore)).toEqual([
        expect.objectContaining({ store_id: "63", sku: "8847315", quantity: 24 }),
      ]);
    } else {
      expect(storelink.landed.length).toBe(landedBefore);
    }
  });

  it("after all that, the server still works and numbering continues with no gaps", async () => {
    const landed47 = storelink.landed.filter((o) => o.store_id === "47").length;
    const result = await h.call("create_replenishment_order", validOrder("47"));
    expect(result.isError).toBeFalsy();
    const expected = `RPL-47-${String(landed47 + 1).padStart(3, "0")}`;
    expect((result.structuredContent as { order_id: string }).order_id).toBe(expected);
    expect(pollutedKeys()).toEqual([]);
  });
});
