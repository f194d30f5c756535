import { isSpecType } from "@modelcontextprotocol/server";
import fc from "fast-check";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { eraOf } from "../../src/http/era.js";
import { fastReadOf } from "../../src/http/fast-reads.js";
import type { Era } from "../../src/mcp/server.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { RUNS } from "../helpers/arbitraries.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { MCP_HEADERS, modernHeaders, modernMeta } from "../helpers/rpc.js";

/**
 * The fast path for plain reads of both eras against its reference, the SDK's own path: the same
 * requests to an app with the fast path and to one without, the same answers (status, type and
 * body, timestamps aside), the same trace lines. Requests the fast path must not take (the write,
 * odd headers, extra params) are answered identically too, since both send them to the SDK.
 */

function app(fast: boolean) {
  const recorder = new MemoryRecorder();
  const keys = new MapKeyProvider();
  delete keys.keys["128"];
  return {
    recorder,
    app: createApp(
      composeDeps({
        storelink: new InMemoryStoreLink(),
        keys,
        recorder,
        orderCap: new OrderCap({ perHour: 0 }),
      }),
      { fastReads: fast },
    ),
  };
}

const META = modernMeta();
const HEADERS = modernHeaders("tools/call");

interface Case {
  id?: unknown;
  name: string;
  args?: unknown;
  headers?: Record<string, string>;
  params?: Record<string, unknown>;
  meta?: Record<string, unknown>;
}

type Cases = [string, Case][];

const X = { name: "lookup_sku", args: { query: "x" } };

/** Cases both eras share: plain reads the fast path takes, then requests it must leave alone. */
const TRACE_META = {
  traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
  tracestate: "vendor=1",
  baggage: "tenant=korral",
};

const BOTH: { fast: Cases; slow: Cases } = {
  fast: [
    [
      "stock across stores",
      { name: "get_stock_position", args: { sku: "8847291", store_ids: ["47", "102", "128"] } },
    ],
    ["an unknown SKU", { name: "get_stock_position", args: { sku: "0000000", store_ids: ["47"] } }],
    [
      "invalid arguments",
      { name: "get_stock_position", args: { sku: "8847291", store_ids: "47" } },
    ],
    ["no arguments", { name: "lookup_sku" }],
    ["a lookup with a string id", { id: "abc", name: "lookup_sku", args: { query: "88" } }],
    [
      "no credentials",
      { name: "get_replenishment_status", args: { store_id: "128", order_id: "RPL-128-001" } },
    ],
    [
      "a charset in Content-Type",
      { ...X, headers: { "content-type": "application/json; charset=utf-8" } },
    ],
    // A traced agent sends the W3C trace context in _meta (the MCP semantic conventions).
    ["trace keys in _meta", { ...X, meta: TRACE_META }],
  ],
  slow: [
    ["a trace key that is not a string", { ...X, meta: { traceparent: 1 } }],
    [
      "the write (never fast)",
      {
        name: "create_replenishment_order",
        args: {
          store_id: "47",
          sku: "8847291",
          quantity: 1,
          reason: "Gap of 8 at store 47. Buyer approved 1.",
        },
      },
    ],
    ["array arguments", { name: "lookup_sku", args: [1] }],
    ["a fractional id", { id: 1.5, ...X }],
    ["a null id", { id: null, ...X }],
    ["event streams only in Accept", { ...X, headers: { accept: "text/event-stream" } }],
    ["no Accept", { ...X, headers: { accept: "" } }],
  ],
};

/** Each era's cases: the shared ones and its own; `fast` are those the fast path takes. */
const ERA_CASES: Record<Era, { fast: Cases; slow: Cases }> = {
  modern: {
    fast: [
      ...BOTH.fast,
      [
        "stock with numeric ids",
        { name: "get_stock_position", args: { sku: 8847291, store_ids: [47] } },
      ],
      [
        "a SKU not ranged",
        { name: "get_stock_position", args: { sku: "8847291", store_ids: ["999"] } },
      ],
      ["a lookup", { name: "lookup_sku", args: { query: "butter" } }],
      [
        "a status read, not found",
        { name: "get_replenishment_status", args: { store_id: "47", order_id: "RPL-47-009" } },
      ],
      ["JSON only in Accept", { ...X, headers: { accept: "application/json" } }],
    ],
    slow: [
      ...BOTH.slow,
      ["a missing Mcp-Name", { ...X, headers: { "mcp-name": "" } }],
      ["a mismatched Mcp-Name", { ...X, headers: { "mcp-name": "get_stock_position" } }],
      ["no MCP-Protocol-Version", { ...X, headers: { "mcp-protocol-version": "" } }],
      ["an extra param", { ...X, params: { requestState: "x" } }],
      ["an extra _meta key", { ...X, meta: { "io.modelcontextprotocol/logLevel": "info" } }],
    ],
  },
  legacy: {
    fast: [
      ...BOTH.fast,
      ["a 2025 MCP-Protocol-Version", { ...X, headers: { "mcp-protocol-version": "2025-06-18" } }],
    ],
    slow: [
      ...BOTH.slow,
      [
        "an unsupported MCP-Protocol-Version",
        { ...X, headers: { "mcp-protocol-version": "1999-01-01" } },
      ],
      ["JSON only in Accept", { ...X, headers: { accept: "application/json" } }],
      ["no Content-Type", { ...X, headers: { "content-type": "" } }],
      ["a progress token", { ...X, meta: { progressToken: 1 } }],
      ["an unknown tool", { name: "no_such_tool", args: {} }],
    ],
  },
};

/**
 * The request of a case in `era`: a 2026-07-28 one carries the envelope and the MCP headers, a
 * 2025 one neither unless the case sets them. Headers set to "" are left out.
 */
function requestIn(era: Era, c: Case): { headers: Record<string, string>; body: unknown } {
  const base = era === "modern" ? { ...HEADERS, "mcp-name": c.name } : MCP_HEADERS;
  const headers = Object.fromEntries(
    Object.entries({ ...base, ...(c.headers ?? {}) }).filter(([, v]) => v !== ""),
  );
  const meta =
    era === "modern" ? { ...META, ...(c.meta ?? {}) } : c.meta === undefined ? undefined : c.meta;
  const params = {
    name: c.name,
    ...(c.args === undefined ? {} : { arguments: c.args }),
    ...(c.params ?? {}),
    ...(meta === undefined ? {} : { _meta: meta }),
  };
  const id = "id" in c ? c.id : 7;
  return { headers, body: { jsonrpc: "2.0", id, method: "tools/call", params } };
}

/**
 * One raw request to an app with the fast path and to one without: the same answer (status, type
 * and body, timestamps aside) and the same trace lines. Headers set to "" are left out.
 */
async function answersAlike(headers: Record<string, string>, text: string): Promise<void> {
  const sent = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== ""));
  const answer = async ({ app: target, recorder }: ReturnType<typeof app>) => {
    const res = await request(target).post("/mcp").set(sent).send(text);
    return {
      status: res.status,
      type: res.headers["content-type"],
      body: res.text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, "<time>"),
      traces: recorder.traces.map((t) => [t.tool, t.status, t.error]),
    };
  };
  expect(await answer(app(true))).toEqual(await answer(app(false)));
}

const LABEL: Record<Era, string> = { modern: "2026-07-28", legacy: "2025" };

describe.each(["modern", "legacy"] as const)("fast reads, %s era", (era) => {
  const { fast, slow } = ERA_CASES[era];
  const taken = new Set(fast.map(([name]) => name));

  it.each([...fast, ...slow])(`${LABEL[era]}, taken or not: %s`, (name, c) => {
    const { headers, body } = requestIn(era, c);
    expect(fastReadOf(body, headers) !== undefined).toBe(taken.has(name));
  });

  it.each([...fast, ...slow])(`${LABEL[era]}, answered as the SDK's path: %s`, (_name, c) => {
    const { headers, body } = requestIn(era, c);
    return answersAlike(headers, JSON.stringify(body));
  });
});

/**
 * The same reference, over requests drawn from a generator rather than a hand-kept list: every
 * envelope (protocol version, clientInfo, clientCapabilities, present or not, of any type),
 * params, headers and ids. Whatever the fast path does with one, the answer and the trace are
 * the SDK path's.
 */
describe("fast reads against the SDK's path, on generated requests", () => {
  const P = "io.modelcontextprotocol/";
  const absent = fc.constant(undefined);
  const junk = fc.oneof(
    fc.constant(null),
    fc.integer(),
    fc.string({ maxLength: 4 }),
    fc.constant([]),
  );
  const clientInfo = fc.oneof(
    absent,
    junk,
    fc.constant({ name: "t", version: "1" }),
    fc.constant({ name: "t" }),
    fc.constant({ name: 1, version: "1" }),
    fc.constant({ version: "1" }),
    fc.constant({ name: "t", version: "1", title: "T" }),
    fc.record({ name: fc.string({ unit: "binary" }), version: fc.string({ unit: "binary" }) }),
  );
  const capabilities = fc.oneof(
    absent,
    junk,
    fc.constant({}),
    fc.constant({ elicitation: { form: {} } }),
    fc.constant({ elicitation: 5 }),
    fc.constant({ roots: { listChanged: true } }),
    fc.constant({ roots: { listChanged: "yes" } }),
    fc.constant({ sampling: {}, experimental: { x: {} } }),
  );
  const version = fc.oneof(
    fc.constant("2026-07-28"),
    fc.constant("2025-06-18"),
    fc.constant(5),
    absent,
  );
  const trace = fc.oneof(absent, fc.constant(TRACE_META), fc.constant({ traceparent: 7 }));
  const meta = fc
    .record({ version, clientInfo, capabilities, trace })
    .map(({ version: v, clientInfo: ci, capabilities: cc, trace: t }) => {
      const m: Record<string, unknown> = { ...(t ?? {}) };
      if (v !== undefined) m[`${P}protocolVersion`] = v;
      if (ci !== undefined) m[`${P}clientInfo`] = ci;
      if (cc !== undefined) m[`${P}clientCapabilities`] = cc;
      return m;
    });
  const call = fc.oneof(
    fc.record({
      name: fc.constant("lookup_sku"),
      args: fc.oneof(fc.constant({ query: "butter" }), fc.constant({ query: 5 }), absent),
    }),
    fc.record({
      name: fc.constant("get_stock_position"),
      args: fc.oneof(
        fc.constant({ sku: "8847291", store_ids: ["47", "128"] }),
        fc.constant({ sku: "8847291" }),
      ),
    }),
  );
  const id = fc.oneof(
    fc.integer({ min: -5, max: 1e6 }),
    fc.string({ minLength: 1, maxLength: 5 }),
    fc.constant(1.5),
    fc.constant(null),
  );
  const headers = fc.record({
    "mcp-protocol-version": fc.oneof(fc.constant("2026-07-28"), fc.constant("")),
    accept: fc.oneof(
      fc.constant("application/json, text/event-stream"),
      fc.constant("application/json"),
    ),
  });

  const legacyHeaders = fc.record({
    "mcp-protocol-version": fc.constantFrom("", "2025-06-18", "2025-03-26", "2026-07-28", "x"),
    "mcp-method": fc.constantFrom("", "tools/call"),
    accept: fc.constantFrom("application/json, text/event-stream", "application/json", ""),
    "content-type": fc.constantFrom("application/json", "text/plain"),
  });
  const legacyParamsExtra = fc.oneof(
    fc.constant({}),
    fc.constant({ _meta: { progressToken: 1 } }),
    fc.constant({ _meta: null }),
    fc.constant({ _meta: TRACE_META }),
    fc.constant({ _meta: { traceparent: TRACE_META.traceparent, progressToken: 1 } }),
    fc.constant({ extra: true }),
  );

  it("answers and traces every generated 2025 read as the SDK's path does", async () => {
    await fc.assert(
      fc.asyncProperty(call, id, legacyHeaders, legacyParamsExtra, async (c, i, h, extra) => {
        const params = {
          name: c.name,
          ...(c.args === undefined ? {} : { arguments: c.args }),
          ...extra,
        };
        const text = JSON.stringify({ jsonrpc: "2.0", id: i, method: "tools/call", params });
        await answersAlike({ ...h }, text);
      }),
      RUNS,
    );
  }, 120_000);

  it("answers and traces every generated read as the SDK's path does", async () => {
    await fc.assert(
      fc.asyncProperty(meta, call, id, headers, async (m, c, i, h) => {
        const params = {
          name: c.name,
          ...(c.args === undefined ? {} : { arguments: c.args }),
          _meta: m,
        };
        const text = JSON.stringify({ jsonrpc: "2.0", id: i, method: "tools/call", params });
        await answersAlike({ ...HEADERS, "mcp-name": c.name, ...h }, text);
      }),
      RUNS,
    );
  }, 120_000);
});

/**
 * The fast path skips the SDK's spec types and classifier for a plain envelope (a clientInfo of
 * a name and a version, or none, and `{}` capabilities): that is sound only while the SDK accepts
 * every such envelope, on every read the fast path takes. Drawn over any strings (lone surrogates
 * included), trace keys and ids.
 */
describe("a plain 2026-07-28 envelope is one the SDK accepts", () => {
  const P = "io.modelcontextprotocol/";
  it("its spec types and classifier agree with the fast path's shortcut", () => {
    const text = fc.string({ unit: "binary", maxLength: 40 });
    const info = fc.oneof(fc.constant(undefined), fc.record({ name: text, version: text }));
    const trace = fc.oneof(
      fc.constant({}),
      fc.constant(TRACE_META),
      fc.record({ traceparent: text }, { requiredKeys: [] }),
    );
    const id = fc.oneof(fc.string({ unit: "binary", maxLength: 8 }), fc.maxSafeInteger());
    const name = fc.constantFrom("lookup_sku", "get_stock_position", "get_replenishment_status");
    fc.assert(
      fc.property(info, trace, id, name, (ci, t, i, n) => {
        const meta: Record<string, unknown> = {
          ...t,
          [`${P}protocolVersion`]: "2026-07-28",
          [`${P}clientCapabilities`]: {},
          ...(ci === undefined ? {} : { [`${P}clientInfo`]: ci }),
        };
        const body = JSON.parse(
          JSON.stringify({
            jsonrpc: "2.0",
            id: i,
            method: "tools/call",
            params: { name: n, arguments: {}, _meta: meta },
          }),
        );
        const headers = { ...HEADERS, "mcp-name": n };
        expect(fastReadOf(body, headers)?.era).toBe("modern");
        expect(eraOf(body, headers)).toBe("modern");
        expect(isSpecType.ClientCapabilities({})).toBe(true);
        if (ci !== undefined)
          expect(isSpecType.Implementation(body.params._meta[`${P}clientInfo`])).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
