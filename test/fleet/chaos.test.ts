import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/delayed-emulator.js";
import { call, type Fleet, outcomeOf, startFleet } from "../helpers/fleet.js";
import { HERO_REASON } from "../helpers/harness.js";
import {
  type LossyProxy,
  lossyProxy,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
  TEST_REDIS_PASSWORD,
} from "../helpers/redis.js";
import { forTheFile } from "../helpers/spawn.js";

/**
 * The cap under faults, as a fleet meets them: four built replicas, each reaching Redis through a
 * proxy that loses one answer in ten; replicas SIGKILLed mid-write and started again; Redis
 * itself SIGKILLed and restarted on its data (AOF) mid-run. Agents retry every uncertain or
 * refused write once with the same key. However the faults fall, no store and SKU gets more
 * orders at StoreLink than the cap.
 */

const CAP = 3;
const STORES = ["47", "102", "111"];
type Replica = Fleet["replicas"][number];

/** A seeded generator (mulberry32): the same run every time. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One attempt as an agent makes it: the call's outcome, or the connection's failure. */
async function attempt(replica: Replica, args: Record<string, unknown>): Promise<string> {
  try {
    return outcomeOf(await call(replica.url, "create_replenishment_order", args));
  } catch {
    return "connection_lost";
  }
}

const RETRIED = new Set(["outcome_unknown", "limits_unavailable", "connection_lost", "internal"]);

describe.runIf(REDIS_AVAILABLE)("the cap under faults", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "korral-redis-aof-"));
  let redis: RunningRedis;
  let proxy: LossyProxy;
  let fleet: Fleet;
  const random = seeded(20261201);

  beforeAll(async () => {
    redis = await startRedis({ persistIn: dataDir });
    proxy = await lossyProxy(redis.port, 0.1, random);
    const url = `redis://:${TEST_REDIS_PASSWORD}@127.0.0.1:${proxy.port}`;
    // StoreLink takes a moment per order, so kills land while writes are in flight.
    fleet = await startFleet(
      4,
      {
        KORRAL_REDIS_URL: url,
        KORRAL_ORDER_CAP_PER_HOUR: String(CAP),
        KORRAL_RATE_LIMIT_PER_MIN: "0",
      },
      30,
    );
  }, 120_000);
  afterAll(async () => {
    await fleet?.close();
    await proxy?.close();
    await redis?.kill();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("no store and SKU gets more than the cap, whatever is killed or lost", async () => {
    const outcomes: string[] = [];
    let quantity = 0;
    for (let round = 0; round < 8; round++) {
      // Six agents at once, each ordering for a store at random through a replica at random.
      const batch = Array.from({ length: 6 }, async (_, i) => {
        const args = {
          store_id: STORES[Math.floor(random() * STORES.length)] as string,
          sku: "8847291",
          quantity: ++quantity,
          reason: HERO_REASON,
          idempotency_key: `chaos-${round}-${i}-order`,
        };
        const pick = () => fleet.replicas[Math.floor(random() * fleet.replicas.length)] as Replica;
        let outcome = await attempt(pick(), args);
        outcomes.push(outcome);
        // The agent resends an uncertain or refused write once, with the same key.
        if (RETRIED.has(outcome)) {
          outcome = await attempt(pick(), args);
          outcomes.push(`retry:${outcome}`);
        }
      });
      // Mid-batch, a replica is killed (-9) and a new one takes its place.
      const victim = Math.floor(random() * fleet.replicas.length);
      const killed = (async () => {
        await until(() => fleet.storelink.received > 0 || round > 0, "a first write");
        const old = fleet.replicas[victim] as Replica;
        old.child.kill("SIGKILL");
        fleet.replicas[victim] = await fleet.start();
      })();
      // Once, Redis itself dies mid-batch and comes back on its data.
      const restarted =
        round === 4
          ? (async () => {
              await redis.kill();
              redis = await forTheFile(() => startRedis({ port: redis.port, persistIn: dataDir }));
            })()
          : Promise.resolve();
      await Promise.all([...batch, killed, restarted]);
    }

    // Orders StoreLink created, per store and SKU (a replay is the same order id).
    const perBucket = new Map<string, Set<string>>();
    for (const orderId of fleet.storelink.created) {
      const store = /^RPL-(\d+)-/.exec(orderId)?.[1] as string;
      perBucket.set(store, (perBucket.get(store) ?? new Set()).add(orderId));
    }
    for (const store of STORES) {
      expect(perBucket.get(store)?.size ?? 0, `orders at store ${store}`).toBeLessThanOrEqual(CAP);
    }
    // The faults really happened, and the fleet still placed orders through them.
    expect(proxy.dropped()).toBeGreaterThan(0);
    expect(outcomes.some((o) => o === "ok" || o === "retry:ok")).toBe(true);
    expect([...perBucket.values()].reduce((n, ids) => n + ids.size, 0)).toBeGreaterThan(0);
  }, 240_000);
});
