import { afterEach, describe, expect, it } from "vitest";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { startEmulator } from "../../src/storelink-emulator.js";
import { connect, type Harness, HERO_REASON } from "../helpers/harness.js";

/**
 * Every create carries a key, and a key the server made for a key-less agent is marked so
 * (`Idempotency-Key-Source: server`): a StoreLink with a key-less dedupe window (the emulator,
 * over real HTTP) still folds an identical key-less resend into the first order, as it did when
 * such creates carried no key. An agent's own fresh keys still mean two orders.
 */

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function overHttp(): Promise<Harness> {
  const emulator = await startEmulator({ storelink: new InMemoryStoreLink() });
  cleanups.push(() => emulator.close());
  const h = await connect({
    storelink: new HttpStoreLinkClient({ baseUrl: emulator.url, timeoutMs: 5_000 }),
  });
  cleanups.push(() => h.close());
  return h;
}

describe("a key-less resend over HTTP", () => {
  it("is folded into the first order by the emulator's window: one truck", async () => {
    const h = await overHttp();
    const first = await h.call("create_replenishment_order", ORDER);
    const again = await h.call("create_replenishment_order", ORDER);
    expect(first.structuredContent).toMatchObject({ order_id: "RPL-47-001", replayed: false });
    expect(again.structuredContent).toMatchObject({ order_id: "RPL-47-001", replayed: true });
    expect(h.recorder.audits.map((a) => a.outcome)).toEqual(["CREATED", "REPLAYED"]);
    // Each attempt had a key of its own, both made here.
    const keys = h.recorder.audits.map((a) => a.idempotency_key);
    expect(new Set(keys).size).toBe(2);
    for (const key of keys) expect(key).toMatch(/^korral-/);
  });

  it("with the agent's own fresh keys is two orders (its keys say so)", async () => {
    const h = await overHttp();
    await h.call("create_replenishment_order", { ...ORDER, idempotency_key: "agent-order-0001" });
    const second = await h.call("create_replenishment_order", {
      ...ORDER,
      idempotency_key: "agent-order-0002",
    });
    expect(second.structuredContent).toMatchObject({ order_id: "RPL-47-002", replayed: false });
  });
});
