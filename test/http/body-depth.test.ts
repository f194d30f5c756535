import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { JSON_BODY_LIMIT, MAX_BODY_DEPTH } from "../../src/http/body-refusals.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { initialize, MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * A 10 kB body of 5,000 nested `[` was a 500 (a stack overflow in the recursive
 * initialize detection), and a deep client response overflowed the SDK's JSON.stringify. Depth is
 * now checked once, without recursion past the limit, before anything else walks the body.
 */

const storelink = new ScriptedStoreLink();
const recorder = new MemoryRecorder();
const app = createApp(composeDeps({ storelink, keys: new MapKeyProvider(), recorder }));

const post = (body: string) => request(app).post("/mcp").set(MCP_HEADERS).send(body);

/** `inner` wrapped in `depth` arrays or single-key objects. */
const nest = (depth: number, inner = "1", kind: "array" | "object" = "array"): string =>
  kind === "array"
    ? `${"[".repeat(depth)}${inner}${"]".repeat(depth)}`
    : `${'{"a":'.repeat(depth)}${inner}${"}".repeat(depth)}`;

/** Valid messages with a deep value in `where`; `deep` is the JSON text of that value. */
const PLACES: Record<string, (deep: string) => string> = {
  "the top level": (deep) => deep,
  "a batch element": (deep) =>
    `[${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" })},${deep}]`,
  "a ping's params": (deep) => `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":${deep}}}`,
  "tools/call arguments": (deep) =>
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_replenishment_order","arguments":{"store_id":"47","sku":"8847291","quantity":12,"reason":"restock ahead of promo","x":${deep}}}}`,
  "an argument's value": (deep) =>
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup_sku","arguments":{"query":${deep}}}}`,
  _meta: (deep) =>
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup_sku","_meta":{"progressToken":1,"x":${deep}},"arguments":{"query":"milk"}}}`,
  "initialize capabilities": (deep) =>
    `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"x":${deep}},"clientInfo":{"name":"t","version":"1"}}}`,
  "a notification": (deep) =>
    `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"_meta":{"x":${deep}}}}`,
  "a client response": (deep) => `{"jsonrpc":"2.0","id":1,"result":{"x":${deep}}}`,
  "an error response's data": (deep) =>
    `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":${deep}}}`,
};

describe("deeply nested bodies on POST /mcp", () => {
  it("the issue's 10 kB of 5,000 nested [ is a 400, not a 500", async () => {
    const body = nest(5_000, "");
    expect(body.length).toBe(10_000);
    const res = await post(body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
  });

  for (const [where, place] of Object.entries(PLACES)) {
    it(`nesting in ${where} is refused with 400 before anything runs, at any depth`, async () => {
      const before = { sent: storelink.sent.length, traces: recorder.traces.length };
      // Just past the limit, the 5,000, and as deep as the body limit allows.
      const deepest = Math.floor((Number.parseInt(JSON_BODY_LIMIT, 10) * 1024 - 400) / 2);
      for (const depth of [MAX_BODY_DEPTH + 1, 5_000, deepest]) {
        for (const kind of ["array", "object"] as const) {
          // An object level takes three times an array level's bytes.
          const levels = kind === "object" ? Math.min(depth, Math.floor(deepest / 3)) : depth;
          const body = place(nest(levels, "1", kind));
          const res = await post(body);
          expect(res.status, `${where}, ${kind} x${depth}`).toBe(400);
          expect(res.body.error.code).toBe(-32600);
        }
      }
      expect(storelink.sent.length).toBe(before.sent);
      expect(recorder.traces.length).toBe(before.traces);
    });
  }

  it("nesting within the limit is served as before", async () => {
    // The body itself counts: message object, params, arguments or _meta, then the nest.
    const room = MAX_BODY_DEPTH - 3;
    const meta = await post(
      JSON.stringify({
        ...toolCall(1, "lookup_sku", { query: "milk" }),
        params: {
          name: "lookup_sku",
          arguments: { query: "milk" },
          _meta: { x: JSON.parse(nest(room)) },
        },
      }),
    );
    expect(meta.status).toBe(200);
    expect(meta.body.result.structuredContent.matches.length).toBeGreaterThan(0);
    const init = await post(
      JSON.stringify({
        ...initialize(),
        params: { ...initialize().params, capabilities: { x: JSON.parse(nest(room)) } },
      }),
    );
    expect(init.status).toBe(200);
    expect(init.body.result.serverInfo.name).toBe("korral-storelink");
  });

  it("after the deep bodies the app still serves", async () => {
    const res = await post(JSON.stringify(toolCall(2, "lookup_sku", { query: "butter" })));
    expect(res.status).toBe(200);
    expect(res.body.result.structuredContent.matches[0].sku).toBe("8847291");
  });
});
