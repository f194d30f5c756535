import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { Server } from "@modelcontextprotocol/server";
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import { createServer } from "../../src/mcp/server.js";
import { NO_LIMIT } from "../../src/policy/rate-limit.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { FakeSecretManager } from "../helpers/fake-secret-manager.js";

/** The composition root: every way of starting the server honours the same configuration. */
async function client(server: Server): Promise<Client> {
  const [a, b] = InMemoryTransport.createLinkedPair();
  const c = new Client({ name: "deps-test", version: "1" });
  await Promise.all([server.connect(b), c.connect(a)]);
  return c;
}

const readStock = (c: Client) =>
  c.callTool({
    name: "get_stock_position",
    arguments: { sku: "8847291", store_ids: ["47"] },
  });

afterEach(() => vi.unstubAllEnvs());

/** A key file with the demo StoreLink's accepted keys, as KORRAL_KEYS_FILE. */
function stubKeyFile(): void {
  const file = join(mkdtempSync(join(tmpdir(), "korral-deps-")), "keys.json");
  writeFileSync(file, JSON.stringify(SEED_ACCEPTED_KEYS));
  vi.stubEnv("KORRAL_KEYS_FILE", file);
}

describe("composeDeps, the composition root", () => {
  it("reads store keys from Secret Manager when KORRAL_KEY_SOURCE says so", async () => {
    const secrets = new FakeSecretManager();
    const name = "projects/korral-test/secrets/storelink-key-47/versions/latest";
    secrets.secrets.set(name, SEED_ACCEPTED_KEYS["47"] as string);
    const config = loadConfig({
      KORRAL_KEY_SOURCE: "secret-manager",
      GOOGLE_CLOUD_PROJECT: "korral-test",
      KORRAL_KEYS_FILE: "/nowhere/keys.json",
    });
    const c = await client(createServer(composeDeps({}, config, { secretClient: secrets })));
    const result = await readStock(c);
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      stores: [{ status: "ok", store_id: "47", on_hand: 3 }],
    });
    expect(secrets.calls.map((call) => call.name)).toEqual([name]);
  });

  it("a Secret Manager that cannot start fails each lookup as that store's credentials, never a crash", async () => {
    const config = loadConfig({
      KORRAL_KEY_SOURCE: "secret-manager",
      GOOGLE_CLOUD_PROJECT: "korral-test",
    });
    // What the real client's start-up can say: nothing of it may reach the model.
    const failing = Promise.reject(
      new Error("Could not load the default credentials from 169.254.169.254"),
    );
    const c = await client(createServer(composeDeps({}, config, { secretClient: failing })));
    for (let attempt = 0; attempt < 2; attempt++) {
      const result = await c.callTool({
        name: "get_stock_position",
        arguments: { sku: "8847291", store_ids: ["47", "102"] },
      });
      expect(result.isError).toBe(true);
      expect(JSON.stringify(result)).toContain("store 47");
      expect(JSON.stringify(result)).toContain("store 102");
      expect(JSON.stringify(result)).not.toMatch(/169\.254|default credentials/);
    }
  });

  it("composed without a config, the deps take the environment's rate limit, as the entries do", async () => {
    stubKeyFile();
    vi.stubEnv("KORRAL_RATE_LIMIT_PER_MIN", "1");
    const c = await client(createServer(composeDeps()));
    expect((await readStock(c)).isError).toBeFalsy();
    const limited = await readStock(c);
    expect(limited.isError).toBe(true);
    expect(limited.structuredContent).toMatchObject({ error: { type: "rate_limited" } });
  });

  it("composed without a config, the deps take the environment's key file", async () => {
    vi.stubEnv("KORRAL_KEYS_FILE", "/nowhere/keys.json");
    const c = await client(createServer(composeDeps()));
    const result = await readStock(c);
    expect(result.structuredContent).toMatchObject({
      stores: [{ status: "error", store_id: "47" }],
    });
  });

  it("a given limiter that never limits (NO_LIMIT) wins, whatever the environment says", async () => {
    stubKeyFile();
    vi.stubEnv("KORRAL_RATE_LIMIT_PER_MIN", "1");
    const c = await client(createServer(composeDeps({ limiter: NO_LIMIT })));
    for (let i = 0; i < 3; i++) expect((await readStock(c)).isError).toBeFalsy();
  });
});
