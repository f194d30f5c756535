import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, storelinkInUse } from "../../src/config.js";
import { createStoreLink } from "../../src/storelink/index.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { configErrorOf, PRODUCTION_AUTH } from "../helpers/config.js";
import { runToExit, type Spawned, spawnDist, startHttp } from "../helpers/spawn.js";

/**
 * A production deployment never runs the embedded, seeded StoreLink by accident, and
 * says which StoreLink it uses (host only) at start-up and on /healthz.
 */

// A URL whose every part but the host could carry a secret.
const SECRET_URL = "https://ops:slk_47_hunter2@storelink.korral.internal:8443/v1/base?key=slk_x#f";
const LEAKS = /slk_|hunter2|ops:|\/v1|base|key=/;

describe("StoreLink selection in production", () => {
  it("NODE_ENV=production without STORELINK_URL stops startup, saying what to set", () => {
    const message = configErrorOf({ NODE_ENV: "production" });
    expect(message).toContain("STORELINK_URL");
    expect(message).toContain("KORRAL_STORELINK=embedded");
    expect(message).not.toContain("\n");
  });

  it("production with STORELINK_URL, or with the explicit demo opt-in, starts", () => {
    expect(
      loadConfig({ NODE_ENV: "production", STORELINK_URL: "http://sl.internal" }).production,
    ).toBe(true);
    const demo = loadConfig({ NODE_ENV: "production", KORRAL_STORELINK: "embedded" });
    expect(createStoreLink(demo)).toBeInstanceOf(InMemoryStoreLink);
    expect(storelinkInUse(demo)).toBe("embedded demo");
  });

  it("outside production the embedded StoreLink stays the default", () => {
    expect(storelinkInUse(loadConfig({}))).toBe("embedded demo");
    expect(storelinkInUse(loadConfig({ NODE_ENV: "development" }))).toBe("embedded demo");
  });

  it("refuses both at once, and any other KORRAL_STORELINK value", () => {
    expect(
      configErrorOf({ KORRAL_STORELINK: "embedded", STORELINK_URL: "http://sl.internal" }),
    ).toContain("both set");
    expect(configErrorOf({ KORRAL_STORELINK: "demo" })).toContain("KORRAL_STORELINK:");
  });

  it("names the URL's host and port only, never userinfo, path, query or fragment", () => {
    const label = storelinkInUse(loadConfig({ STORELINK_URL: SECRET_URL }));
    expect(label).toBe("storelink.korral.internal:8443");
    expect(label).not.toMatch(LEAKS);
  });
});

describe("the confirmation-state key in production", () => {
  it("dist/http.js without KORRAL_REQUEST_STATE_KEY exits 2 with one line naming it", async () => {
    const run = await runToExit("http.js", {
      NODE_ENV: "production",
      KORRAL_STORELINK: "embedded",
    });
    expect(run.code).toBe(2);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/KORRAL_REQUEST_STATE_KEY: required on HTTP when NODE_ENV=production/);
    expect(run.stdout).toBe("");
  });

  it("a key shorter than 32 bytes is refused on any transport", async () => {
    const run = await runToExit("stdio.js", { KORRAL_REQUEST_STATE_KEY: "short" });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/KORRAL_REQUEST_STATE_KEY: must be at least 32 bytes/);
    expect(run.stderr).not.toContain("short");
  });
});

describe.each(["http.js", "stdio.js"])(
  "the built dist/%s in production without STORELINK_URL",
  (entry) => {
    it("exits 2 with one stderr line naming STORELINK_URL, nothing on stdout", async () => {
      const run = await runToExit(entry, { NODE_ENV: "production", STORELINK_URL: "" });
      expect(run.code).toBe(2);
      const lines = run.stderr.trimEnd().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/STORELINK_URL: required when NODE_ENV=production/);
      expect(lines[0]).toContain("KORRAL_STORELINK=embedded");
      expect(run.stdout).toBe("");
    });
  },
);

/** Starts dist/http.js and waits for its listening line; returns its base URL. */
async function startListening(
  env: Record<string, string>,
): Promise<{ run: Spawned; base: string }> {
  const run = await startHttp(env, 15_000);
  return { run, base: run.url };
}

describe("the built dist/http.js says which StoreLink it uses", () => {
  let logDir: string;
  const started: Spawned[] = [];
  beforeAll(async () => {
    logDir = await mkdtemp(join(tmpdir(), "korral-storelink-mode-"));
  });
  afterAll(async () => {
    await Promise.all(started.map((s) => s.stop()));
    await rm(logDir, { recursive: true, force: true });
  });

  it("local HTTP without KORRAL_REQUEST_STATE_KEY says once that replicas will not share it", async () => {
    const { run } = await startListening({ KORRAL_LOG_DIR: logDir });
    started.push(run);
    const warnings = run
      .stderr()
      .split("\n")
      .filter((line) => line.includes("KORRAL_REQUEST_STATE_KEY"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/replicas will not accept each other's/);
  });

  it.each([
    ["the explicit demo", { KORRAL_STORELINK: "embedded" }, "embedded demo"],
    ["a StoreLink URL", { STORELINK_URL: SECRET_URL }, "storelink.korral.internal:8443"],
  ])("%s: /healthz and the start-up lines name it", async (_what, env, expected) => {
    const { run, base } = await startListening({
      NODE_ENV: "production",
      KORRAL_REQUEST_STATE_KEY: "a-test-request-state-key-of-32-bytes!!",
      KORRAL_LOG_DIR: logDir,
      KORRAL_LIMITS: "per-instance",
      ...PRODUCTION_AUTH,
      ...env,
    });
    started.push(run);
    const health = await (await fetch(`${base}/healthz`)).json();
    expect(health).toEqual({
      status: "ok",
      name: "korral-storelink",
      version: expect.any(String),
      storelink: expected,
      limits: "ok",
      limits_store: "per-instance",
    });
    const ops = run
      .stderr()
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as { message: string; storelink?: string; config?: object });
    const starting = ops.find((l) => l.message === "korral-storelink starting");
    const listening = ops.find((l) => l.message.includes("listening on HTTP"));
    expect(starting?.config).toMatchObject({ storelink: expected });
    expect(listening?.storelink).toBe(expected);
    expect(run.stderr()).not.toMatch(LEAKS);
    expect(JSON.stringify(health)).not.toMatch(LEAKS);
  });
});

describe("KORRAL_STORELINK=desktop (the MCP Bundle's setting)", () => {
  it("the embedded demo when STORELINK_URL is empty, even with an inherited NODE_ENV=production", () => {
    const config = loadConfig({
      NODE_ENV: "production",
      KORRAL_STORELINK: "desktop",
      STORELINK_URL: "",
    });
    expect(storelinkInUse(config)).toBe("embedded demo");
  });

  it("the StoreLink at STORELINK_URL when the buyer gave one", () => {
    const config = loadConfig({
      NODE_ENV: "production",
      KORRAL_STORELINK: "desktop",
      STORELINK_URL: "https://storelink.korral.internal",
    });
    expect(storelinkInUse(config)).toBe("storelink.korral.internal");
  });

  it("the built stdio entry starts as the bundle runs it, NODE_ENV=production inherited", async () => {
    const run = spawnDist("stdio.js", {
      NODE_ENV: "production",
      KORRAL_STORELINK: "desktop",
      STORELINK_URL: "",
    });
    const guard = setTimeout(() => run.child.kill("SIGKILL"), 10_000);
    run.child.stdin?.end();
    const code = await run.exit;
    clearTimeout(guard);
    expect(code).toBe(0);
    expect(run.stderr()).toContain("running on stdio (StoreLink: embedded demo)");
  });
});
