import request from "supertest";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import { ERROR_TYPES } from "../../src/errors.js";
import { createApp } from "../../src/http/app.js";
import { limiterFor, MemoryCallLimiter, NO_LIMIT } from "../../src/policy/rate-limit.js";
import {
  connect,
  errorOf,
  HERO_REASON,
  MapKeyProvider,
  MemoryRecorder,
} from "../helpers/harness.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

describe("MemoryCallLimiter", () => {
  it("allows perMinute calls in a caller's minute, then refuses with the seconds until the next one", async () => {
    const limiter = new MemoryCallLimiter(60);
    for (let i = 0; i < 60; i++) expect(await limiter.take("a")).toBeNull();
    const refused = await limiter.take("a");
    expect(refused?.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refused?.retryAfterSeconds).toBeLessThanOrEqual(60);
    expect(await limiter.take("a")).not.toBeNull();
  });

  it("keeps callers apart", async () => {
    const limiter = new MemoryCallLimiter(2);
    expect(await limiter.take("a")).toBeNull();
    expect(await limiter.take("a")).toBeNull();
    expect(await limiter.take("a")).not.toBeNull();
    expect(await limiter.take("b")).toBeNull();
  });

  it("is off at 0 and configured from KORRAL_RATE_LIMIT_PER_MIN", async () => {
    expect(limiterFor(0)).toBe(NO_LIMIT);
    for (let i = 0; i < 1000; i++) expect(await NO_LIMIT.take("a")).toBeNull();
    expect(limiterFor(600)).toBeInstanceOf(MemoryCallLimiter);
    expect(() => new MemoryCallLimiter(0)).toThrow(RangeError);
    expect(loadConfig({}).rateLimitPerMin).toBe(600);
    expect(loadConfig({ KORRAL_RATE_LIMIT_PER_MIN: "0" }).rateLimitPerMin).toBe(0);
    expect(() => loadConfig({ KORRAL_RATE_LIMIT_PER_MIN: "lots" })).toThrow(ConfigError);
    expect(() => loadConfig({ KORRAL_RATE_LIMIT_PER_MIN: "-1" })).toThrow(
      /KORRAL_RATE_LIMIT_PER_MIN/,
    );
  });
});

describe("rate limit through the protocol", () => {
  it("answers a call over the limit with a retryable rate_limited result, and traces it", async () => {
    expect(ERROR_TYPES).toContain("rate_limited");
    const h = await connect({ limiter: new MemoryCallLimiter(2) });
    try {
      expect((await h.call("lookup_sku", { query: "butter" })).isError).toBeFalsy();
      expect((await h.call("lookup_sku", { query: "milk" })).isError).toBeFalsy();
      const limited = await h.call("lookup_sku", { query: "eggs" });
      const error = errorOf(limited);
      expect(error.type).toBe("rate_limited");
      expect(error.retryable).toBe(true);
      const after = (limited.structuredContent as { retry_after_seconds: number })
        .retry_after_seconds;
      expect(after).toBeGreaterThanOrEqual(1);
      expect(after).toBeLessThanOrEqual(60);
      expect(error.message).toContain(`Retry in ${after} s`);
      expect(h.recorder.traces.at(-1)).toMatchObject({
        tool: "lookup_sku",
        status: "error",
        error: expect.stringMatching(/^rate_limited:/),
      });
    } finally {
      await h.close();
    }
  });

  it("audits a rate-limited order as REJECTED, submitting nothing", async () => {
    const storelink = new ScriptedStoreLink();
    const h = await connect({ storelink, limiter: new MemoryCallLimiter(1) });
    try {
      await h.call("lookup_sku", { query: "butter" });
      const order = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
      expect(errorOf(await h.call("create_replenishment_order", order)).type).toBe("rate_limited");
      expect(storelink.calls("createOrder")).toHaveLength(0);
      expect(h.recorder.audits).toMatchObject([
        { outcome: "REJECTED", order_id: null, store_id: "47", quantity: 24, reason: HERO_REASON },
      ]);
      expect(h.recorder.audits[0]?.request_id).toBe(h.recorder.traces.at(-1)?.request_id);
    } finally {
      await h.close();
    }
  });
});

describe("rate limit over HTTP", () => {
  const app = createApp(
    composeDeps({
      keys: new MapKeyProvider(),
      recorder: new MemoryRecorder(),
      limiter: new MemoryCallLimiter(1),
    }),
  );
  const jwt = (claims: object) =>
    `Bearer e30.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.c2ln`;
  const call = (authorization?: string) => {
    const req = request(app)
      .post("/mcp")
      .set("accept", "application/json, text/event-stream")
      .set("content-type", "application/json");
    if (authorization) req.set("authorization", authorization);
    return req.send({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "lookup_sku", arguments: { query: "butter" } },
    });
  };
  const limited = (res: request.Response): boolean =>
    res.status === 200 && res.body.result?.structuredContent?.error?.type === "rate_limited";

  it("limits per verified caller identity, never with a 5xx", async () => {
    const alice = jwt({ email: "agent-a@korral.iam.gserviceaccount.com", sub: "1" });
    const bob = jwt({ sub: "2" });
    expect(limited(await call(alice))).toBe(false);
    expect(limited(await call(alice))).toBe(true);
    expect(limited(await call(bob))).toBe(false);
    expect(limited(await call(bob))).toBe(true);
  });

  it("falls back to the client address without a readable token", async () => {
    expect(limited(await call("Bearer not-a-jwt"))).toBe(false);
    // Same address, no token: the same caller.
    expect(limited(await call())).toBe(true);
  });
});
