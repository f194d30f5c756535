import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import {
  type EmulatorFaults,
  type RunningEmulator,
  startEmulator,
} from "../../src/storelink-emulator.js";
import { validOrder } from "../helpers/arbitraries.js";
import { connect, errorOf, type Harness } from "../helpers/harness.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * StoreLink over HTTP faults on the write that test/storelink/ does not already drive through
 * the protocol (it has: connection cut after the POST, StoreLink down, 401 then success): a
 * deadline passing after the order was applied, and 5xx answers. Each asserts the documented
 * outcome (README "StoreLink over HTTP"), the audit record, and what really landed in StoreLink.
 */

let emulator: RunningEmulator | undefined;
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  await emulator?.close();
  h = undefined;
  emulator = undefined;
});

/**
 * `keyReadsDown`: the first N reads by idempotency key fail as unavailable (StoreLink cannot say
 * either), so a lost answer stays UNCERTAIN instead of being confirmed inline.
 */
async function setUp(faults: EmulatorFaults, timeoutMs = 5_000, keyReadsDown = 0) {
  const storelink = new InMemoryStoreLink();
  emulator = await startEmulator({ storelink, faults });
  const http = new ScriptedStoreLink(new HttpStoreLinkClient({ baseUrl: emulator.url, timeoutMs }));
  for (let i = 0; i < keyReadsDown; i++) http.fail("getOrderRequest", { kind: "unavailable" });
  h = await connect({ storelink: http });
  // What StoreLink really holds for store 47, read behind the HTTP layer's back.
  const landed = async (orderId: string) =>
    storelink.getOrder("47", orderId, await keyOf47()).then(
      () => true,
      () => false,
    );
  return { h, landed };
}

const keyOf47 = async () => new ApiKey(SEED_ACCEPTED_KEYS["47"] as string);

describe("StoreLink over HTTP: faults on the write, through the protocol", () => {
  it("deadline passes after the order was applied: outcome_unknown, UNCERTAIN, and a same-key resend returns it", async () => {
    // The deadline covers the reads before the write too: generous enough for a loaded CI
    // machine (300 ms made them fail as storelink_unavailable), short enough to keep the test quick.
    // StoreLink cannot be asked by key either (four reads within the write's budget).
    const { h, landed } = await setUp({ cutAfterOrders: 0, stallAfterOrders: 1 }, 1_500, 4);
    const order = { ...validOrder("47"), idempotency_key: "load-test-7f3a-0001" };
    const first = await h.call("create_replenishment_order", order);
    expect(errorOf(first)).toMatchObject({ type: "outcome_unknown", retryable: false });
    expect(errorOf(first).next_step).toContain("get_replenishment_status");
    expect(h.recorder.audits).toMatchObject([
      {
        outcome: "UNCERTAIN",
        order_id: null,
        store_id: "47",
        quantity: 24,
        idempotency_key: order.idempotency_key,
      },
    ]);
    expect(await landed("RPL-47-001")).toBe(true);

    // The documented recovery: resend with the same key, get the landed order, not a second one.
    const resend = await h.call("create_replenishment_order", order);
    expect(resend.structuredContent).toMatchObject({ order_id: "RPL-47-001", replayed: true });
    expect(h.recorder.audits.map((a) => [a.outcome, a.order_id])).toEqual([
      ["UNCERTAIN", null],
      ["REPLAYED", "RPL-47-001"],
    ]);
    expect(await landed("RPL-47-002")).toBe(false);
  });

  it.each([
    [500, "internal"],
    [502, "bad_gateway"],
    [504, "gateway_timeout"],
  ])(
    "a %i (%s) to the POST: outcome_unknown and UNCERTAIN, since StoreLink may have acted",
    async (status, code) => {
      const { h, landed } = await setUp({ cutAfterOrders: 0, refuseOrders: [{ status, code }] });
      const result = await h.call("create_replenishment_order", validOrder("47"));
      expect(errorOf(result)).toMatchObject({ type: "outcome_unknown", retryable: false });
      expect(h.recorder.audits).toMatchObject([{ outcome: "UNCERTAIN", order_id: null }]);
      // This emulator refused before acting, so status reads it as not found and a retry is 001.
      expect(await landed("RPL-47-001")).toBe(false);
      const status47 = await h.call("get_replenishment_status", {
        store_id: "47",
        order_id: "RPL-47-001",
      });
      expect(errorOf(status47).type).toBe("not_found");
      const retry = await h.call("create_replenishment_order", validOrder("47"));
      expect(retry.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
      expect(h.recorder.audits.map((a) => a.outcome)).toEqual(["UNCERTAIN", "CREATED"]);
    },
  );

  it("a 503 unavailable is StoreLink refusing before acting: storelink_unavailable, retryable, REJECTED", async () => {
    const { h, landed } = await setUp({
      cutAfterOrders: 0,
      refuseOrders: [{ status: 503, code: "unavailable" }],
    });
    const result = await h.call("create_replenishment_order", validOrder("47"));
    expect(errorOf(result)).toMatchObject({ type: "storelink_unavailable", retryable: true });
    expect(h.recorder.audits).toMatchObject([{ outcome: "REJECTED", order_id: null }]);
    expect(await landed("RPL-47-001")).toBe(false);
    const retry = await h.call("create_replenishment_order", validOrder("47"));
    expect(retry.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
  });

  it("errors carry neither StoreLink's body text nor the key", async () => {
    const { h } = await setUp({
      cutAfterOrders: 0,
      refuseOrders: [{ status: 500, code: "internal" }],
    });
    const result = await h.call("create_replenishment_order", validOrder("47"));
    const text = JSON.stringify([result, h.recorder.traces, h.recorder.audits]);
    expect(text).not.toContain("Injected failure");
    expect(text).not.toContain((await keyOf47()).reveal());
  });
});
