import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterEach, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { stateSigner } from "../../src/policy/request-state.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import type { Deps } from "../../src/tools/define.js";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { HERO_REASON, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { type Listening, listen } from "../helpers/listen.js";

let open: Listening[] = [];
afterEach(async () => {
  await Promise.all(open.map((l) => l.close()));
  open = [];
});

async function service(overrides: Partial<Deps> = {}) {
  const recorder = new MemoryRecorder();
  const storelink = new InMemoryStoreLink();
  const deps = composeDeps({
    storelink,
    keys: new MapKeyProvider(),
    recorder,
    orderCap: new OrderCap({ perHour: 0 }),
    signer: stateSigner(undefined),
    ...overrides,
  });
  const listening = await listen(createApp(deps));
  open.push(listening);
  return { ...listening, recorder, storelink, deps };
}

async function modernClient(
  url: string,
  answer?: "accept" | "decline",
  mode: "auto" | { pin: "2026-07-28" } = { pin: "2026-07-28" },
) {
  const client = new Client(
    { name: "t", version: "1" },
    {
      versionNegotiation: { mode },
      capabilities: answer ? { elicitation: { form: {} } } : {},
    },
  );
  if (answer) {
    client.setRequestHandler("elicitation/create", async (request) => {
      asked.push(request.params.message);
      return answer === "accept"
        ? { action: "accept", content: { confirm: true } }
        : { action: "decline" };
    });
  }
  const asked: string[] = [];
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return { client, asked };
}

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

describe("MCP 2026-07-28 over HTTP with the SDK v2 client", () => {
  it("connects pinned, lists the declared tools and reads stock", async () => {
    const { url } = await service();
    const { client } = await modernClient(url);
    expect(client.getProtocolEra()).toBe("modern");
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOL_NAMES].sort());
    const result = await client.callTool({
      name: "get_stock_position",
      arguments: { sku: "8847291", store_ids: ["47"] },
    });
    expect(result.isError).toBeFalsy();
    expect(JSON.stringify(result.structuredContent)).toContain('"gap":8');
  });

  it("asks the buyer before writing; accepted: one CREATED confirmed=buyer", async () => {
    const { url, recorder } = await service();
    const { client, asked } = await modernClient(url, "accept");
    const result = await client.callTool({ name: "create_replenishment_order", arguments: ORDER });
    expect(result.isError).toBeFalsy();
    expect((result.structuredContent as { order_id: string }).order_id).toBe("RPL-47-001");
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("Quantity: 24");
    expect(recorder.audits.map((a) => [a.outcome, a.confirmed])).toEqual([["CREATED", "buyer"]]);
  });

  it("in auto mode the client finds 2026-07-28 through server/discover, and the buyer is asked", async () => {
    const { url, recorder } = await service();
    const { client, asked } = await modernClient(url, "accept", "auto");
    expect(client.getProtocolEra()).toBe("modern");
    const result = await client.callTool({ name: "create_replenishment_order", arguments: ORDER });
    expect(result.isError).toBeFalsy();
    expect(asked).toHaveLength(1);
    expect(recorder.audits.map((a) => [a.outcome, a.confirmed])).toEqual([["CREATED", "buyer"]]);
  });

  it("a 2025-only client on the same endpoint is served as before: written, confirmed=agent", async () => {
    const { url, recorder } = await service();
    const { client } = await modernClient(url, undefined, "auto");
    await client.close();
    const { Client: V1Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport: V1Transport } = await import(
      "@modelcontextprotocol/sdk/client/streamableHttp.js"
    );
    const legacy = new V1Client({ name: "v1", version: "1" });
    await legacy.connect(new V1Transport(new URL(url)));
    const result = await legacy.callTool({ name: "create_replenishment_order", arguments: ORDER });
    expect(result.isError).toBeFalsy();
    expect(recorder.audits.map((a) => [a.outcome, a.confirmed])).toEqual([["CREATED", "agent"]]);
    await legacy.close();
  });

  it("declined: not_confirmed, one REJECTED, nothing at StoreLink", async () => {
    const { url, recorder, deps } = await service();
    const { client } = await modernClient(url, "decline");
    const result = await client.callTool({ name: "create_replenishment_order", arguments: ORDER });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.structuredContent)).toContain("not_confirmed");
    expect(recorder.audits.map((a) => a.outcome)).toEqual(["REJECTED"]);
    const key = await deps.keys.getKey("47");
    if (!key) throw new Error("no demo key for store 47");
    await expect(deps.storelink.getOrder("47", "RPL-47-001", key)).rejects.toThrow();
  });
});
