import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import type { RedisLimits } from "../../src/limits/redis.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { limiterFor } from "../../src/policy/rate-limit.js";
import {
  connect,
  errorOf,
  HERO_REASON,
  MapKeyProvider,
  MemoryRecorder,
} from "../helpers/harness.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
} from "../helpers/redis.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * The limits store under memory pressure, on a real Redis: a caller cannot grow it by choosing
 * its identity string, and a store at its `maxmemory` (policy `noeviction`, as deployed)
 * refuses every write unsent and stops no read.
 */

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const RATE_PREFIX = "korral:rate:";

async function rateKeys(limits: RedisLimits): Promise<string[]> {
  const keys: string[] = [];
  for await (const batch of limits.client.scanIterator({ MATCH: `${RATE_PREFIX}*`, COUNT: 100 })) {
    keys.push(...(Array.isArray(batch) ? batch : [batch]));
  }
  return keys;
}

describe.runIf(REDIS_AVAILABLE)("the rate limit's keys", () => {
  let redis: RunningRedis;
  let limits: RedisLimits;
  beforeAll(async () => {
    redis = await startRedis();
    limits = await connectedLimits(redis.url);
  });
  afterAll(async () => {
    await limits?.close();
    await redis?.kill();
  });

  it("are of one fixed length whatever identity a caller's token claims: a long identity costs the store no more", async () => {
    const app = createApp(
      composeDeps({
        keys: new MapKeyProvider(),
        recorder: new MemoryRecorder(),
        limiter: limiterFor(600, limits),
      }),
    );
    // An unverified token's email is the caller's to choose: 9,000 characters, a new one a call.
    const callers = 20;
    for (let i = 0; i < callers; i++) {
      const email = `${String(i).padStart(3, "0")}${"a".repeat(9_000)}@korral.example`;
      const token = `e30.${Buffer.from(JSON.stringify({ email })).toString("base64url")}.c2ln`;
      const res = await request(app)
        .post("/mcp")
        .set("accept", "application/json, text/event-stream")
        .set("content-type", "application/json")
        .set("authorization", `Bearer ${token}`)
        .send({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: "lookup_sku", arguments: { query: "butter" } },
        });
      expect(res.status).toBe(200);
      expect(res.body.result?.isError).toBeFalsy();
    }
    const keys = await rateKeys(limits);
    // Each caller counted on the shared store (not the fallback), under a key of its own.
    expect(keys).toHaveLength(callers);
    for (const key of keys) {
      expect(key).toMatch(/^korral:rate:[A-Za-z0-9_-]{22}$/);
      const bytes = Number(await limits.client.sendCommand(["MEMORY", "USAGE", key]));
      expect(bytes).toBeLessThan(200);
    }
  });
});

describe.runIf(REDIS_AVAILABLE)("a full limits store", () => {
  let redis: RunningRedis;
  let limits: RedisLimits;
  let admin: RedisLimits;
  let filler = 0;
  beforeAll(async () => {
    redis = await startRedis({ args: ["--maxmemory", "3mb", "--maxmemory-policy", "noeviction"] });
    limits = await connectedLimits(redis.url);
    admin = await connectedLimits(redis.url);
  });
  afterAll(async () => {
    await limits?.close();
    await admin?.close();
    await redis?.kill();
  });

  it("refuses every write unsent (limits_unavailable), stops no read, and takes writes again once it has room", async () => {
    // Filled to maxmemory: Redis then refuses every command that could grow it (OOM).
    let full = false;
    while (!full && filler < 100) {
      try {
        await admin.client.sendCommand(["SETRANGE", `junk:${filler++}`, "262144", "x"]);
      } catch (error) {
        expect(String(error)).toMatch(/OOM/);
        full = true;
      }
    }
    expect(full).toBe(true);

    const storelink = new ScriptedStoreLink();
    const recorder = new MemoryRecorder();
    const h = await connect({
      storelink,
      recorder,
      orderCap: new OrderCap({ perHour: 3, shared: limits }),
      limiter: limiterFor(600, limits),
    });
    try {
      for (const key of ["full-store-1-key", "full-store-2-key", undefined]) {
        const refused = errorOf(
          await h.call("create_replenishment_order", {
            ...ORDER,
            ...(key === undefined ? {} : { idempotency_key: key }),
          }),
        );
        expect(refused).toMatchObject({ type: "limits_unavailable", retryable: true });
        expect(refused.message).toContain("nothing was submitted");
      }
      expect(storelink.calls("createOrder")).toHaveLength(0);
      expect(recorder.audits.map((a) => a.outcome)).toEqual(Array(3).fill("REJECTED"));

      // Reads go on: the rate limit falls back to this instance's own.
      expect((await h.call("lookup_sku", { query: "butter" })).isError).toBeFalsy();
      expect(
        (await h.call("get_stock_position", { sku: "8847291", store_ids: ["47"] })).isError,
      ).toBeFalsy();

      // Room again: the refused writes hold nothing, and writes go through.
      for (let i = 0; i < filler; i++) await admin.client.del(`junk:${i}`);
      for (const key of ["full-store-1-key", "full-store-2-key", "room-again-key"]) {
        const placed = await h.call("create_replenishment_order", {
          ...ORDER,
          idempotency_key: key,
        });
        expect(placed.isError, JSON.stringify(placed.structuredContent)).toBeFalsy();
      }
      expect(storelink.calls("createOrder")).toHaveLength(3);
    } finally {
      await h.close();
    }
  }, 60_000);
});
