import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { describe, expect, it } from "vitest";
import { undoAfterEach } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import { initialize, toolCall } from "../helpers/rpc.js";
import { DIST, spawnDist, stdioTransport } from "../helpers/spawn.js";

const { defer, stdio, workspace } = undoAfterEach();

describe("stdio entry (built dist/stdio.js)", () => {
  it("writes only JSON-RPC frames to stdout, the banner to stderr, and exits when stdin closes", async () => {
    const { server } = await stdio();
    const frames = [
      initialize(1),
      { jsonrpc: "2.0", method: "notifications/initialized" },
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
      toolCall(3, "get_stock_position", { sku: "8847291", store_ids: ["47", "999"] }),
      toolCall(4, "create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity: 1,
        reason: "n/a",
      }),
    ];
    server.child.stdin?.write(`${frames.map((f) => JSON.stringify(f)).join("\n")}\n`);
    // Wait for all four answers, then close stdin.
    const deadline = Date.now() + 10_000;
    while (server.stdout().trim().split("\n").length < 4 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 25));
    }
    server.child.stdin?.end();
    expect(await server.exit).toBe(0);

    const lines = server.stdout().trim().split("\n");
    expect(lines).toHaveLength(4);
    const messages = lines.map((line) => JSON.parse(line));
    for (const message of messages) expect(message.jsonrpc).toBe("2.0");
    // Calls run concurrently, so answers may come in any order.
    const byId = new Map(messages.map((m) => [m.id, m]));
    expect([...byId.keys()].sort()).toEqual([1, 2, 3, 4]);
    expect(byId.get(4).result.isError).toBe(true);
    expect(server.stderr()).toContain(
      "korral-storelink MCP server running on stdio (StoreLink: embedded demo)",
    );
  });

  it("runs the demo flow for an SDK client over stdio", async () => {
    const ws = await workspace();
    const transport = stdioTransport({
      command: process.execPath,
      args: [`${DIST}stdio.js`],
      env: { ...process.env, KORRAL_KEYS_FILE: ws.keysFile, KORRAL_LOG_DIR: ws.logDir } as Record<
        string,
        string
      >,
      stderr: "pipe",
      // MCP clients spawn servers from arbitrary directories.
      cwd: "/",
    });
    const client = new Client({ name: "stdio-test", version: "1" });
    await client.connect(transport);
    defer(() => client.close());

    const found = await client.callTool({ name: "lookup_sku", arguments: { query: "butter" } });
    expect((found.structuredContent as { matches: { sku: string }[] }).matches[0]?.sku).toBe(
      "8847291",
    );
    const stock = await client.callTool({
      name: "get_stock_position",
      arguments: { sku: "8847291", store_ids: ["47", "102", "111"] },
    });
    expect(
      (stock.structuredContent as { stores: { gap: number }[] }).stores.map((s) => s.gap),
    ).toEqual([8, -4, 3]);
    const created = await client.callTool({
      name: "create_replenishment_order",
      arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON },
    });
    expect((created.structuredContent as { order_id: string }).order_id).toBe("RPL-47-001");
    const status = await client.callTool({
      name: "get_replenishment_status",
      arguments: { store_id: "47", order_id: "RPL-47-001" },
    });
    expect((status.structuredContent as { status: string }).status).toBe("submitted");
  });

  it("starts without a keys file and reports no credentials instead of crashing", async () => {
    const ws = await workspace();
    const server = spawnDist("stdio.js", {
      KORRAL_KEYS_FILE: `${ws.dir}/absent.json`,
      KORRAL_LOG_DIR: ws.logDir,
    });
    defer(() => server.stop());
    server.child.stdin?.write(
      `${JSON.stringify(toolCall(1, "get_stock_position", { sku: "8847291", store_ids: ["47"] }))}\n`,
    );
    const deadline = Date.now() + 10_000;
    while (!server.stdout().includes("\n") && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 25));
    }
    const answer = JSON.parse(server.stdout().trim());
    expect(answer.result.isError).toBe(true);
    expect(answer.result.structuredContent.error.type).toBe("no_credentials");
    expect(answer.result.structuredContent.error.message).toContain(
      "No credentials for store 47. Ask Korral IT for access.",
    );
  });
});
