import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RedisLimits } from "../../src/limits/redis.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { limiterFor } from "../../src/policy/rate-limit.js";
import { createTelemetry } from "../../src/telemetry/otel.js";
import { readTelemetrySettings } from "../../src/telemetry/settings.js";
import { connect, HERO_REASON } from "../helpers/harness.js";
import { KIND, type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp-receiver.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
} from "../helpers/redis.js";

/**
 * The limits store's calls of a tool call are CLIENT spans under its SERVER span (a real Redis,
 * a real OTLP receiver): the rate limit and the write's slot take.
 */
describe.runIf(REDIS_AVAILABLE)("limits store CLIENT spans", () => {
  let redis: RunningRedis;
  let limits: RedisLimits;
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    redis = await startRedis();
    limits = await connectedLimits(redis.url);
    receiver = await startOtlpReceiver("ok");
  });
  afterAll(async () => {
    await limits?.close();
    await redis?.kill();
  });

  it("a write's rate limit and slot take are children of its span", async () => {
    const settings = readTelemetrySettings(
      { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_METRIC_EXPORT_INTERVAL: "600000" },
      "9.9.9",
    );
    if (!settings) throw new Error("telemetry should be on");
    const telemetry = createTelemetry(settings);
    const h = await connect({
      telemetry,
      orderCap: new OrderCap({ perHour: 3, shared: limits }),
      limiter: limiterFor(600, limits),
    });
    try {
      const write = await h.call("create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity: 1,
        reason: HERO_REASON,
        idempotency_key: "limits-span-0001",
      });
      expect(write.isError).toBeFalsy();
    } finally {
      await h.close();
      await telemetry.shutdown(5_000);
    }
    const server = receiver.spans.find((s) => s.name === "tools/call create_replenishment_order");
    const children = receiver.spans.filter(
      (s) => s.kind === KIND.CLIENT && s.parentSpanId === server?.spanId,
    );
    expect(children.map((s) => s.name)).toEqual(
      expect.arrayContaining(["limits rate limit", "limits take slot"]),
    );
    expect(children.find((s) => s.name === "limits take slot")?.attributes).toMatchObject({
      "db.system.name": "redis",
      "db.operation.name": "take slot",
    });
  });
});
