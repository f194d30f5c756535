import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import type { StoreKeyProvider } from "../../src/keys/provider.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { type RunningEmulator, startEmulator } from "../../src/storelink-emulator.js";
import { connect, errorOf, type Harness, HERO_REASON, MapKeyProvider } from "../helpers/harness.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * The MCP server over the real SDK protocol with HttpStoreLinkClient against the emulator: the
 * 401 reload-and-retry-once policy, per-store messages and the write's audit outcomes must be the
 * same as with the in-memory StoreLink.
 */

let emulator: RunningEmulator;
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await emulator?.close();
});

/** `keyReadsDown`: the first N reads by idempotency key fail as unavailable. */
async function setup(
  keys: StoreKeyProvider = new MapKeyProvider(),
  faults = { cutAfterOrders: 0 },
  keyReadsDown = 0,
): Promise<Harness> {
  emulator = await startEmulator({ faults });
  const storelink = new ScriptedStoreLink(
    new HttpStoreLinkClient({ baseUrl: emulator.url, timeoutMs: 5_000 }),
  );
  for (let i = 0; i < keyReadsDown; i++) storelink.fail("getOrderRequest", { kind: "unavailable" });
  harness = await connect({ storelink, keys });
  return harness;
}

/** Hands out a stale key until asked for a fresh one: a rotation mid-call. */
class RotatedKeys implements StoreKeyProvider {
  readonly lookups: boolean[] = [];
  async getKey(storeId: string, options?: { fresh?: boolean }): Promise<ApiKey | undefined> {
    this.lookups.push(options?.fresh === true);
    const value = SEED_ACCEPTED_KEYS[storeId];
    if (value === undefined) return undefined;
    return new ApiKey(options?.fresh ? value : `${value}_stale`);
  }
}

const order = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

describe("MCP server over HttpStoreLinkClient", () => {
  it("runs the demo flow end to end over HTTP", async () => {
    const h = await setup();
    const lookup = await h.call("lookup_sku", { query: "butter" });
    expect(lookup.structuredContent).toMatchObject({ matches: [{ sku: "8847291" }] });
    const stock = await h.call("get_stock_position", {
      sku: "8847291",
      store_ids: ["47", "102", "111"],
    });
    expect(stock.structuredContent).toMatchObject({
      stores: [
        { store_id: "47", gap: 8 },
        { store_id: "102", gap: -4 },
        { store_id: "111", gap: 3 },
      ],
    });
    const created = await h.call("create_replenishment_order", order);
    expect(created.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
    expect(h.recorder.audits.map((a) => a.outcome)).toEqual(["CREATED"]);
    const status = await h.call("get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(status.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
  });

  it("a rotated key: the 401 is retried once with a fresh key and the call succeeds", async () => {
    const keys = new RotatedKeys();
    const h = await setup(keys);
    const created = await h.call("create_replenishment_order", order);
    expect(created.isError).toBeFalsy();
    expect(created.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
    expect(keys.lookups).toEqual([false, true]);
    // One attempt, one audit line: the 401 itself is not an outcome.
    expect(h.recorder.audits).toMatchObject([{ outcome: "CREATED", order_id: "RPL-47-001" }]);
  });

  it("a key that stays wrong: the per-store auth_failed message after exactly one reload", async () => {
    const keys = new MapKeyProvider({ ...SEED_ACCEPTED_KEYS, "63": "slk_63_stale" });
    const h = await setup(keys);
    const result = await h.call("get_stock_position", { sku: "8847291", store_ids: ["63"] });
    expect(errorOf(result).message).toContain(
      "Authentication failed for store 63 after key reload.",
    );
    expect(keys.lookups).toEqual([
      { storeId: "63", fresh: false },
      { storeId: "63", fresh: true },
    ]);
  });

  it("degrades per store: real numbers beside a credentials error and not_ranged", async () => {
    const keys = new MapKeyProvider({ ...SEED_ACCEPTED_KEYS });
    delete keys.keys["128"];
    const h = await setup(keys);
    const result = await h.call("get_stock_position", {
      sku: "2205617",
      store_ids: ["47", "128", "102"],
    });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      stores: [
        { store_id: "47", status: "ok", on_hand: 16 },
        {
          store_id: "128",
          status: "error",
          error: {
            type: "no_credentials",
            message: "No credentials for store 128. Ask Korral IT for access.",
          },
        },
        { store_id: "102", status: "ok", on_hand: 22 },
      ],
    });
    const notRanged = await h.call("get_stock_position", { sku: "6620174", store_ids: ["111"] });
    expect(errorOf(notRanged).type).toBe("not_ranged");
  });

  it("connection cut after the POST landed: outcome_unknown, an UNCERTAIN audit, and the order exists", async () => {
    // StoreLink cannot be asked by key either (four reads within the write's budget).
    const h = await setup(new MapKeyProvider(), { cutAfterOrders: 1 }, 4);
    const result = await h.call("create_replenishment_order", order);
    const error = errorOf(result);
    expect(error.type).toBe("outcome_unknown");
    expect(error.retryable).toBe(false);
    expect(error.next_step).toContain("get_replenishment_status");
    const given = (result.structuredContent as { idempotency_key?: string }).idempotency_key;
    expect(given).toMatch(/^korral-/);
    expect(h.recorder.audits).toHaveLength(1);
    expect(h.recorder.audits[0]).toMatchObject({
      outcome: "UNCERTAIN",
      order_id: null,
      store_id: "47",
      reason: HERO_REASON,
      idempotency_key: given,
    });
    const status = await h.call("get_replenishment_status", {
      store_id: "47",
      idempotency_key: given,
    });
    expect(status.structuredContent).toMatchObject({
      state: "created",
      order_id: "RPL-47-001",
      quantity: 24,
    });
  });

  it("StoreLink down: storelink_unavailable for reads and a REJECTED write, no crash", async () => {
    const h = await setup();
    await emulator.close();
    const lookup = await h.call("lookup_sku", { query: "butter" });
    expect(errorOf(lookup)).toMatchObject({ type: "storelink_unavailable", retryable: true });
    const created = await h.call("create_replenishment_order", order);
    expect(errorOf(created).type).toBe("storelink_unavailable");
    expect(h.recorder.audits.map((a) => a.outcome)).toEqual(["REJECTED"]);
  });
});
