import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { tempWorkspace } from "../helpers/fixtures.js";
import { PYTHON_CLIENT, pythonWithMcp } from "../helpers/python.js";
import { DIST, freePort, runOk, spawnDist, waitForHealthy } from "../helpers/spawn.js";

let python: string;
beforeAll(async () => {
  python = await pythonWithMcp();
}, 300_000);

interface Outcome {
  tools: string[];
  stock: { stores: { store_id: string; gap?: number }[] };
  order: { order_id?: string; error?: { type: string } };
  order_is_error: boolean;
  asked: string[];
}

async function drive(target: string, answer: "accept" | "decline", env: Record<string, string>) {
  const { stdout } = await runOk(python, [PYTHON_CLIENT, target, answer], {
    env: { ...process.env, ...env },
    timeoutMs: 60_000,
  });
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as Outcome;
}

const audit = async (logDir: string) =>
  (await readFile(join(logDir, "audit.log"), "utf8").catch(() => "")).split("\n").filter(Boolean);

describe.each(["http", "stdio"] as const)(
  "the official Python client (mcp 2.3.0) pinned to 2026-07-28 over %s",
  (transport) => {
    async function target(ws: { keysFile: string; logDir: string }) {
      const env = { KORRAL_KEYS_FILE: ws.keysFile, KORRAL_LOG_DIR: ws.logDir };
      if (transport === "stdio") {
        return {
          target: `stdio:${process.execPath}:${join(DIST, "stdio.js")}`,
          env,
          stop: async () => {},
        };
      }
      const port = await freePort();
      const server = spawnDist("http.js", { ...env, PORT: String(port), HOST: "127.0.0.1" });
      await waitForHealthy(server, `http://127.0.0.1:${port}/healthz`);
      return { target: `http://127.0.0.1:${port}/mcp`, env: {}, stop: () => server.stop() };
    }

    it.each(["accept", "decline"] as const)(
      "lists, reads, and the buyer is asked (%s)",
      async (answer) => {
        const ws = await tempWorkspace();
        const server = await target(ws);
        try {
          const outcome = await drive(server.target, answer, server.env);
          expect(outcome.tools).toHaveLength(TOOL_NAMES.length);
          expect(outcome.stock.stores.find((s) => s.store_id === "47")?.gap).toBe(8);
          expect(outcome.asked).toHaveLength(1);
          expect(outcome.asked[0]).toContain("You are confirming: 24 x Madeta butter 250g");
          const lines = await audit(ws.logDir);
          expect(lines).toHaveLength(1);
          if (answer === "accept") {
            expect(outcome.order.order_id).toBe("RPL-47-001");
            expect(lines[0]).toMatch(/ CREATED RPL-47-001 .*confirmed=buyer/);
          } else {
            expect(outcome.order_is_error).toBe(true);
            expect(outcome.order.error?.type).toBe("not_confirmed");
            expect(lines[0]).toMatch(/ REJECTED - /);
          }
        } finally {
          await server.stop();
          await rm(ws.dir, { recursive: true, force: true });
        }
      },
    );
  },
);
