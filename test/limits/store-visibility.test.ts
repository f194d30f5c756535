import { afterAll, describe, expect, it } from "vitest";
import { connectRedisLimits, type RedisLimits } from "../../src/limits/redis.js";
import { until } from "../helpers/delayed-emulator.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { REDIS_AVAILABLE, type RunningRedis, startRedis } from "../helpers/redis.js";
import { freePort, listening, type Spawned, spawnDist } from "../helpers/spawn.js";

/**
 * The limits store's state is visible: /healthz (still 200) says whether writes can be checked;
 * the ops log names each cause of a failed connection once; and the alert's line
 * (`limits store unreachable`) is written for a real outage, never while an instance's network
 * is still coming up at start (Direct VPC egress warm-up).
 */

const running: RunningRedis[] = [];
const spawned: Spawned[] = [];
const opened: RedisLimits[] = [];
afterAll(async () => {
  for (const limits of opened) await limits.close();
  await Promise.all(spawned.map((run) => run.stop()));
  await Promise.all(running.map((redis) => redis.kill()));
});

const lines = (text: string) =>
  text
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { message: string; cause?: string });

async function health(port: number): Promise<Record<string, unknown>> {
  const res = await fetch(`http://127.0.0.1:${port}/healthz`);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

describe.runIf(REDIS_AVAILABLE)("the limits store's state, seen from outside", () => {
  it("a store that comes up after the instance: no outage line, the cause said once, /healthz unavailable then ok", async () => {
    const port = await freePort();
    const run = spawnDist("http.js", {
      PORT: "0",
      HOST: "127.0.0.1",
      KORRAL_LOG_FILES: "off",
      KORRAL_REDIS_URL: `redis://:warm-up-password-71@127.0.0.1:${port}`,
    });
    spawned.push(run);
    const { port: http } = await listening(run, 30_000);
    // Start-up waited 5 s for the store: the client retried many times meanwhile.
    expect(await health(http)).toMatchObject({
      status: "ok",
      limits: "unavailable",
      limits_store: "shared",
    });
    const redis = await startRedis({ port, password: "warm-up-password-71" });
    running.push(redis);
    await until(
      () => run.stderr().includes("limits store connected"),
      "the store to connect",
      30_000,
    );
    expect(await health(http)).toMatchObject({ limits: "ok" });
    const ops = lines(run.stderr());
    expect(ops.filter((l) => l.message.includes("limits store unreachable"))).toEqual([]);
    const failed = ops.filter((l) => l.message.includes("limits store failed"));
    expect(failed.map((l) => l.cause)).toEqual(["refused: Error ECONNREFUSED"]);
  }, 90_000);

  it("a store never reached for KORRAL_REDIS_ALERT_AFTER_MS since start: the outage line, with its cause", async () => {
    const port = await freePort();
    const run = spawnDist("http.js", {
      PORT: "0",
      HOST: "127.0.0.1",
      KORRAL_LOG_FILES: "off",
      KORRAL_REDIS_ALERT_AFTER_MS: "300",
      KORRAL_REDIS_URL: `redis://:never-reached-pw-33@127.0.0.1:${port}`,
    });
    spawned.push(run);
    await until(() => run.stderr().includes("limits store unreachable"), "the outage line", 30_000);
    const outage = lines(run.stderr()).filter((l) =>
      l.message.includes("limits store unreachable"),
    );
    expect(outage).toHaveLength(1);
    // The last cause seen, or none yet if the allowance ran out before the first attempt failed.
    expect(outage[0]?.cause).toMatch(/^(refused: Error ECONNREFUSED|timeout: no connection)$/);
  }, 60_000);

  it("a store lost after it answered: the outage line at once, /healthz unavailable, ok again when back", async () => {
    let redis = await startRedis();
    const run = spawnDist("http.js", {
      PORT: "0",
      HOST: "127.0.0.1",
      KORRAL_LOG_FILES: "off",
      KORRAL_REDIS_URL: redis.url,
    });
    spawned.push(run);
    const { port: http } = await listening(run, 30_000);
    expect(await health(http)).toMatchObject({ limits: "ok", limits_store: "shared" });
    const port = redis.port;
    await redis.kill();
    await until(() => run.stderr().includes("limits store unreachable"), "the outage line", 30_000);
    expect(await health(http)).toMatchObject({ status: "ok", limits: "unavailable" });
    redis = await startRedis({ port });
    running.push(redis);
    await until(() => run.stderr().includes("reachable again"), "the store to be back", 30_000);
    expect(await health(http)).toMatchObject({ limits: "ok" });
  }, 90_000);

  it("names an auth failure as such, once however often the client retries", async () => {
    const log = captureOpsLog();
    try {
      const redis = await startRedis();
      running.push(redis);
      const wrong = connectRedisLimits({
        url: `redis://:not-the-password-9@127.0.0.1:${redis.port}`,
        timeoutMs: 300,
      });
      opened.push(wrong);
      let attempts = 0;
      wrong.client.on("error", () => attempts++);
      await until(() => attempts >= 3, "three refused attempts", 30_000);
      const causes = log
        .lines()
        .filter((l) => String(l.msg).includes("limits store failed"))
        .map((l) => String(l.cause));
      expect(causes).toEqual(["auth: SimpleError WRONGPASS"]);
      // A refused AUTH string is configuration: the outage line at once, not after a warm-up.
      expect(wrong.health.down).toBe(true);
      expect(log.text()).not.toContain("not-the-password-9");
    } finally {
      log.restore();
    }
  }, 60_000);
});
