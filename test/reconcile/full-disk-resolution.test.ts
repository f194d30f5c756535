import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Reconciler } from "../../src/lifecycle/reconcile.js";
import type { RedisLimits } from "../../src/limits/redis.js";
import { createRecorder, type Recorder } from "../../src/logging/recorder.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { landedAttempt, ORDER } from "../helpers/attempts.js";
import { MapKeyProvider } from "../helpers/harness.js";
import { callFields } from "../helpers/records.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
} from "../helpers/redis.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";
import { canMount, smallDisk } from "../helpers/small-disk.js";

/**
 * A RESOLVED line the disk refuses (a real full tmpfs) against the fleet's book (a real Redis):
 * the book is settled only once the line is on disk. While it waits in memory the attempt stays in
 * the book, so a resolver killed meanwhile leaves it to the next one, and every UNCERTAIN write
 * still gets its one RESOLVED line.
 */

const LEASE_MS = 300;

describe.runIf(REDIS_AVAILABLE && canMount())("a RESOLVED line on a full disk", () => {
  let redis: RunningRedis;
  const open: { limits: RedisLimits[]; recorders: Recorder[]; dirs: string[] } = {
    limits: [],
    recorders: [],
    dirs: [],
  };

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    for (const recorder of open.recorders.splice(0)) await recorder.close();
    for (const limits of open.limits.splice(0)) await limits.close();
    for (const dir of open.dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  afterAll(async () => {
    await redis?.kill();
  });

  /** A resolver: its own connection to the book, writing its audit lines in `dir`. */
  async function resolver(storelink: ScriptedStoreLink, dir: string, keep = true) {
    const limits = await connectedLimits(redis.url);
    open.limits.push(limits);
    const orderCap = new OrderCap({ perHour: 3, shared: limits });
    const recorder = createRecorder({ dir, warn: () => {} });
    // A killed resolver's recorder is never closed: what waits in its memory dies with it.
    if (keep) open.recorders.push(recorder);
    const keys = new MapKeyProvider();
    const reconciler = new Reconciler(
      { storelink, keys, orderCap, recorder },
      {
        graceMs: 60_000,
        intervalMs: 60_000,
        sendingMs: 0,
        catchUpMs: 0,
        leaseMs: LEASE_MS,
        logDir: dir,
      },
    );
    return { orderCap, recorder, keys, reconciler };
  }

  /** A write whose replica died after StoreLink created its order: its attempt is in the book. */
  async function landed(storelink: ScriptedStoreLink, n: number) {
    const dir = mkdtempSync(join(tmpdir(), "korral-writer-"));
    open.dirs.push(dir);
    const writer = await resolver(storelink, dir);
    const { attempt, order } = await landedAttempt(
      writer.orderCap,
      writer.keys,
      storelink.inner,
      `req_${String(n).repeat(32)}`,
      `full-disk-order-000${n}`,
    );
    return { attempt, order, book: writer.orderCap };
  }

  const resolvedLines = (dir: string, requestId: string): string[] => {
    let text = "";
    try {
      text = readFileSync(join(dir, "audit.log"), "utf8");
    } catch {}
    return text
      .split("\n")
      .filter((line) => line.includes(" RESOLVED ") && line.includes(requestId));
  };

  it("waits in the book while its line waits for the disk; settled once the line is there, with one line", async () => {
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const { attempt, order, book } = await landed(storelink, 1);
    const disk = smallDisk();
    const a = await resolver(storelink, disk.dir);
    disk.fill();
    expect(await a.reconciler.run()).toMatchObject({ created: 0, waiting: 1 });
    expect((await book.attempts()).map((k) => k.attempt.request_id)).toEqual([attempt.request_id]);
    // Space returns; the next audit line of the process takes the waiting one with it.
    disk.free();
    const rejected = {
      ts: new Date().toISOString(),
      outcome: "REJECTED" as const,
      order_id: null,
      ...callFields("req_other"),
      ...ORDER,
      detail: "not_confirmed: the buyer declined",
    };
    expect(await a.recorder.audit(rejected)).toBe(true);
    expect(await a.reconciler.run()).toMatchObject({ created: 1, waiting: 0 });
    expect(await book.attempts()).toEqual([]);
    const lines = resolvedLines(disk.dir, attempt.request_id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(order.order_id);
  });

  it("a resolver killed while its line waits for the disk: the next resolver writes the one line and settles the book", async () => {
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const { attempt, order, book } = await landed(storelink, 2);
    // A on its own full disk, killed with its line in memory (an instance of its own, say).
    const disk = smallDisk();
    const a = await resolver(storelink, disk.dir, false);
    disk.fill();
    expect(await a.reconciler.run()).toMatchObject({ created: 0, waiting: 1 });
    expect(resolvedLines(disk.dir, attempt.request_id)).toEqual([]);

    // B, after A's claim has lapsed, on a disk with room.
    const dir = mkdtempSync(join(tmpdir(), "korral-next-resolver-"));
    open.dirs.push(dir);
    const b = await resolver(storelink, dir);
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 100));
    expect(await b.reconciler.run()).toMatchObject({ created: 1 });
    expect(await book.attempts()).toEqual([]);
    const lines = resolvedLines(dir, attempt.request_id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(order.order_id);
  });
});
