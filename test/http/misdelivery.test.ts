import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { type Listening, listen } from "../helpers/listen.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";
import { SlowStoreLink } from "../helpers/slow-storelink.js";

/**
 * Over a real socket, attackers loop batches that repeat a request id (a ping
 * and a slow create, both id 1), batches whose ids differ only in type (1 and "1"), and batches
 * that cancel their own slow create; victims loop plain creates with id 1. Before the fix the
 * ping completed the batch's answer map, the pooled server went back to the pool with the create
 * still running, and that create's answer (the attacker's order for store 102) reached a
 * victim's POST: about a third of the victims' answers were someone else's.
 */

const landed = new ScriptedStoreLink();
// The attackers' creates (store 102) are slow, so they are still running when their POST looks
// done; the victims' (store 47) are quick, so they borrow servers in the meantime.
const storelink = new SlowStoreLink((store) => (store === "102" ? 40 : 5), landed);
const recorder = new MemoryRecorder();
let server: Listening;

beforeAll(async () => {
  server = await listen(
    createApp(
      composeDeps({
        storelink,
        keys: new MapKeyProvider(),
        recorder,
        // The hourly cap would stop the loops; it is not what this test is about.
        orderCap: new OrderCap({ perHour: 0 }),
      }),
    ),
  );
});
afterAll(() => server.close());

const create = (id: number | string, store: string, sku: string, reason: string) => ({
  ...toolCall(0, "create_replenishment_order", { store_id: store, sku, quantity: 12, reason }),
  id,
});

interface Answer {
  id?: unknown;
  error?: { code?: number };
  result?: { structuredContent?: { store_id?: string; reason?: string } };
}

const post = async (body: unknown): Promise<{ status: number; answer: Answer | Answer[] }> => {
  const res = await fetch(server.url, {
    method: "POST",
    headers: MCP_HEADERS,
    body: JSON.stringify(body),
  }).catch(() => undefined);
  if (!res) return { status: 0, answer: [] };
  const text = await res.text();
  return { status: res.status, answer: text === "" ? [] : (JSON.parse(text) as Answer) };
};

/** Whether `answer` is the created order for exactly this store and reason. */
const isOwn = (answer: Answer | undefined, id: unknown, store: string, reason: string) =>
  answer?.id === id &&
  answer?.result?.structuredContent?.store_id === store &&
  answer?.result?.structuredContent?.reason === reason;

describe("batches that repeat, retype or cancel ids, against plain callers, on one app", () => {
  it("never deliver one caller's answer to another", async () => {
    // A fixed number of rounds per caller, all running at once: what is asserted is what each
    // caller received, never how much got done within a time.
    const ROUNDS = 24;
    const wrong: string[] = [];
    const misdelivered: string[] = [];
    let victimAnswers = 0;
    let duplicatesRefused = 0;

    const repeater = async (n: number) => {
      for (let i = 0; i < ROUNDS; i++) {
        // The recipe: the same id twice, a quick ping and a slow create.
        const { status, answer } = await post([
          { jsonrpc: "2.0", id: 1, method: "ping" },
          create(1, "102", "8847315", `ATTACKER ${n}-${i} repeated-id restock`),
        ]);
        if (status === 400 && !Array.isArray(answer) && answer.error?.code === -32600) {
          duplicatesRefused++;
        } else {
          wrong.push(`duplicate-id batch answered ${status} ${JSON.stringify(answer)}`);
        }
      }
    };
    const other = async (n: number) => {
      for (let i = 0; i < ROUNDS; i++) {
        const reason = `ATTACKER ${n}-${i} other-batch restock`;
        if (i % 2 === 0) {
          // 1 and "1" are different ids: both are answered, each with its own answer.
          const { status, answer } = await post([
            { jsonrpc: "2.0", id: 1, method: "ping" },
            create("1", "102", "8847315", reason),
          ]);
          const [pong, created] = Array.isArray(answer) ? answer : [];
          if (status !== 200 || pong?.id !== 1 || !isOwn(created, "1", "102", reason)) {
            wrong.push(`1/"1" batch answered ${status} ${JSON.stringify(answer)}`);
          }
        } else {
          // A slow create cancelled in its own batch: not waited for, and its server (its
          // handler still running at StoreLink) is never lent again.
          const { status } = await post([
            create(7, "102", "8847315", reason),
            { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7 } },
          ]);
          if (status !== 202) wrong.push(`cancelling batch answered ${status}`);
        }
      }
    };
    const victim = async (n: number) => {
      for (let i = 0; i < ROUNDS; i++) {
        const reason = `VICTIM ${n}-${i} weekend promo restock`;
        const { status, answer } = await post(create(1, "47", "8847291", reason));
        victimAnswers++;
        if (status !== 200 || Array.isArray(answer) || !isOwn(answer, 1, "47", reason)) {
          misdelivered.push(
            `victim ${reason} got ${status} ${JSON.stringify(answer).slice(0, 300)}`,
          );
        }
      }
    };
    await Promise.all([repeater(1), repeater(2), other(3), victim(1), victim(2), victim(3)]);

    expect(victimAnswers).toBe(3 * ROUNDS);
    expect(misdelivered).toEqual([]);
    expect(wrong).toEqual([]);
    expect(duplicatesRefused).toBe(2 * ROUNDS);
    // A refused batch ran nothing: no order, no trace, no audit line carries its text.
    const refused = (text: string) => text.includes("repeated-id");
    expect(landed.landed.filter((o) => refused(JSON.stringify(o)))).toEqual([]);
    expect(recorder.traces.filter((t) => refused(JSON.stringify(t)))).toEqual([]);
    expect(recorder.audits.filter((a) => refused(JSON.stringify(a)))).toEqual([]);
  });
});
