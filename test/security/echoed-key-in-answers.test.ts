import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import type { ApiKey } from "../../src/keys/api-key.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { stateSigner } from "../../src/policy/request-state.js";
import type { CreatedOrder, Order, OrderRequest } from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { connect, HERO_REASON, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { modernWrite, ORDER, roundOne, YES } from "../helpers/modern-write.js";

/**
 * A StoreLink that echoes the key it was sent inside an order's text fields (the reason, as sent
 * and percent-encoded and base64): the key reaches no tool result, trace or audit line, on the
 * 2025 path and both 2026-07-28 rounds, for the write and for the status read. Every encoding in
 * every field of every answer: echo-every-encoding.test.ts.
 */

const KEY = SEED_ACCEPTED_KEYS["47"] as string;
const FORMS = [KEY, encodeURIComponent(KEY), Buffer.from(KEY).toString("base64")];

class EchoingStoreLink extends InMemoryStoreLink {
  #echo(order: Order, key: ApiKey): Order {
    const k = key.reveal();
    return {
      ...order,
      reason: `${order.reason} [auth ${k}] [url ${encodeURIComponent(k)}] [b64 ${Buffer.from(k).toString("base64")}]`,
    };
  }
  override async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    const created = await super.createOrder(request, key);
    return { ...created, order: this.#echo(created.order, key) };
  }
  override async getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order> {
    return this.#echo(await super.getOrder(storeId, orderId, key), key);
  }
}

const leaks = (text: string): string[] => FORMS.filter((form) => text.includes(form));

describe("a StoreLink that echoes the key in an order's reason", () => {
  it("2025: the write and the status read carry no key, nor do the logs", async () => {
    const h = await connect({ storelink: new EchoingStoreLink() });
    try {
      const created = await h.call("create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity: 24,
        reason: HERO_REASON,
      });
      expect(created.isError).toBeFalsy();
      const orderId = (created.structuredContent as { order_id: string }).order_id;
      const status = await h.call("get_replenishment_status", {
        store_id: "47",
        order_id: orderId,
      });
      expect(status.isError).toBeFalsy();
      expect(JSON.stringify(status)).toContain("[REDACTED]");
      const text = JSON.stringify([created, status, h.recorder.traces, h.recorder.audits]);
      expect(leaks(text)).toEqual([]);
    } finally {
      await h.close();
    }
  });

  it("2026-07-28: round 2's result carries no key", async () => {
    const recorder = new MemoryRecorder();
    const app = createApp(
      composeDeps({
        storelink: new EchoingStoreLink(),
        keys: new MapKeyProvider(),
        recorder,
        orderCap: new OrderCap({ perHour: 0 }),
        signer: stateSigner(undefined),
      }),
    );
    const state = await roundOne(app);
    const placed = await modernWrite(app, { args: ORDER, state, answer: YES });
    expect(placed.isError).toBeFalsy();
    // The create answers the reason it sent, never StoreLink's copy (contract.ts).
    expect((placed.structuredContent as { reason?: string }).reason).toBe(ORDER.reason);
    expect(leaks(JSON.stringify([placed, recorder.traces, recorder.audits]))).toEqual([]);
  });
});
