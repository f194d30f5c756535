import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import type { ApiKey } from "../../src/keys/api-key.js";
import type { StoreKeyProvider } from "../../src/keys/provider.js";
import type { OrderRequest } from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import type { Deps } from "../../src/tools/define.js";
import { connect, errorOf, type Harness, HERO_REASON, MapKeyProvider } from "../helpers/harness.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * The hourly loop guard against a StoreLink that folds nothing: the OpenAPI contract promises a
 * fold only for the same Idempotency-Key, and a proxy that makes every body unique (or a
 * StoreLink with another window) folds nothing at all. The cap must hold by itself for every
 * new order; a retry with the same key joins its first attempt's slot and rests on the key
 * contract (openapi/storelink.yaml, held by test/storelink/emulator-wire.test.ts).
 */

const HERO = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

/** A StoreLink that never returns an existing order: no key-less window, keys ignored. */
class NeverFolds extends InMemoryStoreLink {
  constructor() {
    super({ dedupeWindowMs: 0 });
  }
  override createOrder(request: OrderRequest, key: ApiKey) {
    const { idempotency_key: _ignored, ...rest } = request;
    return super.createOrder(rest, key);
  }
}

let open: Harness[] = [];
// The injected crashes are logged as unexpected errors: kept off the test output.
let ops: ReturnType<typeof captureOpsLog>;
beforeEach(() => {
  ops = captureOpsLog();
});
afterEach(async () => {
  await Promise.all(open.map((h) => h.close()));
  open = [];
  ops.restore();
});

/** The cap as the server wires it from the default configuration (3 an hour, 10 min window). */
async function start(overrides: Partial<Deps> = {}) {
  const storelink = new ScriptedStoreLink(new NeverFolds());
  const { orderCap } = composeDeps({ storelink, keys: new MapKeyProvider() }, loadConfig({}));
  const h = await connect({ storelink, orderCap, ...overrides });
  open.push(h);
  return { h, storelink };
}

const outcomes = (h: Harness) => h.recorder.audits.map((a) => a.outcome);
const types = (results: CallToolResult[]) =>
  results.map((r) => (r.isError ? errorOf(r).type : "ok"));

describe("loop guard with a StoreLink that folds nothing", () => {
  it("10 identical key-less creates: 3 orders, the rest refused before they are sent", async () => {
    const { h, storelink } = await start();
    const results: CallToolResult[] = [];
    for (let i = 0; i < 10; i++) results.push(await h.call("create_replenishment_order", HERO));
    expect(types(results)).toEqual(["ok", "ok", "ok", ...Array(7).fill("order_cap_reached")]);
    expect(storelink.landed).toHaveLength(3);
    expect(storelink.attemptsOf("createOrder")).toBe(3);
    expect(outcomes(h)).toEqual([...Array(3).fill("CREATED"), ...Array(7).fill("REJECTED")]);
  });

  it("10 creates with the same idempotency key: one slot, every retry sent for StoreLink to fold (here it breaks the contract)", async () => {
    const { h, storelink } = await start();
    const args = { ...HERO, idempotency_key: "approval-0001" };
    const results: CallToolResult[] = [];
    for (let i = 0; i < 10; i++) results.push(await h.call("create_replenishment_order", args));
    expect(types(results)).toEqual(Array(10).fill("ok"));
    expect(storelink.attemptsOf("createOrder")).toBe(10);
    // The key holds one slot of three: two new orders fit, the third is refused.
    const more = [1, 2, 3].map((n) => ({ ...HERO, quantity: n }));
    const after: CallToolResult[] = [];
    for (const order of more) after.push(await h.call("create_replenishment_order", order));
    expect(types(after)).toEqual(["ok", "ok", "order_cap_reached"]);
  });

  it("10 identical key-less creates at once: still 3", async () => {
    const { h, storelink } = await start();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => h.call("create_replenishment_order", HERO)),
    );
    expect(types(results).filter((t) => t === "ok")).toHaveLength(3);
    expect(storelink.landed).toHaveLength(3);
  });

  it("an outcome_unknown counts; a write StoreLink refused unsent does not", async () => {
    const { h, storelink } = await start();
    storelink.fail("createOrder", { kind: "unavailable" }, { kind: "unavailable" });
    storelink.fail("createOrder", { after: "outcome_unknown" });
    const results: CallToolResult[] = [];
    for (let i = 0; i < 6; i++) results.push(await h.call("create_replenishment_order", HERO));
    expect(types(results)).toEqual([
      "storelink_unavailable",
      "storelink_unavailable",
      "outcome_unknown",
      "ok",
      "ok",
      "order_cap_reached",
    ]);
    expect(storelink.landed).toHaveLength(3);
  });
});

/** A key source that fails with an unexpected error (a bug, not a KeySourceError). */
class CrashingKeys implements StoreKeyProvider {
  async getKey(): Promise<ApiKey | undefined> {
    throw new Error("key provider bug");
  }
}

describe("an unexpected error is UNCERTAIN only once the write was handed to createOrder", () => {
  it.each([
    ["getSku", "getSku" as const],
    ["listStores", "listStores" as const],
  ])("a crash in %s is internal, REJECTED, and holds no slot", async (_label, method) => {
    const { h, storelink } = await start();
    for (let i = 0; i < 4; i++) storelink.fail(method, { crash: `${method} blew up` });
    for (let i = 0; i < 4; i++) {
      expect(errorOf(await h.call("create_replenishment_order", HERO)).type).toBe("internal");
    }
    expect(outcomes(h)).toEqual(Array(4).fill("REJECTED"));
    expect(storelink.attemptsOf("createOrder")).toBe(0);
    // The cap is untouched: three orders still go through.
    for (let i = 0; i < 3; i++) {
      expect((await h.call("create_replenishment_order", HERO)).isError).toBeUndefined();
    }
  });

  it("a crash in the key lookup is REJECTED", async () => {
    const { h, storelink } = await start({ keys: new CrashingKeys() });
    expect(errorOf(await h.call("create_replenishment_order", HERO)).type).toBe("internal");
    expect(outcomes(h)).toEqual(["REJECTED"]);
    expect(storelink.attemptsOf("createOrder")).toBe(0);
  });

  it("a crash inside createOrder stays UNCERTAIN and counts", async () => {
    const { h, storelink } = await start();
    storelink.fail("createOrder", { crash: "client bug after send" });
    expect(errorOf(await h.call("create_replenishment_order", HERO)).type).toBe("internal");
    expect(outcomes(h)).toEqual(["UNCERTAIN"]);
    for (let i = 0; i < 2; i++) await h.call("create_replenishment_order", HERO);
    expect(errorOf(await h.call("create_replenishment_order", HERO)).type).toBe(
      "order_cap_reached",
    );
  });
});

describe("a retry after an unknown outcome, at the cap", () => {
  it("gets the order that landed; a new order is refused without claiming nothing was submitted", async () => {
    // A StoreLink that keeps the key contract, whose answer to the third order is lost.
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink({ dedupeWindowMs: 0 }));
    const { orderCap } = composeDeps({ storelink, keys: new MapKeyProvider() }, loadConfig({}));
    const h = await connect({ storelink, orderCap });
    open.push(h);
    const order = (quantity: number, key: string) =>
      h.call("create_replenishment_order", { ...HERO, quantity, idempotency_key: key });
    expect((await order(1, "order-key-0001")).isError).toBeFalsy();
    expect((await order(2, "order-key-0002")).isError).toBeFalsy();
    storelink.fail("createOrder", { after: "outcome_unknown" });
    // StoreLink cannot be asked by key either (four reads within the write's budget).
    for (let i = 0; i < 4; i++) storelink.fail("getOrderRequest", { kind: "unavailable" });
    expect(errorOf(await order(3, "order-key-0003")).type).toBe("outcome_unknown");
    expect(storelink.landed).toHaveLength(3);

    // The hour is full, one of the three uncertain: a new order is refused, and the refusal
    // says the earlier outcome is unknown instead of "Nothing was submitted".
    const refused = errorOf(await order(4, "order-key-0004"));
    expect(refused.type).toBe("order_cap_reached");
    expect(refused.message).not.toContain("Nothing was submitted");
    expect(refused.message).toContain("1 has an unknown outcome and may have landed");
    expect(refused.message).toContain("This request was not sent to StoreLink");

    // The agent resends the uncertain order with its key, as the tool description asks: it is
    // not refused, StoreLink folds it, and the agent gets the order that landed.
    const retry = await order(3, "order-key-0003");
    expect(retry.isError).toBeFalsy();
    expect(retry.structuredContent).toMatchObject({
      replayed: true,
      order_id: storelink.landed[2]?.order_id,
    });
    expect(storelink.landed).toHaveLength(3);
    // Now known to have landed: the next refusal counts three placed.
    const after = errorOf(await order(5, "order-key-0005"));
    expect(after.message).toContain("3 were placed in the last hour.");
    expect(after.message).toContain("Nothing was submitted");
  });
});
