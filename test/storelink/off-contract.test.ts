import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { StoreLinkError } from "../../src/storelink/client.js";
import { HttpStoreLinkClient, MAX_RESPONSE_BYTES } from "../../src/storelink/http.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";

/**
 * StoreLink answering off its contract (openapi/storelink.yaml), over real loopback sockets: the
 * client never follows a redirect (the key stays with StoreLink's origin), a write that may have
 * landed is outcome_unknown whatever the answer's body claims, a field StoreLink owns off its
 * contract shape is an off-contract answer, and no answer is read past 1 MiB.
 */

const KEY = new ApiKey(SEED_ACCEPTED_KEYS["47"] as string);
const ORDER = {
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  reason: "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24.",
};
const CREATED = {
  order_id: "RPL-47-001",
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  reason: ORDER.reason,
  status: "submitted",
  created_at: "2026-12-01T10:00:00.000Z",
};

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()?.();
});

async function serve(handler: Handler) {
  const seen: { url: string | undefined; key: string | undefined }[] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url, key: req.headers["x-storelink-key"] as string | undefined });
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
  return { url, seen, client: new HttpStoreLinkClient({ baseUrl: url, timeoutMs: 2_000 }) };
}

const json = (res: ServerResponse, status: number, body: unknown, headers = {}) =>
  res
    .writeHead(status, { "content-type": "application/json", ...headers })
    .end(JSON.stringify(body));

async function kindOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StoreLinkError) return error.kind;
    return `other: ${(error as Error).message}`;
  }
  return "resolved";
}

describe("StoreLink off its contract", () => {
  it("never follows a redirect; the key never reaches the other origin", async () => {
    const elsewhere = await serve((_req, res) => json(res, 201, CREATED));
    for (const status of [301, 302, 303, 307, 308]) {
      const storelink = await serve((_req, res) =>
        json(
          res,
          status,
          { error: { code: "idempotency_conflict", message: "x" } },
          {
            location: `${elsewhere.url}/v1/stores/47/orders`,
          },
        ),
      );
      expect(await kindOf(storelink.client.createOrder(ORDER, KEY)), `write, ${status}`).toBe(
        "outcome_unknown",
      );
      expect(await kindOf(storelink.client.getStock("47", "8847291", KEY)), `read, ${status}`).toBe(
        "unavailable",
      );
    }
    expect(elsewhere.seen).toEqual([]);
  });

  it.each([
    ["a 204", (res: ServerResponse) => res.writeHead(204).end()],
    ["a bare 401", (res: ServerResponse) => res.writeHead(401).end()],
    [
      "a 401 HTML page",
      (res: ServerResponse) =>
        res.writeHead(401, { "content-type": "text/html" }).end("<h1>no</h1>"),
    ],
    [
      "a 403 page",
      (res: ServerResponse) =>
        res.writeHead(403, { "content-type": "text/html" }).end("<h1>Forbidden</h1>"),
    ],
    [
      "a 500 claiming not_ranged",
      (res: ServerResponse) => json(res, 500, { error: { code: "not_ranged", message: "x" } }),
    ],
    [
      "a 502 claiming unknown_sku",
      (res: ServerResponse) => json(res, 502, { error: { code: "unknown_sku", message: "x" } }),
    ],
    [
      "a 503 claiming idempotency_conflict",
      (res: ServerResponse) =>
        json(res, 503, { error: { code: "idempotency_conflict", message: "x" } }),
    ],
    [
      "a 418 with a 404 code",
      (res: ServerResponse) => json(res, 418, { error: { code: "unknown_store", message: "x" } }),
    ],
  ])("the order POST answered with %s is outcome_unknown", async (_name, answer) => {
    const { client } = await serve((_req, res) => answer(res));
    expect(await kindOf(client.createOrder(ORDER, KEY))).toBe("outcome_unknown");
  });

  it.each([
    [404, "unknown_store"],
    [404, "unknown_sku"],
    [409, "idempotency_conflict"],
    [422, "not_ranged"],
    [401, "unauthorized"],
  ])("the contract's refusal %i %s is still a refusal", async (status, code) => {
    const { client } = await serve((_req, res) =>
      json(res, status, { error: { code, message: "x" } }),
    );
    expect(await kindOf(client.createOrder(ORDER, KEY))).toBe(code);
  });

  it("503 unavailable (refused before acting) is unavailable, not uncertain", async () => {
    const { client } = await serve((_req, res) =>
      json(res, 503, { error: { code: "unavailable", message: "x" } }),
    );
    expect(await kindOf(client.createOrder(ORDER, KEY))).toBe("unavailable");
  });

  it.each([
    ["quantity", { quantity: 240 }],
    ["store", { store_id: "63" }],
    ["SKU", { sku: "8847315" }],
  ])("a 201 with another %s is outcome_unknown, never a clean order", async (_name, change) => {
    const { client } = await serve((_req, res) => json(res, 201, { ...CREATED, ...change }));
    expect(await kindOf(client.createOrder(ORDER, KEY))).toBe("outcome_unknown");
  });

  // Only the fields StoreLink owns are read from a create, each on its contract shape: an echo of
  // the key, in any encoding, has nowhere to go.
  const echo = Buffer.from(KEY.reveal()).toString("hex");
  it.each([
    ["an order id carrying the key", { order_id: `RPL-47-${echo}` }],
    ["an order id that is the key", { order_id: KEY.reveal() }],
    ["an order id of another store", { order_id: "RPL-63-001" }],
    ["an order id of 13 digits", { order_id: "RPL-47-1234567890123" }],
    ["a status off the list", { status: `submitted ${echo}` }],
    ["a time that is no date-time", { created_at: `2026-12-01T10:00:00.000Z ${echo}` }],
  ])("a 201 with %s is outcome_unknown", async (_name, change) => {
    const { client } = await serve((_req, res) => json(res, 201, { ...CREATED, ...change }));
    expect(await kindOf(client.createOrder(ORDER, KEY))).toBe("outcome_unknown");
  });

  it("a 201 whose reason carries the key answers the reason sent, and the time as written here", async () => {
    const { client } = await serve((_req, res) =>
      json(res, 201, {
        ...CREATED,
        reason: `${ORDER.reason} ${echo}`,
        created_at: "2026-12-01T11:00:00+01:00",
      }),
    );
    const { order } = await client.createOrder(ORDER, KEY);
    expect(order).toEqual({ ...CREATED, created_at: "2026-12-01T10:00:00.000Z" });
  });

  it.each([
    ["another order id", { order_id: "RPL-47-002" }],
    ["another store", { store_id: "63" }],
    ["a SKU carrying the key", { sku: `8847291-${echo}` }],
    ["a SKU that is not an id", { sku: "8847291 x" }],
    ["a time that is no date-time", { created_at: echo }],
  ])("a status read answered with %s is unavailable", async (_name, change) => {
    const { client } = await serve((_req, res) => json(res, 200, { ...CREATED, ...change }));
    expect(await kindOf(client.getOrder("47", "RPL-47-001", KEY))).toBe("unavailable");
  });

  it.each([
    ["another store", { store_id: "63" }],
    ["another SKU", { sku: "8847315" }],
    ["a time carrying the key", { as_of: `2026-12-01T10:00:00Z${echo}` }],
  ])("a stock reading with %s is unavailable", async (_name, change) => {
    const reading = {
      store_id: "47",
      sku: "8847291",
      on_hand: 3,
      units_sold_last_24h: 11,
      as_of: "2026-12-01T10:00:00.000Z",
    };
    const { client } = await serve((_req, res) => json(res, 200, { ...reading, ...change }));
    expect(await kindOf(client.getStock("47", "8847291", KEY))).toBe("unavailable");
  });

  it("an answer over 1 MiB is an error and is not read to its end", async () => {
    let written = 0;
    let stopped = false;
    const { client } = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = (): void => {
        while (!stopped && written < 64 * MAX_RESPONSE_BYTES) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once("drain", pump);
            return;
          }
        }
        res.end();
      };
      res.on("close", () => {
        stopped = true;
      });
      pump();
    });
    expect(await kindOf(client.getStock("47", "8847291", KEY))).toBe("unavailable");
    // The client stopped reading long before the 64 MiB the server had to send.
    await new Promise((r) => setTimeout(r, 100));
    expect(written).toBeLessThan(16 * MAX_RESPONSE_BYTES);
  });

  it("a declared Content-Length over 1 MiB is refused before reading", async () => {
    const { client } = await serve((_req, res) => {
      res.writeHead(201, {
        "content-type": "application/json",
        "content-length": String(2 * MAX_RESPONSE_BYTES),
      });
      res.write("{");
    });
    expect(await kindOf(client.createOrder(ORDER, KEY))).toBe("outcome_unknown");
  });
});
