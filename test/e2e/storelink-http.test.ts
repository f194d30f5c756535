import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONFIRMED_BY_KEY_DETAIL } from "../../src/policy/audit.js";
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
  const auditLines = () => readFileSync(join(ws.logDir, "audit.log"), "utf8").trim().split("\n");

  beforeAll(async () => {
    // The first two order POSTs are applied, then their sockets dropped unanswered.
    emulator = await startEmulatorProcess({ STORELINK_EMULATOR_CUT_AFTER_ORDERS: "2" });
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

  it("the agent gets the order that landed: StoreLink confirms it by the key, one CREATED line", async () => {
    const result = await callTool(mcp.url, "create_replenishment_order", order);
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ order_id: "RPL-47-001", replayed: false });
    const read = await callTool(mcp.url, "get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(read.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
    // Audit lines are durable before the answer leaves: exactly one, naming the key the server made.
    const lines = auditLines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      / CREATED RPL-47-001 store=47 sku=8847291 qty=24 req=req_\w+ by=\S+ key=korral-[0-9a-f-]{36} /,
    );
    expect(lines[0]).toContain(`detail="${CONFIRMED_BY_KEY_DETAIL}"`);
    expect(mcp.child.exitCode).toBeNull();
  });

  it("a cut write with the agent's key is confirmed, and a same-key resend is REPLAYED, not a second truck", async () => {
    const keyed = { ...order, quantity: 12, idempotency_key: "e2e-cut-resend-0001" };
    const first = await callTool(mcp.url, "create_replenishment_order", keyed);
    expect(first.structuredContent).toMatchObject({ order_id: "RPL-47-002", replayed: false });
    const resend = await callTool(mcp.url, "create_replenishment_order", keyed);
    expect(resend.structuredContent).toMatchObject({ order_id: "RPL-47-002", replayed: true });
    const lines = auditLines();
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(
      / CREATED RPL-47-002 store=47 sku=8847291 qty=12 .* key=e2e-cut-resend-0001 /,
    );
    expect(lines[1]).toContain(`detail="${CONFIRMED_BY_KEY_DETAIL}"`);
    expect(lines[2]).toMatch(
      / REPLAYED RPL-47-002 store=47 sku=8847291 qty=12 .* key=e2e-cut-resend-0001 /,
    );
    // Exactly two orders at StoreLink: none made by the resend.
    const third = await callTool(mcp.url, "get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-003",
    });
    expect(errorOf(third).type).toBe("not_found");
  });
});
