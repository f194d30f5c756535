import request from "supertest";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { connect, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { modernHeaders, modernMeta } from "../helpers/rpc.js";

/**
 * Malformed params to any method, in both protocol eras: -32602 with a short message naming the
 * bad field, never -32603, never the parser's issue list. And every tools/call is traced, one
 * for a tool that does not exist too.
 */

const MALFORMED: [string, Record<string, unknown>, string][] = [
  ["tools/list", { cursor: 5 }, "cursor"],
  ["prompts/list", { cursor: [] }, "cursor"],
  ["prompts/get", { name: 7 }, "name"],
  ["prompts/get", { name: "replenishment-check", arguments: { product: 5 } }, "arguments.product"],
  ["resources/list", { cursor: {} }, "cursor"],
  ["resources/templates/list", { cursor: 1 }, "cursor"],
  ["resources/read", { uri: 5 }, "uri"],
  ["tools/call", { name: 5 }, "name"],
  ["tools/call", { name: "lookup_sku", arguments: [1] }, "arguments"],
];

function expectShort(error: { code?: number; message?: string }, field: string): void {
  expect(error.code).toBe(-32602);
  const message = error.message ?? "";
  expect(message).toContain(field);
  expect(message).not.toContain("\n");
  expect(message).not.toContain('"code"');
  expect(message.length).toBeLessThan(400);
}

describe("2025 session: malformed params", () => {
  it.each(MALFORMED)("%s %j", async (method, params, field) => {
    const h = await connect();
    try {
      await expect(h.client.request({ method, params } as never, z.any())).rejects.toMatchObject({
        code: -32602,
      });
      const error = await h.client.request({ method, params } as never, z.any()).catch((e) => e);
      expectShort(
        { code: error.code, message: String(error.message).replace(/^MCP error -32602: /, "") },
        field,
      );
    } finally {
      await h.close();
    }
  });
});

const META = modernMeta();

describe("2026-07-28 over HTTP: malformed params", () => {
  const recorder = new MemoryRecorder();
  const app = createApp(
    composeDeps({
      storelink: new InMemoryStoreLink(),
      keys: new MapKeyProvider(),
      recorder,
    }),
  );
  const post = (method: string, params: Record<string, unknown>) =>
    request(app)
      .post("/mcp")
      .set(
        modernHeaders(
          method,
          typeof params.name === "string" && (method === "tools/call" || method === "prompts/get")
            ? params.name
            : method === "resources/read" && typeof params.uri === "string"
              ? params.uri
              : undefined,
        ),
      )
      .send(JSON.stringify({ jsonrpc: "2.0", id: 3, method, params: { ...params, _meta: META } }));

  it.each(MALFORMED)("%s %j", async (method, params, field) => {
    const res = await post(method, params);
    expect(res.body.id).toBe(3);
    expectShort(res.body.error ?? {}, field);
  });

  it("a call to an unknown tool is answered -32602 and traced", async () => {
    const res = await post("tools/call", {
      name: "delete_everything",
      arguments: { store_id: "47" },
    });
    expect(res.body.error?.code).toBe(-32602);
    const traced = recorder.traces.find((t) => t.tool === "delete_everything");
    expect(traced).toMatchObject({ status: "error", args: { store_id: "47" } });
    expect(traced?.error).toMatch(/^unknown_tool: /);
  });
});

describe("a call to an unknown tool in a 2025 session", () => {
  it("is traced like every call", async () => {
    const h = await connect();
    try {
      const error = await h.client
        .callTool({ name: "cancel_order", arguments: { order_id: "RPL-47-001" } })
        .catch((e) => e);
      expect(error.code).toBe(-32602);
      expect(h.recorder.traces.map((t) => [t.tool, t.status])).toEqual([["cancel_order", "error"]]);
    } finally {
      await h.close();
    }
  });
});
