import { createClient } from "redis";
import { afterAll, describe, expect, it } from "vitest";
import { connectRedisLimits, type RedisLimits } from "../../src/limits/redis.js";
import { until } from "../helpers/delayed-emulator.js";
import {
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
  TEST_REDIS_PASSWORD,
} from "../helpers/redis.js";
import { runToExit as runEntryToExit } from "../helpers/spawn.js";

/**
 * Runs a built entry to its exit, its stdin at its end; the guard only ends a server that never
 * stops (a failure), generous because the refusal needs a connection and a reply on a busy machine.
 */
const runToExit = (entry: string, env: Record<string, string>) =>
  runEntryToExit(entry, env, { timeoutMs: 60_000, stdin: "ignore" });

/**
 * The cap's slots are keys with a TTL: under any maxmemory-policy but noeviction, Redis may
 * evict them (volatile-* pick among keys with a TTL, allkeys-* among all), and an attacker who
 * fills memory frees the cap. A store with such a policy never takes a slot: the server refuses
 * to start (exit 2), with one line naming the policy.
 */

const running: RunningRedis[] = [];
const opened: RedisLimits[] = [];
afterAll(async () => {
  for (const limits of opened) await limits.close();
  await Promise.all(running.map((redis) => redis.kill()));
});

async function redisWith(policy: string): Promise<RunningRedis> {
  const redis = await startRedis({ maxmemoryPolicy: policy });
  running.push(redis);
  return redis;
}

describe.runIf(REDIS_AVAILABLE)("the limits store's eviction policy", () => {
  it.each(["volatile-lru", "allkeys-lru", "volatile-ttl", "allkeys-random"])(
    "%s: dist/http.js exits 2 with one line naming the policy",
    async (policy) => {
      const redis = await redisWith(policy);
      const run = await runToExit("http.js", {
        KORRAL_REDIS_URL: redis.url,
        KORRAL_LOG_FILES: "off",
      });
      expect(run.code).toBe(2);
      const lines = run.stderr.split("\n").filter((line) => line.includes("maxmemory-policy"));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(`maxmemory-policy is ${policy}`);
      expect(lines[0]).toContain("KORRAL_REDIS_URL");
      expect(run.stderr + run.stdout).not.toContain(TEST_REDIS_PASSWORD);
      expect(run.stderr).not.toContain("listening on HTTP");
    },
    90_000,
  );

  it("dist/stdio.js refuses it too, stdout untouched", async () => {
    const redis = await redisWith("volatile-lfu");
    const run = await runToExit("stdio.js", {
      KORRAL_REDIS_URL: redis.url,
      KORRAL_LOG_FILES: "off",
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("maxmemory-policy is volatile-lfu");
    expect(run.stdout).toBe("");
  }, 90_000);

  it("no slot is ever taken on such a store, and writes stay refused", async () => {
    const redis = await redisWith("volatile-lru");
    const limits = connectRedisLimits({ url: redis.url, timeoutMs: 2_000 });
    opened.push(limits);
    await until(() => limits.refusal !== undefined, "the policy to be refused");
    expect(await limits.refused).toContain("volatile-lru");
    await expect(limits.slots.take("47:8847291", "a", 3, "h1")).rejects.toThrow(/not connected/);
    expect(limits.health.state).toBe("unavailable");
    const admin = createClient({ url: redis.url });
    await admin.connect();
    try {
      expect(await admin.dbSize()).toBe(0);
    } finally {
      admin.destroy();
    }
  });

  it("noeviction (what DEPLOYMENT.md sets) is used", async () => {
    const redis = await redisWith("noeviction");
    const limits = connectRedisLimits({ url: redis.url, timeoutMs: 2_000 });
    opened.push(limits);
    await until(() => limits.health.state === "ok", "the store to be checked");
    expect(limits.refusal).toBeUndefined();
    expect(await limits.slots.take("47:8847291", "a", 3, "h1")).toMatchObject({ kind: "taken" });
  });
});
