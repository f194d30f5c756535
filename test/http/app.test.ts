import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { HERO_REASON, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { initialize, MCP_HEADERS, toolCall } from "../helpers/rpc.js";

const app = () =>
  createApp(composeDeps({ keys: new MapKeyProvider(), recorder: new MemoryRecorder() }));

const post = (target: ReturnType<typeof app>, body: unknown) =>
  request(target)
    .post("/mcp")
    .set(MCP_HEADERS)
    .send(body as object);

describe("HTTP transport", () => {
  it("answers /healthz with 200 JSON", async () => {
    const res = await request(app()).get("/healthz");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
    expect(res.body.status).toBe("ok");
  });

  it("answers /health, the path for checks through Cloud Run's URL, exactly as /healthz", async () => {
    const target = app();
    const [probe, check] = await Promise.all([
      request(target).get("/healthz"),
      request(target).get("/health"),
    ]);
    expect(check.status).toBe(200);
    expect(check.body).toEqual(probe.body);
  });

  it("initializes statelessly: no session id is issued", async () => {
    const res = await post(app(), initialize());
    expect(res.status).toBe(200);
    expect(res.body.result.serverInfo.name).toBe("korral-storelink");
    expect(res.body.result.capabilities.tools).toBeDefined();
    expect(res.headers["mcp-session-id"]).toBeUndefined();
  });

  it("serves tools/call without a prior initialize, each request on its own", async () => {
    const res = await post(app(), toolCall(7, "lookup_sku", { query: "butter" }));
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(7);
    expect(res.body.result.structuredContent.matches[0].sku).toBe("8847291");
  });

  it("shares one StoreLink per process: an order made in one request is read in the next", async () => {
    const target = app();
    const made = await post(
      target,
      toolCall(1, "create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity: 24,
        reason: HERO_REASON,
      }),
    );
    expect(made.body.result.structuredContent.order_id).toBe("RPL-47-001");
    const read = await post(
      target,
      toolCall(2, "get_replenishment_status", { store_id: "47", order_id: "RPL-47-001" }),
    );
    expect(read.body.result.structuredContent).toMatchObject({
      order_id: "RPL-47-001",
      quantity: 24,
    });
  });

  it("answers tool failures as isError results inside a 200", async () => {
    const res = await post(
      app(),
      toolCall(3, "get_stock_position", { sku: "0000000", store_ids: ["47"] }),
    );
    expect(res.status).toBe(200);
    expect(res.body.result.isError).toBe(true);
    expect(res.body.result.structuredContent.error.type).toBe("unknown_sku");
  });

  it.each(["get", "delete"] as const)(
    "answers %s /mcp with 405 and a JSON-RPC body",
    async (method) => {
      const res = await request(app())[method]("/mcp").set(MCP_HEADERS);
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe("POST");
      expect(res.body.jsonrpc).toBe("2.0");
    },
  );

  it("answers malformed JSON with 400 and JSON-RPC parse error -32700, no stack", async () => {
    const res = await request(app())
      .post("/mcp")
      .set(MCP_HEADERS)
      .send('{"jsonrpc":"2.0","id":1,"method":');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe(-32700);
    expect(res.text).not.toMatch(/at .*\.js:\d+|<html/i);
  });

  it("answers an unknown path with a JSON body, not an HTML page", async () => {
    const res = await request(app()).get("/nope");
    expect(res.status).toBe(404);
    expect(res.headers["content-type"]).toMatch(/application\/json/);
  });
});
