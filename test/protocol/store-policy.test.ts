import { afterEach, describe, expect, it } from "vitest";
import type { PolicySource } from "../../src/policy/policy-source.js";
import { parsePolicy, type StorePolicy, unavailablePolicy } from "../../src/policy/store-policy.js";
import { connect, errorOf, type Harness, HERO_REASON, MapKeyProvider } from "../helpers/harness.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * The store policy through the real protocol: the harness's server acts for `local:direct` (the
 * caller of a server built without one). A refused store costs no key lookup and no StoreLink
 * call for it; a refused write is audited REJECTED with who, before anything is asked or sent.
 */

const POLICY = {
  version: 1,
  mode: "enforce",
  groups: {
    "brno-read": { read: { stores: ["47"] } },
    "brno-order": { order: { stores: ["47"] } },
  },
  principals: { "local:direct": ["brno-read"] },
};

function sourceOf(document: object): PolicySource {
  const parsed = parsePolicy(JSON.stringify(document));
  if (!("policy" in parsed)) throw new Error(parsed.problem);
  return fixed(parsed.policy);
}
const fixed = (policy: StorePolicy): PolicySource => ({ current: async () => policy });

let open: Harness[] = [];
afterEach(async () => {
  await Promise.all(open.map((h) => h.close()));
  open = [];
});

async function start(policy: PolicySource) {
  const storelink = new ScriptedStoreLink();
  const keys = new MapKeyProvider();
  const h = await connect({ storelink, keys, policy });
  open.push(h);
  return { h, storelink, keys };
}

describe("the store policy over the protocol", () => {
  it("a store the principal may not read is its own entry, with no key lookup or StoreLink read for it", async () => {
    const { h, storelink, keys } = await start(sourceOf(POLICY));
    const result = await h.call("get_stock_position", { sku: "8847291", store_ids: ["47", "63"] });
    expect(result.isError).toBeFalsy();
    const stores = (
      result.structuredContent as {
        stores: { store_id: string; status: string; error?: { type: string; message: string } }[];
      }
    ).stores;
    expect(stores.map((s) => [s.store_id, s.status])).toEqual([
      ["47", "ok"],
      ["63", "error"],
    ]);
    expect(stores[1]?.error?.type).toBe("not_permitted");
    expect(stores[1]?.error?.message).toContain("Ask Korral IT for access");
    expect(keys.lookups.map((l) => l.storeId)).toEqual(["47"]);
    expect(storelink.calls("getStock").map((c) => c.storeId)).toEqual(["47"]);
  });

  it("every store refused: a whole-call error, still with each store's entry", async () => {
    const { h, keys } = await start(sourceOf(POLICY));
    const result = await h.call("get_stock_position", { sku: "8847291", store_ids: ["63", "102"] });
    expect(errorOf(result).type).toBe("not_permitted");
    expect(keys.lookups).toEqual([]);
  });

  it("an order of a store the principal may not read is not_permitted, and StoreLink is never asked", async () => {
    const { h, storelink } = await start(sourceOf(POLICY));
    const result = await h.call("get_replenishment_status", {
      store_id: "63",
      order_id: "RPL-63-001",
    });
    expect(errorOf(result).type).toBe("not_permitted");
    expect(storelink.sent).toEqual([]);
  });

  it("a write for a store the principal may not order for: REJECTED with who, nothing read or sent", async () => {
    const { h, storelink, keys } = await start(sourceOf(POLICY));
    for (const dry_run of [false, true]) {
      const result = await h.call("create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity: 24,
        reason: HERO_REASON,
        idempotency_key: `order-key-${dry_run}`,
        dry_run,
      });
      expect(errorOf(result).type).toBe("not_permitted");
    }
    expect(storelink.sent).toEqual([]);
    expect(keys.lookups).toEqual([]);
    expect(h.recorder.audits.map((a) => [a.outcome, a.by, a.store_id])).toEqual([
      ["REJECTED", "local:direct", "47"],
      ["REJECTED", "local:direct", "47"],
    ]);
    expect(h.recorder.audits[0]?.detail).toContain("may not order for store 47");
  });

  it("granted the order, the write goes through and its CREATED line says who", async () => {
    const granted = { ...POLICY, principals: { "local:direct": ["brno-read", "brno-order"] } };
    const { h, storelink } = await start(sourceOf(granted));
    const result = await h.call("create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: HERO_REASON,
    });
    expect(result.isError).toBeFalsy();
    expect(storelink.landed).toHaveLength(1);
    expect(h.recorder.audits.map((a) => [a.outcome, a.by])).toEqual([["CREATED", "local:direct"]]);
  });

  it("shadow mode refuses nothing", async () => {
    const { h } = await start(sourceOf({ ...POLICY, mode: "shadow" }));
    const result = await h.call("get_stock_position", { sku: "8847291", store_ids: ["63"] });
    expect(result.isError).toBeFalsy();
  });

  it("a policy that cannot be read fails the write closed (retryable) and gives reads an entry", async () => {
    const { h, storelink } = await start(fixed(unavailablePolicy("the file is missing")));
    const write = await h.call("create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: HERO_REASON,
    });
    expect(errorOf(write)).toMatchObject({ type: "policy_unavailable", retryable: true });
    expect(storelink.calls("createOrder")).toEqual([]);
    const read = await h.call("get_stock_position", { sku: "8847291", store_ids: ["47"] });
    expect(errorOf(read).type).toBe("policy_unavailable");
    expect(JSON.stringify(read)).not.toContain("the file is missing");
  });
});
