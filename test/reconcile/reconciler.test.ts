import { appendFile, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import {
  FENCE_HORIZON_MS,
  Reconciler,
  type ReconcilerOptions,
} from "../../src/lifecycle/reconcile.js";
import { createRecorder } from "../../src/logging/recorder.js";
import type { AuditRecord, CallRecorder } from "../../src/logging/records.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { isStoreLinkError } from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { until } from "../helpers/delayed-emulator.js";
import { connect, errorOf, type Harness, HERO_REASON, MapKeyProvider } from "../helpers/harness.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { Gate, ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * The reconciler in one process: every write of unknown outcome gets exactly one RESOLVED line
 * that matches StoreLink's truth for its key, the cap counts that truth, a fenced key never
 * creates an order, and the reconciler itself never sends a create.
 */

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const KEY_47 = new ApiKey(SEED_ACCEPTED_KEYS["47"] as string);

const open: Harness[] = [];
const dirs: string[] = [];
afterEach(async () => {
  while (open.length > 0) await open.pop()?.close();
  while (dirs.length > 0) await rm(dirs.pop() as string, { recursive: true, force: true });
});

/** A StoreLink whose key reads fail while `down` (the inline resolution cannot tell). */
function scripted(): ScriptedStoreLink {
  return new ScriptedStoreLink(new InMemoryStoreLink({ dedupeWindowMs: 0 }));
}
const keyReadsDown = (storelink: ScriptedStoreLink) => {
  for (let i = 0; i < 4; i++) storelink.fail("getOrderRequest", { kind: "unavailable" });
};

async function setUp(
  storelink: ScriptedStoreLink,
  options: Partial<ReconcilerOptions> = {},
  perHour = 3,
  given?: CallRecorder,
) {
  const orderCap = new OrderCap({ perHour });
  const keys = new MapKeyProvider();
  const h = await connect({ storelink, keys, orderCap, ...(given ? { recorder: given } : {}) });
  open.push(h);
  const recorder = given ?? h.recorder;
  const reconciler = (more: Partial<ReconcilerOptions> = {}) =>
    new Reconciler(
      { storelink, keys, orderCap, recorder },
      { graceMs: 60_000, intervalMs: 60_000, ...options, ...more },
    );
  return { h, orderCap, reconciler };
}

const audits = (h: Harness): AuditRecord[] => h.recorder.audits;
const uncertainKeyOf = (h: Harness): string =>
  audits(h).find((a) => a.outcome === "UNCERTAIN")?.idempotency_key as string;

describe("the reconciler", () => {
  it("an order that landed: one RESOLVED outcome=CREATED naming it, for the UNCERTAIN's req and key; the slot counts", async () => {
    const storelink = scripted().fail("createOrder", { after: "outcome_unknown" });
    keyReadsDown(storelink);
    const { h, reconciler } = await setUp(storelink, {}, 1);
    expect(errorOf(await h.call("create_replenishment_order", ORDER)).type).toBe("outcome_unknown");
    const uncertain = audits(h)[0] as AuditRecord;
    expect(uncertain.outcome).toBe("UNCERTAIN");

    const report = await reconciler().run();
    expect(report).toMatchObject({ created: 1, notCreated: 0 });
    const resolved = audits(h)[1];
    expect(resolved).toMatchObject({
      outcome: "RESOLVED",
      resolution: "CREATED",
      order_id: storelink.landed[0]?.order_id,
      request_id: uncertain.request_id,
      idempotency_key: uncertain.idempotency_key,
      by: uncertain.by,
      store_id: "47",
      quantity: 24,
      reason: HERO_REASON,
    });
    // Resolved once: a second pass finds nothing, and nothing but reads reached StoreLink.
    expect(await reconciler().run()).toMatchObject({ created: 0, notCreated: 0, waiting: 0 });
    expect(audits(h)).toHaveLength(2);
    expect(storelink.attemptsOf("createOrder")).toBe(1);
    expect(storelink.attemptsOf("fenceOrderRequest")).toBe(0);
    // The cap (1 an hour) counts the order as placed, no longer as unknown.
    const next = errorOf(
      await h.call("create_replenishment_order", { ...ORDER, idempotency_key: "next-order-0001" }),
    );
    expect(next.type).toBe("order_cap_reached");
    expect(next.message).toContain("1 was placed in the last hour.");
  });

  it("an order that never reached StoreLink: nothing during the grace; then fenced, NOT_CREATED, the slot given back, and a late copy creates nothing", async () => {
    // The request is lost before StoreLink: nothing lands, and the answer is unknown.
    const storelink = scripted().fail("createOrder", { kind: "outcome_unknown" });
    const { h, reconciler } = await setUp(storelink, {}, 1);
    const failed = await h.call("create_replenishment_order", ORDER);
    expect(errorOf(failed).type).toBe("outcome_unknown");
    const key = uncertainKeyOf(h);
    expect((failed.structuredContent as { idempotency_key?: string }).idempotency_key).toBe(key);

    // Within the grace the agent's own same-key retry may still place it: nothing is fenced.
    expect(await reconciler().run()).toMatchObject({ waiting: 1, notCreated: 0 });
    expect(storelink.attemptsOf("fenceOrderRequest")).toBe(0);
    expect(audits(h)).toHaveLength(1);

    expect(await reconciler({ graceMs: 0 }).run()).toMatchObject({ notCreated: 1 });
    const resolved = audits(h)[1];
    expect(resolved).toMatchObject({
      outcome: "RESOLVED",
      resolution: "NOT_CREATED",
      order_id: null,
      request_id: audits(h)[0]?.request_id,
      idempotency_key: key,
    });
    // StoreLink holds the key fenced: a late copy of the request creates nothing.
    const late = await storelink
      .createOrder({ ...ORDER, idempotency_key: key }, KEY_47)
      .catch((error: unknown) => error);
    expect(isStoreLinkError(late, "idempotency_key_fenced")).toBe(true);
    expect(storelink.landed).toHaveLength(0);
    // The agent's retry with the key is told the truth, and sends no create.
    const retry = errorOf(
      await h.call("create_replenishment_order", { ...ORDER, idempotency_key: key }),
    );
    expect(retry.type).toBe("not_created");
    expect(retry.next_step).toContain("new idempotency_key");
    // The slot came back: a new order fits the cap of 1.
    const fresh = await h.call("create_replenishment_order", {
      ...ORDER,
      idempotency_key: "fresh-order-0001",
    });
    expect(fresh.isError).toBeFalsy();
    expect(storelink.landed).toHaveLength(1);
  });

  it("two reconcilers at once resolve an attempt once", async () => {
    const storelink = scripted().fail("createOrder", { after: "outcome_unknown" });
    keyReadsDown(storelink);
    const { h, reconciler } = await setUp(storelink);
    await h.call("create_replenishment_order", ORDER);
    const reports = await Promise.all([reconciler().run(), reconciler().run(), reconciler().run()]);
    expect(reports.reduce((n, r) => n + r.created, 0)).toBe(1);
    expect(audits(h).filter((a) => a.outcome === "RESOLVED")).toHaveLength(1);
  });

  it("waits while StoreLink says the create is in progress, and while it cannot be reached", async () => {
    const storelink = scripted().fail("createOrder", { kind: "outcome_unknown" });
    const { h, reconciler } = await setUp(storelink);
    await h.call("create_replenishment_order", ORDER);
    storelink.fail("getOrderRequest", { kind: "unavailable" });
    expect(await reconciler({ graceMs: 0 }).run()).toMatchObject({ errors: 1, notCreated: 0 });
    storelink.fail("getOrderRequest", { kind: "order_request_in_progress" });
    // In progress: never fenced while a create runs; a later pass resolves it.
    expect(await reconciler({ graceMs: 0 }).run()).toMatchObject({ waiting: 1, notCreated: 0 });
    expect(storelink.attemptsOf("fenceOrderRequest")).toBe(0);
    expect(await reconciler({ graceMs: 0 }).run()).toMatchObject({ notCreated: 1 });
  });

  it("a StoreLink without contract 1.1: nothing is resolved NOT_CREATED, and the ops log says so", async () => {
    const storelink = scripted().fail("createOrder", { kind: "outcome_unknown" });
    const { h, reconciler } = await setUp(storelink);
    await h.call("create_replenishment_order", ORDER);
    storelink.fail("getOrderRequest", { kind: "order_request_not_found" });
    storelink.fail("fenceOrderRequest", { kind: "unsupported" });
    const ops = captureOpsLog();
    try {
      expect(await reconciler({ graceMs: 0 }).run()).toMatchObject({ notCreated: 0, created: 0 });
      expect(ops.text()).toContain("StoreLink lacks contract 1.1");
    } finally {
      ops.restore();
    }
    expect(audits(h).map((a) => a.outcome)).toEqual(["UNCERTAIN"]);
  });

  it("says at start whether StoreLink answers contract 1.1 (one read of a key nobody sent)", async () => {
    for (const supported of [false, true]) {
      const storelink = scripted();
      if (!supported) storelink.fail("getOrderRequest", { kind: "unsupported" });
      const { reconciler } = await setUp(storelink);
      const ops = captureOpsLog();
      const running = reconciler();
      try {
        running.start();
        await until(() => storelink.attemptsOf("getOrderRequest") === 1, "the probe");
        const said = () => ops.text().includes("StoreLink lacks contract 1.1");
        if (!supported) await until(said, "the ops line");
        await running.run();
        expect(said()).toBe(!supported);
      } finally {
        running.stop();
        ops.restore();
      }
      expect(storelink.calls("getOrderRequest")[0]?.storeId).toBe("47");
      expect(storelink.attemptsOf("fenceOrderRequest") + storelink.attemptsOf("createOrder")).toBe(
        0,
      );
    }
  });

  it("never fences a key past the horizon: StoreLink may have dropped the record of an old order", async () => {
    const storelink = scripted();
    const { orderCap, reconciler } = await setUp(storelink);
    orderCap.adopt(
      {
        ts: new Date(Date.now() - FENCE_HORIZON_MS - 60_000).toISOString(),
        request_id: `req_${"b".repeat(32)}`,
        by: "user:alice@korral.example",
        ...ORDER,
        idempotency_key: "six-days-old-key-01",
      },
      FENCE_HORIZON_MS + 60_000,
    );
    const ops = captureOpsLog();
    try {
      const running = reconciler({ graceMs: 0 });
      expect(await running.run()).toMatchObject({ waiting: 1, notCreated: 0 });
      await running.run();
      // Said once, for a person to act on.
      expect(ops.text().match(/too old to fence safely/g)).toHaveLength(1);
    } finally {
      ops.restore();
    }
    expect(storelink.attemptsOf("fenceOrderRequest")).toBe(0);
  });

  it("a write still being sent is left to its writer", async () => {
    const gate = new Gate();
    const storelink = scripted().fail("createOrder", { hang: gate });
    const { h, reconciler } = await setUp(storelink);
    const pending = h.call("create_replenishment_order", ORDER);
    await until(() => storelink.attemptsOf("createOrder") === 1, "the create to reach StoreLink");
    expect(await reconciler({ graceMs: 0 }).run()).toMatchObject({ created: 0, notCreated: 0 });
    expect(storelink.attemptsOf("getOrderRequest")).toBe(0);
    gate.release();
    expect((await pending).isError).toBeFalsy();
    expect(audits(h).map((a) => a.outcome)).toEqual(["CREATED"]);
  });
});

describe("without a limits store, audit.log serves", () => {
  it("an UNCERTAIN line of an earlier run is resolved by the next one, once, across restarts", async () => {
    const dir = await mkdtemp(join(tmpdir(), "korral-reconcile-"));
    dirs.push(dir);
    const storelink = scripted().fail("createOrder", { after: "outcome_unknown" });
    keyReadsDown(storelink);
    const first = createRecorder({ dir, warn: () => {} });
    const { h } = await setUp(storelink, {}, 3, first);
    expect(errorOf(await h.call("create_replenishment_order", ORDER)).type).toBe("outcome_unknown");
    await first.close();

    // The next run: a new process (its own empty book) on the same log directory.
    const run = async () => {
      const recorder = createRecorder({ dir, warn: () => {} });
      const reconciler = new Reconciler(
        {
          storelink,
          keys: new MapKeyProvider(),
          orderCap: new OrderCap({ perHour: 3 }),
          recorder,
        },
        { graceMs: 60_000, intervalMs: 60_000, logDir: dir },
      );
      const report = await reconciler.run();
      await recorder.close();
      return report;
    };
    // A reconciler killed mid-line left half a RESOLVED line: the next one finishes the job with
    // one whole line, on a line of its own.
    const uncertainLine = (await readFile(join(dir, "audit.log"), "utf8")).trimEnd();
    const torn = `${new Date().toISOString()} RESOLVED RPL-47-001 store=47 sku=8847291 qty=24 ${/req=\S+ by=\S+ key=\S+/.exec(uncertainLine)?.[0]} outcome=CREATED detail="StoreLink ho`;
    await appendFile(join(dir, "audit.log"), torn);
    expect(await run()).toMatchObject({ created: 1 });
    expect(await run()).toMatchObject({ created: 0 });
    const all = (await readFile(join(dir, "audit.log"), "utf8")).trimEnd().split("\n");
    expect(all).toHaveLength(3);
    expect(all[1]).toBe(torn);
    const lines = all.filter((line) => line !== torn);
    expect(lines).toHaveLength(2);
    const req = /\breq=(\S+)/.exec(lines[0] as string)?.[1];
    const key = /\bkey=(\S+)/.exec(lines[0] as string)?.[1];
    expect(lines[1]).toMatch(
      new RegExp(
        `^\\S+ RESOLVED ${storelink.landed[0]?.order_id} store=47 sku=8847291 qty=24 req=${req} by=\\S+ key=${key} outcome=CREATED detail="[^"]+" reason="`,
      ),
    );
  });
});
