import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { HERO_REASON, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";

const HERO = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

function rpc(app: ReturnType<typeof createApp>, id: number, method: string, params: unknown) {
  return request(app)
    .post("/mcp")
    .set("accept", "application/json, text/event-stream")
    .send({ jsonrpc: "2.0", id, method, params });
}

const order = (app: ReturnType<typeof createApp>, id: number, args: Record<string, unknown>) =>
  rpc(app, id, "tools/call", { name: "create_replenishment_order", arguments: args });

describe("write safety over stateless HTTP", () => {
  it("never elicits, even for a client that declared it, and keeps today's behaviour", async () => {
    const recorder = new MemoryRecorder();
    const app = createApp(
      composeDeps({ keys: new MapKeyProvider(), recorder, confirmWrites: true }),
    );
    const init = await rpc(app, 1, "initialize", {
      protocolVersion: "2025-06-18",
      capabilities: { elicitation: { form: {} } },
      clientInfo: { name: "t", version: "1" },
    });
    expect(init.status).toBe(200);
    const res = await order(app, 2, HERO);
    expect(res.status).toBe(200);
    expect(res.body.result.isError).toBeUndefined();
    expect(res.body.result.structuredContent).toMatchObject({
      mode: "submitted",
      order_id: "RPL-47-001",
      replayed: false,
    });
    expect(recorder.audits.map((a) => a.outcome)).toEqual(["CREATED"]);
  });

  it("never asks in one POST either: an initialize batched with the write is refused whole", async () => {
    const recorder = new MemoryRecorder();
    const app = createApp(
      composeDeps({ keys: new MapKeyProvider(), recorder, confirmWrites: true }),
    );
    const res = await request(app)
      .post("/mcp")
      .set(MCP_HEADERS)
      .send(
        JSON.stringify([
          {
            jsonrpc: "2.0",
            id: 1,
            method: "initialize",
            params: {
              protocolVersion: "2025-06-18",
              capabilities: { elicitation: { form: {} } },
              clientInfo: { name: "t", version: "1" },
            },
          },
          toolCall(2, "create_replenishment_order", HERO),
        ]),
      );
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe(-32600);
    expect(recorder.audits).toEqual([]);
    expect(recorder.traces).toEqual([]);
  });

  it("under KORRAL_REQUIRE_CONFIRMATION, a 2025 client that declared elicitation is refused with words true of it", async () => {
    const recorder = new MemoryRecorder();
    const app = createApp(
      composeDeps({ keys: new MapKeyProvider(), recorder, requireConfirmation: true }),
    );
    await rpc(app, 1, "initialize", {
      protocolVersion: "2025-06-18",
      capabilities: { elicitation: { form: {} } },
      clientInfo: { name: "t", version: "1" },
    });
    const res = await order(app, 2, HERO);
    const error = res.body.result.structuredContent.error;
    expect(error.type).toBe("not_confirmed");
    // It declared form elicitation: the refusal must not say it did not.
    expect(error.message).not.toMatch(/declared no form elicitation/);
    expect(error.message).toContain("an MCP 2025-06-18 client over HTTP never can be");
    expect(recorder.audits.map((a) => a.outcome)).toEqual(["REJECTED"]);
  });

  it("dedupes and caps across requests, because both live in process-wide dependencies", async () => {
    const recorder = new MemoryRecorder();
    const app = createApp(
      composeDeps({
        keys: new MapKeyProvider(),
        recorder,
        orderCap: new OrderCap({ perHour: 2 }),
      }),
    );
    const key = { idempotency_key: "http-approval-0001" };
    const first = await order(app, 1, { ...HERO, ...key });
    const retry = await order(app, 2, { ...HERO, ...key });
    expect(retry.body.result.structuredContent).toMatchObject({
      order_id: first.body.result.structuredContent.order_id,
      replayed: true,
    });
    await order(app, 3, { ...HERO, quantity: 5 });
    const capped = await order(app, 4, { ...HERO, quantity: 6 });
    expect(capped.body.result.isError).toBe(true);
    expect(capped.body.result.structuredContent.error.type).toBe("order_cap_reached");
    expect(recorder.audits.map((a) => a.outcome)).toEqual([
      "CREATED",
      "REPLAYED",
      "CREATED",
      "REJECTED",
    ]);
  });

  it("offers the dry_run preview a stateless client needs", async () => {
    const recorder = new MemoryRecorder();
    const app = createApp(composeDeps({ keys: new MapKeyProvider(), recorder }));
    const res = await order(app, 1, { ...HERO, dry_run: true });
    expect(res.body.result.structuredContent).toMatchObject({
      mode: "preview",
      stock: { on_hand: 3, units_sold_last_24h: 11, gap: 8 },
    });
    expect(recorder.audits.map((a) => a.outcome)).toEqual(["PREVIEW"]);
  });
});
