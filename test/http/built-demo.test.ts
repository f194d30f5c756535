import { rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempWorkspace } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { freePort, type Spawned, spawnDist, waitForHealthy } from "../helpers/spawn.js";

let server: Spawned;
let base: string;
let dir: string;

beforeAll(async () => {
  const ws = await tempWorkspace();
  dir = ws.dir;
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawnDist("http.js", {
    PORT: String(port),
    HOST: "127.0.0.1",
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: ws.logDir,
  });
  await waitForHealthy(server, `${base}/healthz`);
});

afterAll(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function call(id: number, name: string, args: Record<string, unknown>) {
  const res = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: MCP_HEADERS,
    body: JSON.stringify(toolCall(id, name, args)),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { result: { structuredContent: Record<string, unknown> } };
  return body.result.structuredContent;
}

describe("the demo flow over HTTP against the built server", () => {
  it("butter -> 8847291 -> stock -> RPL-47-001 -> status, across separate requests", async () => {
    const found = await call(1, "lookup_sku", { query: "butter" });
    expect((found.matches as { sku: string }[])[0]?.sku).toBe("8847291");
    const stock = await call(2, "get_stock_position", {
      sku: "8847291",
      store_ids: ["47", "102", "111"],
    });
    expect((stock.stores as { gap: number }[]).map((s) => s.gap)).toEqual([8, -4, 3]);
    const created = await call(3, "create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: HERO_REASON,
    });
    expect(created.order_id).toBe("RPL-47-001");
    const status = await call(4, "get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(status).toMatchObject({ order_id: "RPL-47-001", status: "submitted", quantity: 24 });
  });
});
