import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { connect, errorOf, type Harness, HERO_REASON, MapKeyProvider } from "../helpers/harness.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";

/**
 * Models and the Inspector CLI send `sku=8847291` as the number 8847291. A
 * non-negative safe integer is accepted wherever a SKU, store id, store_ids entry or lookup query
 * is expected, and means its decimal text; anything else that is not a string stays refused with
 * a message saying what to send. Order ids are always text (RPL-<store>-<seq>).
 */

const FIXED = new Date("2026-03-02T08:00:00.000Z");
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** A harness whose StoreLink clock stands still, so two reads of the same stock are equal. */
const frozen = async (): Promise<Harness> => {
  h = await connect({ storelink: new InMemoryStoreLink({ now: () => FIXED }) });
  return h;
};

/** Pairs of calls that must give identical results: [tool, number form, string form]. */
const SAME: [string, Record<string, unknown>, Record<string, unknown>][] = [
  ["lookup_sku", { query: 8847 }, { query: "8847" }],
  ["lookup_sku", { query: 8847291 }, { query: "8847291" }],
  [
    "get_stock_position",
    { sku: 8847291, store_ids: [47, 102, 111] },
    { sku: "8847291", store_ids: ["47", "102", "111"] },
  ],
  [
    "get_stock_position",
    { sku: "8847291", store_ids: [47, "63"] },
    { sku: "8847291", store_ids: ["47", "63"] },
  ],
  // Errors too: an unknown store or SKU given as a number is reported like its text form.
  ["get_stock_position", { sku: 1, store_ids: [47] }, { sku: "1", store_ids: ["47"] }],
  [
    "get_stock_position",
    { sku: 8847291, store_ids: [999] },
    { sku: "8847291", store_ids: ["999"] },
  ],
  [
    "create_replenishment_order",
    { store_id: 47, sku: 8847291, quantity: 24, reason: HERO_REASON, dry_run: true },
    { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON, dry_run: true },
  ],
];

describe("whole numbers as ids, through the SDK client", () => {
  for (const [tool, asNumber, asText] of SAME) {
    it(`${tool} ${JSON.stringify(asNumber)} answers exactly as its string form`, async () => {
      const harness = await frozen();
      const byNumber = await harness.call(tool, asNumber);
      const byText = await harness.call(tool, asText);
      expect(byNumber).toEqual(byText);
    });
  }

  it("the number form succeeds where it used to be refused", async () => {
    const harness = await frozen();
    const stock = await harness.call("get_stock_position", { sku: 8847291, store_ids: [47] });
    expect(stock.isError).toBeFalsy();
    expect(stock.structuredContent).toMatchObject({
      sku: "8847291",
      stores: [{ status: "ok", store_id: "47", on_hand: 3, units_sold_last_24h: 11, gap: 8 }],
    });
    const lookup = await harness.call("lookup_sku", { query: 8847291 });
    expect(lookup.structuredContent).toMatchObject({
      query: "8847291",
      matches: [{ sku: "8847291" }],
    });
  });

  it("a write with numeric ids creates the order for the store and SKU as text", async () => {
    const harness = await frozen();
    const made = await harness.call("create_replenishment_order", {
      store_id: 47,
      sku: 8847291,
      quantity: 24,
      reason: HERO_REASON,
    });
    expect(made.structuredContent).toMatchObject({
      mode: "submitted",
      order_id: "RPL-47-001",
      store_id: "47",
      sku: "8847291",
    });
    const audit = harness.recorder.audits.at(-1);
    expect(audit).toMatchObject({ outcome: "CREATED", store_id: "47", sku: "8847291" });
    const byNumber = await harness.call("get_replenishment_status", {
      store_id: 47,
      order_id: "RPL-47-001",
    });
    const byText = await harness.call("get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(byNumber.isError).toBeFalsy();
    expect(byNumber).toEqual(byText);
  });

  it("the trace records the arguments as sent: numbers stay numbers", async () => {
    const harness = await frozen();
    await harness.call("get_stock_position", { sku: 8847291, store_ids: [47, "102"] });
    const trace = harness.recorder.traces.at(-1);
    expect(trace?.status).toBe("ok");
    expect(trace?.args).toEqual({ sku: 8847291, store_ids: [47, "102"] });
  });

  it("a refused write with numeric ids names its store and SKU as text in the trace and audit", async () => {
    const harness = await frozen();
    const result = await harness.call("create_replenishment_order", {
      store_id: 47,
      sku: 8847291,
      quantity: 24,
      reason: "n/a",
    });
    expect(errorOf(result).type).toBe("invalid_arguments");
    expect(harness.recorder.traces.at(-1)?.store_id).toBe("47");
    expect(harness.recorder.audits).toMatchObject([
      { outcome: "REJECTED", store_id: "47", sku: "8847291", quantity: 24 },
    ]);
  });

  /** Values that are not a string and not a non-negative safe integer, with the message's gist. */
  const REFUSED: [value: unknown, message: RegExp][] = [
    [47.5, /must be a string such as "47" \(a whole number is also accepted\)/],
    [-47, /must not be negative/],
    [Number.NaN, /must be a string such as "47"/],
    [Number.POSITIVE_INFINITY, /must be a string such as "47"/],
    [2 ** 53, /must be at most 9007199254740991 as a number; send a longer id as a string/],
    [1e21, /must be at most 9007199254740991 as a number/],
    [true, /must be a string such as "47"/],
    [null, /must be a string such as "47"/],
    [{ id: 47 }, /must be a string such as "47"/],
    [[47], /must be a string such as "47"/],
  ];

  for (const [value, message] of REFUSED) {
    it(`refuses store_id ${String(JSON.stringify(value) ?? value)} with a clear message`, async () => {
      const harness = await frozen();
      for (const [tool, args, field] of [
        ["get_replenishment_status", { store_id: value, order_id: "RPL-47-001" }, "store_id"],
        ["get_stock_position", { sku: "8847291", store_ids: [value] }, "store_ids.0"],
        [
          "create_replenishment_order",
          { store_id: value, sku: "8847291", quantity: 24, reason: HERO_REASON },
          "store_id",
        ],
      ] as const) {
        const error = errorOf(await harness.call(tool, args));
        expect(error.type).toBe("invalid_arguments");
        expect(error.message).toContain(`${field}: `);
        expect(error.message).toMatch(message);
      }
      // The same rule for a SKU and a query, with their own example.
      const sku = errorOf(
        await harness.call("get_stock_position", { sku: value, store_ids: ["47"] }),
      );
      expect(sku.message).toMatch(/sku: /);
      const query = errorOf(await harness.call("lookup_sku", { query: value }));
      expect(query.message).toMatch(/query: /);
    });
  }

  it("order ids are text only: a number is refused with what an order id looks like", async () => {
    const harness = await frozen();
    const error = errorOf(
      await harness.call("get_replenishment_status", { store_id: "47", order_id: 1 }),
    );
    expect(error.type).toBe("invalid_arguments");
    expect(error.message).toContain(
      'order_id: must be a string such as "RPL-47-001", the order_id create_replenishment_order returned',
    );
  });
});

describe("the advertised schema says so", () => {
  it("tools/list offers string or integer for every id but order_id, and clients can validate", async () => {
    const harness = await frozen();
    const { tools } = await harness.client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    // The SDK's own validator, as SDK clients use it on the schemas a server advertises.
    const validator = new AjvJsonSchemaValidator();
    const validate = (tool: string, args: unknown): boolean => {
      const schema = byName.get(tool)?.inputSchema;
      if (!schema) throw new Error(`no tool ${tool}`);
      return validator.getValidator(schema)(args).valid;
    };
    // The schema's own word: each id is a string or a non-negative integer.
    const properties = byName.get("get_stock_position")?.inputSchema.properties ?? {};
    const sku = (properties as Record<string, object>).sku;
    expect(sku).toMatchObject({
      anyOf: [{ type: "string" }, { type: "integer", minimum: 0 }],
    });
    expect(validate("get_stock_position", { sku: 8847291, store_ids: [47, "102"] })).toBe(true);
    expect(validate("lookup_sku", { query: 8847 })).toBe(true);
    expect(validate("create_replenishment_order", { ...validWrite, store_id: 47 })).toBe(true);
    expect(validate("get_replenishment_status", { store_id: 47, order_id: "RPL-47-001" })).toBe(
      true,
    );
    // And what stays refused is refused by a client that checks the schema, too.
    expect(validate("get_stock_position", { sku: 8847291.5, store_ids: ["47"] })).toBe(false);
    expect(validate("get_stock_position", { sku: -1, store_ids: ["47"] })).toBe(false);
    expect(validate("get_stock_position", { sku: "..", store_ids: ["47"] })).toBe(false);
    expect(validate("get_replenishment_status", { store_id: "47", order_id: 1 })).toBe(false);
  });
});

const validWrite = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

describe("over HTTP, numbers arrive as JSON numbers", () => {
  it("a raw tools/call with numeric ids is answered like the string form", async () => {
    const app = createApp(composeDeps({ keys: new MapKeyProvider() }));
    const res = await request(app)
      .post("/mcp")
      .set(MCP_HEADERS)
      .send(toolCall(1, "get_stock_position", { sku: 8847291, store_ids: [47, 63] }));
    expect(res.status).toBe(200);
    expect(res.body.result.isError).toBeFalsy();
    expect(res.body.result.structuredContent.stores.map((s: { gap: number }) => s.gap)).toEqual([
      8, -2,
    ]);
  });
});
