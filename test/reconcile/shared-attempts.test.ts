import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { Reconciler } from "../../src/lifecycle/reconcile.js";
import type { RedisLimits } from "../../src/limits/redis.js";
import { callRecord, unverifiedOrigin } from "../../src/logging/call-record.js";
import { createRecorder } from "../../src/logging/recorder.js";
import { submittedWrite } from "../../src/policy/audit.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { heldAttempt, landedAttempt, ORDER, sendOrder } from "../helpers/attempts.js";
import { until } from "../helpers/delayed-emulator.js";
import {
  connect,
  errorOf,
  type Harness,
  MapKeyProvider,
  MemoryRecorder,
} from "../helpers/harness.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
} from "../helpers/redis.js";
import { Gate, ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * Attempts on the fleet's limits store (a real Redis): recorded with the slot, so a replica that
 * never answers (killed) leaves its attempt for any other replica's reconciler, which resolves it
 * once fleet-wide; and a same-key retry learns the truth from StoreLink when the store is down.
 */

describe.runIf(REDIS_AVAILABLE)("attempts on the shared limits store", () => {
  let redis: RunningRedis;
  const limits: RedisLimits[] = [];
  const open: Harness[] = [];

  beforeAll(async () => {
    redis = await startRedis();
  });
  // Each test starts on an empty book and empty slots (the cap is 3 an hour per SKU and store).
  beforeEach(async () => {
    const store = await connectedLimits(redis.url);
    await store.client.flushAll();
    await store.close();
  });
  afterEach(async () => {
    while (open.length > 0) await open.pop()?.close();
    while (limits.length > 0) await limits.pop()?.close();
  });
  afterAll(async () => {
    await redis?.kill();
  });

  /** A replica: its own connection to the store, its own order cap, one shared StoreLink. */
  async function replica(storelink: ScriptedStoreLink, recorder = new MemoryRecorder()) {
    const shared = await connectedLimits(redis.url);
    limits.push(shared);
    const orderCap = new OrderCap({ perHour: 3, shared });
    const keys = new MapKeyProvider();
    const reconciler = (graceMs = 60_000) =>
      new Reconciler(
        { storelink, keys, orderCap, recorder },
        { graceMs, intervalMs: 60_000, sendingMs: 0, catchUpMs: 0 },
      );
    return { orderCap, recorder, keys, reconciler, shared };
  }

  /**
   * A replica whose reconciler logs to files in `dir` (it reads the audit lines there, its own
   * and others'); `onLine` runs after each of its audit lines is durable.
   */
  async function resolverOn(
    storelink: ScriptedStoreLink,
    dir: string,
    options: { leaseMs?: number; onLine?: () => Promise<void> } = {},
  ) {
    const r = await replica(storelink);
    const recorder = createRecorder({ dir, warn: () => {} });
    const audit = recorder.audit.bind(recorder);
    recorder.audit = async (record, context) => {
      const whole = await audit(record, context);
      await options.onLine?.();
      return whole;
    };
    const reconciler = new Reconciler(
      { storelink, keys: r.keys, orderCap: r.orderCap, recorder },
      {
        graceMs: 60_000,
        intervalMs: 60_000,
        sendingMs: 0,
        catchUpMs: 0,
        leaseMs: options.leaseMs,
        logDir: dir,
      },
    );
    return { ...r, recorder, reconciler };
  }

  it("an attempt whose replica never settled it (killed mid-write) is resolved by the other replicas, exactly once", async () => {
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const a = await replica(storelink);
    // Replica A takes the slot and records the attempt, sends, and dies before any answer.
    const { attempt } = await landedAttempt(
      a.orderCap,
      a.keys,
      storelink.inner,
      `req_${"a".repeat(32)}`,
      "killed-replica-order-0001",
    );

    // Three other replicas reconcile at once.
    const others = await Promise.all([replica(storelink), replica(storelink), replica(storelink)]);
    const reports = await Promise.all(others.map((r) => r.reconciler().run()));
    expect(reports.reduce((n, r) => n + r.created, 0)).toBe(1);
    const lines = others.flatMap((r) => r.recorder.audits);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      outcome: "RESOLVED",
      resolution: "CREATED",
      order_id: "RPL-47-001",
      request_id: attempt.request_id,
      by: "user:alice@korral.example",
      idempotency_key: attempt.idempotency_key,
    });
    // Gone from the store: nobody resolves it again.
    expect(await others[0]?.orderCap.attempts()).toEqual([]);
  });

  it("a resolver killed between its RESOLVED line and settling the book: the next, after the lease, settles it without a second line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "korral-resolver-killed-"));
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const writer = await replica(storelink);
    await landedAttempt(
      writer.orderCap,
      writer.keys,
      storelink.inner,
      `req_${"b".repeat(32)}`,
      "killed-resolver-order-0001",
    );

    // Resolver A's line is durable, and then A is gone: its connection to the book with it.
    const leaseMs = 300;
    const resolvedLines = () =>
      readFileSync(join(dir, "audit.log"), "utf8")
        .split("\n")
        .filter((line) => / RESOLVED .* req=req_b{32} /.test(line));
    try {
      const a = await resolverOn(storelink, dir, {
        leaseMs,
        onLine: async () => {
          await a.shared.close();
        },
      });
      expect(await a.reconciler.run()).toMatchObject({ created: 0, errors: 1 });
      expect(resolvedLines()).toHaveLength(1);
      await a.recorder.close();

      // B finds the attempt still in the book, claimed; after the lease it is B's.
      const b = await resolverOn(storelink, dir, { leaseMs });
      await new Promise((resolve) => setTimeout(resolve, leaseMs + 100));
      expect(await b.reconciler.run()).toMatchObject({ created: 1, errors: 0 });
      await b.recorder.close();
      expect(resolvedLines()).toHaveLength(1);
      expect(resolvedLines()[0]).toContain("RPL-47-001");
      expect(await b.orderCap.attempts()).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a resolver that settles from another's RESOLVED line before that one settles: counted once across the two", async () => {
    const dir = mkdtempSync(join(tmpdir(), "korral-settled-once-"));
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const writer = await replica(storelink);
    const { attempt } = await landedAttempt(
      writer.orderCap,
      writer.keys,
      storelink.inner,
      `req_${"e".repeat(32)}`,
      "settled-once-order-0001",
    );
    try {
      // B's whole pass runs between A's durable line and A's settle of the book: B reads A's
      // line, finds the attempt still in the book, and settles it from the line.
      const b = await resolverOn(storelink, dir);
      let bReport: Awaited<ReturnType<Reconciler["run"]>> | undefined;
      const a = await resolverOn(storelink, dir, {
        onLine: async () => {
          bReport = await b.reconciler.run();
        },
      });
      const aReport = await a.reconciler.run();
      await a.recorder.close();
      await b.recorder.close();
      expect(bReport).toMatchObject({ created: 1, errors: 0 });
      expect(aReport).toMatchObject({ created: 0, errors: 0 });
      const lines = readFileSync(join(dir, "audit.log"), "utf8")
        .split("\n")
        .filter((line) => line.includes(` req=${attempt.request_id} `));
      expect(lines).toHaveLength(1);
      expect(await a.orderCap.attempts()).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    ["CREATED", false],
    ["REPLAYED", true],
  ])(
    "a writer killed after its %s line, before settling the book: settled with no RESOLVED line",
    async (_, replayed) => {
      const dir = mkdtempSync(join(tmpdir(), "korral-writer-killed-"));
      const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
      const writer = await replica(storelink);
      const { attempt, order } = await landedAttempt(
        writer.orderCap,
        writer.keys,
        storelink.inner,
        `req_${"c".repeat(32)}`,
        "killed-writer-order-0001",
      );
      const lines = () =>
        readFileSync(join(dir, "audit.log"), "utf8")
          .split("\n")
          .filter((line) => line.includes(` req=${attempt.request_id} `));
      try {
        // The writer's own line is whole on disk; the settle of the book never came.
        const writerLog = createRecorder({ dir, warn: () => {} });
        const call = callRecord(
          unverifiedOrigin(attempt.by, "killed-writer"),
          attempt.request_id,
          "create_replenishment_order",
          ORDER,
          new AbortController().signal,
        );
        await writerLog.audit(
          submittedWrite(
            call,
            { ...ORDER, idempotency_key: attempt.idempotency_key },
            order.order_id,
            replayed,
            "buyer",
          ),
        );
        await writerLog.close();
        expect(lines()).toHaveLength(1);

        const other = await resolverOn(storelink, dir);
        expect(await other.reconciler.run()).toMatchObject({ created: 1, errors: 0 });
        await other.recorder.close();
        expect(lines()).toHaveLength(1);
        expect(await other.orderCap.attempts()).toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it("a resolver whose fence outlasts its lease writes no line: the resolver that took the attempt over writes the one", async () => {
    const inner = new InMemoryStoreLink();
    const gate = new Gate();
    const slow = new ScriptedStoreLink(inner).fail("fenceOrderRequest", { hang: gate });
    const a = await replica(slow);
    // An order lost before StoreLink: its attempt in the book, no record at StoreLink.
    const { attempt } = await heldAttempt(
      a.orderCap,
      `req_${"c".repeat(32)}`,
      "slow-fence-order-0001",
    );
    const leaseMs = 300;
    const resolverOf = (r: Awaited<ReturnType<typeof replica>>, storelink: ScriptedStoreLink) =>
      new Reconciler(
        { storelink, keys: r.keys, orderCap: r.orderCap, recorder: r.recorder },
        { graceMs: 0, intervalMs: 60_000, sendingMs: 0, catchUpMs: 0, leaseMs },
      );
    // A claims the attempt and sends the fence, whose answer does not come (a paused process
    // would look the same).
    const aPass = resolverOf(a, slow).run();
    await until(() => slow.attemptsOf("fenceOrderRequest") === 1, "A's fence");
    await new Promise((resolve) => setTimeout(resolve, leaseMs + 100));
    // B takes the attempt over after the lease: fences the key, writes the line, settles.
    const b = await replica(new ScriptedStoreLink(inner));
    expect(await resolverOf(b, new ScriptedStoreLink(inner)).run()).toMatchObject({
      notCreated: 1,
    });
    // A's fence answers at last (the key is fenced): past its lease, A writes nothing.
    gate.release();
    expect(await aPass).toMatchObject({ notCreated: 0, waiting: 1 });
    const resolved = [...a.recorder.audits, ...b.recorder.audits].filter(
      (line) => line.outcome === "RESOLVED",
    );
    expect(resolved).toHaveLength(1);
    expect(resolved[0]).toMatchObject({
      request_id: attempt.request_id,
      resolution: "NOT_CREATED",
    });
    expect(await b.orderCap.attempts()).toEqual([]);
  });

  // Ages are on the store's clock: a replica whose own clock is wrong neither fences a write still
  // inside its grace nor leaves a write past it unresolved.
  const SKEW_MS = 30 * 60_000;

  it("a resolver whose clock runs 30 minutes ahead leaves a write inside its grace alone", async () => {
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const writer = await replica(storelink);
    const { attempt } = await heldAttempt(
      writer.orderCap,
      `req_${"e".repeat(32)}`,
      "skewed-ahead-order-0001",
    );
    const ahead = await replica(storelink);
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + SKEW_MS });
    try {
      expect(await ahead.reconciler().run()).toMatchObject({ waiting: 1, notCreated: 0 });
    } finally {
      vi.useRealTimers();
    }
    expect(ahead.recorder.audits).toEqual([]);
    // Not fenced: the writer's send still lands.
    const order = await sendOrder(writer.keys, storelink.inner, attempt.idempotency_key);
    expect(await ahead.reconciler(0).run()).toMatchObject({ created: 1 });
    expect(ahead.recorder.audits).toMatchObject([
      { outcome: "RESOLVED", resolution: "CREATED", order_id: order.order_id },
    ]);
  });

  it("a resolver whose clock runs 30 minutes behind resolves a write past its grace", async () => {
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const writer = await replica(storelink);
    await heldAttempt(writer.orderCap, `req_${"f".repeat(32)}`, "skewed-behind-order-0001");
    const behind = await replica(storelink);
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() - SKEW_MS });
    try {
      expect(await behind.reconciler(0).run()).toMatchObject({ notCreated: 1 });
    } finally {
      vi.useRealTimers();
    }
    expect(behind.recorder.audits).toMatchObject([
      { outcome: "RESOLVED", resolution: "NOT_CREATED" },
    ]);
  });

  it("an order lost before StoreLink: NOT_CREATED after the grace, fenced, and its slot given back on the store", async () => {
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink()).fail("createOrder", {
      kind: "outcome_unknown",
    });
    const a = await replica(storelink);
    const h = await connect({
      storelink,
      keys: a.keys,
      orderCap: a.orderCap,
      recorder: a.recorder,
    });
    open.push(h);
    const failed = await h.call("create_replenishment_order", { ...ORDER, store_id: "102" });
    const key = (failed.structuredContent as { idempotency_key: string }).idempotency_key;
    const b = await replica(storelink);
    expect(await b.reconciler().run()).toMatchObject({ waiting: 1 });
    expect(await b.reconciler(0).run()).toMatchObject({ notCreated: 1 });
    expect(b.recorder.audits[0]).toMatchObject({ resolution: "NOT_CREATED", idempotency_key: key });
    // The store's bucket holds no slot for it any more, and no attempt.
    expect(await b.shared.client.hGetAll("korral:cap:{102:8847291}")).toEqual({});
    expect(await b.shared.client.hGetAll("korral:attempts:{102:8847291}")).toEqual({});
  });

  it("a same-key retry while the limits store is down gets the order that landed, with no create", async () => {
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink());
    const a = await replica(storelink);
    const h = await connect({
      storelink,
      keys: a.keys,
      orderCap: a.orderCap,
      recorder: a.recorder,
    });
    open.push(h);
    const args = { ...ORDER, store_id: "111", idempotency_key: "retry-while-down-0001" };
    const placed = await h.call("create_replenishment_order", args);
    expect(placed.isError).toBeFalsy();
    await a.shared.close();
    // A new order cannot be counted: refused unsent.
    expect(
      errorOf(
        await h.call("create_replenishment_order", {
          ...args,
          idempotency_key: "new-while-down-01",
        }),
      ).type,
    ).toBe("limits_unavailable");
    // The retry of the landed one is answered from StoreLink by its key.
    const retry = await h.call("create_replenishment_order", args);
    expect(retry.isError).toBeFalsy();
    expect(retry.structuredContent).toMatchObject({ replayed: true, order_id: "RPL-111-001" });
    expect(storelink.attemptsOf("createOrder")).toBe(1);
    expect(a.recorder.audits.map((l) => l.outcome)).toEqual(["CREATED", "REJECTED", "REPLAYED"]);
  });
});
