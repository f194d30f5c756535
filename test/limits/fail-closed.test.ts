import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import type { RedisLimits } from "../../src/limits/redis.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { limiterFor } from "../../src/policy/rate-limit.js";
import { stateSigner } from "../../src/policy/request-state.js";
import { until } from "../helpers/delayed-emulator.js";
import {
  connect,
  errorOf,
  HERO_REASON,
  MapKeyProvider,
  MemoryRecorder,
} from "../helpers/harness.js";
import { modernWrite, roundOne, YES } from "../helpers/modern-write.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
  TEST_REDIS_PASSWORD,
} from "../helpers/redis.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";
import { forTheFile } from "../helpers/spawn.js";

/**
 * The shared limits store gone mid-run (a real Redis, SIGKILLed): every write attempt, on every
 * path and in both eras, is refused before the order is sent and audited REJECTED; reads go on;
 * the ops log says it once, and once when it is back, and writes resume by themselves.
 */

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

describe.runIf(REDIS_AVAILABLE)("the limits store unreachable", () => {
  let redis: RunningRedis;
  let limits: RedisLimits;
  const storelink = new ScriptedStoreLink();
  const recorder = new MemoryRecorder();
  const deps = () => ({
    storelink,
    keys: new MapKeyProvider(),
    recorder,
    orderCap: new OrderCap({ perHour: 3, shared: limits }),
    limiter: limiterFor(600, limits),
    signer: stateSigner("a-shared-request-state-key-of-32-bytes!"),
  });

  beforeAll(async () => {
    redis = await startRedis();
    limits = await connectedLimits(redis.url, 300);
  });
  afterAll(async () => {
    await limits?.close();
    await redis?.kill();
  });

  it("refuses the 2025 write, both 2026-07-28 rounds and a preview unsent; reads go on; resumes when Redis is back", async () => {
    const log = captureOpsLog();
    try {
      const app = createApp(composeDeps(deps()));
      const h = await connect(deps());
      // Round 1 while the store answers, so its state can be answered while it does not.
      const state = await roundOne(app);
      const port = redis.port;
      await redis.kill();
      await until(() => !limits.client.isReady, "the connection to drop");

      const refusals = [
        errorOf(await h.call("create_replenishment_order", ORDER)),
        errorOf(await h.call("create_replenishment_order", { ...ORDER, dry_run: true })),
        errorOf(
          await h.call("create_replenishment_order", {
            ...ORDER,
            idempotency_key: "retry-key-0001",
          }),
        ),
        (await modernWrite(app)).structuredContent?.error,
        (await modernWrite(app, { state, answer: YES })).structuredContent?.error,
      ];
      for (const error of refusals) {
        expect(error).toMatchObject({ type: "limits_unavailable", retryable: true });
        expect(error?.message).toContain("nothing was submitted");
      }
      expect(storelink.calls("createOrder")).toHaveLength(0);
      expect(recorder.audits.map((a) => a.outcome)).toEqual(Array(5).fill("REJECTED"));

      // Reads: the rate limit falls back to this instance's own.
      expect((await h.call("lookup_sku", { query: "butter" })).isError).toBeFalsy();
      const down = log.lines().filter((l) => String(l.msg).includes("limits store unreachable"));
      expect(down).toHaveLength(1);
      expect(log.text()).not.toContain(TEST_REDIS_PASSWORD);

      redis = await forTheFile(() => startRedis({ port }));
      await until(() => limits.health.state === "ok", "the reconnection", 20_000);
      expect((await h.call("create_replenishment_order", ORDER)).isError).toBeFalsy();
      const second = await modernWrite(app, { state: await roundOne(app), answer: YES });
      expect(second.isError).toBeFalsy();
      expect(storelink.calls("createOrder")).toHaveLength(2);
      const back = log
        .lines()
        .filter((l) => String(l.msg).includes("limits store reachable again"));
      expect(back).toHaveLength(1);
      await h.close();
    } finally {
      log.restore();
    }
  }, 60_000);

  it("a store that answers slower than the deadline is unreachable: the write is refused", async () => {
    const h = await connect({ storelink, orderCap: new OrderCap({ perHour: 3, shared: limits }) });
    try {
      // Redis paused until UNPAUSE: every command waits past the 300 ms deadline.
      const admin = limits.client.duplicate();
      admin.on("error", () => {});
      await admin.connect();
      await admin.sendCommand(["CLIENT", "PAUSE", "10000", "ALL"]);
      const sent = storelink.calls("createOrder").length;
      const refused = errorOf(
        await h.call("create_replenishment_order", { ...ORDER, quantity: 5 }),
      );
      expect(refused.type).toBe("limits_unavailable");
      expect(storelink.calls("createOrder")).toHaveLength(sent);
      await admin.sendCommand(["CLIENT", "UNPAUSE"]);
      admin.destroy();
    } finally {
      await h.close();
    }
  }, 30_000);
});
