import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { configErrorOf, PRODUCTION_AUTH } from "../helpers/config.js";
import { listening, runToExit, spawnDist } from "../helpers/spawn.js";

/**
 * Where the limits are counted: KORRAL_REDIS_URL (the fleet's), or each process's own. Production
 * HTTP never starts counting per instance by accident.
 */

const STATE_KEY = "a-test-request-state-key-of-32-bytes!!";

describe("KORRAL_REDIS_URL and KORRAL_LIMITS", () => {
  it("production HTTP without either exits 2 with one line naming both", async () => {
    const run = await runToExit("http.js", {
      NODE_ENV: "production",
      KORRAL_STORELINK: "embedded",
      KORRAL_REQUEST_STATE_KEY: STATE_KEY,
    });
    expect(run.code).toBe(2);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/KORRAL_REDIS_URL: required on HTTP when NODE_ENV=production/);
    expect(lines[0]).toContain("KORRAL_LIMITS=per-instance");
    expect(run.stdout).toBe("");
  });

  it("production HTTP with KORRAL_LIMITS=per-instance starts, and its start-up line says so", async () => {
    const run = spawnDist("http.js", {
      PORT: "0",
      HOST: "127.0.0.1",
      NODE_ENV: "production",
      KORRAL_STORELINK: "embedded",
      KORRAL_REQUEST_STATE_KEY: STATE_KEY,
      KORRAL_LIMITS: "per-instance",
      ...PRODUCTION_AUTH,
    });
    try {
      await listening(run, 15_000);
      expect(run.stderr()).toContain('"limits":"per-instance"');
    } finally {
      await run.stop();
    }
  });

  it("stdio in production needs no Redis", async () => {
    const run = spawnDist("stdio.js", {
      NODE_ENV: "production",
      KORRAL_STORELINK: "embedded",
    });
    const guard = setTimeout(() => run.child.kill("SIGKILL"), 10_000);
    run.child.stdin?.end();
    const code = await run.exit;
    clearTimeout(guard);
    expect(code).toBe(0);
  });

  it("a URL that is not redis:// or rediss:// is refused without repeating it", () => {
    for (const bad of [
      "http://:hunter2-secret@10.0.0.3:6379",
      "redis//:hunter2-secret@10.0.0.3",
      "rediss://",
    ]) {
      const message = configErrorOf({ KORRAL_REDIS_URL: bad });
      expect(message).toMatch(/KORRAL_REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/);
      expect(message).not.toContain("hunter2");
    }
  });

  it("says which: the shared store, or per instance; never both", () => {
    const url = "rediss://:hunter2-secret@10.0.0.3:6378";
    expect(loadConfig({ KORRAL_REDIS_URL: url })).toMatchObject({
      redisUrl: url,
      redisTimeoutMs: 300,
      limitsPerInstance: false,
    });
    expect(loadConfig({ KORRAL_LIMITS: "per-instance" }).limitsPerInstance).toBe(true);
    const both = configErrorOf({ KORRAL_REDIS_URL: url, KORRAL_LIMITS: "per-instance" });
    expect(both).toMatch(/KORRAL_LIMITS=per-instance and KORRAL_REDIS_URL are both set/);
    expect(both).not.toContain("hunter2");
    expect(configErrorOf({ KORRAL_LIMITS: "shared" })).toMatch(/needs KORRAL_REDIS_URL/);
    expect(configErrorOf({ KORRAL_REDIS_TIMEOUT_MS: "5" })).toMatch(/KORRAL_REDIS_TIMEOUT_MS/);
  });
});
