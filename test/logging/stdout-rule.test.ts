import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { structuredStdout } from "../../src/logging/setup.js";
import { grantingAll, policyFile } from "../helpers/fixtures.js";
import { startFakeGoogle } from "../helpers/google-idp.js";
import { HERO_REASON } from "../helpers/harness.js";
import { listening, type Spawned, spawnDist } from "../helpers/spawn.js";

/**
 * HTTP mode writes Cloud Logging lines to stdout in production, where Cloud Run
 * collects them, and keeps a local terminal quiet (the records are in log/ there). With the log
 * files off the stdout lines stay, so the audit trail always lands somewhere.
 */
describe("structuredStdout", () => {
  const config = (env: NodeJS.ProcessEnv) => loadConfig({ KORRAL_STORELINK: "embedded", ...env });
  it.each([
    // [NODE_ENV, KORRAL_LOG_FILES, stdout is a terminal, stdout lines]
    ["production", "on", false, true],
    ["production", "on", true, false],
    ["production", "off", true, true],
    ["development", "on", false, false],
    ["", "on", false, false],
    ["", "on", true, false],
    ["", "off", false, true],
  ] as const)("NODE_ENV=%s files=%s tty=%s -> %s", (nodeEnv, files, tty, expected) => {
    expect(structuredStdout(config({ NODE_ENV: nodeEnv, KORRAL_LOG_FILES: files }), tty)).toBe(
      expected,
    );
  });
});

describe("the built dist/http.js, stdout per mode", () => {
  let run: Spawned | undefined;
  let logDir = "";
  afterEach(async () => {
    await run?.stop();
    if (logDir) await rm(logDir, { recursive: true, force: true });
  });

  /**
   * Starts the server, makes one order, stops it; returns what stdout and the audit file got.
   * `authorization`: the header the order is sent with (production authenticates its callers).
   */
  async function oneOrder(env: Record<string, string>, authorization?: string) {
    logDir = await mkdtemp(join(tmpdir(), "korral-stdout-"));
    run = spawnDist("http.js", {
      PORT: "0",
      HOST: "127.0.0.1",
      KORRAL_LOG_DIR: logDir,
      KORRAL_KEYS_FILE: join(import.meta.dirname, "../../keys.example.json"),
      STORELINK_URL: "",
      ...env,
    });
    const { port } = await listening(run, 15_000);
    const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(authorization ? { authorization } : {}),
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: {
          name: "create_replenishment_order",
          arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON },
        },
      }),
    });
    expect(res.status).toBe(200);
    expect(await run.stop()).toBe(0);
    return { stdout: run.stdout(), audit: await readFile(join(logDir, "audit.log"), "utf8") };
  }

  it("locally (no NODE_ENV=production): stdout stays empty, the audit line is in log/", async () => {
    const { stdout, audit } = await oneOrder({ NODE_ENV: "development" });
    expect(stdout).toBe("");
    expect(audit).toContain("CREATED RPL-47-001");
  });

  it("in production: one Cloud Logging line per record on stdout, and the files too", async () => {
    // Production authenticates its callers: the agent's Google ID token, from a local "Google".
    const google = await startFakeGoogle();
    const audience = "https://korral-storelink.test.invalid";
    const agent = "agent@korral-prod.iam.gserviceaccount.com";
    const token = await google.idToken(agent, audience);
    // ...and scopes them to their stores: this agent may use every one.
    const policyDir = await mkdtemp(join(tmpdir(), "korral-policy-"));
    const { stdout, audit } = await oneOrder(
      {
        NODE_ENV: "production",
        KORRAL_STORELINK: "embedded",
        KORRAL_REQUEST_STATE_KEY: "a-test-request-state-key-of-32-bytes!!",
        KORRAL_LIMITS: "per-instance",
        KORRAL_AUTH: "google",
        KORRAL_GOOGLE_AUDIENCES: audience,
        KORRAL_TEST_GOOGLE_CERTS_URL: google.certsUrl,
        KORRAL_POLICY_FILE: await policyFile(policyDir, grantingAll(`svc:${agent}`)),
      },
      `Bearer ${token}`,
    ).finally(async () => {
      await google.close();
      await rm(policyDir, { recursive: true, force: true });
    });
    const entries = stdout
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as { log_type: string; severity: string });
    expect(entries.map((e) => [e.log_type, e.severity])).toEqual([
      ["audit", "NOTICE"],
      ["trace", "INFO"],
    ]);
    expect(audit).toContain("CREATED RPL-47-001");
  });
});
