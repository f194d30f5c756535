import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { HERO_REASON } from "../helpers/harness.js";
import { spawnProcess } from "../helpers/spawn.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/slow-http.mjs", import.meta.url));
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const clean of cleanups.splice(0)) await clean();
});

/** Spawns the built service (via the fixture) and waits for the port it listens on. */
async function spawnSlowServer(slowMs: number) {
  const logDir = mkdtempSync(join(tmpdir(), "korral-shutdown-"));
  const server = spawnProcess(process.execPath, [FIXTURE], {
    env: {
      ...process.env,
      PORT: "0",
      HOST: "127.0.0.1",
      KORRAL_LOG_DIR: logDir,
      KORRAL_TEST_SLOW_MS: String(slowMs),
    },
    stdin: "ignore",
  });
  cleanups.push(async () => {
    await server.kill();
    rmSync(logDir, { recursive: true, force: true });
  });
  const port = Number((await server.ready(/"port":([1-9]\d*)/))[1]);
  return { ...server, port, logDir, waitFor: (pattern: RegExp) => server.ready(pattern) };
}

const createOrder = (port: number) =>
  fetch(`http://127.0.0.1:${port}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 42,
      method: "tools/call",
      params: {
        name: "create_replenishment_order",
        arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON },
      },
    }),
  });

describe("SIGTERM", () => {
  it("lets an in-flight write finish and be audited, refuses new connections, exits 0", async () => {
    const server = await spawnSlowServer(1_500);
    const inFlight = createOrder(server.port);
    await server.waitFor(/FIXTURE_CALL_STARTED createOrder/);
    server.child.kill("SIGTERM");
    await server.waitFor(/shutting down/);

    // New connections are refused while the write is still running.
    await expect(
      fetch(`http://127.0.0.1:${server.port}/healthz`, { signal: AbortSignal.timeout(5_000) }),
    ).rejects.toThrow();

    const res = await inFlight;
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      id: number;
      result: { isError?: boolean; structuredContent: { order_id: string } };
    };
    expect(body.id).toBe(42);
    expect(body.result.isError).toBeFalsy();
    expect(body.result.structuredContent.order_id).toBe("RPL-47-001");

    expect(await server.exit).toBe(0);
    expect(server.stderr()).toContain("FIXTURE_AFTER_CLOSE");
    const audit = readFileSync(join(server.logDir, "audit.jsonl"), "utf8");
    expect(audit).toContain('"outcome":"CREATED"');
    expect(audit).toContain('"order_id":"RPL-47-001"');
  });

  it("exits 0 at once when idle", async () => {
    const server = await spawnSlowServer(0);
    // A kept-alive idle connection must not hold the shutdown open.
    expect((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status).toBe(200);
    server.child.kill("SIGTERM");
    expect(await server.exit).toBe(0);
  });
});
