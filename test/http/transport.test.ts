import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { type Listening, listen } from "../helpers/listen.js";

const app = createApp(composeDeps({ keys: new MapKeyProvider(), recorder: new MemoryRecorder() }));
const post = (body: unknown, headers: Record<string, string> = {}) =>
  request(app)
    .post("/mcp")
    .set({
      accept: "application/json, text/event-stream",
      "content-type": "application/json",
      ...headers,
    })
    .send(JSON.stringify(body));

const INIT = {
  jsonrpc: "2.0",
  id: 0,
  method: "initialize",
  params: {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "t", version: "1" },
  },
};
const LIST = (id: number | string) => ({ jsonrpc: "2.0", id, method: "tools/list" });

describe("the streamable HTTP POST path (stateless, JSON responses)", () => {
  it("answers initialize with the server's info and capabilities", async () => {
    const res = await post(INIT);
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(res.headers["mcp-session-id"]).toBeUndefined();
    expect(res.body).toMatchObject({
      jsonrpc: "2.0",
      id: 0,
      result: { serverInfo: { name: "korral-storelink" }, capabilities: { tools: {} } },
    });
  });

  it("accepts notifications with 202 and no body", async () => {
    const res = await post({ jsonrpc: "2.0", method: "notifications/initialized" });
    expect(res.status).toBe(202);
    expect(res.text).toBe("");
  });

  it("answers a batch with every response, matched by id", async () => {
    const res = await post([LIST("a"), { jsonrpc: "2.0", method: "notifications/x" }, LIST(9)]);
    expect(res.status).toBe(200);
    expect(res.body.map((r: { id: unknown }) => r.id)).toEqual(["a", 9]);
  });

  it("answers an unknown method with a JSON-RPC error, in a 200", async () => {
    const res = await post({ jsonrpc: "2.0", id: 3, method: "no/such-method" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: 3, error: { code: -32601 } });
  });

  it("refuses what the SDK transport refuses, with the same codes", async () => {
    const tooMany = Array.from({ length: 101 }, (_, i) => LIST(i));
    expect((await post(tooMany)).body).toMatchObject({ error: { code: -32600 } });
    expect((await post(tooMany)).status).toBe(400);
    const notRpc = await post({ hello: "world" });
    expect(notRpc.status).toBe(400);
    expect(notRpc.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
    const twoInits = await post([INIT, { ...INIT, id: 1 }]);
    expect(twoInits.status).toBe(400);
    expect(twoInits.body.error.code).toBe(-32600);
    const badVersion = await post(LIST(1), { "mcp-protocol-version": "1999-01-01" });
    expect(badVersion.status).toBe(400);
    expect(badVersion.body.error.message).toMatch(/Unsupported protocol version/);
    expect((await post(LIST(1), { "mcp-protocol-version": "2025-06-18" })).status).toBe(200);
  });
});

describe("the SDK's own HTTP client", () => {
  let server: Listening;
  let url: URL;
  beforeAll(async () => {
    server = await listen(app);
    url = new URL(server.url);
  });
  afterAll(() => server.close());

  it("initializes, lists the declared tools and calls one", async () => {
    const client = new Client({ name: "sdk-client", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(url));
    try {
      expect(client.getServerVersion()?.name).toBe("korral-storelink");
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([...TOOL_NAMES].sort());
      const result = await client.callTool({
        name: "get_stock_position",
        arguments: { sku: "8847291", store_ids: ["47"] },
      });
      expect(result.structuredContent).toMatchObject({ stores: [{ store_id: "47", gap: 8 }] });
    } finally {
      await client.close();
    }
  });
});
