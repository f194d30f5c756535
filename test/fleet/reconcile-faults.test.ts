import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { CONFIRMED_BY_KEY_DETAIL } from "../../src/policy/audit.js";
import { isStoreLinkError, type Order } from "../../src/storelink/client.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { until } from "../helpers/delayed-emulator.js";
import { call, type Fleet, outcomeOf, startFleet } from "../helpers/fleet.js";
import { HERO_REASON } from "../helpers/harness.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
} from "../helpers/redis.js";
import { forTheFile } from "../helpers/spawn.js";

/**
 * Reconciliation as a fleet meets it: three built replicas on one Redis, in front of the StoreLink
 * emulator, while order requests are dropped before StoreLink, copies arrive late (some before
 * the reconciler's fence, some after it), answers are lost after the order landed, replicas are
 * SIGKILLed mid-write and started again, and Redis is down for more than ten seconds. Agents,
 * some sending an idempotency key and some not, do what the tool tells them: after an unknown
 * outcome they resend with the same key or ask get_replenishment_status by it, and give up only
 * after TRIES tries. Once the fleet is quiet, audit.log is checked against StoreLink's truth:
 * every UNCERTAIN line is RESOLVED once, as StoreLink says; a fenced key holds no order; no agent
 * was left without an order StoreLink held before its last call; one line per attempt, one truck
 * per key and per order, and the cap, fleet-wide.
 */

const CAP = 3;
const STORES = ["47", "102", "111"];
const SKUS = ["8847291", "8847315"];
const GRACE_MS = 2_000;
/** A late copy lands during the inline asks, between UNCERTAIN and the fence, or after the fence. */
const LATE_MS = [400, 2_500, 9_000];
const AGENTS = 16;
const TRIES = 8;
/** The pause before each try after the first: long enough in all to outlast the Redis outage. */
const PAUSES_MS = [300, 700, 1_200, 2_000, 3_000, 4_000, 5_000];
/** Longer than the 10 s the brief asks of an outage. */
const OUTAGE_MS = 11_000;
/** Tool errors after which the agent tries again (with the same key, when it has one). */
const RETRIED = new Set(["outcome_unknown", "limits_unavailable", "internal"]);
/** The answers that give the agent its order. */
const HAS_ORDER = new Set(["created", "replayed"]);

type Replica = Fleet["replicas"][number];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A seeded generator (mulberry32): the same faults for a seed every time. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One logical order as its agent saw it. */
interface LogicalOrder {
  store: string;
  sku: string;
  /** Unique in the run: StoreLink's orders of this quantity are this order's trucks. */
  quantity: number;
  /** The agent's own key, or the one the server made and returned; undefined until known. */
  key: string | undefined;
  /** Asks get_replenishment_status first after an unknown outcome (else resends first). */
  asker: boolean;
  outcomes: string[];
  gaveUp: boolean;
  final: string;
  orderId: string | undefined;
  /** When the agent's last call began (an order created before it must have been answered). */
  lastCallAt: number;
}

/** A call's result, or why no answer came: the connection was refused, or lost mid-call. */
async function tryCall(
  replica: Replica,
  name: string,
  args: Record<string, unknown>,
): Promise<CallToolResult | "connection_refused" | "connection_lost"> {
  try {
    return await call(replica.url, name, args);
  } catch (error) {
    // A killed replica not yet replaced refuses the connection: nothing reached it.
    const code = (error as { cause?: { code?: unknown } }).cause?.code;
    return code === "ECONNREFUSED" ? "connection_refused" : "connection_lost";
  }
}

const structured = (result: CallToolResult): Record<string, unknown> =>
  (result.structuredContent ?? {}) as Record<string, unknown>;

/** Answers after which the write may have landed: the agent may ask by key before resending. */
const MAY_HAVE_LANDED = new Set([
  "outcome_unknown",
  "internal",
  "connection_lost",
  "status:unknown",
  "status:in_progress",
  "status:connection_lost",
  "status:connection_refused",
]);

/**
 * The agent: the tool's instructions, followed for at most TRIES calls. After an answer that
 * leaves the order uncertain it asks get_replenishment_status by key (an asker, until it has
 * heard "unknown" three times in a row; else now and then) or resends with the same key and
 * parameters; after a refusal that sent nothing it resends. Without a key, it resends only what
 * surely was not sent: a key-less retry of a lost write could load a second truck.
 */
async function runAgent(order: LogicalOrder, pick: () => Replica, random: () => number) {
  const args = { store_id: order.store, sku: order.sku, quantity: order.quantity };
  let last = "";
  let unknowns = 0;
  // A refused connection reached no replica (a killed one not yet back): the agent's client
  // connects again without spending a try, up to a bound of its own.
  let refused = 0;
  for (let n = 0; n < TRIES; n++) {
    if (last.endsWith("connection_refused") && refused++ < TRIES * 2) {
      n--;
      await sleep(PAUSES_MS[0] as number);
    } else if (n > 0) {
      await sleep(PAUSES_MS[n - 1] as number);
    }
    order.lastCallAt = Date.now();
    const ask =
      order.key !== undefined &&
      MAY_HAVE_LANDED.has(last) &&
      (order.asker ? unknowns < 3 : random() < 0.2);
    if (ask) {
      const result = await tryCall(pick(), "get_replenishment_status", {
        store_id: order.store,
        idempotency_key: order.key,
      });
      const said =
        typeof result === "string"
          ? result
          : result.isError
            ? outcomeOf(result)
            : String(structured(result).state);
      last = `status:${said}`;
      order.outcomes.push(last);
      if (typeof result !== "string" && said === "created") {
        order.final = "created";
        order.orderId = String(structured(result).order_id);
        return;
      }
      if (said === "not_created") {
        order.final = "not_created";
        return;
      }
      unknowns++;
      continue;
    }
    unknowns = 0;
    const sent = {
      ...args,
      reason: HERO_REASON,
      ...(order.key === undefined ? {} : { idempotency_key: order.key }),
    };
    const result = await tryCall(pick(), "create_replenishment_order", sent);
    last = typeof result === "string" ? result : outcomeOf(result);
    order.outcomes.push(last);
    if (typeof result === "string") {
      if (order.key === undefined && result === "connection_lost") {
        order.final = "unknown_without_key";
        return;
      }
      continue;
    }
    if (last === "ok") {
      order.final = structured(result).replayed === true ? "replayed" : "created";
      order.orderId = String(structured(result).order_id);
      return;
    }
    const returnedKey = structured(result).idempotency_key;
    if (order.key === undefined && typeof returnedKey === "string") order.key = returnedKey;
    if (!RETRIED.has(last)) {
      order.final = last;
      return;
    }
    // Without a key, only a write refused unsent may be sent again.
    if (order.key === undefined && last !== "limits_unavailable") {
      order.final = "unknown_without_key";
      return;
    }
  }
  order.gaveUp = true;
  order.final = order.outcomes.at(-1) as string;
}

/** One audit.log line: time, outcome, order id, and its `name=value` fields. */
interface AuditLine {
  ts: number;
  outcome: string;
  orderId: string | undefined;
  fields: Map<string, string>;
}

const TOKEN = /([a-z_]+)=("(?:[^"\\]|\\.)*"|\S+)/g;

function readAudit(fleet: Fleet): AuditLine[] {
  let text: string;
  try {
    text = readFileSync(join(fleet.logDir, "audit.log"), "utf8");
  } catch {
    return [];
  }
  const lines: AuditLine[] = [];
  for (const line of text.split("\n")) {
    const head = /^(\S+) ([A-Z_]+) (\S+) /.exec(line);
    if (!head) continue;
    const fields = new Map<string, string>();
    for (const [, name, raw] of line.slice(head[0].length).matchAll(TOKEN)) {
      const value = (raw as string).startsWith('"') ? (JSON.parse(raw as string) as string) : raw;
      if (!fields.has(name as string)) fields.set(name as string, value as string);
    }
    lines.push({
      ts: Date.parse(head[1] as string),
      outcome: head[2] as string,
      orderId: head[3] === "-" ? undefined : head[3],
      fields,
    });
  }
  return lines;
}

/** What StoreLink holds for a key at a store. */
type Truth = { state: "created"; order: Order } | { state: "fenced" | "in_progress" | "none" };

/** Polls `check` every 250 ms until it holds (a generous bound: this is not a timing test). */
async function poll(check: () => Promise<boolean>, what: string, timeoutMs = 150_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

const PRIMARY = new Set(["CREATED", "REPLAYED", "REJECTED", "UNCERTAIN", "PREVIEW"]);

describe.runIf(REDIS_AVAILABLE).each([20261201, 4242, 977])(
  "reconciliation under faults (seed %i)",
  (seed) => {
    const dataDir = mkdtempSync(join(tmpdir(), "korral-redis-aof-"));
    let redis: RunningRedis;
    let fleet: Fleet;
    const random = seeded(seed);

    beforeAll(async () => {
      redis = await startRedis({ persistIn: dataDir });
      fleet = await startFleet(
        3,
        {
          KORRAL_REDIS_URL: redis.url,
          KORRAL_ORDER_CAP_PER_HOUR: String(CAP),
          KORRAL_RATE_LIMIT_PER_MIN: "0",
          KORRAL_RECONCILE_GRACE_MS: String(GRACE_MS),
          KORRAL_RECONCILE_INTERVAL_MS: "1000",
          // A write still "sending" whose replica was killed is picked up after
          // 2 * (1000 + 100) + 3000 + 1000 + 5000 ms (src/deps.ts, sendingBoundMs).
          STORELINK_TIMEOUT_MS: "1000",
          KORRAL_KEY_DEADLINE_MS: "100",
        },
        30,
      );
    }, 120_000);
    afterAll(async () => {
      await fleet?.close();
      await redis?.kill();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it("every unknown outcome is resolved to StoreLink's truth, and no agent is left without its order", async () => {
      const pick = () => fleet.replicas[Math.floor(random() * fleet.replicas.length)] as Replica;
      const orders: LogicalOrder[] = Array.from({ length: AGENTS }, (_, i) => ({
        store: STORES[Math.floor(random() * STORES.length)] as string,
        sku: SKUS[Math.floor(random() * SKUS.length)] as string,
        quantity: i + 1,
        // Half the agents send a key of their own; the others learn the server's on outcome_unknown.
        key: random() < 0.5 ? `faults-${seed}-${i}-order` : undefined,
        asker: random() < 0.5,
        outcomes: [],
        gaveUp: false,
        final: "",
        orderId: undefined,
        lastCallAt: 0,
      }));
      // Creates StoreLink refused because their key was fenced (late copies, resends), counted.
      let refusedFenced = 0;
      const create = fleet.storelink.createOrder.bind(fleet.storelink);
      fleet.storelink.createOrder = async (...args) => {
        try {
          return await create(...args);
        } catch (error) {
          if (isStoreLinkError(error, "idempotency_key_fenced")) refusedFenced++;
          throw error;
        }
      };
      const started = Date.now();
      const at = (ms: number) => sleep(Math.max(0, started + ms - Date.now()));

      // The agents start over the first eight seconds.
      const agents = orders.map(async (order) => {
        await at(random() * 8_000);
        await runAgent(order, pick, random);
      });

      // Redis is killed and, after more than ten seconds, started again on its data.
      const outage = (async () => {
        await at(2_000 + random() * 2_000);
        await redis.kill();
        await sleep(OUTAGE_MS);
        redis = await forTheFile(() => startRedis({ port: redis.port, persistIn: dataDir }));
      })();

      // Faults for the next order POSTs, armed four times: a request dropped before StoreLink, an
      // answer lost after the order landed, and a copy delivered late (each delay at least once).
      const faults = (async () => {
        for (let step = 0; step < 4; step++) {
          // Two before the outage, two once Redis is back (the agents' resends come then).
          if (step < 2) await at(step * 2_500);
          else await outage.then(() => sleep((step - 2) * 2_500));
          if (step === 0 || random() < 0.5) {
            fleet.faults.dropOrders = (fleet.faults.dropOrders ?? 0) + 1;
          }
          if (step === 1 || random() < 0.5) fleet.faults.cutAfterOrders += 1;
          const afterMs =
            step < LATE_MS.length
              ? (LATE_MS[step] as number)
              : (LATE_MS[Math.floor(random() * LATE_MS.length)] as number);
          fleet.faults.lateOrders = { count: 1, afterMs };
        }
      })();

      // Two replicas are killed (-9) while a write is at StoreLink, and started again: one before
      // the outage, one after it.
      let kills = 0;
      const killing = (async () => {
        for (const step of [0, 1]) {
          if (step === 0) await at(1_000 + random() * 3_000);
          else await outage.then(() => sleep(random() * 3_000));
          const seen = fleet.storelink.received;
          try {
            await until(() => fleet.storelink.received > seen, "a write at StoreLink", 8_000);
          } catch {
            continue;
          }
          const victim = Math.floor(random() * fleet.replicas.length);
          (fleet.replicas[victim] as Replica).child.kill("SIGKILL");
          kills++;
          fleet.replicas[victim] = await fleet.start();
        }
      })();

      await Promise.all([...agents, faults, killing, outage]);

      // Quiet: every UNCERTAIN line gets its RESOLVED line, and the fleet's book empties.
      const limits = await connectedLimits(redis.url);
      try {
        await poll(async () => {
          const lines = readAudit(fleet);
          const resolved = new Set(
            lines.filter((l) => l.outcome === "RESOLVED").map((l) => l.fields.get("req")),
          );
          return lines.every((l) => l.outcome !== "UNCERTAIN" || resolved.has(l.fields.get("req")));
        }, "every UNCERTAIN line to be RESOLVED");
        await poll(
          async () => (await limits.slots.attempts()).entries.length === 0,
          "the fleet's book of attempts to empty",
        );
      } finally {
        await limits.close();
      }
      // Lines written since (an attempt settled with the book) are read too.
      const lines = readAudit(fleet);

      // StoreLink's truth: every order it created, and what it holds for each key it was sent.
      const storeKey = (store: string) => new ApiKey(SEED_ACCEPTED_KEYS[store] as string);
      const storelinkOrders: Order[] = [];
      for (const id of new Set(fleet.storelink.created)) {
        const store = /^RPL-(\d+)-/.exec(id)?.[1] as string;
        storelinkOrders.push(await fleet.storelink.getOrder(store, id, storeKey(store)));
      }
      const truthOf = async (store: string, key: string): Promise<Truth> => {
        try {
          const record = await fleet.storelink.getOrderRequest(store, key, storeKey(store));
          return record.state === "created" ? record : { state: record.state };
        } catch (error) {
          if (isStoreLinkError(error, "order_request_not_found")) return { state: "none" };
          throw error;
        }
      };
      const keys = new Map<string, string>(); // `store key` -> store
      for (const l of lines) {
        const key = l.fields.get("key");
        const store = l.fields.get("store");
        if (key !== undefined && store !== undefined) keys.set(`${store} ${key}`, store);
      }
      for (const o of orders) if (o.key !== undefined) keys.set(`${o.store} ${o.key}`, o.store);
      const truth = new Map<string, Truth>();
      for (const [scoped, store] of keys) {
        truth.set(scoped, await truthOf(store, scoped.slice(store.length + 1)));
      }
      const truthFor = (l: AuditLine) =>
        truth.get(`${l.fields.get("store")} ${l.fields.get("key")}`) as Truth;

      // 4. One outcome line per attempt, at most one RESOLVED line; a line without its attempt's
      // outcome is the RESOLVED line of a write whose process died before it wrote one.
      const byReq = new Map<string, AuditLine[]>();
      for (const l of lines) {
        const req = l.fields.get("req") as string;
        byReq.set(req, [...(byReq.get(req) ?? []), l]);
      }
      let resolvedOnly = 0;
      for (const [req, its] of byReq) {
        const primary = its.filter((l) => PRIMARY.has(l.outcome));
        const resolved = its.filter((l) => l.outcome === "RESOLVED");
        expect(primary.length, `outcome lines of ${req}`).toBeLessThanOrEqual(1);
        expect(resolved.length, `RESOLVED lines of ${req}`).toBeLessThanOrEqual(1);
        expect(its.length, `lines of ${req}`).toBe(primary.length + resolved.length);
        if (primary.length === 0) resolvedOnly++;
        // 1. Every UNCERTAIN line has exactly one RESOLVED line.
        if (primary[0]?.outcome === "UNCERTAIN")
          expect(resolved, `RESOLVED for ${req}`).toHaveLength(1);
      }

      // 1. Every RESOLVED line says what StoreLink holds for its key.
      for (const l of lines.filter((line) => line.outcome === "RESOLVED")) {
        const found = truthFor(l);
        const what = `RESOLVED req=${l.fields.get("req")} key=${l.fields.get("key")}`;
        if (l.fields.get("outcome") === "CREATED") {
          expect(found.state, what).toBe("created");
          expect(l.orderId, what).toBe(found.state === "created" ? found.order.order_id : "?");
        } else {
          expect(l.fields.get("outcome"), what).toBe("NOT_CREATED");
          expect(found.state, what).toBe("fenced");
        }
      }
      // Every line naming an order names the one StoreLink holds for its key.
      for (const l of lines.filter((line) => line.orderId !== undefined)) {
        const found = truthFor(l);
        expect(found.state === "created" ? found.order.order_id : found.state).toBe(l.orderId);
      }

      // 2. No fenced key has an order: a late copy after the fence created nothing, and every
      // order StoreLink created belongs to a key that holds it.
      const fenced = [...truth.values()].filter((t) => t.state === "fenced").length;
      const heldByKeys = new Set(
        [...truth.values()].flatMap((t) => (t.state === "created" ? [t.order.order_id] : [])),
      );
      for (const order of storelinkOrders) {
        expect(heldByKeys.has(order.order_id), `a key holding ${order.order_id}`).toBe(true);
      }

      // 4. No second truck per logical order (its unique quantity), and the cap per store and SKU.
      const trucks = new Map<string, Order[]>();
      const buckets = new Map<string, number>();
      for (const order of storelinkOrders) {
        const logical = `${order.store_id} ${order.sku} ${order.quantity}`;
        trucks.set(logical, [...(trucks.get(logical) ?? []), order]);
        const bucket = `${order.store_id} ${order.sku}`;
        buckets.set(bucket, (buckets.get(bucket) ?? 0) + 1);
      }
      for (const [logical, its] of trucks) expect(its, `trucks for ${logical}`).toHaveLength(1);
      for (const [bucket, n] of buckets) {
        expect(n, `orders for ${bucket}`).toBeLessThanOrEqual(CAP);
      }

      // 3. No agent gave up, or was refused, while StoreLink held its order before its last call;
      // an agent told it has its order has exactly that one.
      for (const o of orders) {
        const held = trucks.get(`${o.store} ${o.sku} ${o.quantity}`)?.[0];
        const what = `order qty=${o.quantity} key=${o.key} asker=${o.asker}: ${o.outcomes.join(",")} -> ${o.final}`;
        if (HAS_ORDER.has(o.final)) {
          expect(o.orderId, what).toBe(held?.order_id);
          continue;
        }
        if (o.final === "unknown_without_key" || held === undefined) continue;
        expect(Date.parse(held.created_at), what).toBeGreaterThanOrEqual(o.lastCallAt);
      }
      // An agent's key that holds an order holds this agent's order.
      for (const o of orders) {
        const t = o.key === undefined ? undefined : truth.get(`${o.store} ${o.key}`);
        if (t?.state === "created") expect(t.order.quantity).toBe(o.quantity);
      }

      // The faults happened.
      const uncertain = lines.filter((l) => l.outcome === "UNCERTAIN");
      expect(uncertain.length).toBeGreaterThan(0);
      expect(kills).toBeGreaterThan(0);
      expect(storelinkOrders.length).toBeGreaterThan(0);

      // For the closing note.
      const inline = lines.filter(
        (l) =>
          (l.outcome === "CREATED" || l.outcome === "REPLAYED") &&
          l.fields.get("detail") === CONFIRMED_BY_KEY_DETAIL,
      ).length;
      const resolvedLines = lines.filter((l) => l.outcome === "RESOLVED");
      const byOutcome = (name: string) =>
        resolvedLines.filter((l) => l.fields.get("outcome") === name).length;
      const resolvedAt = new Map(resolvedLines.map((l) => [l.fields.get("req"), l.ts]));
      const longest = Math.max(
        0,
        ...uncertain.map((l) => (resolvedAt.get(l.fields.get("req")) ?? l.ts) - l.ts),
      );
      const finals = new Map<string, number>();
      for (const o of orders) finals.set(o.final, (finals.get(o.final) ?? 0) + 1);
      // biome-ignore lint/suspicious/noConsole: one line of numbers per seed, for the record of the run
      console.log(
        `seed ${seed}: UNCERTAIN=${uncertain.length} inline=${inline} ` +
          `RESOLVED CREATED=${byOutcome("CREATED")} NOT_CREATED=${byOutcome("NOT_CREATED")} ` +
          `(without an outcome line: ${resolvedOnly}) longest UNCERTAIN->RESOLVED=${longest} ms; ` +
          `orders=${storelinkOrders.length} fenced keys=${fenced} creates refused as fenced=${refusedFenced} kills=${kills} ` +
          `gave up=${orders.filter((o) => o.gaveUp).length} finals=${JSON.stringify(Object.fromEntries(finals))}`,
      );
    }, 240_000);
  },
);
