import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { HERO_REASON } from "../helpers/harness.js";
import {
  DIST,
  freePort,
  runOk,
  type Spawned,
  spawnDist,
  waitForHealthy,
} from "../helpers/spawn.js";

/**
 * The official MCP Inspector CLI (@modelcontextprotocol/inspector-cli, pinned) lists and calls
 * the tools of the built server, over stdio and over streamable HTTP: an independent client
 * agrees the server speaks the protocol.
 */

const INSPECTOR = fileURLToPath(
  new URL("../../node_modules/@modelcontextprotocol/inspector-cli/build/index.js", import.meta.url),
);

let dir: string;
let env: NodeJS.ProcessEnv;
let http: Spawned;
let url: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-inspector-"));
  const keysFile = join(dir, "keys.json");
  await writeFile(keysFile, JSON.stringify(SEED_ACCEPTED_KEYS));
  // The inspector passes its own environment on to the stdio server it spawns.
  env = { ...process.env, KORRAL_KEYS_FILE: keysFile, KORRAL_LOG_DIR: join(dir, "log") };
  const port = await freePort();
  url = `http://127.0.0.1:${port}/mcp`;
  http = spawnDist("http.js", {
    PORT: String(port),
    HOST: "127.0.0.1",
    KORRAL_KEYS_FILE: keysFile,
    KORRAL_LOG_DIR: join(dir, "http-log"),
  });
  await waitForHealthy(http, `http://127.0.0.1:${port}/healthz`);
});
afterAll(async () => {
  await http?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Runs the inspector CLI against a target and parses the JSON it prints. */
async function inspector(target: string[], ...args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await runOk(process.execPath, [INSPECTOR, ...target, ...args], {
    env,
    timeoutMs: 30_000,
  });
  return JSON.parse(stdout) as Record<string, unknown>;
}

// Values are JSON (the CLI parses each), so SKU codes are quoted to stay strings.
const ORDER_ARGS = [
  "--tool-arg",
  'store_id="47"',
  'sku="8847291"',
  "quantity=24",
  `reason=${JSON.stringify(HERO_REASON)}`,
];

describe.each([
  ["stdio", () => [process.execPath, `${DIST}stdio.js`]],
  ["http", () => [url, "--transport", "http"]],
])("MCP Inspector CLI over %s", (_transport, target) => {
  it("lists exactly the declared tools", async () => {
    const listed = await inspector(target(), "--method", "tools/list");
    const names = (listed.tools as { name: string }[]).map((t) => t.name).sort();
    expect(names).toEqual([...TOOL_NAMES].sort());
  });

  it("calls a read and the write, and gets structured results", async () => {
    const found = await inspector(
      target(),
      "--method",
      "tools/call",
      "--tool-name",
      "get_stock_position",
      "--tool-arg",
      'sku="8847291"',
      'store_ids=["47"]',
    );
    expect(found.structuredContent).toMatchObject({
      sku: "8847291",
      stores: [{ store_id: "47", on_hand: 3, units_sold_last_24h: 11, gap: 8 }],
    });
    const made = await inspector(
      target(),
      "--method",
      "tools/call",
      "--tool-name",
      "create_replenishment_order",
      ...ORDER_ARGS,
    );
    expect((made.structuredContent as { order_id: string }).order_id).toMatch(/^RPL-47-\d{3}$/);
  });

  // Clients that list tools first validate structuredContent against the outputSchema even on
  // isError results; every outputSchema admits the error shape, so the model gets the error.
  it("gets a bad argument back as an isError result, not a crash", async () => {
    const bad = await inspector(
      target(),
      "--method",
      "tools/call",
      "--tool-name",
      "lookup_sku",
      "--tool-arg",
      'query=""',
    );
    expect(bad.isError).toBe(true);
  });
});
