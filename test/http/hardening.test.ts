import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { allowedHostsFor, createApp } from "../../src/http/app.js";
import { LOOPBACK_HOSTS } from "../../src/http/host-patterns.js";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";

// As serve() builds it on Cloud Run with KORRAL_ALLOWED_HOSTS and KORRAL_ALLOWED_ORIGINS set.
const app = createApp(composeDeps({ keys: new MapKeyProvider(), recorder: new MemoryRecorder() }), {
  allowedHosts: allowedHostsFor({
    host: "0.0.0.0",
    allowedHosts: ["korral-storelink-abc123-ew.a.run.app"],
  }),
  allowedOrigins: ["https://agent.korral.example"],
});

const LIST = { jsonrpc: "2.0", id: 7, method: "tools/list", params: {} };
const ACCEPT = "application/json, text/event-stream";

const post = (body: unknown = LIST) =>
  request(app)
    .post("/mcp")
    .set("accept", ACCEPT)
    .set("content-type", "application/json")
    .send(typeof body === "string" ? body : JSON.stringify(body));

/** Every error body is a JSON-RPC error object: never HTML, never a stack. */
function expectRpcError(res: request.Response, status: number, code: number): void {
  expect(res.status).toBe(status);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  expect(res.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code } });
  expect(res.text).not.toMatch(/<html|<!DOCTYPE|\bat .*\.(js|ts):\d+/i);
}

describe("Host validation", () => {
  it("enforces loopback names on loopback, configured names anywhere, else any Host", () => {
    expect(allowedHostsFor({ host: "127.0.0.1", allowedHosts: [] })).toEqual(LOOPBACK_HOSTS);
    expect(allowedHostsFor({ host: "0.0.0.0", allowedHosts: [] })).toBeUndefined();
    expect(allowedHostsFor({ host: "0.0.0.0", allowedHosts: ["svc.example"] })).toEqual([
      ...LOOPBACK_HOSTS,
      "svc.example",
    ]);
  });

  it("accepts the localhost names on any port", async () => {
    for (const host of ["localhost:8080", "127.0.0.1:3000", "[::1]:8080", "LOCALHOST"]) {
      const res = await post().set("host", host);
      expect(res.status, host).toBe(200);
    }
  });

  it("accepts a configured host name, case-insensitively", async () => {
    const res = await post().set("host", "Korral-StoreLink-abc123-ew.a.run.app");
    expect(res.status).toBe(200);
    expect(res.body.result.tools).toHaveLength(TOOL_NAMES.length);
  });

  it("refuses any other Host with 403 (DNS rebinding)", async () => {
    expectRpcError(await post().set("host", "evil.example"), 403, -32000);
    expectRpcError(await post().set("host", "localhost.evil.example:8080"), 403, -32000);
  });
});

describe("Origin validation", () => {
  it("accepts requests without Origin (non-browser clients)", async () => {
    const res = await post();
    expect(res.headers.origin).toBeUndefined();
    expect(res.status).toBe(200);
  });

  it("accepts a configured origin and localhost pages", async () => {
    expect((await post().set("origin", "https://agent.korral.example")).status).toBe(200);
    expect((await post().set("origin", "http://localhost:6274")).status).toBe(200);
  });

  it("refuses a foreign Origin with 403, on every method", async () => {
    expectRpcError(await post().set("origin", "https://evil.example"), 403, -32000);
    expectRpcError(await post().set("origin", "null"), 403, -32000);
    expectRpcError(
      await post().set("origin", "https://agent.korral.example.evil.example"),
      403,
      -32000,
    );
    expectRpcError(
      await request(app).get("/mcp").set("origin", "https://evil.example"),
      403,
      -32000,
    );
  });
});

describe("request bodies and headers", () => {
  it("answers a body over the limit with 413", async () => {
    const huge = { ...LIST, params: { padding: "x".repeat(300 * 1024) } };
    expectRpcError(await post(huge), 413, -32600);
  });

  it("answers malformed JSON with 400 and -32700", async () => {
    expectRpcError(await post('{"jsonrpc":"2.0",'), 400, -32700);
  });

  it("answers a wrong Accept header with 406", async () => {
    const res = await request(app)
      .post("/mcp")
      .set("accept", "text/html")
      .set("content-type", "application/json")
      .send(JSON.stringify(LIST));
    expect(res.status).toBe(406);
    expect(res.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } });
  });

  it("answers a non-JSON content type with 415", async () => {
    const res = await request(app)
      .post("/mcp")
      .set("accept", ACCEPT)
      .set("content-type", "text/plain")
      .send("hello");
    expect(res.status).toBe(415);
    expect(res.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } });
  });

  it("answers other methods and paths with JSON-RPC errors", async () => {
    const get = await request(app).get("/mcp");
    expectRpcError(get, 405, -32000);
    expect(get.headers.allow).toBe("POST");
    expectRpcError(await request(app).delete("/mcp"), 405, -32000);
    expectRpcError(await request(app).get("/nowhere"), 404, -32601);
    expectRpcError(await request(app).post("/nowhere").send("{"), 404, -32601);
  });

  it("still serves the health probe and a tool call", async () => {
    expect((await request(app).get("/healthz")).body).toMatchObject({ status: "ok" });
    const res = await post({
      jsonrpc: "2.0",
      id: "a",
      method: "tools/call",
      params: { name: "lookup_sku", arguments: { query: "butter" } },
    });
    expect(res.status).toBe(200);
    expect(res.body.id).toBe("a");
    expect(res.body.result.structuredContent.matches[0].sku).toBe("8847291");
  });
});
