import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { stateSigner } from "../../src/policy/request-state.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import type { Deps } from "../../src/tools/define.js";
import { HERO_REASON, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { modernWrite as call, envelope, ORDER, roundOne, YES } from "../helpers/modern-write.js";
import { MCP_HEADERS, MODERN_VERSION } from "../helpers/rpc.js";

const KEY_A = "a-shared-request-state-key-of-32-bytes!";
const KEY_B = "another-request-state-key-of-32-bytes!!";

/** One replica: its own app over a StoreLink that may be shared with other replicas. */
function replica(storelink: InMemoryStoreLink, key: string | undefined, extra: Partial<Deps> = {}) {
  const recorder = new MemoryRecorder();
  const app = createApp(
    composeDeps({
      storelink,
      keys: new MapKeyProvider(),
      recorder,
      orderCap: new OrderCap({ perHour: 0 }),
      signer: stateSigner(key),
      ...extra,
    }),
  );
  return { app, recorder };
}

const outcomes = (r: MemoryRecorder) => r.audits.map((a) => a.outcome);

describe("2026-07-28 confirmation state (requestState)", () => {
  it("round 1 runs the checks and asks; nothing is audited until the outcome", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    await roundOne(app);
    expect(recorder.audits).toEqual([]);
    expect(recorder.traces.map((t) => t.status)).toEqual(["input_required"]);
  });

  it("a round-1 refusal is an outcome: REJECTED, and no question is asked", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A, {
      keys: new MapKeyProvider({}),
    });
    const result = await call(app);
    expect(result.resultType).not.toBe("input_required");
    expect(result.structuredContent?.error?.type).toBe("no_credentials");
    expect(outcomes(recorder)).toEqual(["REJECTED"]);
  });

  it("a replayed round 2 never creates a second order, nor a second CREATED", async () => {
    const storelink = new InMemoryStoreLink();
    const { app, recorder } = replica(storelink, KEY_A);
    const state = await roundOne(app);
    const second = await call(app, { state, answer: YES });
    expect(second.structuredContent?.order_id).toBe("RPL-47-001");
    const replays = await Promise.all([1, 2, 3].map(() => call(app, { state, answer: YES })));
    for (const replay of replays) {
      expect(replay.structuredContent?.order_id).toBe("RPL-47-001");
      expect(replay.structuredContent?.replayed).toBe(true);
    }
    expect(outcomes(recorder).filter((o) => o === "CREATED")).toHaveLength(1);
    expect(recorder.audits[0]?.confirmed).toBe("buyer");
  });

  it("round 2 sent five times at once still makes one order", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const state = await roundOne(app);
    const answers = await Promise.all([1, 2, 3, 4, 5].map(() => call(app, { state, answer: YES })));
    expect(new Set(answers.map((a) => a.structuredContent?.order_id))).toEqual(
      new Set(["RPL-47-001"]),
    );
    expect(outcomes(recorder).sort()).toEqual([
      "CREATED",
      "REPLAYED",
      "REPLAYED",
      "REPLAYED",
      "REPLAYED",
    ]);
  });

  it("a 2026-07-28 write inside a batch is refused whole, nothing run", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const message = {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "create_replenishment_order", arguments: ORDER, _meta: envelope({}) },
    };
    const res = await request(app)
      .post("/mcp")
      // A batch names no single method: only the era header.
      .set({ ...MCP_HEADERS, "mcp-protocol-version": MODERN_VERSION })
      .send(JSON.stringify([message, { ...message, id: 2 }]));
    expect(res.status).toBe(400);
    expect(res.body.error?.code).toBe(-32600);
    expect(recorder.audits).toEqual([]);
    expect(recorder.traces).toEqual([]);
  });

  it("another replica with the same key accepts the state, and still folds a replay", async () => {
    const storelink = new InMemoryStoreLink();
    const one = replica(storelink, KEY_A);
    const two = replica(storelink, KEY_A);
    const state = await roundOne(one.app);
    const done = await call(two.app, { state, answer: YES });
    expect(done.structuredContent?.order_id).toBe("RPL-47-001");
    const again = await call(one.app, { state, answer: YES });
    expect(again.structuredContent?.replayed).toBe(true);
    expect([...outcomes(one.recorder), ...outcomes(two.recorder)].sort()).toEqual([
      "CREATED",
      "REPLAYED",
    ]);
  });

  it("a replica with another key refuses the state: REJECTED, nothing written", async () => {
    const storelink = new InMemoryStoreLink();
    const one = replica(storelink, KEY_A);
    const other = replica(storelink, KEY_B);
    const state = await roundOne(one.app);
    const refused = await call(other.app, { state, answer: YES });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent?.error?.type).toBe("not_confirmed");
    expect(outcomes(other.recorder)).toEqual(["REJECTED"]);
    expect(other.recorder.audits[0]?.detail).toMatch(/not valid/);
    // Nothing reached StoreLink: the next order of store 47 is still its first.
    const fresh = await call(one.app, { state: await roundOne(one.app), answer: YES });
    expect(fresh.structuredContent?.order_id).toBe("RPL-47-001");
  });

  it.each([
    [
      "a flipped byte",
      (s: string) => `${s.slice(0, 10)}${s[10] === "A" ? "B" : "A"}${s.slice(11)}`,
    ],
    ["a truncated state", (s: string) => s.slice(0, -3)],
    ["garbage", () => "not-a-state"],
    ["an empty string", () => ""],
  ])("%s is refused before anything is sent, never read as a fresh round 1", async (_, tamper) => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const state = await roundOne(app);
    const refused = await call(app, { state: tamper(state), answer: YES });
    expect(refused.resultType).not.toBe("input_required");
    expect(refused.isError).toBe(true);
    expect(outcomes(recorder)).toEqual(["REJECTED"]);
  });

  it("state for other order details is refused (quantity, store, reason, key changed)", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const state = await roundOne(app);
    for (const args of [
      { ...ORDER, quantity: 240 },
      { ...ORDER, store_id: "63" },
      { ...ORDER, reason: `${HERO_REASON} Also 200 more.` },
      { ...ORDER, idempotency_key: "another-key-123" },
    ]) {
      const refused = await call(app, { args, state, answer: YES });
      expect(refused.structuredContent?.error?.type).toBe("not_confirmed");
    }
    expect(outcomes(recorder)).toEqual(["REJECTED", "REJECTED", "REJECTED", "REJECTED"]);
  });

  it("state issued to another caller is refused", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const state = await roundOne(app, { as: "buyer@korral.example" });
    const refused = await call(app, { state, answer: YES, as: "someone-else@korral.example" });
    expect(refused.isError).toBe(true);
    expect(outcomes(recorder)).toEqual(["REJECTED"]);
    expect(recorder.audits[0]?.detail).toMatch(/another caller/);
  });

  it("expired state is refused", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const state = await roundOne(app);
    const realNow = Date.now;
    Date.now = () => realNow() + 301_000;
    try {
      const refused = await call(app, { state, answer: YES });
      expect(refused.isError).toBe(true);
    } finally {
      Date.now = realNow;
    }
    expect(outcomes(recorder)).toEqual(["REJECTED"]);
    expect(recorder.audits[0]?.detail).toMatch(/expired/);
  });

  it.each([
    ["declined", { action: "decline" }],
    ["cancelled", { action: "cancel" }],
    ["accepted but unticked", { action: "accept", content: { confirm: false } }],
    ["accepted with a string", { action: "accept", content: { confirm: "true" } }],
  ])("%s: not_confirmed, one REJECTED, nothing written", async (_, answer) => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const state = await roundOne(app);
    const refused = await call(app, { state, answer });
    expect(refused.structuredContent?.error?.type).toBe("not_confirmed");
    expect(outcomes(recorder)).toEqual(["REJECTED"]);
  });

  it("an answer without state is never a confirmation: the buyer is asked", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const result = await call(app, { answer: YES });
    expect(result.resultType).toBe("input_required");
    expect(recorder.audits).toEqual([]);
  });

  it("a client that declared no elicitation is written as today, confirmed=agent", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A);
    const result = await call(app, { capabilities: {} });
    expect(result.structuredContent?.order_id).toBe("RPL-47-001");
    expect(recorder.audits.map((a) => [a.outcome, a.confirmed])).toEqual([["CREATED", "agent"]]);
  });

  it("KORRAL_REQUIRE_CONFIRMATION refuses what the buyer cannot confirm", async () => {
    const { app, recorder } = replica(new InMemoryStoreLink(), KEY_A, {
      requireConfirmation: true,
    });
    const refused = await call(app, { capabilities: {} });
    expect(refused.structuredContent?.error?.type).toBe("not_confirmed");
    expect(JSON.stringify(refused.content)).toMatch(/form elicitation/);
    expect(outcomes(recorder)).toEqual(["REJECTED"]);
    // A client that can ask still gets to.
    const state = await roundOne(app);
    const done = await call(app, { state, answer: YES });
    expect(done.structuredContent?.order_id).toBe("RPL-47-001");
  });
});
