import {
  type CallToolResult,
  CallToolResultSchema,
  type ElicitRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ApiKey } from "../../src/keys/api-key.js";
import { CONFIRMED_BY_KEY_DETAIL } from "../../src/policy/audit.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { type OrderRequest, StoreLinkError } from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import type { Deps } from "../../src/tools/define.js";
import {
  type ClientOptions,
  connect,
  errorOf,
  type Harness,
  HERO_REASON,
  MapKeyProvider,
} from "../helpers/harness.js";

const HERO = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

interface Submitted {
  mode: string;
  order_id?: string;
  replayed?: boolean;
  confirmation: string;
  store_name: string;
  sku_name: string;
  stock?: { on_hand: number; units_sold_last_24h: number; gap: number; reading: string };
}
const ok = (result: CallToolResult): Submitted => {
  if (result.isError) throw new Error(`unexpected error: ${JSON.stringify(result.content)}`);
  return result.structuredContent as unknown as Submitted;
};

let open: Harness[] = [];
async function start(deps: Partial<Deps> = {}, options: ClientOptions = {}) {
  const h = await connect(deps, options);
  open.push(h);
  return h;
}
afterEach(async () => {
  await Promise.all(open.map((h) => h.close()));
  open = [];
});

const outcomes = (h: Harness) => h.recorder.audits.map((a) => `${a.outcome} ${a.order_id ?? "-"}`);

/** A mutable clock for StoreLink's dedupe window and the loop guard's rolling hour. */
function clock(start = Date.parse("2026-08-13T12:00:00Z")) {
  let t = start;
  return {
    now: () => t,
    date: () => new Date(t),
    advance: (ms: number): void => {
      t += ms;
    },
  };
}

describe("idempotency: one truck, once", () => {
  it("same key and parameters return the original order, marked as a replay, audited REPLAYED", async () => {
    const h = await start();
    const args = { ...HERO, idempotency_key: "buyer-approval-0001" };
    const first = ok(await h.call("create_replenishment_order", args));
    const again = ok(await h.call("create_replenishment_order", args));
    expect(first).toMatchObject({ mode: "submitted", order_id: "RPL-47-001", replayed: false });
    expect(again).toMatchObject({ mode: "submitted", order_id: "RPL-47-001", replayed: true });
    expect(again.confirmation).toMatch(/already submitted.*no new order was created/);
    expect(outcomes(h)).toEqual(["CREATED RPL-47-001", "REPLAYED RPL-47-001"]);
    // No sequence number was spent on the replay.
    const next = ok(
      await h.call("create_replenishment_order", {
        ...args,
        idempotency_key: "buyer-approval-0002",
      }),
    );
    expect(next.order_id).toBe("RPL-47-002");
  });

  it("same key with different parameters is refused, nothing submitted, audited REJECTED", async () => {
    const h = await start();
    const key = "buyer-approval-0001";
    ok(await h.call("create_replenishment_order", { ...HERO, idempotency_key: key }));
    const clash = await h.call("create_replenishment_order", {
      ...HERO,
      quantity: 30,
      idempotency_key: key,
    });
    expect(errorOf(clash)).toMatchObject({ type: "idempotency_conflict", retryable: false });
    expect(outcomes(h)).toEqual(["CREATED RPL-47-001", "REJECTED -"]);
    const status = await h.call("get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-002",
    });
    expect(errorOf(status).type).toBe("not_found");
  });

  it("folds an identical key-less request within the window, and not after it", async () => {
    const c = clock();
    const h = await start({
      storelink: new InMemoryStoreLink({ now: c.date, dedupeWindowMs: 10 * 60_000 }),
    });
    const first = ok(await h.call("create_replenishment_order", HERO));
    c.advance(9 * 60_000);
    const folded = ok(await h.call("create_replenishment_order", HERO));
    expect(folded).toMatchObject({ order_id: first.order_id, replayed: true });
    // A different quantity is a different order, window or not.
    const other = ok(await h.call("create_replenishment_order", { ...HERO, quantity: 12 }));
    expect(other).toMatchObject({ order_id: "RPL-47-002", replayed: false });
    c.advance(2 * 60_000);
    const later = ok(await h.call("create_replenishment_order", HERO));
    expect(later).toMatchObject({ order_id: "RPL-47-003", replayed: false });
    expect(outcomes(h)).toEqual([
      "CREATED RPL-47-001",
      "REPLAYED RPL-47-001",
      "CREATED RPL-47-002",
      "CREATED RPL-47-003",
    ]);
  });

  it("a zero window turns the key-less fold off", async () => {
    const h = await start({ storelink: new InMemoryStoreLink({ dedupeWindowMs: 0 }) });
    ok(await h.call("create_replenishment_order", HERO));
    expect(ok(await h.call("create_replenishment_order", HERO)).order_id).toBe("RPL-47-002");
  });

  it.each([
    ["with one idempotency key", { idempotency_key: "buyer-approval-0001" }],
    ["without a key", {}],
  ])("concurrent identical requests %s resolve to ONE order", async (_label, extra) => {
    const h = await start();
    const results = await Promise.all(
      Array.from({ length: 6 }, () => h.call("create_replenishment_order", { ...HERO, ...extra })),
    );
    const orders = results.map(ok);
    expect(new Set(orders.map((o) => o.order_id))).toEqual(new Set(["RPL-47-001"]));
    expect(orders.filter((o) => o.replayed === false)).toHaveLength(1);
    const audits = h.recorder.audits.map((a) => a.outcome);
    expect(audits.filter((o) => o === "CREATED")).toHaveLength(1);
    expect(audits.filter((o) => o === "REPLAYED")).toHaveLength(5);
  });

  /** Creates the order, then loses the answer once; `readable` says whether the key can be read. */
  class LostAnswer extends InMemoryStoreLink {
    lose = true;
    constructor(readonly readable: boolean) {
      super();
    }
    override async createOrder(request: OrderRequest, key: ApiKey) {
      const created = await super.createOrder(request, key);
      if (this.lose) {
        this.lose = false;
        throw new StoreLinkError("outcome_unknown", "connection reset after send");
      }
      return created;
    }
    override async getOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey) {
      if (!this.readable) throw new StoreLinkError("unavailable", "StoreLink is down");
      return super.getOrderRequest(storeId, idempotencyKey, key);
    }
  }

  it("a lost answer is asked for by key before the answer: CREATED, the agent gets the order", async () => {
    const h = await start({ storelink: new LostAnswer(true) });
    const created = ok(await h.call("create_replenishment_order", HERO));
    expect(created).toMatchObject({ order_id: "RPL-47-001", replayed: false });
    expect(outcomes(h)).toEqual(["CREATED RPL-47-001"]);
    const line = h.recorder.audits[0];
    expect(line?.detail).toBe(CONFIRMED_BY_KEY_DETAIL);
    // The server made the key (the agent gave none), in the schema's own alphabet.
    expect(line?.idempotency_key).toMatch(/^korral-[0-9a-f-]{36}$/);
  });

  it("the retry after an UNCERTAIN, with the key the agent was given, returns the order that landed", async () => {
    const storelink = new LostAnswer(false);
    const h = await start({ storelink });
    const failed = await h.call("create_replenishment_order", HERO);
    expect(errorOf(failed).type).toBe("outcome_unknown");
    const given = (failed.structuredContent as { idempotency_key?: string }).idempotency_key;
    expect(given).toMatch(/^korral-/);
    expect(errorOf(failed).next_step).toContain(`idempotency_key ${given}`);
    expect(h.recorder.audits[0]).toMatchObject({ outcome: "UNCERTAIN", idempotency_key: given });
    const retry = ok(
      await h.call("create_replenishment_order", { ...HERO, idempotency_key: given }),
    );
    expect(retry).toMatchObject({ order_id: "RPL-47-001", replayed: true });
    expect(outcomes(h)).toEqual(["UNCERTAIN -", "REPLAYED RPL-47-001"]);
    expect(h.recorder.audits[1]?.idempotency_key).toBe(given);
  });

  it("rejects a malformed idempotency key before anything is sent", async () => {
    const h = await start();
    const result = await h.call("create_replenishment_order", { ...HERO, idempotency_key: "a b" });
    expect(errorOf(result).type).toBe("invalid_arguments");
    expect(outcomes(h)).toEqual(["REJECTED -"]);
  });
});

describe("confirmation by elicitation", () => {
  const elicitingClient = (
    answer: (request: ElicitRequest) => Awaited<ReturnType<NonNullable<ClientOptions["onElicit"]>>>,
  ) => {
    const asked: ElicitRequest[] = [];
    const options: ClientOptions = {
      capabilities: { elicitation: { form: {} } },
      onElicit: (request) => {
        asked.push(request);
        return answer(request);
      },
    };
    return { asked, options };
  };

  it("asks the buyer with store, SKU (both named), quantity, reason and live stock; accept submits", async () => {
    const { asked, options } = elicitingClient(() => ({
      action: "accept",
      content: { confirm: true },
    }));
    const h = await start({}, options);
    const order = ok(await h.call("create_replenishment_order", HERO));
    expect(order).toMatchObject({ mode: "submitted", order_id: "RPL-47-001" });
    expect(asked).toHaveLength(1);
    const message = asked[0]?.params.message ?? "";
    for (const part of [
      "47 (Korral Brno-Kralovo Pole)",
      "8847291 (Madeta butter 250g)",
      "Quantity: 24",
      HERO_REASON,
      "on_hand 3, 11 sold in the last 24h, gap +8",
    ]) {
      expect(message).toContain(part);
    }
    expect(outcomes(h)).toEqual(["CREATED RPL-47-001"]);
    expect(h.recorder.audits[0]?.confirmed).toBe("buyer");
  });

  it.each([
    ["decline", { action: "decline" as const }],
    ["cancel", { action: "cancel" as const }],
    ["accept without ticking confirm", { action: "accept" as const, content: { confirm: false } }],
  ])("%s: isError, REJECTED, nothing submitted", async (_label, answer) => {
    const { asked, options } = elicitingClient(() => answer);
    const h = await start({}, options);
    const result = await h.call("create_replenishment_order", HERO);
    expect(errorOf(result)).toMatchObject({ type: "not_confirmed", retryable: false });
    expect(asked).toHaveLength(1);
    expect(outcomes(h)).toEqual(["REJECTED -"]);
    const status = await h.call("get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(errorOf(status).type).toBe("not_found");
  });

  it("an elicitation the client fails to answer is not a yes", async () => {
    const { options } = elicitingClient(() => {
      throw new Error("client UI crashed");
    });
    const h = await start({}, options);
    expect(errorOf(await h.call("create_replenishment_order", HERO)).type).toBe("not_confirmed");
    expect(outcomes(h)).toEqual(["REJECTED -"]);
  });

  it("a question the client leaves open and then cancels is not a yes: REJECTED, nothing sent", async () => {
    let askedNow!: () => void;
    const reached = new Promise<void>((resolve) => {
      askedNow = resolve;
    });
    // The buyer never answers: the client cancels the call while the question is open.
    const { options } = elicitingClient(() => {
      askedNow();
      return new Promise(() => {}) as never;
    });
    const h = await start({}, options);
    const abort = new AbortController();
    const call = h.client
      .callTool({ name: "create_replenishment_order", arguments: HERO }, undefined, {
        signal: abort.signal,
      })
      .catch(() => "cancelled");
    await reached;
    abort.abort();
    expect(await call).toBe("cancelled");
    await vi.waitFor(() => expect(outcomes(h)).toEqual(["REJECTED -"]));
    expect(h.recorder.audits[0]?.detail).toContain("no answer");
  });

  it("a 2025 client cannot answer for the buyer: its own requestState and inputResponses are not a yes", async () => {
    const { asked, options } = elicitingClient(() => ({ action: "decline" }));
    const h = await start({}, options);
    const accept = { confirm: { action: "accept", content: { confirm: true } } };
    for (const requestState of [undefined, "forged.state", ""]) {
      const result = (await h.client.request(
        {
          method: "tools/call",
          params: {
            name: "create_replenishment_order",
            arguments: HERO,
            ...(requestState === undefined ? {} : { requestState }),
            inputResponses: accept,
          },
        },
        CallToolResultSchema,
      )) as CallToolResult;
      expect(errorOf(result).type).toBe("not_confirmed");
    }
    // Without a state the buyer is asked (and declines); a state of the client's own is refused
    // before anything is sent. Nothing was placed.
    expect(asked).toHaveLength(1);
    expect(outcomes(h)).toEqual(["REJECTED -", "REJECTED -", "REJECTED -"]);
    expect(h.recorder.audits.map((a) => a.detail)).toEqual([
      expect.stringContaining("(declined)"),
      expect.stringContaining("is not valid"),
      expect.stringContaining("is not valid"),
    ]);
  });

  it("does not ask when the switch is off, or for a client without elicitation", async () => {
    const { asked, options } = elicitingClient(() => ({ action: "decline" }));
    const off = await start({ confirmWrites: false }, options);
    expect(ok(await off.call("create_replenishment_order", HERO)).order_id).toBe("RPL-47-001");
    expect(asked).toHaveLength(0);

    const plain = await start();
    expect(ok(await plain.call("create_replenishment_order", HERO)).order_id).toBe("RPL-47-001");
    // Neither asked the buyer: the audit says the agent's word is all there was.
    expect([...off.recorder.audits, ...plain.recorder.audits].map((a) => a.confirmed)).toEqual([
      "agent",
      "agent",
    ]);
  });

  it("KORRAL_REQUIRE_CONFIRMATION: a client that cannot ask is refused before anything is sent", async () => {
    const strict = await start({ requireConfirmation: true });
    const refused = errorOf(await strict.call("create_replenishment_order", HERO));
    expect(refused).toMatchObject({ type: "not_confirmed", retryable: false });
    expect(refused.next_step).toMatch(/client that can show a confirmation dialog/);
    expect(outcomes(strict)).toEqual(["REJECTED -"]);
    const status = await strict.call("get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-001",
    });
    expect(errorOf(status).type).toBe("not_found");

    // A 2025 session whose client can elicit is asked, and may write.
    const { options } = elicitingClient(() => ({ action: "accept", content: { confirm: true } }));
    const asking = await start({ requireConfirmation: true }, options);
    expect(ok(await asking.call("create_replenishment_order", HERO)).order_id).toBe("RPL-47-001");
  });

  it("a refused store or SKU fails before the buyer is asked", async () => {
    const { asked, options } = elicitingClient(() => ({
      action: "accept",
      content: { confirm: true },
    }));
    const h = await start({}, options);
    const result = await h.call("create_replenishment_order", {
      ...HERO,
      store_id: "111",
      sku: "6620174",
    });
    expect(errorOf(result).type).toBe("not_ranged");
    expect(asked).toHaveLength(0);
  });

  it("dry_run never asks", async () => {
    const { asked, options } = elicitingClient(() => ({ action: "decline" }));
    const h = await start({}, options);
    expect(ok(await h.call("create_replenishment_order", { ...HERO, dry_run: true })).mode).toBe(
      "preview",
    );
    expect(asked).toHaveLength(0);
  });
});

describe("dry_run preview", () => {
  it("returns exactly what would be submitted, with live stock, and submits nothing", async () => {
    const h = await start();
    const preview = ok(await h.call("create_replenishment_order", { ...HERO, dry_run: true }));
    expect(preview).toMatchObject({
      mode: "preview",
      store_id: "47",
      store_name: "Korral Brno-Kralovo Pole",
      sku: "8847291",
      sku_name: "Madeta butter 250g",
      quantity: 24,
      reason: HERO_REASON,
      stock: { on_hand: 3, units_sold_last_24h: 11, gap: 8, reading: "shortfall" },
    });
    expect(preview.order_id).toBeUndefined();
    expect(preview.confirmation).toMatch(/^Preview only, nothing submitted/);
    expect(outcomes(h)).toEqual(["PREVIEW -"]);
    // Nothing was created: the first real order is still 001.
    expect(ok(await h.call("create_replenishment_order", HERO)).order_id).toBe("RPL-47-001");
  });

  it.each([
    ["SKU not ranged at the store", { store_id: "111", sku: "6620174" }, {}, "not_ranged"],
    ["unknown store", { store_id: "999" }, {}, "unknown_store"],
    ["no key for the store", {}, { "47": undefined }, "no_credentials"],
    ["key rejected after reload", {}, { "47": "slk_47_stale" }, "auth_failed"],
  ])("runs every check: %s", async (_label, args, keyPatch, type) => {
    const keys = new MapKeyProvider();
    for (const [store, key] of Object.entries(keyPatch)) {
      if (key === undefined) delete keys.keys[store];
      else keys.keys[store] = key;
    }
    const h = await start({ keys });
    const result = await h.call("create_replenishment_order", { ...HERO, ...args, dry_run: true });
    expect(errorOf(result).type).toBe(type);
    expect(h.recorder.audits).toHaveLength(1);
    expect(h.recorder.audits[0]).toMatchObject({ outcome: "REJECTED", order_id: null });
    expect(h.recorder.audits[0]?.detail).toMatch(/^dry_run: /);
  });

  it("validates the reason like a real order", async () => {
    const h = await start();
    const result = await h.call("create_replenishment_order", {
      ...HERO,
      reason: "asap",
      dry_run: true,
    });
    expect(errorOf(result).type).toBe("invalid_arguments");
  });

  it("lists an output schema that admits both shapes", async () => {
    const h = await start();
    const { tools } = await h.client.listTools();
    const tool = tools.find((t) => t.name === "create_replenishment_order");
    // anyOf: [the result, the error shape of an isError result]
    const schema = tool?.outputSchema as unknown as { anyOf: Record<string, unknown>[] };
    const [success] = schema.anyOf;
    const props = success?.properties as Record<string, { enum?: string[] }>;
    expect(props.mode?.enum).toEqual(["submitted", "preview"]);
    expect(success?.required).not.toContain("order_id");
    expect(success?.required).not.toContain("stock");
    const input = tool?.inputSchema.properties as Record<string, unknown>;
    expect(Object.keys(input)).toEqual(expect.arrayContaining(["idempotency_key", "dry_run"]));
  });
});

describe("loop guard", () => {
  const order = (h: Harness, n: number, extra: Record<string, unknown> = {}) =>
    h.call("create_replenishment_order", { ...HERO, quantity: n, ...extra });

  it("refuses the 4th order for the same store and SKU within the hour, and tells the buyer who to call", async () => {
    const h = await start({ orderCap: new OrderCap({ perHour: 3 }) });
    for (const n of [1, 2, 3]) ok(await order(h, n));
    const refused = await order(h, 4);
    const error = errorOf(refused);
    expect(error).toMatchObject({ type: "order_cap_reached", retryable: false });
    expect(error.message).toContain("contact Korral ops");
    expect(error.message).toContain("Nothing was submitted");
    expect(error.message).toContain("3 were placed in the last hour.");
    expect(outcomes(h).at(-1)).toBe("REJECTED -");
    const status = await h.call("get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-004",
    });
    expect(errorOf(status).type).toBe("not_found");
    // Other SKUs at the store, and the same SKU elsewhere, are counted separately.
    ok(await h.call("create_replenishment_order", { ...HERO, sku: "8847315" }));
    ok(await h.call("create_replenishment_order", { ...HERO, store_id: "111" }));
    // A preview tells the buyer up front.
    expect(errorOf(await order(h, 5, { dry_run: true })).type).toBe("order_cap_reached");
  });

  it("replays do not count, and a retry with the same key is never refused by the cap", async () => {
    const h = await start({ orderCap: new OrderCap({ perHour: 3 }) });
    const first = ok(await order(h, 1, { idempotency_key: "approval-0001" }));
    // A retry joins the slot its key holds: no second slot, and StoreLink folds it.
    for (let i = 0; i < 4; i++) {
      expect(ok(await order(h, 1, { idempotency_key: "approval-0001" })).replayed).toBe(true);
    }
    ok(await order(h, 2));
    ok(await order(h, 3));
    // Three orders counted: a new one is refused, but the retry of the first still gets the
    // order that landed (it is never told to have ops place it again).
    const retry = ok(await order(h, 1, { idempotency_key: "approval-0001" }));
    expect(retry).toMatchObject({ replayed: true, order_id: first.order_id });
    const refused = errorOf(await order(h, 4, { idempotency_key: "approval-0004" }));
    expect(refused.type).toBe("order_cap_reached");
    expect(refused.next_step).toContain("get_replenishment_status");
    // A preview of the retry is not refused either; of a new order it is.
    ok(await order(h, 1, { idempotency_key: "approval-0001", dry_run: true }));
    expect(errorOf(await order(h, 4, { dry_run: true })).type).toBe("order_cap_reached");
    expect(outcomes(h).slice(-4)).toEqual([
      `REPLAYED ${first.order_id}`,
      "REJECTED -",
      "PREVIEW -",
      "REJECTED -",
    ]);
  });

  it("is a rolling hour", async () => {
    const c = clock();
    const h = await start({
      orderCap: new OrderCap({ perHour: 1, now: c.now }),
    });
    ok(await order(h, 1));
    c.advance(59 * 60_000);
    expect(errorOf(await order(h, 2)).type).toBe("order_cap_reached");
    c.advance(60_000);
    ok(await order(h, 2));
  });

  it("holds under concurrency: 5 distinct orders at once, exactly 3 go through", async () => {
    const h = await start({ orderCap: new OrderCap({ perHour: 3 }) });
    const results = await Promise.all([1, 2, 3, 4, 5].map((n) => order(h, n)));
    expect(results.filter((r) => !r.isError)).toHaveLength(3);
    // The refusal counts the three, those still at StoreLink as being submitted.
    for (const refused of results.filter((r) => r.isError)) {
      const counted =
        /(\d) (?:was|were) placed in the last hour(?:, and (\d) more (?:is|are) being submitted now)?\./.exec(
          errorOf(refused).message,
        );
      expect(Number(counted?.[1]) + Number(counted?.[2] ?? 0)).toBe(3);
    }
    expect(results.filter((r) => r.isError).map((r) => errorOf(r).type)).toEqual([
      "order_cap_reached",
      "order_cap_reached",
    ]);
  });

  it("a refused write (declined, conflict) gives its slot back", async () => {
    let answer: "accept" | "decline" = "decline";
    const h = await start(
      { orderCap: new OrderCap({ perHour: 1 }) },
      {
        capabilities: { elicitation: { form: {} } },
        onElicit: () =>
          answer === "accept"
            ? { action: "accept", content: { confirm: true } }
            : { action: "decline" },
      },
    );
    expect(errorOf(await order(h, 1)).type).toBe("not_confirmed");
    answer = "accept";
    ok(await order(h, 1));
  });

  it("is shared by every session of the instance, and 0 turns it off", async () => {
    const storelink = new InMemoryStoreLink();
    const orderCap = new OrderCap({ perHour: 2 });
    const a = await start({ storelink, orderCap });
    const b = await start({ storelink, orderCap });
    ok(await order(a, 1));
    ok(await order(b, 2));
    expect(errorOf(await order(a, 3)).type).toBe("order_cap_reached");

    const off = await start({ orderCap: new OrderCap({ perHour: 0 }) });
    for (const n of [1, 2, 3, 4, 5]) ok(await order(off, n));
  });
});
