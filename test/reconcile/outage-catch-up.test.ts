import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Reconciler } from "../../src/lifecycle/reconcile.js";
import type { RedisLimits } from "../../src/limits/redis.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { until } from "../helpers/delayed-emulator.js";
import { HERO_REASON, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
} from "../helpers/redis.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * A limits store outage (a real Redis, killed and started again on its data) and the attempts
 * still marked as being sent: a live writer whose release the store refused retries it once the
 * store answers, so until the store has answered without a failure for longer than a writer's
 * longest pause between tries (or, in a process started since, for as long after its start),
 * such an attempt is not taken for a dead writer's. Before, an
 * attempt refused unsent during the outage ("nothing was submitted") could have its key fenced,
 * and the agent's same-key retry of the order the buyer approved was refused `not_created`.
 */

const STORE = { store_id: "47", name: "Brno" };
const ITEM = { sku: "8847291", name: "Butter", category: "Dairy", unit: "each" as const };

const attemptOf = (n: number) => ({
  ts: new Date().toISOString(),
  request_id: `req_${String(n).repeat(32)}`,
  by: "user:alice@korral.example",
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  reason: HERO_REASON,
  idempotency_key: `outage-order-000${n}`,
});

describe.runIf(REDIS_AVAILABLE)("attempts still being sent, after a limits store outage", () => {
  const dir = mkdtempSync(join(tmpdir(), "korral-redis-outage-"));
  let redis: RunningRedis | undefined;
  const connections: RedisLimits[] = [];
  afterAll(async () => {
    for (const limits of connections) await limits.close();
    await redis?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("are left to their writers until the store has been quiet; then a dead writer's is resolved", async () => {
    redis = await startRedis({ persistIn: dir });
    const writerLimits = await connectedLimits(redis.url);
    const resolverLimits = await connectedLimits(redis.url);
    connections.push(writerLimits, resolverLimits);
    const writer = new OrderCap({ perHour: 3, shared: writerLimits });
    const book = new OrderCap({ perHour: 3, shared: resolverLimits });
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const recorder = new MemoryRecorder();
    const resolver = (catchUpMs: number) =>
      new Reconciler(
        { storelink, keys: new MapKeyProvider(), orderCap: book, recorder },
        { graceMs: 0, intervalMs: 60_000, sendingMs: 0, catchUpMs },
      );
    // Two writes hold their slots: one a live writer will refuse unsent, one whose writer dies.
    const refused = await writer.hold(STORE, ITEM, attemptOf(1));
    await writer.hold(STORE, ITEM, attemptOf(2));

    // The store goes down; the live writer refuses its write unsent meanwhile (its release is
    // refused, and retried); the store comes back on its data.
    const port = redis.port;
    await redis.kill();
    await refused.failed(false);
    redis = await startRedis({ port, persistIn: dir });
    await until(() => resolverLimits.health.state === "ok", "the resolver's connection back");

    // At once: both attempts are still the writers' (no fence, no line), also for a replica
    // started after the outage, which saw no failure of the store.
    expect(await resolver(60_000).run()).toMatchObject({ created: 0, notCreated: 0, errors: 0 });
    const restarted = await connectedLimits(redis.url);
    connections.push(restarted);
    const itsResolver = new Reconciler(
      {
        storelink,
        keys: new MapKeyProvider(),
        orderCap: new OrderCap({ perHour: 3, shared: restarted }),
        recorder,
      },
      { graceMs: 0, intervalMs: 60_000, sendingMs: 0, catchUpMs: 60_000 },
    );
    expect(await itsResolver.run()).toMatchObject({ created: 0, notCreated: 0, errors: 0 });
    expect(storelink.attemptsOf("fenceOrderRequest")).toBe(0);
    expect(recorder.audits).toEqual([]);

    // The live writer's release lands: its attempt leaves the book.
    for (let i = 0; i < 200; i++) {
      const ids = (await book.attempts()).map((kept) => kept.attempt.request_id);
      if (!ids.includes(attemptOf(1).request_id)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect((await book.attempts()).map((kept) => kept.attempt.request_id)).toEqual([
      attemptOf(2).request_id,
    ]);

    // Once the store has been quiet long enough, the dead writer's attempt is resolved.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await resolver(300).run()).toMatchObject({ notCreated: 1 });
    expect(storelink.calls("fenceOrderRequest").map((call) => call.storeId)).toEqual(["47"]);
    expect(recorder.audits).toMatchObject([
      { outcome: "RESOLVED", resolution: "NOT_CREATED", request_id: attemptOf(2).request_id },
    ]);
    expect(await book.attempts()).toEqual([]);
  }, 60_000);
});
