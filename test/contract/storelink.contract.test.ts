import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { type StoreLinkClient, StoreLinkError } from "../../src/storelink/client.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InvalidIdError } from "../../src/storelink/ids.js";
import { InMemoryStoreLink, type InMemoryStoreLinkOptions } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { startEmulator } from "../../src/storelink-emulator.js";
import { Gate } from "../helpers/scripted-storelink.js";

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

/** A client over a fresh seeded StoreLink made with `options`. */
type Factory = (options?: InMemoryStoreLinkOptions) => Promise<StoreLinkClient>;
const factories: [string, Factory][] = [
  ["in-memory", async (options) => new InMemoryStoreLink(options)],
  [
    "http→emulator",
    async (options) => {
      const emulator = await startEmulator({ storelink: new InMemoryStoreLink(options) });
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

describe.each(factories)("StoreLink contract 1.1, order requests: %s", (_name, make) => {
  const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: REASON };
  /** The id the next new order at store 47 gets: proves what was (not) created before it. */
  const nextOrderId = async (client: StoreLinkClient): Promise<string> =>
    (await client.createOrder({ ...ORDER, quantity: 99 }, key("47"))).order.order_id;

  it("reads a key's record: created with its order; none is order_request_not_found", async () => {
    const client = await make();
    const created = await client.createOrder({ ...ORDER, idempotency_key: "req-1" }, key("47"));
    expect(await client.getOrderRequest("47", "req-1", key("47"))).toEqual({
      idempotency_key: "req-1",
      state: "created",
      order: created.order,
    });
    expect(await kindOf(client.getOrderRequest("47", "req-2", key("47")))).toBe(
      "order_request_not_found",
    );
    // Keys are scoped to the store: another store has no record of it, and the key is checked.
    expect(await kindOf(client.getOrderRequest("102", "req-1", key("102")))).toBe(
      "order_request_not_found",
    );
    expect(await kindOf(client.getOrderRequest("102", "req-1", key("47")))).toBe("unauthorized");
    // Store, then key, then the record.
    expect(await kindOf(client.getOrderRequest("999", "req-1", WRONG))).toBe("unknown_store");
    expect(await kindOf(client.getOrderRequest("47", "req-2", WRONG))).toBe("unauthorized");
    expect(await kindOf(client.fenceOrderRequest("999", "req-1", WRONG))).toBe("unknown_store");
    expect(await kindOf(client.fenceOrderRequest("47", "req-2", WRONG))).toBe("unauthorized");
    // A key outside the shared rule never reaches a route.
    for (const bad of [".", "..", "a/b", "a b", "x".repeat(201)]) {
      await expect(client.getOrderRequest("47", bad, key("47"))).rejects.toBeInstanceOf(
        InvalidIdError,
      );
      await expect(client.fenceOrderRequest("47", bad, key("47"))).rejects.toBeInstanceOf(
        InvalidIdError,
      );
    }
  });

  it("fences an unused key: a later create with it is idempotency_key_fenced and creates nothing", async () => {
    const client = await make();
    expect(await client.fenceOrderRequest("47", "req-f", key("47"))).toEqual({ state: "fenced" });
    expect(await client.getOrderRequest("47", "req-f", key("47"))).toEqual({
      idempotency_key: "req-f",
      state: "fenced",
    });
    expect(
      await kindOf(client.createOrder({ ...ORDER, idempotency_key: "req-f" }, key("47"))),
    ).toBe("idempotency_key_fenced");
    // Fencing is idempotent, and the fence is per store: store 102 may still use the key.
    expect(await client.fenceOrderRequest("47", "req-f", key("47"))).toEqual({ state: "fenced" });
    const elsewhere = await client.createOrder(
      { ...ORDER, store_id: "102", idempotency_key: "req-f" },
      key("102"),
    );
    expect(elsewhere.order.order_id).toBe("RPL-102-001");
    expect(await nextOrderId(client)).toBe("RPL-47-001");
  });

  it("a fence never cancels: a key that created answers created with its order", async () => {
    const client = await make();
    const created = await client.createOrder({ ...ORDER, idempotency_key: "req-c" }, key("47"));
    const fenced = await client.fenceOrderRequest("47", "req-c", key("47"));
    expect(fenced).toEqual({ state: "created", order: created.order });
    // The key still replays its order; the record is unchanged.
    expect(await client.createOrder({ ...ORDER, idempotency_key: "req-c" }, key("47"))).toEqual({
      order: created.order,
      replayed: true,
    });
    expect(await client.getOrderRequest("47", "req-c", key("47"))).toMatchObject({
      state: "created",
    });
  });

  it("a create in progress: read in_progress, a fence is order_request_in_progress, then created", async () => {
    // In progress until the test says so: nothing here depends on the machine's speed.
    const gate = new Gate();
    const client = await make({ inProgressUntil: () => gate.wait() });
    const creating = client.createOrder({ ...ORDER, idempotency_key: "req-p" }, key("47"));
    // The create reaches StoreLink (over HTTP, its POST lands some time after it was sent).
    let record = await client.getOrderRequest("47", "req-p", key("47")).catch(() => undefined);
    while (record === undefined) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      record = await client.getOrderRequest("47", "req-p", key("47")).catch(() => undefined);
    }
    expect(record).toEqual({ idempotency_key: "req-p", state: "in_progress" });
    expect(await kindOf(client.fenceOrderRequest("47", "req-p", key("47")))).toBe(
      "order_request_in_progress",
    );
    // A retry with the same key and body waits for it and answers its order; another body conflicts.
    const retry = client.createOrder({ ...ORDER, idempotency_key: "req-p" }, key("47"));
    expect(
      await kindOf(
        client.createOrder({ ...ORDER, quantity: 1, idempotency_key: "req-p" }, key("47")),
      ),
    ).toBe("idempotency_conflict");
    gate.release();
    const created = await creating;
    expect(created.replayed).toBe(false);
    expect(await retry).toEqual({ order: created.order, replayed: true });
    expect(await client.getOrderRequest("47", "req-p", key("47"))).toEqual({
      idempotency_key: "req-p",
      state: "created",
      order: created.order,
    });
    expect(await client.fenceOrderRequest("47", "req-p", key("47"))).toEqual({
      state: "created",
      order: created.order,
    });
    expect(await nextOrderId(client)).toBe("RPL-47-002");
  });

  it("a fence and a create with one key, concurrently: exactly one wins and the other sees it", async () => {
    const client = await make();
    let won = 0;
    for (let i = 0; i < 6; i++) {
      const k = `race-${i}`;
      const [create, fence] = await Promise.allSettled([
        client.createOrder({ ...ORDER, idempotency_key: k }, key("47")),
        client.fenceOrderRequest("47", k, key("47")),
      ]);
      if (fence.status !== "fulfilled") throw fence.reason;
      if (create.status === "fulfilled") {
        expect(create.value.replayed).toBe(false);
        expect(fence.value).toEqual({ state: "created", order: create.value.order });
        won += 1;
      } else {
        expect(create.reason).toMatchObject({ kind: "idempotency_key_fenced" });
        expect(fence.value).toEqual({ state: "fenced" });
        expect(await client.getOrderRequest("47", k, key("47"))).toMatchObject({ state: "fenced" });
      }
    }
    // Only the creates that won made an order: the next one is numbered after them.
    expect(await nextOrderId(client)).toBe(`RPL-47-${String(won + 1).padStart(3, "0")}`);
  });
});

describe("in-memory only: a key this server made folds like a key-less order", () => {
  const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: REASON };

  it("replays an identical order within the window and records the key as created", async () => {
    const client = new InMemoryStoreLink();
    const first = await client.createOrder(ORDER, key("47"));
    const made = { ...ORDER, idempotency_key: "mcp-confirm-1", key_made_by_server: true };
    expect(await client.createOrder(made, key("47"))).toEqual({
      order: first.order,
      replayed: true,
    });
    expect(await client.getOrderRequest("47", "mcp-confirm-1", key("47"))).toEqual({
      idempotency_key: "mcp-confirm-1",
      state: "created",
      order: first.order,
    });
    // Passing the key back (without the flag) replays it too.
    expect(
      await client.createOrder({ ...ORDER, idempotency_key: "mcp-confirm-1" }, key("47")),
    ).toEqual({ order: first.order, replayed: true });
    // An agent's own key does not fold: the key decides.
    const agents = await client.createOrder({ ...ORDER, idempotency_key: "agent-1" }, key("47"));
    expect(agents).toMatchObject({ order: { order_id: "RPL-47-002" }, replayed: false });
  });

  it("outside the window, or with the window off, a key this server made is a new order", async () => {
    let now = Date.parse("2026-12-01T08:00:00Z");
    const client = new InMemoryStoreLink({ now: () => new Date(now), dedupeWindowMs: 60_000 });
    await client.createOrder(ORDER, key("47"));
    now += 60_000;
    const late = { ...ORDER, idempotency_key: "mcp-confirm-2", key_made_by_server: true };
    expect((await client.createOrder(late, key("47"))).order.order_id).toBe("RPL-47-002");
    const off = new InMemoryStoreLink({ dedupeWindowMs: 0 });
    await off.createOrder(ORDER, key("47"));
    const made = { ...ORDER, idempotency_key: "mcp-confirm-3", key_made_by_server: true };
    expect((await off.createOrder(made, key("47"))).order.order_id).toBe("RPL-47-002");
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
    await record(client.getOrderRequest("47", "k1", key("47")));
    await record(client.getOrderRequest("47", "k2", key("47")));
    await record(client.getOrderRequest("63", "k1", key("47")));
    await record(client.fenceOrderRequest("47", "k1", key("47")));
    await record(client.fenceOrderRequest("47", "k2", key("47")));
    await record(client.fenceOrderRequest("47", "k2", key("47")));
    await record(client.getOrderRequest("47", "k2", key("47")));
    await record(client.createOrder({ ...order, idempotency_key: "k2" }, key("47")));
    await record(client.createOrder({ ...order, idempotency_key: "k3", quantity: 2 }, key("47")));
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
