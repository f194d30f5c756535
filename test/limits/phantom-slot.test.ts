import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { RedisLimits } from "../../src/limits/redis.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { until } from "../helpers/delayed-emulator.js";
import { connect, errorOf, HERO_REASON } from "../helpers/harness.js";
import {
  connectedLimits,
  type LossyProxy,
  lossyProxy,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
  TEST_REDIS_PASSWORD,
} from "../helpers/redis.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * No phantom slot: a write refused `limits_unavailable` ("nothing was submitted") because the
 * limits store answered late, or lost the answer with its connection, never keeps a cap slot
 * once the store answers again, and a refusal at the cap never says "being submitted" of writes
 * that were never sent. A real Redis; the write through the real protocol.
 */

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const BUCKET_KEY = "korral:cap:{47:8847291}";

describe.runIf(REDIS_AVAILABLE)("no phantom slot", () => {
  let redis: RunningRedis;
  let admin: RedisLimits;
  const opened: RedisLimits[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = await connectedLimits(redis.url);
  });
  beforeEach(async () => {
    await admin.client.flushAll();
  });
  afterAll(async () => {
    for (const limits of opened) await limits.close();
    await admin?.close();
    await redis?.kill();
  });

  /** Polls the store until `check` holds (no wall-clock assertion: only a bound on the wait). */
  async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
    for (let i = 0; i < 3_000; i++) {
      if (await check()) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`timed out waiting for ${what}`);
  }

  it("three writes refused while Redis answers past the deadline hold no slot once it answers: three real orders go through, and the fourth's refusal counts only them", async () => {
    const limits = await connectedLimits(redis.url, 300);
    opened.push(limits);
    const storelink = new ScriptedStoreLink();
    const h = await connect({ storelink, orderCap: new OrderCap({ perHour: 3, shared: limits }) });
    try {
      // Writes (the take's script among them) wait on the server until UNPAUSE: each take runs
      // after its write was refused.
      await admin.client.sendCommand(["CLIENT", "PAUSE", "30000", "WRITE"]);
      for (let i = 0; i < 3; i++) {
        const refused = errorOf(
          await h.call("create_replenishment_order", {
            ...ORDER,
            idempotency_key: `late-answer-${i}-key`,
          }),
        );
        expect(refused.type).toBe("limits_unavailable");
        expect(refused.message).toContain("nothing was submitted");
      }
      expect(storelink.calls("createOrder")).toHaveLength(0);
      await admin.client.sendCommand(["CLIENT", "UNPAUSE"]);

      for (let i = 0; i < 3; i++) {
        const placed = await h.call("create_replenishment_order", {
          ...ORDER,
          quantity: 10 + i,
          idempotency_key: `real-order-${i}-key`,
        });
        expect(placed.isError, JSON.stringify(placed.structuredContent)).toBeFalsy();
      }
      const capped = errorOf(
        await h.call("create_replenishment_order", { ...ORDER, idempotency_key: "fourth-key" }),
      );
      expect(capped.type).toBe("order_cap_reached");
      expect(capped.message).toContain("3 were placed in the last hour");
      expect(capped.message).not.toContain("being submitted");
      expect(storelink.calls("createOrder")).toHaveLength(3);
    } finally {
      await h.close();
    }
  }, 60_000);

  it("a take whose answer is lost with its connection is released once the store answers again", async () => {
    // The proxy forwards the take to Redis and cuts the connection instead of its answer.
    let armed = false;
    const proxy: LossyProxy = await lossyProxy(redis.port, 0.5, () => {
      if (!armed) return 1;
      armed = false;
      return 0;
    });
    const limits = await connectedLimits(
      `redis://:${TEST_REDIS_PASSWORD}@127.0.0.1:${proxy.port}`,
      2_000,
    );
    opened.push(limits);
    const storelink = new ScriptedStoreLink();
    const h = await connect({ storelink, orderCap: new OrderCap({ perHour: 3, shared: limits }) });
    try {
      armed = true;
      const refused = errorOf(
        await h.call("create_replenishment_order", {
          ...ORDER,
          idempotency_key: "lost-answer-key",
        }),
      );
      expect(refused.type).toBe("limits_unavailable");
      expect(proxy.dropped()).toBe(1);
      expect(storelink.calls("createOrder")).toHaveLength(0);
      await until(() => limits.client.isReady, "the reconnection", 20_000);
      // The take ran on Redis; its release follows once the store answers again.
      await eventually(
        async () => (await admin.client.exists(BUCKET_KEY)) === 0,
        "the lost take's slot to be released",
      );
    } finally {
      await h.close();
      await proxy.close();
    }
  }, 60_000);
});
