import { readFileSync } from "node:fs";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { createEmulatorApp } from "../../src/storelink-emulator.js";
import { Gate } from "../helpers/scripted-storelink.js";

/** The emulator's wire format (supertest on createEmulatorApp) against openapi/storelink.yaml. */

const SPEC = readFileSync(new URL("../../openapi/storelink.yaml", import.meta.url), "utf8");
const KEY = { "X-StoreLink-Key": SEED_ACCEPTED_KEYS["47"] as string };
const BODY = { sku: "8847291", quantity: 24, reason: "Gap of 8 at 47, buyer approved 24." };

/** Asserts the documented error shape and that the spec lists this code. */
function expectError(res: request.Response, status: number, code: string): void {
  expect(res.status).toBe(status);
  expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
  expect(SPEC).toContain(`- ${code}\n`);
}

describe("StoreLink emulator wire format", () => {
  it("answers /healthz and the unauthenticated directory and catalogue", async () => {
    const app = createEmulatorApp();
    expect((await request(app).get("/healthz")).body).toEqual({ status: "ok" });
    expect((await request(app).get("/v1/stores")).body.stores).toHaveLength(5);
    expect((await request(app).get("/v1/skus").query({ q: "milk" })).body.skus).toHaveLength(1);
    expectError(await request(app).get("/v1/skus"), 400, "invalid_request");
    expectError(await request(app).get("/v1/skus/nope"), 404, "unknown_sku");
  });

  it("maps each domain failure to its documented status and code", async () => {
    const app = createEmulatorApp();
    expectError(await request(app).get("/v1/stores/47/stock/8847291"), 401, "unauthorized");
    expectError(
      await request(app).get("/v1/stores/47/stock/8847291").set("X-StoreLink-Key", "slk_bad"),
      401,
      "unauthorized",
    );
    expectError(
      await request(app).get("/v1/stores/999/stock/8847291").set(KEY),
      404,
      "unknown_store",
    );
    expectError(await request(app).get("/v1/stores/47/stock/0").set(KEY), 404, "unknown_sku");
    expectError(
      await request(app)
        .get("/v1/stores/111/stock/6620174")
        .set("X-StoreLink-Key", SEED_ACCEPTED_KEYS["111"] as string),
      422,
      "not_ranged",
    );
    expectError(
      await request(app).get("/v1/stores/47/orders/RPL-47-001").set(KEY),
      404,
      "order_not_found",
    );
    expectError(await request(app).get("/v1/nothing"), 404, "not_found");
  });

  it("creates with 201, replays an Idempotency-Key with 200, refuses reuse with 409", async () => {
    const app = createEmulatorApp();
    const post = () => request(app).post("/v1/stores/47/orders").set(KEY);
    const first = await post().set("Idempotency-Key", "k-1").send(BODY);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ order_id: "RPL-47-001", status: "submitted", ...BODY });
    const replay = await post().set("Idempotency-Key", "k-1").send(BODY);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);
    expectError(
      await post()
        .set("Idempotency-Key", "k-1")
        .send({ ...BODY, quantity: 1 }),
      409,
      "idempotency_conflict",
    );
    expect((await post().send({ ...BODY, quantity: 6 })).body.order_id).toBe("RPL-47-002");
    const read = await request(app).get("/v1/stores/47/orders/RPL-47-001").set(KEY);
    expect(read.body).toEqual(first.body);
  });

  it("keeps the contract the fleet rests on: concurrent POSTs with one key make one order, and a key is kept for 24 hours", async () => {
    expect(SPEC).toContain("keeps a key for at least 24 hours");
    expect(SPEC).toContain(
      "Concurrent\n            POSTs with the same key and body make exactly one order",
    );
    let now = Date.parse("2026-12-01T08:00:00Z");
    const storelink = new InMemoryStoreLink({ now: () => new Date(now) });
    const app = createEmulatorApp({ storelink });
    const post = () =>
      request(app).post("/v1/stores/47/orders").set(KEY).set("Idempotency-Key", "fleet-k-1");
    const answers = await Promise.all(Array.from({ length: 20 }, () => post().send(BODY)));
    expect(answers.map((res) => res.status).sort()).toEqual([...Array(19).fill(200), 201]);
    expect(new Set(answers.map((res) => res.body.order_id))).toEqual(new Set(["RPL-47-001"]));
    now += 24 * 60 * 60_000 + 1;
    const late = await post().send(BODY);
    expect(late.status).toBe(200);
    expect(late.body.order_id).toBe("RPL-47-001");
    // Nothing else was created: the next order is the second.
    expect(
      (
        await request(app)
          .post("/v1/stores/47/orders")
          .set(KEY)
          .send({ ...BODY, quantity: 7 })
      ).body.order_id,
    ).toBe("RPL-47-002");
  });

  it("serves contract 1.1's order requests: read, fence, and a fenced key's create refused", async () => {
    expect(SPEC).toContain("version: 1.1.0");
    const app = createEmulatorApp();
    const read = (k: string) => request(app).get(`/v1/stores/47/order-requests/${k}`).set(KEY);
    const fence = (k: string) =>
      request(app).post(`/v1/stores/47/order-requests/${k}/fence`).set(KEY);
    const post = (k: string) =>
      request(app).post("/v1/stores/47/orders").set(KEY).set("Idempotency-Key", k);
    expectError(await read("k-1"), 404, "order_request_not_found");
    const created = await post("k-1").send(BODY);
    expect((await read("k-1")).body).toEqual({
      idempotency_key: "k-1",
      state: "created",
      order: created.body,
    });
    expect((await fence("k-1")).body).toEqual({ state: "created", order: created.body });
    const fenced = await fence("k-2");
    expect([fenced.status, fenced.body]).toEqual([200, { state: "fenced" }]);
    expectError(await post("k-2").send(BODY), 409, "idempotency_key_fenced");
    expect((await read("k-2")).body).toEqual({ idempotency_key: "k-2", state: "fenced" });
    // Store, then key, then the record; a key outside the rule is refused.
    expectError(await request(app).get("/v1/stores/999/order-requests/k-1"), 404, "unknown_store");
    expectError(await request(app).get("/v1/stores/47/order-requests/k-1"), 401, "unauthorized");
    expectError(await read("a%20b"), 400, "invalid_request");
  });

  it("answers order_request_in_progress while a create with the key runs", async () => {
    const gate = new Gate();
    const app = createEmulatorApp({
      storelink: new InMemoryStoreLink({ inProgressUntil: () => gate.wait() }),
    });
    const creating = request(app)
      .post("/v1/stores/47/orders")
      .set(KEY)
      .set("Idempotency-Key", "k-3")
      .send(BODY)
      .then((res) => res);
    const read = () => request(app).get("/v1/stores/47/order-requests/k-3").set(KEY);
    let state = (await read()).body.state;
    while (state === undefined) state = (await read()).body.state;
    expect(state).toBe("in_progress");
    expectError(
      await request(app).post("/v1/stores/47/order-requests/k-3/fence").set(KEY),
      409,
      "order_request_in_progress",
    );
    gate.release();
    expect((await creating).status).toBe(201);
  });

  it("rejects malformed order bodies with 400 and creates nothing", async () => {
    const app = createEmulatorApp();
    const post = () => request(app).post("/v1/stores/47/orders").set(KEY);
    expectError(await post().send({ ...BODY, quantity: 0 }), 400, "invalid_request");
    expectError(await post().send({ ...BODY, extra: 1 }), 400, "invalid_request");
    expectError(
      await post().set("content-type", "application/json").send("{not json"),
      400,
      "invalid_request",
    );
    expect((await post().send(BODY)).body.order_id).toBe("RPL-47-001");
  });

  it("never echoes the key it was sent", async () => {
    const app = createEmulatorApp();
    const res = await request(app)
      .get("/v1/stores/47/stock/8847291")
      .set("X-StoreLink-Key", "slk_47_leaky_deadbeef");
    expect(res.status).toBe(401);
    expect(JSON.stringify(res.body) + JSON.stringify(res.headers)).not.toContain("deadbeef");
  });
});
