import { execFileSync } from "node:child_process";
import { closeSync, constants, existsSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/delayed-emulator.js";
import { undoAfterEach } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { spawnDist } from "../helpers/spawn.js";

/**
 * SIGTERM ends the process even when a read hangs in the thread pool (the key file a FIFO, as a
 * stuck mount behaves): `process.exit` would wait for that read forever; the exit watchdog ends
 * the process once everything owed is audited.
 */

const { defer, workspace } = undoAfterEach();
const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

describe("a key read hung in the thread pool, then SIGTERM", () => {
  it.each(["http.js", "stdio.js"] as const)(
    "%s still ends, with the write audited",
    async (entry) => {
      const ws = await workspace();
      const fifo = join(ws.logDir, "..", "hung-keys.json");
      execFileSync("mkfifo", [fifo]);
      // Whatever happens, the FIFO gets a writer at the end, so no thread of this runner hangs.
      defer(async () => {
        try {
          closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
        } catch {
          // No reader left (ENXIO): nothing hangs on it.
        }
      });
      const server = spawnDist(entry, {
        KORRAL_KEYS_FILE: fifo,
        KORRAL_KEY_DEADLINE_MS: "200",
        KORRAL_SHUTDOWN_GRACE_MS: "500",
        KORRAL_LOG_DIR: ws.logDir,
        HOST: "127.0.0.1",
        PORT: "0",
      });
      defer(() => server.stop());
      const body = JSON.stringify(toolCall(5, "create_replenishment_order", ORDER));
      if (entry === "http.js") {
        await until(() => /listening on HTTP/.test(server.stderr()), "the listening line");
        const port = /"port":(\d+)[^\n]*listening on HTTP/.exec(server.stderr())?.[1];
        const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
          method: "POST",
          headers: MCP_HEADERS,
          body,
        });
        const answer = (await res.json()) as { result: { isError?: boolean } };
        expect(answer.result.isError).toBe(true);
      } else {
        server.child.stdin?.write(`${body}\n`);
        await until(() => server.stdout().includes('"id":5'), "the answer");
      }
      const audit = join(ws.logDir, "audit.log");
      await until(() => existsSync(audit), "the audit line");
      server.child.kill("SIGTERM");
      let cut = false;
      const guard = setTimeout(() => {
        cut = true;
        server.child.kill("SIGKILL");
      }, 20_000);
      const code = await server.exit;
      clearTimeout(guard);
      expect(cut, "the process had to be killed from outside").toBe(false);
      expect(code === null ? server.child.signalCode : code).not.toBeNull();
      expect(readFileSync(audit, "utf8")).toMatch(/ REJECTED - store=47 /);
    },
    40_000,
  );
});
