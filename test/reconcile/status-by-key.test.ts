import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { connect, errorOf, type Harness, HERO_REASON } from "../helpers/harness.js";
import { Gate, ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * get_replenishment_status by idempotency key: the agent learns the truth of an attempt it has no
 * order id for, scoped to its store, by an exact key (never a search).
 */

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const KEY_47 = new ApiKey(SEED_ACCEPTED_KEYS["47"] as string);

const open: Harness[] = [];
afterEach(async () => {
  while (open.length > 0) await open.pop()?.close();
});

async function start(storelink = new ScriptedStoreLink(new InMemoryStoreLink())) {
  const h = await connect({ storelink });
  open.push(h);
  return { h, storelink };
}

const status = (h: Harness, args: Record<string, unknown>) =>
  h.call("get_replenishment_status", { store_id: "47", ...args });

describe("get_replenishment_status by idempotency_key", () => {
  it("created: the order, its order_id among it, the same as by order_id", async () => {
    const { h } = await start();
    const args = { ...ORDER, idempotency_key: "status-by-key-0001" };
    expect((await h.call("create_replenishment_order", args)).isError).toBeFalsy();
    const byKey = await status(h, { idempotency_key: "status-by-key-0001" });
    expect(byKey.isError).toBeFalsy();
    expect(byKey.structuredContent).toMatchObject({
      state: "created",
      order_id: "RPL-47-001",
      status: "submitted",
      sku: "8847291",
      quantity: 24,
      idempotency_key: "status-by-key-0001",
    });
    const byId = await status(h, { order_id: "RPL-47-001" });
    expect(byId.structuredContent).toMatchObject({ state: "created", order_id: "RPL-47-001" });
  });

  it("not_created for a fenced key, unknown for a key StoreLink has no record of, in_progress while it creates", async () => {
    const gate = new Gate();
    const inner = new InMemoryStoreLink({ inProgressUntil: () => gate.wait() });
    const { h } = await start(new ScriptedStoreLink(inner));
    await inner.fenceOrderRequest("47", "fenced-key-00001", KEY_47);
    const fenced = await status(h, { idempotency_key: "fenced-key-00001" });
    expect(fenced.structuredContent).toMatchObject({ state: "not_created" });
    expect((fenced.structuredContent as { summary: string }).summary).toContain("new key");
    expect((fenced.structuredContent as { order_id?: string }).order_id).toBeUndefined();

    const unknown = await status(h, { idempotency_key: "never-seen-key-01" });
    expect(unknown.structuredContent).toMatchObject({ state: "unknown" });

    const creating = inner.createOrder({ ...ORDER, idempotency_key: "in-progress-key-1" }, KEY_47);
    const during = await status(h, { idempotency_key: "in-progress-key-1" });
    expect(during.structuredContent).toMatchObject({ state: "in_progress" });
    gate.release();
    await creating;
    const after = await status(h, { idempotency_key: "in-progress-key-1" });
    expect(after.structuredContent).toMatchObject({ state: "created", order_id: "RPL-47-001" });
  });

  it("is scoped to its store: another store's key is unknown there", async () => {
    const { h } = await start();
    await h.call("create_replenishment_order", { ...ORDER, idempotency_key: "store-scoped-0001" });
    const elsewhere = await h.call("get_replenishment_status", {
      store_id: "63",
      idempotency_key: "store-scoped-0001",
    });
    expect(elsewhere.structuredContent).toMatchObject({ state: "unknown", store_id: "63" });
  });

  it("takes exactly one of order_id and idempotency_key", async () => {
    const { h, storelink } = await start();
    for (const args of [{}, { order_id: "RPL-47-001", idempotency_key: "both-given-key-01" }]) {
      const refused = errorOf(await status(h, args));
      expect(refused.type).toBe("invalid_arguments");
      expect(refused.message).toContain("exactly one of order_id and idempotency_key");
    }
    // A key outside the schema's alphabet never reaches StoreLink.
    expect(errorOf(await status(h, { idempotency_key: "../../orders" })).type).toBe(
      "invalid_arguments",
    );
    expect(storelink.attemptsOf("getOrderRequest")).toBe(0);
  });

  it("a StoreLink that cannot be reached is an error to retry, never a state", async () => {
    const { h, storelink } = await start();
    storelink.fail("getOrderRequest", { kind: "unavailable" });
    const failed = errorOf(await status(h, { idempotency_key: "unreachable-key-1" }));
    expect(failed).toMatchObject({ type: "storelink_unavailable", retryable: true });
  });
});
