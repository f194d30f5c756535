import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { LOOPBACK_HOSTS } from "../../src/http/host-patterns.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { initialize, MCP_HEADERS } from "../helpers/rpc.js";

/** A page on evil.example.com that rebinds its name to 127.0.0.1 must not reach the tools. */
const app = (options: Parameters<typeof createApp>[1]) =>
  createApp(composeDeps({ keys: new MapKeyProvider(), recorder: new MemoryRecorder() }), options);

describe("DNS-rebinding protection", () => {
  it("with loopback hosts enforced, a foreign Host is refused with 403 and a JSON-RPC body", async () => {
    const res = await request(app({ allowedHosts: LOOPBACK_HOSTS }))
      .post("/mcp")
      .set({ ...MCP_HEADERS, host: "evil.example.com", origin: "http://evil.example.com" })
      .send(initialize());
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } });
  });

  it.each(["127.0.0.1:8080", "localhost:3000", "[::1]:9"])("accepts Host %s", async (host) => {
    const res = await request(app({ allowedHosts: LOOPBACK_HOSTS }))
      .post("/mcp")
      .set({ ...MCP_HEADERS, host })
      .send(initialize());
    expect(res.status).toBe(200);
  });

  it("without allowedHosts (Cloud Run), any Host is served", async () => {
    const res = await request(app({}))
      .post("/mcp")
      .set({ ...MCP_HEADERS, host: "korral-storelink-abc-ew.a.run.app" })
      .send(initialize());
    expect(res.status).toBe(200);
  });
});
