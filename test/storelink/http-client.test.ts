import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { inspect } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { StoreLinkError } from "../../src/storelink/client.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { startEmulator } from "../../src/storelink-emulator.js";

/** Transport failures of HttpStoreLinkClient over real sockets: the write's uncertainty rules. */

const KEY_47 = SEED_ACCEPTED_KEYS["47"] as string;
const key47 = new ApiKey(KEY_47);
const ORDER = {
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  reason: "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24.",
};

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

/** A raw TCP server on 127.0.0.1:0 whose behaviour per connection the test decides. */
async function rawServer(onSocket: (socket: Socket) => void): Promise<string> {
  const sockets = new Set<Socket>();
  const server: Server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    onSocket(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return `http://127.0.0.1:${address.port}`;
}

/** A port that refuses connections: bound, then closed. */
async function closedPortUrl(): Promise<string> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${address.port}`;
}

async function failure(promise: Promise<unknown>): Promise<StoreLinkError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StoreLinkError) return error;
    throw error;
  }
  throw new Error("expected a StoreLinkError");
}

/** Reads the request head, then answers with `response` (or nothing). */
const answering =
  (response: string | null) =>
  (socket: Socket): void => {
    socket.once("data", () => {
      if (response !== null) socket.end(response);
    });
  };

describe("HttpStoreLinkClient transport failures", () => {
  it("connection refused: reads and writes are unavailable (nothing was sent)", async () => {
    const client = new HttpStoreLinkClient({ baseUrl: await closedPortUrl() });
    expect((await failure(client.getStock("47", "8847291", key47))).kind).toBe("unavailable");
    expect((await failure(client.lookupSku("butter"))).kind).toBe("unavailable");
    const write = await failure(client.createOrder(ORDER, key47));
    expect(write.kind).toBe("unavailable");
    expect(write.message).toContain("ECONNREFUSED");
  });

  it("DNS failure is unavailable for the write", async () => {
    const client = new HttpStoreLinkClient({ baseUrl: "http://storelink.invalid" });
    expect((await failure(client.createOrder(ORDER, key47))).kind).toBe("unavailable");
  });

  it("connection cut after the POST was applied: outcome_unknown, and the order did land", async () => {
    const emulator = await startEmulator({ faults: { cutAfterOrders: 1 } });
    cleanups.push(() => emulator.close());
    const client = new HttpStoreLinkClient({ baseUrl: emulator.url });
    const error = await failure(client.createOrder(ORDER, key47));
    expect(error.kind).toBe("outcome_unknown");
    expect(emulator.faults.cutAfterOrders).toBe(0);
    // The uncertainty was real: the order exists.
    expect(await client.getOrder("47", "RPL-47-001", key47)).toMatchObject({ quantity: 24 });
    // Resending the same order is answered with the landed one (StoreLink's dedupe, over HTTP)...
    expect(await client.createOrder(ORDER, key47)).toMatchObject({
      order: { order_id: "RPL-47-001" },
      replayed: true,
    });
    // ...and a different order is 002: the client made exactly one order, no hidden retry.
    const other = await client.createOrder({ ...ORDER, quantity: 6 }, key47);
    expect(other.order.order_id).toBe("RPL-47-002");
  });

  it("the same cut on a read is just unavailable", async () => {
    const url = await rawServer((socket) => socket.once("data", () => socket.destroy()));
    const client = new HttpStoreLinkClient({ baseUrl: url });
    expect((await failure(client.getOrder("47", "RPL-47-001", key47))).kind).toBe("unavailable");
  });

  it("no answer before the deadline: the write is outcome_unknown, a read unavailable", async () => {
    const url = await rawServer(answering(null));
    const client = new HttpStoreLinkClient({ baseUrl: url, timeoutMs: 150 });
    const write = await failure(client.createOrder(ORDER, key47));
    expect(write.kind).toBe("outcome_unknown");
    expect(write.message).toContain("timed out");
    expect((await failure(client.getStock("47", "8847291", key47))).kind).toBe("unavailable");
  });

  it("an answer whose body stops coming: the deadline covers the body too", async () => {
    // The head and the start of the body, then nothing: the connection stays open.
    const url = await rawServer((socket) =>
      socket.once("data", () =>
        socket.write(
          "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        ),
      ),
    );
    const client = new HttpStoreLinkClient({ baseUrl: url, timeoutMs: 150 });
    const write = await failure(client.createOrder(ORDER, key47));
    expect(write.kind).toBe("outcome_unknown");
    expect((await failure(client.getStock("47", "8847291", key47))).kind).toBe("unavailable");
  });

  it("a 500 without a usable body: the write is outcome_unknown, a read unavailable", async () => {
    const url = await rawServer(
      answering(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
      ),
    );
    const client = new HttpStoreLinkClient({ baseUrl: url });
    expect((await failure(client.createOrder(ORDER, key47))).kind).toBe("outcome_unknown");
    expect((await failure(client.getSku("8847291"))).kind).toBe("unavailable");
  });

  it("a 201 whose body is cut off is outcome_unknown (the order landed, the answer did not)", async () => {
    const url = await rawServer(
      answering(
        'HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{"order_id":"RPL-',
      ),
    );
    const client = new HttpStoreLinkClient({ baseUrl: url });
    expect((await failure(client.createOrder(ORDER, key47))).kind).toBe("outcome_unknown");
  });

  it("503 unavailable is StoreLink refusing before acting: a plain unavailable", async () => {
    const body = JSON.stringify({ error: { code: "unavailable", message: "maintenance" } });
    const url = await rawServer(
      answering(
        `HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
      ),
    );
    const client = new HttpStoreLinkClient({ baseUrl: url });
    expect((await failure(client.createOrder(ORDER, key47))).kind).toBe("unavailable");
  });

  it("never retries the write: one POST reaches the server per call", async () => {
    let requests = 0;
    const url = await rawServer((socket) =>
      socket.once("data", () => {
        requests += 1;
        socket.destroy();
      }),
    );
    const client = new HttpStoreLinkClient({ baseUrl: url });
    expect((await failure(client.createOrder(ORDER, key47))).kind).toBe("outcome_unknown");
    expect(requests).toBe(1);
  });

  it("never puts the key in an error, its message, stack or inspection", async () => {
    const emulator = await startEmulator({ storelink: new InMemoryStoreLink() });
    cleanups.push(() => emulator.close());
    const secret = new ApiKey("slk_47_not_the_right_one_c0ffee");
    const clients = [
      new HttpStoreLinkClient({ baseUrl: emulator.url }),
      new HttpStoreLinkClient({ baseUrl: await closedPortUrl() }),
      new HttpStoreLinkClient({ baseUrl: await rawServer(answering(null)), timeoutMs: 100 }),
    ];
    for (const client of clients) {
      for (const call of [
        () => client.getStock("47", "8847291", secret),
        () => client.createOrder(ORDER, secret),
        () => client.getOrder("47", "RPL-47-001", secret),
      ]) {
        const error = await failure(call());
        const text = `${error.message} ${error.stack} ${inspect(error, { depth: 10 })} ${JSON.stringify(error)}`;
        expect(text).not.toContain("c0ffee");
      }
    }
  });

  it("sends the idempotency key as the Idempotency-Key header", async () => {
    let head = "";
    const url = await rawServer((socket) =>
      socket.once("data", (chunk) => {
        head = chunk.toString("latin1");
        socket.destroy();
      }),
    );
    await failure(
      new HttpStoreLinkClient({ baseUrl: url }).createOrder(
        { ...ORDER, idempotency_key: "idem-xyz" },
        key47,
      ),
    );
    expect(head).toMatch(/^POST \/v1\/stores\/47\/orders HTTP\/1\.1\r\n/);
    expect(head.toLowerCase()).toContain("idempotency-key: idem-xyz\r\n");
  });
});

describe("HttpStoreLinkClient store directory cache", () => {
  it("reuses the directory within its TTL, refetches after, and never caches a failure", async () => {
    const emulator = await startEmulator();
    cleanups.push(() => emulator.close());
    const paths: string[] = [];
    let now = 0;
    let broken = false;
    const client = new HttpStoreLinkClient({
      baseUrl: emulator.url,
      storesTtlMs: 1_000,
      now: () => now,
      fetch: (input, init) => {
        paths.push(new URL(String(input)).pathname);
        return broken ? Promise.reject(new TypeError("fetch failed")) : fetch(input, init);
      },
    });
    const first = await client.listStores();
    first.pop(); // callers get copies: mutating one does not poison the cache
    expect(await client.listStores()).toHaveLength(5);
    expect(paths).toEqual(["/v1/stores"]);

    now = 1_000;
    broken = true;
    expect((await failure(client.listStores())).kind).toBe("unavailable");
    broken = false;
    expect(await client.listStores()).toHaveLength(5);
    expect(paths).toEqual(["/v1/stores", "/v1/stores", "/v1/stores"]);
  });
});
