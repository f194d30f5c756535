import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { errorOf, HERO_REASON } from "../helpers/harness.js";
import { forTheFile } from "../helpers/spawn.js";
import {
  type Child,
  callTool,
  startEmulatorProcess,
  startMcpHttpProcess,
  tempWorkspace,
} from "./processes.js";

/**
 * The built emulator and two built MCP HTTP processes in front of it (STORELINK_URL): orders
 * outlive the MCP process that made them, because they now live in StoreLink.
 */

const order = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

describe("two MCP HTTP processes over one StoreLink emulator", () => {
  const ws = tempWorkspace({ ...SEED_ACCEPTED_KEYS });
  let emulator: Child;
  let a: Child;
  let b: Child;
  const mcpEnv = (): Record<string, string> => ({
    STORELINK_URL: emulator.url,
    STORELINK_TIMEOUT_MS: "5000",
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: ws.logDir,
  });

  beforeAll(async () => {
    emulator = await startEmulatorProcess();
    [a, b] = await Promise.all([startMcpHttpProcess(mcpEnv()), startMcpHttpProcess(mcpEnv())]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop(), emulator?.stop()]);
    ws.cleanup();
  });

  it("an order made through one process is read through the other", async () => {
    const created = await callTool(a.url, "create_replenishment_order", order);
    expect(created.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
    const read = await callTool(b.url, "get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(read.isError).toBeFalsy();
    expect(read.structuredContent).toMatchObject({
      order_id: "RPL-47-001",
      quantity: 24,
      status: "submitted",
    });
  });

  it("survives a restart of the process that made it, and numbering goes on", async () => {
    await a.stop();
    // In place of the one the file started: the next test uses it too.
    a = await forTheFile(() => startMcpHttpProcess(mcpEnv()));
    const read = await callTool(a.url, "get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(read.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
    // A new order (not a resend of the first, which StoreLink's dedupe window would fold).
    const next = await callTool(a.url, "create_replenishment_order", { ...order, quantity: 12 });
    expect(next.structuredContent).toMatchObject({ order_id: "RPL-47-002", replayed: false });
  });

  it("emulator stopped: clear storelink_unavailable errors and the MCP processes stay up", async () => {
    await emulator.stop();
    const stock = await callTool(b.url, "get_stock_position", {
      sku: "8847291",
      store_ids: ["47", "102"],
    });
    const error = errorOf(stock);
    expect(error.type).toBe("storelink_unavailable");
    expect(error.retryable).toBe(true);
    const write = await callTool(a.url, "create_replenishment_order", order);
    expect(errorOf(write).type).toBe("storelink_unavailable");

    for (const child of [a, b]) {
      expect(child.child.exitCode).toBeNull();
      expect((await fetch(new URL("/healthz", child.url))).status).toBe(200);
    }
  });
});

describe("a connection cut after the POST reached the emulator", () => {
  const ws = tempWorkspace({ ...SEED_ACCEPTED_KEYS });
  let emulator: Child;
  let mcp: Child;

  beforeAll(async () => {
    emulator = await startEmulatorProcess({ STORELINK_EMULATOR_CUT_AFTER_ORDERS: "1" });
    mcp = await startMcpHttpProcess({
      STORELINK_URL: emulator.url,
      KORRAL_KEYS_FILE: ws.keysFile,
      KORRAL_LOG_DIR: ws.logDir,
    });
  });
  afterAll(async () => {
    await Promise.all([mcp?.stop(), emulator?.stop()]);
    ws.cleanup();
  });

  it("is outcome_unknown for the agent, and the order did land", async () => {
    const result = await callTool(mcp.url, "create_replenishment_order", order);
    const error = errorOf(result);
    expect(error.type).toBe("outcome_unknown");
    expect(error.retryable).toBe(false);
    const read = await callTool(mcp.url, "get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(read.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
    expect(mcp.child.exitCode).toBeNull();
  });

  it("audits UNCERTAIN, and a resend comes back as the landed order (REPLAYED), not a second truck", async () => {
    const resend = await callTool(mcp.url, "create_replenishment_order", order);
    expect(resend.structuredContent).toMatchObject({ order_id: "RPL-47-001", replayed: true });
    // Audit lines are durable before the answer leaves, so both are on disk by now.
    const lines = readFileSync(join(ws.logDir, "audit.log"), "utf8").trim().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/ UNCERTAIN - store=47 sku=8847291 qty=24 req=req_\w+ /);
    expect(lines[0]).toContain("no answer came back");
    expect(lines[1]).toMatch(/ REPLAYED RPL-47-001 store=47 sku=8847291 qty=24 /);
  });
});
