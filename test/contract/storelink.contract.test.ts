import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { type StoreLinkClient, StoreLinkError } from "../../src/storelink/client.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InvalidIdError } from "../../src/storelink/ids.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { startEmulator } from "../../src/storelink-emulator.js";

/**
 * One suite, two clients: the seeded in-memory StoreLink, and HttpStoreLinkClient talking to the
 * emulator over real HTTP on 127.0.0.1:0. Identical results are the proof that the seam holds.
 */

const key = (storeId: string): ApiKey => new ApiKey(SEED_ACCEPTED_KEYS[storeId] ?? "missing");
const WRONG = new ApiKey("slk_wrong");
const REASON = "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24.";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

type Factory = () => Promise<StoreLinkClient>;
const factories: [string, Factory][] = [
  ["in-memory", async () => new InMemoryStoreLink()],
  [
    "http→emulator",
    async () => {
      const emulator = await startEmulator({ storelink: new InMemoryStoreLink() });
      cleanups.push(() => emulator.close());
      return new HttpStoreLinkClient({ baseUrl: emulator.url, timeoutMs: 5_000 });
    },
  ],
];

async function kindOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StoreLinkError) return error.kind;
    throw error;
  }
  throw new Error("expected a StoreLinkError, got success");
}

describe.each(factories)("StoreLink contract: %s", (_name, make) => {
  it("lists the store directory", async () => {
    const stores = await (await make()).listStores();
    expect(stores.map((s) => s.store_id)).toEqual(["47", "63", "102", "111", "128"]);
    expect(stores[0]).toEqual({ store_id: "47", name: "Korral Brno-Kralovo Pole" });
  });

  it("looks SKUs up by name substring and code prefix; empty query → no matches", async () => {
    const client = await make();
    expect(await client.lookupSku("BUTTER")).toEqual([
      { sku: "8847291", name: "Madeta butter 250g", category: "Dairy", unit: "each" },
    ]);
    expect((await client.lookupSku("8847")).map((s) => s.sku)).toEqual([
      "8847291",
      "8847315",
      "8847402",
    ]);
    expect(await client.lookupSku("   ")).toEqual([]);
    expect(await client.lookupSku("caviar & ?q=1")).toEqual([]);
  });

  it("gets one SKU, or unknown_sku", async () => {
    const client = await make();
    expect(await client.getSku("4410220")).toMatchObject({ name: "Bananas loose", unit: "kg" });
    expect(await kindOf(client.getSku("0000000"))).toBe("unknown_sku");
    // An id outside the shared rule (a traversal attempt) is refused before anything is sent.
    await expect(client.getSku("../stores")).rejects.toBeInstanceOf(InvalidIdError);
    await expect(client.getSku("..")).rejects.toBeInstanceOf(InvalidIdError);
  });

  it("reads the stock position with the store's key", async () => {
    const reading = await (await make()).getStock("47", "8847291", key("47"));
    expect(reading).toMatchObject({
      store_id: "47",
      sku: "8847291",
      on_hand: 3,
      units_sold_last_24h: 11,
    });
    expect(Number.isNaN(Date.parse(reading.as_of))).toBe(false);
  });

  it("distinguishes not_ranged, unknown_sku, unknown_store and unauthorized", async () => {
    const client = await make();
    expect(await kindOf(client.getStock("111", "6620174", key("111")))).toBe("not_ranged");
    expect(await kindOf(client.getStock("47", "0000000", key("47")))).toBe("unknown_sku");
    expect(await kindOf(client.getStock("999", "8847291", key("47")))).toBe("unknown_store");
    expect(await kindOf(client.getStock("47", "8847291", WRONG))).toBe("unauthorized");
    // A key is valid for its own store only.
    expect(await kindOf(client.getStock("47", "8847291", key("102")))).toBe("unauthorized");
    // Store is checked before the key, the key before the SKU.
    expect(await kindOf(client.getStock("999", "0000000", WRONG))).toBe("unknown_store");
    expect(await kindOf(client.getStock("47", "0000000", WRONG))).toBe("unauthorized");
  });

  it("numbers orders per store from RPL-<store>-001 and reads them back", async () => {
    const client = await make();
    const order = { store_id: "47", sku: "8847291", quantity: 24, reason: REASON };
    const first = await client.createOrder(order, key("47"));
    expect(first.replayed).toBe(false);
    expect(first.order).toMatchObject({ order_id: "RPL-47-001", status: "submitted", ...order });
    const second = await client.createOrder({ ...order, quantity: 12 }, key("47"));
    expect(second.order.order_id).toBe("RPL-47-002");
    expect(
      (await client.createOrder({ ...order, store_id: "102" }, key("102"))).order.order_id,
    ).toBe("RPL-102-001");

    expect(await client.getOrder("47", "RPL-47-001", key("47"))).toEqual(first.order);
  });

  it("refuses writes that cannot be placed, creating nothing", async () => {
    const client = await make();
    const order = { store_id: "47", sku: "8847291", quantity: 5, reason: REASON };
    expect(await kindOf(client.createOrder(order, WRONG))).toBe("unauthorized");
    expect(await kindOf(client.createOrder({ ...order, store_id: "999" }, key("47")))).toBe(
      "unknown_store",
    );
    expect(await kindOf(client.createOrder({ ...order, sku: "0000000" }, key("47")))).toBe(
      "unknown_sku",
    );
    expect(
      await kindOf(client.createOrder({ ...order, store_id: "128", sku: "2205617" }, key("128"))),
    ).toBe("not_ranged");
    // Nothing above consumed a number.
    expect((await client.createOrder(order, key("47"))).order.order_id).toBe("RPL-47-001");
  });

  it("scopes orders to their store: another store's order is order_not_found", async () => {
    const client = await make();
    await client.createOrder(
      { store_id: "47", sku: "8847291", quantity: 5, reason: REASON },
      key("47"),
    );
    expect(await kindOf(client.getOrder("102", "RPL-47-001", key("102")))).toBe("order_not_found");
    expect(await kindOf(client.getOrder("47", "RPL-47-999", key("47")))).toBe("order_not_found");
    expect(await kindOf(client.getOrder("47", "RPL-47-001", WRONG))).toBe("unauthorized");
    expect(await kindOf(client.getOrder("999", "RPL-47-001", key("47")))).toBe("unknown_store");
  });

  it("replays an idempotency key with the same parameters and refuses it with others", async () => {
    const client = await make();
    const order = {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: REASON,
      idempotency_key: "idem-47-a",
    };
    const first = await client.createOrder(order, key("47"));
    const again = await client.createOrder(order, key("47"));
    expect(again).toEqual({ order: first.order, replayed: true });
    expect(await kindOf(client.createOrder({ ...order, quantity: 25 }, key("47")))).toBe(
      "idempotency_conflict",
    );
    // Keys are scoped per store: the same key at another store is a new order.
    const other = await client.createOrder({ ...order, store_id: "102" }, key("102"));
    expect(other).toMatchObject({ order: { order_id: "RPL-102-001" }, replayed: false });
    // A different key for the same parameters is a new order (the key decides, not the body).
    const fresh = await client.createOrder({ ...order, idempotency_key: "idem-47-b" }, key("47"));
    expect(fresh).toMatchObject({ order: { order_id: "RPL-47-002" }, replayed: false });
  });

  it("folds an identical key-less order within the dedupe window into the first", async () => {
    const client = await make();
    const order = { store_id: "47", sku: "8847291", quantity: 24, reason: REASON };
    const first = await client.createOrder(order, key("47"));
    expect(await client.createOrder(order, key("47"))).toEqual({
      order: first.order,
      replayed: true,
    });
    // Any difference in the parameters is a different order.
    const other = await client.createOrder({ ...order, quantity: 23 }, key("47"));
    expect(other).toMatchObject({ order: { order_id: "RPL-47-002" }, replayed: false });
  });
});

describe("both clients give identical results for one script", () => {
  /** Runs a fixed script and records every outcome, with timestamps blanked. */
  async function transcript(client: StoreLinkClient): Promise<unknown[]> {
    const out: unknown[] = [];
    const record = async (p: Promise<unknown>): Promise<void> => {
      try {
        out.push({ ok: JSON.parse(JSON.stringify(await p).replace(/"20\d\d-[^"]+"/g, '"T"')) });
      } catch (error) {
        if (!(error instanceof StoreLinkError)) throw error;
        out.push({ error: error.kind, message: error.message });
      }
    };
    const order = { store_id: "47", sku: "8847291", quantity: 24, reason: REASON };
    await record(client.listStores());
    for (const q of ["butter", "66", "", "zzz"]) await record(client.lookupSku(q));
    for (const sku of ["8847291", "nope"]) await record(client.getSku(sku));
    for (const [store, sku] of [
      ["47", "8847291"],
      ["128", "8847291"],
      ["128", "2205617"],
      ["5", "8847291"],
      ["47", "x"],
    ] as const) {
      await record(client.getStock(store, sku, key(store)));
    }
    await record(client.getStock("63", "8847291", WRONG));
    await record(client.createOrder(order, key("47")));
    await record(client.createOrder(order, key("47")));
    await record(client.createOrder({ ...order, idempotency_key: "k1" }, key("47")));
    await record(client.createOrder({ ...order, idempotency_key: "k1" }, key("47")));
    await record(client.createOrder({ ...order, idempotency_key: "k1", quantity: 1 }, key("47")));
    await record(client.createOrder({ ...order, store_id: "111", sku: "6620174" }, key("111")));
    await record(client.getOrder("47", "RPL-47-002", key("47")));
    await record(client.getOrder("63", "RPL-47-002", key("63")));
    return out;
  }

  it("in-memory and HTTP transcripts are equal", async () => {
    const [memory, http] = await Promise.all(factories.map(async ([, make]) => make()));
    const a = await transcript(memory as StoreLinkClient);
    const b = await transcript(http as StoreLinkClient);
    expect(b).toEqual(a);
    expect(a.filter((r) => "error" in (r as object)).length).toBeGreaterThan(5);
  });
});
