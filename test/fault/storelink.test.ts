import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { validOrder } from "../helpers/arbitraries.js";
import { connect, errorOf, type Harness, MapKeyProvider } from "../helpers/harness.js";
import { Gate, ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * Faults at the StoreLinkClient seam, through the protocol. Each gives the documented outcome:
 * the error type the model branches on, whether retrying can help, the audit line of the write,
 * and (checked against what really landed) whether an order exists.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const stock = { sku: "8847291", store_ids: ["47", "102"] };

async function setUp(storelink: ScriptedStoreLink, keys = new MapKeyProvider()) {
  h = await connect({ storelink, keys });
  return h;
}

describe("StoreLink unavailable (nothing was sent)", () => {
  it("a read degrades per store and says retryable; all stores down is an error", async () => {
    const storelink = new ScriptedStoreLink().fail("getStock", { kind: "unavailable" });
    const { call } = await setUp(storelink);
    const partial = await call("get_stock_position", stock);
    expect(partial.isError).toBeFalsy();
    const stores = (partial.structuredContent as { stores: { status: string; error?: unknown }[] })
      .stores;
    expect(stores.map((s) => s.status).sort()).toEqual(["error", "ok"]);
    expect(stores.find((s) => s.status === "error")?.error).toMatchObject({
      type: "storelink_unavailable",
      retryable: true,
    });

    storelink.fail("getStock", { kind: "unavailable" }, { kind: "unavailable" });
    const all = errorOf(await call("get_stock_position", stock));
    expect(all).toMatchObject({ type: "storelink_unavailable", retryable: true });
    expect(all.next_step).toMatch(/no gaps/i);
  });

  it("lookup_sku and get_replenishment_status report storelink_unavailable, retryable", async () => {
    const storelink = new ScriptedStoreLink()
      .fail("lookupSku", { kind: "unavailable" })
      .fail("getOrder", { kind: "unavailable" });
    const { call } = await setUp(storelink);
    expect(errorOf(await call("lookup_sku", { query: "butter" }))).toMatchObject({
      type: "storelink_unavailable",
      retryable: true,
    });
    expect(
      errorOf(await call("get_replenishment_status", { store_id: "47", order_id: "RPL-47-001" })),
    ).toMatchObject({ type: "storelink_unavailable", retryable: true });
  });

  it("a write that was never sent is REJECTED, writes nothing, and the retry gets 001", async () => {
    const storelink = new ScriptedStoreLink().fail("createOrder", { kind: "unavailable" });
    const { call, recorder } = await setUp(storelink);
    expect(errorOf(await call("create_replenishment_order", validOrder()))).toMatchObject({
      type: "storelink_unavailable",
      retryable: true,
    });
    expect(storelink.landed).toEqual([]);
    expect(recorder.audits).toMatchObject([{ outcome: "REJECTED", order_id: null }]);
    const retry = await call("create_replenishment_order", validOrder());
    expect((retry.structuredContent as { order_id: string }).order_id).toBe("RPL-47-001");
  });

  it("a failure reading the store directory fails the write before anything is sent", async () => {
    const storelink = new ScriptedStoreLink().fail("listStores", { kind: "unavailable" });
    const { call, recorder } = await setUp(storelink);
    expect(errorOf(await call("create_replenishment_order", validOrder())).type).toBe(
      "storelink_unavailable",
    );
    expect(storelink.attemptsOf("createOrder")).toBe(0);
    expect(recorder.audits[0]?.outcome).toBe("REJECTED");
  });
});

describe("connection lost after the write was sent (outcome unknown)", () => {
  it("is outcome_unknown, not retryable, audited UNCERTAIN, and the landed order is readable", async () => {
    const storelink = new ScriptedStoreLink().fail("createOrder", { after: "outcome_unknown" });
    // StoreLink cannot be asked by key either (four reads within the write's budget).
    for (let i = 0; i < 4; i++) storelink.fail("getOrderRequest", { kind: "unavailable" });
    const { call, recorder } = await setUp(storelink);
    const result = await call("create_replenishment_order", validOrder());
    const error = errorOf(result);
    expect(error).toMatchObject({ type: "outcome_unknown", retryable: false });
    const given = (result.structuredContent as { idempotency_key?: string }).idempotency_key;
    expect(given).toMatch(/^korral-/);
    expect(error.next_step).toMatch(/Do NOT place it again with a new key/);
    expect(error.next_step).toContain(`idempotency_key ${given}`);
    expect(recorder.audits).toMatchObject([
      { outcome: "UNCERTAIN", order_id: null, idempotency_key: given },
    ]);
    expect(storelink.attemptsOf("getOrderRequest")).toBe(4);
    // It did land: the documented next step (read the status by the key given) finds it.
    expect(storelink.landed).toHaveLength(1);
    const status = await call("get_replenishment_status", {
      store_id: "47",
      idempotency_key: given,
    });
    expect(status.isError).toBeFalsy();
    expect(status.structuredContent).toMatchObject({ state: "created", order_id: "RPL-47-001" });
    // And no silent retry happened: exactly one attempt.
    expect(storelink.attemptsOf("createOrder")).toBe(1);
  });

  it("an unexpected client error on the write is internal, UNCERTAIN, and hides its text", async () => {
    const storelink = new ScriptedStoreLink().fail("createOrder", {
      crash: "socket reset; Authorization: Bearer slk_47_demo_7f3a91c2e5b8",
    });
    const { call, recorder } = await setUp(storelink);
    const result = await call("create_replenishment_order", validOrder());
    expect(errorOf(result).type).toBe("internal");
    expect(JSON.stringify(result)).not.toMatch(/slk_|Bearer|socket reset/);
    expect(JSON.stringify(recorder.traces)).not.toMatch(/slk_|Bearer/);
    expect(recorder.audits[0]?.outcome).toBe("UNCERTAIN");
    expect(storelink.attemptsOf("createOrder")).toBe(1);
  });
});

describe("StoreLink hangs", () => {
  it("the client's timeout ends the call; the server stays responsive; no retry is made", async () => {
    const gate = new Gate();
    const storelink = new ScriptedStoreLink().fail("getStock", { hang: gate }, { hang: gate });
    const { client, call } = await setUp(storelink);
    const hung = client.callTool({ name: "get_stock_position", arguments: stock }, undefined, {
      timeout: 150,
    });
    await expect(hung).rejects.toSatisfy(
      (e: unknown) => e instanceof McpError && e.code === ErrorCode.RequestTimeout,
    );
    // Another call is served while the first is still stuck.
    const other = await call("lookup_sku", { query: "butter" });
    expect(other.isError).toBeFalsy();
    gate.release();
    expect(storelink.attemptsOf("getStock")).toBe(2);
  });

  it("a write that hangs and is abandoned by the client can still land: status tells", async () => {
    const gate = new Gate();
    const storelink = new ScriptedStoreLink().fail("createOrder", { hang: gate });
    const { client, call, recorder } = await setUp(storelink);
    const hung = client.callTool(
      { name: "create_replenishment_order", arguments: validOrder() },
      undefined,
      { timeout: 150 },
    );
    await expect(hung).rejects.toBeInstanceOf(McpError);
    expect(storelink.landed).toEqual([]);
    gate.release();
    // Wait for the landed write's audit line (durable before any answer), not for a time.
    await expect.poll(() => recorder.audits.length).toBe(1);
    expect(recorder.audits[0]).toMatchObject({ outcome: "CREATED", order_id: "RPL-47-001" });
    const status = await call("get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(status.isError).toBeFalsy();
    expect(storelink.attemptsOf("createOrder")).toBe(1);
  });
});

describe("401 from StoreLink", () => {
  it("a 401 then success: exactly one retry, with a fresh key lookup, one order", async () => {
    const storelink = new ScriptedStoreLink().fail("createOrder", { kind: "unauthorized" });
    const keys = new MapKeyProvider();
    const { call, recorder } = await setUp(storelink, keys);
    const result = await call("create_replenishment_order", validOrder());
    expect(result.isError).toBeFalsy();
    expect(storelink.attemptsOf("createOrder")).toBe(2);
    expect(keys.lookups).toEqual([
      { storeId: "47", fresh: false },
      { storeId: "47", fresh: true },
    ]);
    expect(storelink.landed).toHaveLength(1);
    expect(recorder.audits).toMatchObject([{ outcome: "CREATED", order_id: "RPL-47-001" }]);
  });

  it("401 twice: no third attempt, auth_failed with the spec's message, REJECTED", async () => {
    const storelink = new ScriptedStoreLink().fail(
      "createOrder",
      { kind: "unauthorized" },
      { kind: "unauthorized" },
    );
    const keys = new MapKeyProvider();
    const { call, recorder } = await setUp(storelink, keys);
    const error = errorOf(await call("create_replenishment_order", validOrder()));
    expect(error.message).toBe(
      "Authentication failed for store 47 after key reload. If it still fails, retry shortly; if it keeps failing, contact Korral IT.",
    );
    expect(storelink.attemptsOf("createOrder")).toBe(2);
    expect(keys.lookups.map((l) => l.fresh)).toEqual([false, true]);
    expect(storelink.landed).toEqual([]);
    expect(recorder.audits).toMatchObject([{ outcome: "REJECTED" }]);
  });

  it("a 401 on a read, then a 401 again, fails that store only", async () => {
    const storelink = new ScriptedStoreLink().fail(
      "getStock",
      { kind: "unauthorized" },
      { kind: "unauthorized" },
    );
    const keys = new MapKeyProvider({ "47": SEED_ACCEPTED_KEYS["47"] as string });
    const { call } = await setUp(storelink, keys);
    const result = await call("get_stock_position", { sku: "8847291", store_ids: ["47"] });
    expect(errorOf(result).type).toBe("auth_failed");
    expect(storelink.attemptsOf("getStock")).toBe(2);
  });
});
