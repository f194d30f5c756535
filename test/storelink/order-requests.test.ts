import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import type { CreatedOrder, OrderRequest } from "../../src/storelink/client.js";
import { StoreLinkError } from "../../src/storelink/client.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { type EmulatorFaults, startEmulator } from "../../src/storelink-emulator.js";
import { Gate } from "../helpers/scripted-storelink.js";

/**
 * HttpStoreLinkClient on contract 1.1's order-request routes, over real loopback sockets: every
 * answer is checked before use (off-contract → unavailable), a StoreLink without the routes is
 * `unsupported`, an echoed key is scrubbed, a fenced key's create is a refusal; and the emulator's
 * drop and late faults, the lost and the delayed request the fence exists for.
 */

const SECRET = SEED_ACCEPTED_KEYS["47"] as string;
const KEY = new ApiKey(SECRET);
const IDEM = "agent-key-0001";
const ORDER = {
  order_id: "RPL-47-001",
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  reason: "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24.",
  status: "submitted",
  created_at: "2026-12-01T10:00:00.000Z",
};
const REQUEST: OrderRequest = {
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  reason: ORDER.reason,
  idempotency_key: IDEM,
};

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()?.();
});

async function serve(handler: Handler) {
  const seen: { method: string | undefined; url: string | undefined }[] = [];
  const server = createServer((req, res) => {
    seen.push({ method: req.method, url: req.url });
    req.resume();
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { seen, client: new HttpStoreLinkClient({ baseUrl: url, timeoutMs: 2_000 }) };
}

const json = (res: ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));

/** The kind of the failure, with its message checked for both keys on the way. */
async function kindOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    const text = `${(error as Error).message} ${(error as Error).stack}`;
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(IDEM);
    if (error instanceof StoreLinkError) return error.kind;
    return `other: ${(error as Error).message}`;
  }
  return "resolved";
}

describe("order requests over HTTP: answers off the contract are unavailable", () => {
  it.each([
    ["another key echoed", { idempotency_key: "agent-key-0002", state: "fenced" }],
    ["an unknown state", { idempotency_key: IDEM, state: "cancelled" }],
    ["created without its order", { idempotency_key: IDEM, state: "created" }],
    ["fenced with an order", { idempotency_key: IDEM, state: "fenced", order: ORDER }],
    [
      "an order for another store",
      {
        idempotency_key: IDEM,
        state: "created",
        order: { ...ORDER, order_id: "RPL-102-001", store_id: "102" },
      },
    ],
    [
      "an order id of another store",
      { idempotency_key: IDEM, state: "created", order: { ...ORDER, order_id: "RPL-102-001" } },
    ],
    [
      "an order off its shape",
      { idempotency_key: IDEM, state: "created", order: { ...ORDER, quantity: 0 } },
    ],
    ["no key at all", { state: "fenced" }],
  ])("read: %s", async (_what, body) => {
    const storelink = await serve((_req, res) => json(res, 200, body));
    expect(await kindOf(storelink.client.getOrderRequest("47", IDEM, KEY))).toBe("unavailable");
  });

  it.each([
    ["in_progress (a 200 the fence never gives)", { state: "in_progress" }],
    ["created without its order", { state: "created" }],
    ["fenced with an order", { state: "fenced", order: ORDER }],
    ["an order for another store", { state: "created", order: { ...ORDER, store_id: "102" } }],
    ["an unknown state", { state: "cancelled" }],
  ])("fence: %s", async (_what, body) => {
    const storelink = await serve((_req, res) => json(res, 200, body));
    expect(await kindOf(storelink.client.fenceOrderRequest("47", IDEM, KEY))).toBe("unavailable");
  });

  it("takes an on-contract answer, its routes and key segment as the contract names them", async () => {
    const storelink = await serve((req, res) =>
      req.method === "POST"
        ? json(res, 200, { state: "created", order: ORDER })
        : json(res, 200, { idempotency_key: "a:b.c", state: "created", order: ORDER }),
    );
    expect(await storelink.client.getOrderRequest("47", "a:b.c", KEY)).toEqual({
      idempotency_key: "a:b.c",
      state: "created",
      order: ORDER,
    });
    expect(await storelink.client.fenceOrderRequest("47", "a:b.c", KEY)).toEqual({
      state: "created",
      order: ORDER,
    });
    expect(storelink.seen).toEqual([
      { method: "GET", url: "/v1/stores/47/order-requests/a%3Ab.c" },
      { method: "POST", url: "/v1/stores/47/order-requests/a%3Ab.c/fence" },
    ]);
  });

  it("scrubs the store key echoed in the order's reason", async () => {
    const echoed = { ...ORDER, reason: `approved; key was ${SECRET}` };
    const storelink = await serve((req, res) =>
      req.method === "POST"
        ? json(res, 200, { state: "created", order: echoed })
        : json(res, 200, { idempotency_key: IDEM, state: "created", order: echoed }),
    );
    const read = await storelink.client.getOrderRequest("47", IDEM, KEY);
    const fenced = await storelink.client.fenceOrderRequest("47", IDEM, KEY);
    for (const answer of [read, fenced]) {
      expect(JSON.stringify(answer)).not.toContain(SECRET);
      expect(answer).toMatchObject({ state: "created", order: { order_id: "RPL-47-001" } });
    }
  });

  it("a fence whose connection fails is unavailable (it never creates; ask again)", async () => {
    const storelink = await serve((req) => req.socket.destroy());
    expect(await kindOf(storelink.client.fenceOrderRequest("47", IDEM, KEY))).toBe("unavailable");
    const erring = await serve((_req, res) => json(res, 500, { error: { code: "internal" } }));
    expect(await kindOf(erring.client.fenceOrderRequest("47", IDEM, KEY))).toBe("unavailable");
  });
});

describe("a StoreLink before contract 1.1 is unsupported", () => {
  it.each([
    ["404 not_found", 404, { error: { code: "not_found", message: "no route" } }],
    ["a bare 404", 404, undefined],
    ["a 405 page", 405, "<h1>Method Not Allowed</h1>"],
    ["a 501 with a code outside the contract", 501, { error: { code: "nope", message: "x" } }],
  ])("%s", async (_what, status, body) => {
    const storelink = await serve((_req, res) => {
      if (body === undefined) res.writeHead(status).end();
      else if (typeof body === "string")
        res.writeHead(status, { "content-type": "text/html" }).end(body);
      else json(res, status, body);
    });
    expect(await kindOf(storelink.client.getOrderRequest("47", IDEM, KEY))).toBe("unsupported");
    expect(await kindOf(storelink.client.fenceOrderRequest("47", IDEM, KEY))).toBe("unsupported");
  });

  it("while a 404 with a contract code is that code's answer", async () => {
    const codes = ["unknown_store", "order_request_not_found"];
    for (const code of codes) {
      const storelink = await serve((_req, res) =>
        json(res, 404, { error: { code, message: IDEM } }),
      );
      expect(await kindOf(storelink.client.getOrderRequest("47", IDEM, KEY))).toBe(code);
    }
    const busy = await serve((_req, res) =>
      json(res, 409, { error: { code: "order_request_in_progress", message: "x" } }),
    );
    expect(await kindOf(busy.client.fenceOrderRequest("47", IDEM, KEY))).toBe(
      "order_request_in_progress",
    );
  });

  it("the order POST's 409 idempotency_key_fenced is a refusal, not an uncertain write", async () => {
    const storelink = await serve((_req, res) =>
      json(res, 409, { error: { code: "idempotency_key_fenced", message: `key ${IDEM}` } }),
    );
    expect(await kindOf(storelink.client.createOrder(REQUEST, KEY))).toBe("idempotency_key_fenced");
    // A 409 with another code is still no refusal the contract defines.
    const odd = await serve((_req, res) =>
      json(res, 409, { error: { code: "order_request_in_progress", message: "x" } }),
    );
    expect(await kindOf(odd.client.createOrder(REQUEST, KEY))).toBe("outcome_unknown");
  });
});

/** The seeded StoreLink, counting the creates that reached it and have been decided. */
class Counting extends InMemoryStoreLink {
  decided = 0;
  override async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    try {
      return await super.createOrder(request, key);
    } finally {
      this.decided += 1;
    }
  }
}

async function emulatorWith(faults: EmulatorFaults) {
  const storelink = new Counting();
  const emulator = await startEmulator({ storelink, faults });
  closers.push(() => emulator.close());
  const client = new HttpStoreLinkClient({ baseUrl: emulator.url, timeoutMs: 5_000 });
  const nextOrderId = async () =>
    (await storelink.createOrder({ ...REQUEST, idempotency_key: undefined, quantity: 7 }, KEY))
      .order.order_id;
  return { storelink, client, faults, nextOrderId };
}

const until = async (check: () => boolean): Promise<void> => {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10));
};

describe("the emulator's lost and late requests", () => {
  it("drop: the POST never reaches StoreLink; nothing is created, the key has no record", async () => {
    const { storelink, client, faults, nextOrderId } = await emulatorWith({
      cutAfterOrders: 0,
      dropOrders: 1,
    });
    expect(await kindOf(client.createOrder(REQUEST, KEY))).toBe("outcome_unknown");
    expect(faults.dropOrders).toBe(0);
    expect(storelink.decided).toBe(0);
    expect(await kindOf(client.getOrderRequest("47", IDEM, KEY))).toBe("order_request_not_found");
    expect(await nextOrderId()).toBe("RPL-47-001");
  });

  it("late: the create lands after the caller lost the connection", async () => {
    const { storelink, client, faults } = await emulatorWith({
      cutAfterOrders: 0,
      lateOrders: { count: 1, afterMs: 200 },
    });
    expect(await kindOf(client.createOrder(REQUEST, KEY))).toBe("outcome_unknown");
    expect(faults.lateOrders?.count).toBe(0);
    await until(() => storelink.decided === 1);
    expect(await client.getOrderRequest("47", IDEM, KEY)).toMatchObject({
      state: "created",
      order: { order_id: "RPL-47-001" },
    });
  });

  it("late, fenced first: the late copy creates nothing", async () => {
    // The copy lands only once the fence is in: nothing here depends on the machine's speed.
    const gate = new Gate();
    const { storelink, client, nextOrderId } = await emulatorWith({
      cutAfterOrders: 0,
      lateOrders: { count: 1, afterMs: 0, after: gate.wait() },
    });
    expect(await kindOf(client.createOrder(REQUEST, KEY))).toBe("outcome_unknown");
    expect(await client.fenceOrderRequest("47", IDEM, KEY)).toEqual({ state: "fenced" });
    gate.release();
    await until(() => storelink.decided === 1);
    expect(await client.getOrderRequest("47", IDEM, KEY)).toEqual({
      idempotency_key: IDEM,
      state: "fenced",
    });
    expect(await nextOrderId()).toBe("RPL-47-001");
  });
});
