import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { stateSigner } from "../../src/policy/request-state.js";
import { undoAfterEach } from "../helpers/fixtures.js";
import { HERO_REASON, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { MCP_HEADERS, modernHeaders, modernMeta } from "../helpers/rpc.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";
import { stdoutMessages } from "../helpers/spawn.js";

/**
 * Argument names that are not data (`__proto__`, `constructor`, `prototype`) are refused as
 * invalid arguments on every path and era, never dropped: `"__proto__": {"dry_run": true}` must
 * not turn a preview into a placed order. The bodies are raw JSON text, as a client sends them.
 */

const ORDER = `"store_id":"47","sku":"8847291","quantity":24,"reason":"${HERO_REASON}"`;
const HOSTILE = [
  `{${ORDER},"__proto__":{"dry_run":true}}`,
  `{${ORDER},"__pr\\u006fto__":{"dry_run":true}}`,
  `{${ORDER},"constructor":{"prototype":{"dry_run":true}}}`,
  `{${ORDER},"prototype":{"dry_run":true}}`,
];
const READ = `{"sku":"8847291","store_ids":["47"],"__proto__":{"x":1}}`;

const { stdio } = undoAfterEach();

function app() {
  const storelink = new ScriptedStoreLink();
  const recorder = new MemoryRecorder();
  const served = createApp(
    composeDeps({
      storelink,
      keys: new MapKeyProvider(),
      recorder,
      orderCap: new OrderCap({ perHour: 0 }),
      signer: stateSigner(undefined),
    }),
  );
  return { served, storelink, recorder };
}

const callText = (id: number, name: string, args: string, meta?: object) =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"${name}","arguments":${args}${meta ? `,"_meta":${JSON.stringify(meta)}` : ""}}}`;

const expectRefused = (result: {
  isError?: boolean;
  structuredContent?: { error?: { type: string; message: string } };
}) => {
  expect(result.isError).toBe(true);
  expect(result.structuredContent?.error?.type).toBe("invalid_arguments");
  expect(result.structuredContent?.error?.message).toMatch(/not an argument name/);
};

describe("argument names that are not data", () => {
  it.each(HOSTILE)("2025 over HTTP refuses %s and sends nothing", async (args) => {
    const { served, storelink, recorder } = app();
    const res = await request(served)
      .post("/mcp")
      .set(MCP_HEADERS)
      .send(callText(1, "create_replenishment_order", args));
    expectRefused(res.body.result);
    expect(storelink.calls("createOrder")).toHaveLength(0);
    expect(recorder.audits.map((a) => a.outcome)).toEqual(["REJECTED"]);
  });

  it.each(HOSTILE)("2026-07-28 over HTTP refuses %s and sends nothing", async (args) => {
    const { served, storelink } = app();
    const res = await request(served)
      .post("/mcp")
      .set(modernHeaders("tools/call", "create_replenishment_order"))
      .send(callText(1, "create_replenishment_order", args, modernMeta({}, "raw")));
    expect(res.status).toBe(200);
    expectRefused(res.body.result);
    expect(storelink.calls("createOrder")).toHaveLength(0);
  });

  it("a 2026-07-28 read (the fast path) refuses one too", async () => {
    const { served } = app();
    const res = await request(served)
      .post("/mcp")
      .set(modernHeaders("tools/call", "get_stock_position"))
      .send(callText(1, "get_stock_position", READ, modernMeta({}, "raw")));
    expectRefused(res.body.result);
  });

  it("over stdio, in both eras, every one is refused and nothing is written", async () => {
    const { ws, server } = await stdio();
    const lines = HOSTILE.flatMap((args, i) => [
      callText(10 + i, "create_replenishment_order", args),
      callText(20 + i, "create_replenishment_order", args, modernMeta({}, "raw")),
    ]);
    server.child.stdin?.write(`${lines.join("\n")}\n`);
    server.child.stdin?.end();
    expect(await server.exit).toBe(0);
    const answers = stdoutMessages(server);
    expect(answers).toHaveLength(lines.length);
    for (const answer of answers) expectRefused(answer.result);
    const { readFile } = await import("node:fs/promises");
    const audit = await readFile(`${ws.logDir}/audit.log`, "utf8");
    expect(audit).not.toMatch(/ CREATED | PREVIEW /);
  });
});
