import { fileURLToPath } from "node:url";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { ERROR_TYPES } from "../../src/errors.js";
import { FileKeyProvider } from "../../src/keys/file.js";
import { StoreLinkError } from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { connect, errorOf, type Harness, HERO_REASON, MapKeyProvider } from "../helpers/harness.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

const EXAMPLE_KEYS = fileURLToPath(new URL("../../keys.example.json", import.meta.url));

let h: Harness;
afterEach(async () => {
  await h?.close();
});

type Json = Record<string, unknown>;
const ok = (result: CallToolResult): Json => {
  expect(result.isError, JSON.stringify(result)).not.toBe(true);
  // The same JSON as text, for clients that read only content.
  const [first] = result.content;
  expect(first?.type).toBe("text");
  expect(JSON.parse((first as { text: string }).text)).toEqual(result.structuredContent);
  return result.structuredContent as Json;
};
const stores = (result: CallToolResult) => (result.structuredContent as { stores: Json[] }).stores;

const order = (over: Json = {}) => ({
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  reason: HERO_REASON,
  ...over,
});

describe("tool surface", () => {
  it("lists exactly the declared tools, each with both schemas and every annotation set", async () => {
    h = await connect();
    const { tools } = await h.client.listTools();
    expect(tools.map((t) => t.name)).toEqual([...TOOL_NAMES]);
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe("object");
      expect(tool.outputSchema?.type).toBe("object");
      for (const hint of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]) {
        expect(typeof (tool.annotations as Json)[hint], `${tool.name}.${hint}`).toBe("boolean");
      }
      expect(tool.description).toContain("lookup_sku -> get_stock_position");
      expect(tool.description).toMatch(/Not supported/);
      expect(tool.description?.length).toBeLessThan(2000);
    }
    const byName = new Map(tools.map((t) => [t.name, t]));
    const write = byName.get("create_replenishment_order");
    expect(write?.annotations?.readOnlyHint).toBe(false);
    expect(write?.annotations?.idempotentHint).toBe(false);
    // The write is the one tool that is not read-only: every other declared tool is a read.
    for (const read of TOOL_NAMES.filter((name) => name !== "create_replenishment_order")) {
      expect(byName.get(read)?.annotations?.readOnlyHint).toBe(true);
    }
    expect(write?.description).toMatch(/confirm store, SKU and quantity/i);
    expect(write?.description).toMatch(/never infer/i);
    expect(write?.description).toMatch(/live stock numbers/i);
    expect(byName.get("get_stock_position")?.description).toMatch(/gap = 0: knife edge, NOT fine/);
  });

  it("documents every input argument in its schema, and only those the handler accepts", async () => {
    h = await connect();
    const { tools } = await h.client.listTools();
    for (const tool of tools) {
      const props = tool.inputSchema.properties as Record<string, { description?: string }>;
      for (const [name, prop] of Object.entries(props)) {
        expect(prop.description, `${tool.name}.${name} has a description`).toBeTruthy();
      }
      expect((tool.inputSchema as Json).additionalProperties).toBe(false);
    }
  });

  it("has no price, cost, margin or supplier field anywhere in the schemas", async () => {
    h = await connect();
    const { tools } = await h.client.listTools();
    const keys: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === "object") {
        for (const [k, v] of Object.entries(node)) {
          if (k === "properties") keys.push(...Object.keys(v as Json));
          walk(v);
        }
      }
    };
    walk(tools.map((t) => [t.inputSchema, t.outputSchema]));
    expect(keys.length).toBeGreaterThan(10);
    for (const key of keys) expect(key).not.toMatch(/price|cost|margin|supplier|vendor/i);
  });
});

describe("the demo flow", () => {
  it("butter -> 8847291 -> stock at 47, 102, 111 -> 24 units at 47 -> RPL-47-001 -> status", async () => {
    h = await connect();
    const found = ok(await h.call("lookup_sku", { query: "butter" }));
    expect(found.matches).toEqual([
      { sku: "8847291", name: "Madeta butter 250g", category: "Dairy", unit: "each" },
    ]);

    const stock = await h.call("get_stock_position", {
      sku: "8847291",
      store_ids: ["47", "102", "111"],
    });
    ok(stock);
    expect(stores(stock).map((s) => [s.store_id, s.on_hand, s.units_sold_last_24h, s.gap])).toEqual(
      [
        ["47", 3, 11, 8],
        ["102", 9, 5, -4],
        ["111", 6, 9, 3],
      ],
    );
    expect(stores(stock)[0]).toMatchObject({
      store_name: "Korral Brno-Kralovo Pole",
      reading: "shortfall",
    });
    expect(Date.parse(String(stores(stock)[0]?.as_of))).not.toBeNaN();

    const created = ok(await h.call("create_replenishment_order", order()));
    expect(created).toMatchObject({ order_id: "RPL-47-001", status: "submitted", quantity: 24 });
    expect(created.confirmation).toContain("RPL-47-001");
    expect(created.confirmation).toContain("24 x Madeta butter 250g");
    expect(created.confirmation).toContain("Korral Brno-Kralovo Pole");

    const status = ok(
      await h.call("get_replenishment_status", { store_id: "47", order_id: "RPL-47-001" }),
    );
    expect(status).toMatchObject({
      order_id: "RPL-47-001",
      status: "submitted",
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: HERO_REASON,
    });
  });

  it("shows the whole hero case, with 128 as a knife edge, not as covered", async () => {
    h = await connect();
    const stock = await h.call("get_stock_position", {
      sku: "8847291",
      store_ids: ["47", "63", "102", "111", "128"],
    });
    ok(stock);
    expect(stores(stock).map((s) => [s.store_id, s.gap, s.reading])).toEqual([
      ["47", 8, "shortfall"],
      ["63", -2, "covered"],
      ["102", -4, "covered"],
      ["111", 3, "shortfall"],
      ["128", 0, "knife_edge"],
    ]);
  });
});

describe("lookup_sku", () => {
  it.each([
    ["BuTtEr", ["8847291"]],
    ["8847", ["8847291", "8847315", "8847402"]],
    ["6620118", ["6620118"]],
    ["  rolls ", ["6620174"]],
    ["7291", []], // a code matches by exact or prefix only
  ])("%j matches %j", async (query, skus) => {
    h = await connect();
    const result = ok(await h.call("lookup_sku", { query }));
    expect((result.matches as Json[]).map((m) => m.sku)).toEqual(skus);
  });

  it("answers no match with an empty list and a hint, not an error", async () => {
    h = await connect();
    const result = ok(await h.call("lookup_sku", { query: "caviar" }));
    expect(result.matches).toEqual([]);
    expect(result.hint).toMatch(/caviar/);
  });
});

describe("get_stock_position failures", () => {
  it("gives per-store entries for an unknown store and a SKU not ranged there", async () => {
    h = await connect();
    const result = await h.call("get_stock_position", {
      sku: "6620174",
      store_ids: ["47", "111", "999"],
    });
    ok(result);
    const [s47, s111, s999] = stores(result);
    expect(s47).toMatchObject({ status: "ok", store_id: "47" });
    expect(s111).toMatchObject({
      status: "error",
      error: { type: "not_ranged", retryable: false },
    });
    expect(s999).toMatchObject({ status: "error", error: { type: "unknown_store" } });
    expect(JSON.stringify(s999)).toContain("47 (Korral Brno-Kralovo Pole)");
  });

  it("fails the whole call for an unknown SKU", async () => {
    h = await connect();
    const error = errorOf(
      await h.call("get_stock_position", { sku: "0000000", store_ids: ["47"] }),
    );
    expect(error.type).toBe("unknown_sku");
    expect(error.next_step).toContain("lookup_sku");
  });

  it("is an error when every store fails, never a wall of failures read as no gaps", async () => {
    h = await connect();
    const result = await h.call("get_stock_position", {
      sku: "2205617",
      store_ids: ["128", "998"],
    });
    const error = errorOf(result);
    expect(error.message).toContain("store 128");
    expect(error.message).toContain("store 998");
    expect(error.next_step).toContain("no gaps");
    expect(stores(result)).toHaveLength(2);
  });

  it("degrades per store with the example keys: 63 stale, 128 missing, the rest real", async () => {
    const storelink = new ScriptedStoreLink();
    h = await connect({ storelink, keys: new FileKeyProvider(EXAMPLE_KEYS) });
    const result = await h.call("get_stock_position", {
      sku: "8847291",
      store_ids: ["47", "63", "102", "128"],
    });
    ok(result);
    const [s47, s63, s102, s128] = stores(result);
    expect(s47).toMatchObject({ status: "ok", gap: 8 });
    expect(s102).toMatchObject({ status: "ok", gap: -4 });
    expect(s63?.error).toMatchObject({
      type: "auth_failed",
      message:
        "Authentication failed for store 63 after key reload. If it still fails, retry shortly; if it keeps failing, contact Korral IT.",
    });
    expect(s128?.error).toMatchObject({
      type: "no_credentials",
      message: "No credentials for store 128. Ask Korral IT for access.",
    });
    // 63 was tried exactly twice (original + one reload); 128 never reached StoreLink.
    expect(storelink.calls("getStock").filter((c) => c.storeId === "63")).toHaveLength(2);
    expect(storelink.calls("getStock").filter((c) => c.storeId === "128")).toHaveLength(0);
  });

  it("lists each store once even if asked twice", async () => {
    h = await connect();
    const result = await h.call("get_stock_position", { sku: "8847291", store_ids: ["47", "47"] });
    expect(stores(ok(result) && result)).toHaveLength(1);
  });
});

describe("create_replenishment_order", () => {
  it("numbers orders per store from 001", async () => {
    h = await connect();
    const ids = [];
    // Distinct quantities: identical key-less orders within the dedupe window fold into one.
    for (const [store_id, quantity] of [
      ["47", 24],
      ["47", 25],
      ["102", 24],
      ["47", 26],
    ] as const) {
      ids.push(
        ok(await h.call("create_replenishment_order", order({ store_id, quantity }))).order_id,
      );
    }
    expect(ids).toEqual(["RPL-47-001", "RPL-47-002", "RPL-102-001", "RPL-47-003"]);
  });

  it("reads kg SKUs as kilograms in the confirmation", async () => {
    h = await connect();
    const created = ok(
      await h.call("create_replenishment_order", order({ sku: "4410220", quantity: 40 })),
    );
    expect(created.confirmation).toContain("40 kg of Bananas loose");
  });

  it.each([
    ["empty", ""],
    ["whitespace", "   "],
    ["a bare number", "24242424242424"],
    ["short", "Low stock."],
    ["two words", "Restock-butter-urgently please"],
    ["a placeholder", "n/a"],
    ["a placeholder in caps", "TBD"],
  ])("rejects a reason that is %s, sending nothing to StoreLink", async (_what, reason) => {
    const storelink = new ScriptedStoreLink();
    h = await connect({ storelink });
    const error = errorOf(await h.call("create_replenishment_order", order({ reason })));
    expect(error.type).toBe("invalid_arguments");
    expect(error.message).toMatch(/reason/);
    expect(storelink.calls("createOrder")).toHaveLength(0);
    expect(h.recorder.audits).toMatchObject([{ outcome: "REJECTED", order_id: null, reason }]);
  });

  it.each([
    ["zero", 0, /at least 1/],
    ["negative", -5, /at least 1/],
    ["fractional", 2.5, /whole number/],
    ["over the bound", 10_001, /at most 10000 units/],
    ["a string", "24", /whole number/],
    ["missing", undefined, /whole number/],
  ])("rejects a quantity that is %s", async (_what, quantity, message) => {
    const storelink = new ScriptedStoreLink();
    h = await connect({ storelink });
    const error = errorOf(await h.call("create_replenishment_order", order({ quantity })));
    expect(error.type).toBe("invalid_arguments");
    expect(error.message).toMatch(message);
    expect(storelink.calls("createOrder")).toHaveLength(0);
  });

  it("rejects an argument the tool does not have rather than ignoring it", async () => {
    h = await connect();
    const error = errorOf(await h.call("create_replenishment_order", order({ priority: "high" })));
    expect(error.type).toBe("invalid_arguments");
    expect(error.message).toContain("priority");
  });

  it.each([
    ["an unknown store", { store_id: "999" }, "unknown_store"],
    ["an unknown SKU", { sku: "1234567" }, "unknown_sku"],
    ["a SKU not ranged at the store", { store_id: "128", sku: "2205617" }, "not_ranged"],
    ["a store without credentials", { store_id: "128" }, "no_credentials"],
  ])("refuses %s, creating nothing", async (_what, over, type) => {
    const storelink = new ScriptedStoreLink();
    const keys = new MapKeyProvider({ ...SEED_ACCEPTED_KEYS });
    delete keys.keys["128"];
    if (type === "not_ranged") keys.keys["128"] = SEED_ACCEPTED_KEYS["128"] as string;
    h = await connect({ storelink, keys });
    expect(errorOf(await h.call("create_replenishment_order", order(over))).type).toBe(type);
    expect(h.recorder.audits).toMatchObject([{ outcome: "REJECTED", order_id: null }]);
    // A later good order is still number 001: nothing was created.
    expect(ok(await h.call("create_replenishment_order", order())).order_id).toBe("RPL-47-001");
  });

  it("retries a 401 once with the reloaded key, and a second 401 makes no third attempt", async () => {
    const storelink = new ScriptedStoreLink();
    const keys = new MapKeyProvider({ ...SEED_ACCEPTED_KEYS, "47": "stale" });
    h = await connect({ storelink, keys });
    expect(errorOf(await h.call("create_replenishment_order", order())).type).toBe("auth_failed");
    expect(storelink.calls("createOrder").map((c) => c.key)).toEqual(["stale", "stale"]);
    expect(h.recorder.audits[0]?.outcome).toBe("REJECTED");

    // The operator fixes the key: the next call uses it with no restart.
    keys.keys["47"] = SEED_ACCEPTED_KEYS["47"] as string;
    expect(ok(await h.call("create_replenishment_order", order())).order_id).toBe("RPL-47-001");
  });

  it("recovers invisibly when the reload picks up a rotated key", async () => {
    const keys = new MapKeyProvider({ ...SEED_ACCEPTED_KEYS, "47": "stale" });
    const inner = new InMemoryStoreLink();
    const storelink = new ScriptedStoreLink(inner);
    // Rotation lands between the first attempt and the reload.
    const original = storelink.createOrder.bind(storelink);
    storelink.createOrder = async (request, key) => {
      keys.keys["47"] = SEED_ACCEPTED_KEYS["47"] as string;
      return original(request, key);
    };
    h = await connect({ storelink, keys });
    expect(ok(await h.call("create_replenishment_order", order())).order_id).toBe("RPL-47-001");
    expect(storelink.calls("createOrder")).toHaveLength(2);
  });

  it("reports a write that may have landed as outcome_unknown and audits it UNCERTAIN", async () => {
    const storelink = new ScriptedStoreLink();
    storelink.createOrder = async () => {
      throw new StoreLinkError("outcome_unknown", "socket hang up after send");
    };
    h = await connect({ storelink });
    const error = errorOf(await h.call("create_replenishment_order", order()));
    expect(error.type).toBe("outcome_unknown");
    expect(error.next_step).toMatch(/get_replenishment_status/);
    expect(error.retryable).toBe(false);
    expect(h.recorder.audits).toMatchObject([{ outcome: "UNCERTAIN", reason: HERO_REASON }]);
  });

  it("hides an unexpected failure's text from the model behind a reference", async () => {
    const storelink = new ScriptedStoreLink();
    storelink.createOrder = async () => {
      throw new Error("ECONNRESET at /internal/path with secret detail");
    };
    h = await connect({ storelink });
    const result = await h.call("create_replenishment_order", order());
    const error = errorOf(result);
    expect(error.type).toBe("internal");
    expect(JSON.stringify(result)).not.toContain("secret detail");
    expect(error.message).toMatch(/reference req_[0-9a-f]{32}/);
    // It may have landed: the trail must not claim it was refused.
    expect(h.recorder.audits[0]?.outcome).toBe("UNCERTAIN");
  });

  it("keeps the unexpected failure's cause for the operator's log, under the same reference", async () => {
    const ops = captureOpsLog();
    try {
      const storelink = new ScriptedStoreLink();
      storelink.createOrder = async () => {
        throw new Error("ECONNRESET while writing the order");
      };
      h = await connect({ storelink });
      const error = errorOf(await h.call("create_replenishment_order", order()));
      const reference = /req_[0-9a-f]{32}/.exec(error.message)?.[0];
      const logged = ops.lines().find((l) => l.request_id === reference);
      expect((logged?.err as { message?: string })?.message).toBe(
        "ECONNRESET while writing the order",
      );
    } finally {
      ops.restore();
    }
  });
});

describe("get_replenishment_status", () => {
  it("treats store_id as a scope check: another store's order is not found", async () => {
    h = await connect();
    ok(await h.call("create_replenishment_order", order()));
    const error = errorOf(
      await h.call("get_replenishment_status", { store_id: "102", order_id: "RPL-47-001" }),
    );
    expect(error.type).toBe("not_found");
    expect(JSON.stringify(error)).not.toContain(HERO_REASON);
  });

  it("reports an unknown order as not found", async () => {
    h = await connect();
    expect(
      errorOf(await h.call("get_replenishment_status", { store_id: "47", order_id: "RPL-47-999" }))
        .type,
    ).toBe("not_found");
  });
});

describe("errors in general", () => {
  it("returns bad arguments as an isError result with the structured error", async () => {
    h = await connect();
    // A whole number is a valid SKU (its decimal text); a fraction is not.
    const result = await h.call("get_stock_position", { sku: 8847291.5 });
    const error = errorOf(result);
    expect(error).toMatchObject({ type: "invalid_arguments", retryable: false });
    expect(error.message).toMatch(/sku/);
    expect(error.message).toMatch(/store_ids/);
    expect((result.content[0] as { text: string }).text).toContain("Next step:");
  });

  it("uses only the documented error types", async () => {
    h = await connect({ keys: new FileKeyProvider(EXAMPLE_KEYS) });
    const results = await Promise.all([
      h.call("lookup_sku", {}),
      h.call("get_stock_position", { sku: "x", store_ids: ["47"] }),
      h.call("get_replenishment_status", { store_id: "63", order_id: "RPL-63-001" }),
      h.call("create_replenishment_order", order({ store_id: "128" })),
    ]);
    for (const result of results) {
      expect(ERROR_TYPES).toContain(errorOf(result).type);
    }
  });

  it("answers an unknown tool with a JSON-RPC error (a protocol fault)", async () => {
    h = await connect();
    await expect(h.call("delete_order", {})).rejects.toThrow(/Unknown tool: delete_order/);
  });

  it("traces every call, success or failure, with store_id a string or null", async () => {
    h = await connect();
    await h.call("lookup_sku", { query: "milk" });
    await h.call("get_stock_position", { sku: "8847291", store_ids: ["47", "102"] });
    await h.call("create_replenishment_order", order({ reason: "n/a" }));
    expect(h.recorder.traces.map((t) => [t.tool, t.store_id, t.status])).toEqual([
      ["lookup_sku", null, "ok"],
      ["get_stock_position", null, "ok"],
      ["create_replenishment_order", "47", "error"],
    ]);
    expect(h.recorder.traces[1]?.args).toEqual({ sku: "8847291", store_ids: ["47", "102"] });
    // The write's audit line and its trace line join on request_id.
    expect(h.recorder.audits[0]?.request_id).toBe(h.recorder.traces[2]?.request_id);
  });
});
