import { IncomingMessage, ServerResponse } from "node:http";
import { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { ServerPool } from "../../src/http/server-pool.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { createServer } from "../../src/server.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { initialize, MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { Gate, ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * The pool's rule, on real MCP servers and transports: a server is lent again only when every
 * handler it started has sent its answer. Identity of the borrowed server is what is observed:
 * a server that may still be running someone's handler must never come back out of the pool.
 */

function setUp() {
  const storelink = new ScriptedStoreLink();
  const recorder = new MemoryRecorder();
  const pool = new ServerPool(() =>
    createServer({
      storelink,
      keys: new MapKeyProvider(),
      recorder,
      orderCap: new OrderCap({ perHour: 0 }),
    }),
  );
  return { storelink, recorder, pool };
}

/** One POST's request and response, and the status and body once the transport ends it. */
function exchange() {
  const req = new IncomingMessage(new Socket());
  req.headers = { ...MCP_HEADERS };
  const res = new ServerResponse(req);
  const answered = new Promise<{ status: number; body: string }>((resolve) => {
    const end = res.end.bind(res);
    res.end = ((chunk?: unknown) => {
      resolve({ status: res.statusCode, body: typeof chunk === "string" ? chunk : "" });
      return end(chunk as string);
    }) as typeof res.end;
  });
  return { req, res, answered };
}

async function post(pool: ServerPool, body: unknown) {
  const pooled = await pool.acquire();
  const { req, res, answered } = exchange();
  pooled.transport.handle(req, res, body);
  const answer = await answered;
  pool.release(pooled);
  return { pooled, ...answer };
}

const stock = (id: number | string, store: string) => ({
  ...toolCall(0, "get_stock_position", { sku: "8847291", store_ids: [store] }),
  id,
});

describe("which servers go back to the pool", () => {
  it("a server whose requests were all answered, including those the SDK answers itself", async () => {
    const { pool } = setUp();
    const first = await post(pool, [
      stock(1, "47"),
      { jsonrpc: "2.0", id: 2, method: "ping" },
      { jsonrpc: "2.0", id: 3, method: "no/such-method" },
      { jsonrpc: "2.0", method: "notifications/whatever" },
      // A client's response answers nothing here; it is not a request to wait for.
      { jsonrpc: "2.0", id: 1, result: {} },
    ]);
    expect(first.status).toBe(200);
    expect((JSON.parse(first.body) as { id: unknown }[]).map((a) => a.id)).toEqual([1, 2, 3]);
    expect(await pool.acquire()).toBe(first.pooled);
  });

  it("not a server whose batch cancelled a call still running at StoreLink", async () => {
    const { pool, storelink } = setUp();
    const gate = new Gate();
    storelink.fail("getStock", { hang: gate });
    const cancelled = await post(pool, [
      stock(7, "47"),
      { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7 } },
    ]);
    // Answered at once (nothing left to wait for), while the handler still waits on StoreLink.
    expect(cancelled.status).toBe(202);
    await new Promise((resolve) => setImmediate(resolve));
    expect(storelink.attemptsOf("getStock")).toBe(1);
    const next = await pool.acquire();
    expect(next).not.toBe(cancelled.pooled);
    gate.release();
  });

  it("not a server that answered an initialize (it holds that client's capabilities)", async () => {
    const { pool } = setUp();
    const init = await post(pool, initialize());
    expect(init.status).toBe(200);
    expect(await pool.acquire()).not.toBe(init.pooled);
  });

  it("a server whose batch was refused for a repeated id, which ran nothing", async () => {
    const { pool, storelink, recorder } = setUp();
    const refused = await post(pool, [
      { jsonrpc: "2.0", id: 1, method: "ping" },
      { jsonrpc: "2.0", method: "notifications/initialized" },
      stock(1, "47"),
    ]);
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toMatchObject({ id: null, error: { code: -32600 } });
    await new Promise((resolve) => setImmediate(resolve));
    expect(storelink.sent).toEqual([]);
    expect(recorder.traces).toEqual([]);
    expect(await pool.acquire()).toBe(refused.pooled);
  });
});
