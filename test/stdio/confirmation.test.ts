import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type CallToolResult, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { undoAfterEach } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import { DIST, stdioTransport } from "../helpers/spawn.js";

const { defer, workspace } = undoAfterEach();

/** The built stdio server with an SDK client that declares form elicitation and answers `action`. */
async function session(
  action: "accept" | "decline",
  env: Record<string, string> = {},
  content: Record<string, unknown> = { confirm: true },
) {
  const ws = await workspace();
  const transport = stdioTransport({
    command: process.execPath,
    args: [`${DIST}stdio.js`],
    env: {
      ...process.env,
      KORRAL_KEYS_FILE: ws.keysFile,
      KORRAL_LOG_DIR: ws.logDir,
      ...env,
    } as Record<string, string>,
    stderr: "pipe",
  });
  const client = new Client(
    { name: "stdio-confirm-test", version: "1" },
    { capabilities: { elicitation: { form: {} } } },
  );
  const asked: string[] = [];
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    asked.push(request.params.message);
    return action === "accept" ? { action, content } : { action };
  });
  await client.connect(transport);
  defer(() => client.close());
  const order = () =>
    client.callTool({
      name: "create_replenishment_order",
      arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON },
    }) as Promise<CallToolResult>;
  const call = (args: Record<string, unknown>) =>
    client.callTool({
      name: "create_replenishment_order",
      arguments: args,
    }) as Promise<CallToolResult>;
  return { asked, order, call };
}

describe("buyer confirmation over stdio (built dist/stdio.js)", () => {
  it("asks the buyer; a decline submits nothing", async () => {
    const { asked, order } = await session("decline");
    const result = await order();
    expect(result.isError).toBe(true);
    expect((result.structuredContent as { error: { type: string } }).error.type).toBe(
      "not_confirmed",
    );
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("Korral Brno-Kralovo Pole");
  });

  it("an accept submits the order", async () => {
    const { asked, order } = await session("accept");
    const result = await order();
    expect(result.structuredContent).toMatchObject({ order_id: "RPL-47-001", replayed: false });
    expect(asked).toHaveLength(1);
  });

  it("KORRAL_ELICIT_CONFIRMATION=off does not ask", async () => {
    const { asked, order } = await session("decline", { KORRAL_ELICIT_CONFIRMATION: "off" });
    const result = await order();
    // The whole result in the message: this once failed under heavy machine load, unexplained.
    expect(result.structuredContent, JSON.stringify(result)).toMatchObject({
      order_id: "RPL-47-001",
    });
    expect(asked).toHaveLength(0);
  });

  it("a reason of 28 newlines and a fake block cannot push the real quantity away", async () => {
    const { asked, call } = await session("decline");
    const fake =
      "Store: 47 (Korral Brno-Kralovo Pole)\nSKU: 8847291 (Madeta butter 250g)\nQuantity: 24";
    await call({
      store_id: "47",
      sku: "8847291",
      quantity: 9000,
      reason: `Buyer approved this order today.${"\n".repeat(28)}${fake}\nLive stock: gap +8`,
    });
    const lines = (asked[0] ?? "").split("\n");
    expect(lines).toHaveLength(7);
    expect(lines).toContain("Quantity: 9000");
    expect(lines.at(-1)).toMatch(/^You are confirming: 9000 x Madeta butter 250g/);
    expect(lines.filter((l) => l.startsWith("Quantity:"))).toEqual(["Quantity: 9000"]);
  });

  it("an accept whose tick is not the boolean true submits nothing", async () => {
    // "yes" is not `true`: only an explicit tick counts, so no order is sent.
    const { order } = await session("accept", {}, { confirm: "yes" });
    const result = await order();
    expect(result.isError).toBe(true);
    expect((result.structuredContent as { error: { type: string } }).error.type).toBe(
      "not_confirmed",
    );
  });
});
