import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { RedisLimits } from "../../src/limits/redis.js";
import { until } from "../helpers/delayed-emulator.js";
import { call, type Fleet, outcomeOf, startFleet } from "../helpers/fleet.js";
import { HERO_REASON } from "../helpers/harness.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
  TEST_REDIS_PASSWORD,
} from "../helpers/redis.js";
import { forTheFile } from "../helpers/spawn.js";

/**
 * Built replicas (`dist/http.js`) against one real Redis and one StoreLink: the order cap and the
 * rate limit hold for the fleet as they do for one process, and writes fail closed without Redis.
 */

const HERO = { store_id: "47", sku: "8847291", reason: HERO_REASON };
/**
 * A new order: each call's quantity is one no earlier order had, so StoreLink's window for
 * identical key-less orders folds none of them (a fold gives its slot back).
 */
let quantities = 0;
const order = (extra: Record<string, unknown> = {}) => ({
  ...HERO,
  quantity: ++quantities,
  ...extra,
});
type Replica = Fleet["replicas"][number];
/** Orders that reached StoreLink for the hero bucket (every test starts from an empty Redis). */
const landed = (fleet: Fleet): number => new Set(fleet.storelink.created).size;

describe.runIf(REDIS_AVAILABLE)("a fleet on one Redis", () => {
  let redis: RunningRedis;
  let admin: RedisLimits;
  let fleet: Fleet;

  beforeAll(async () => {
    redis = await startRedis();
    admin = await connectedLimits(redis.url);
    fleet = await startFleet(8, {
      KORRAL_REDIS_URL: redis.url,
      KORRAL_ORDER_CAP_PER_HOUR: "3",
      KORRAL_RATE_LIMIT_PER_MIN: "0",
    });
  }, 120_000);
  afterAll(async () => {
    await fleet?.close();
    await admin?.close();
    await redis?.kill();
  });
  beforeEach(async () => {
    await admin.client.flushAll();
    fleet.storelink.created.length = 0;
  });

  it.each([1, 3, 8])(
    "%i replicas, 12 concurrent new orders: exactly 3 reach StoreLink",
    async (size) => {
      const replicas = fleet.replicas.slice(0, size);
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          call((replicas[i % size] as Replica).url, "create_replenishment_order", order()),
        ),
      );
      const outcomes = results.map(outcomeOf);
      expect(outcomes.filter((o) => o === "ok")).toHaveLength(3);
      expect(outcomes.filter((o) => o === "order_cap_reached")).toHaveLength(9);
      expect(landed(fleet)).toBe(3);
    },
  );

  it("8 replicas in turn, 8 sequential new orders: 3 go through, the rest are refused", async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const replica = fleet.replicas[i] as Replica;
      outcomes.push(outcomeOf(await call(replica.url, "create_replenishment_order", order())));
    }
    expect(outcomes).toEqual(["ok", "ok", "ok", ...Array(5).fill("order_cap_reached")]);
    expect(landed(fleet)).toBe(3);
  });

  it("a retry with the same key on another replica, at the cap, gets the order that landed", async () => {
    const [a, b, c] = fleet.replicas as [Replica, Replica, Replica];
    const keyed = order({ idempotency_key: "fleet-key-0001" });
    const first = await call(a.url, "create_replenishment_order", keyed);
    expect(outcomeOf(first)).toBe("ok");
    await call(b.url, "create_replenishment_order", order());
    await call(c.url, "create_replenishment_order", order());
    const retry = await call(b.url, "create_replenishment_order", keyed);
    expect(retry.structuredContent).toMatchObject({
      replayed: true,
      order_id: (first.structuredContent as { order_id: string }).order_id,
    });
    expect(outcomeOf(await call(a.url, "create_replenishment_order", order()))).toBe(
      "order_cap_reached",
    );
    expect(landed(fleet)).toBe(3);
  });

  it("a replica restarted still counts the fleet's orders", async () => {
    for (let i = 0; i < 3; i++) {
      const replica = fleet.replicas[i] as Replica;
      expect(outcomeOf(await call(replica.url, "create_replenishment_order", order()))).toBe("ok");
    }
    const old = fleet.replicas[0] as Replica;
    old.child.kill("SIGKILL");
    await until(() => old.child.exitCode !== null || old.child.signalCode !== null, "the kill");
    const restarted = await fleet.start();
    fleet.replicas[0] = restarted;
    expect(outcomeOf(await call(restarted.url, "create_replenishment_order", order()))).toBe(
      "order_cap_reached",
    );
    expect(landed(fleet)).toBe(3);
  });
});

describe.runIf(REDIS_AVAILABLE)("the rate limit across replicas", () => {
  let redis: RunningRedis;
  let fleet: Fleet;
  beforeAll(async () => {
    redis = await startRedis();
    fleet = await startFleet(3, {
      KORRAL_REDIS_URL: redis.url,
      KORRAL_RATE_LIMIT_PER_MIN: "5",
    });
  }, 60_000);
  afterAll(async () => {
    await fleet?.close();
    await redis?.kill();
  });

  it("one caller gets 5 calls a minute from the fleet, not 5 from each replica", async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 15; i++) {
      const replica = fleet.replicas[i % 3] as Replica;
      outcomes.push(outcomeOf(await call(replica.url, "lookup_sku", { query: "butter" })));
    }
    expect(outcomes.filter((o) => o === "ok")).toHaveLength(5);
    expect(outcomes.filter((o) => o === "rate_limited")).toHaveLength(10);
  });
});

describe.runIf(REDIS_AVAILABLE)("Redis gone: writes fail closed, reads go on", () => {
  let redis: RunningRedis;
  let fleet: Fleet;
  beforeAll(async () => {
    redis = await startRedis();
    fleet = await startFleet(2, {
      KORRAL_REDIS_URL: redis.url,
      KORRAL_RATE_LIMIT_PER_MIN: "600",
    });
  }, 60_000);
  afterAll(async () => {
    await fleet?.close();
    await redis?.kill();
  });

  it("refuses every write attempt unsent and audited REJECTED, serves reads and /healthz, and resumes when Redis is back", async () => {
    const [a, b] = fleet.replicas as [Replica, Replica];
    expect(outcomeOf(await call(a.url, "create_replenishment_order", order()))).toBe("ok");
    const port = redis.port;
    await redis.kill();
    const received = fleet.storelink.received;

    const attempts = [
      await call(a.url, "create_replenishment_order", order()),
      await call(b.url, "create_replenishment_order", order({ idempotency_key: "down-0001" })),
      await call(a.url, "create_replenishment_order", order({ dry_run: true })),
    ];
    for (const refused of attempts) {
      expect(outcomeOf(refused)).toBe("limits_unavailable");
      const error = (
        refused.structuredContent as { error: { retryable: boolean; message: string } }
      ).error;
      expect(error.retryable).toBe(true);
      expect(error.message).toContain("nothing was submitted");
    }
    // Nothing but reads reached StoreLink; no order was sent.
    expect(fleet.storelink.received).toBe(received);
    // Reads go on, and the service stays healthy.
    expect(outcomeOf(await call(b.url, "lookup_sku", { query: "butter" }))).toBe("ok");
    expect(
      outcomeOf(await call(a.url, "get_stock_position", { sku: "8847291", store_ids: ["47"] })),
    ).toBe("ok");
    expect((await fetch(new URL("/healthz", a.url))).status).toBe(200);

    // The ops log says it once per outage, with no password.
    await until(() => a.stderr().includes("limits store unreachable"), "the outage line");
    expect(a.stderr().split("limits store unreachable").length - 1).toBe(1);

    redis = await forTheFile(() => startRedis({ port }));
    await until(
      () => a.stderr().includes("limits store reachable again"),
      "the recovery line",
      20_000,
    );
    let resumed = "";
    for (let i = 0; i < 100 && resumed !== "ok"; i++) {
      resumed = outcomeOf(await call(a.url, "create_replenishment_order", order()));
      if (resumed !== "ok") await new Promise((r) => setTimeout(r, 100));
    }
    expect(resumed).toBe("ok");

    const audit = readFileSync(join(fleet.logDir, "audit.log"), "utf8");
    const rejected = audit.split("\n").filter((line) => line.includes(" REJECTED "));
    expect(rejected.length).toBeGreaterThanOrEqual(3);
    const trace = readFileSync(join(fleet.logDir, "trace.jsonl"), "utf8");
    expect(trace).toContain("limits_unavailable");
    for (const text of [a.stderr(), b.stderr(), audit, trace, JSON.stringify(attempts)]) {
      expect(text).not.toContain(TEST_REDIS_PASSWORD);
      expect(text).not.toContain(redis.url);
    }
  }, 60_000);
});
