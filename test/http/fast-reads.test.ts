import fc from "fast-check";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/http/app.js";
import { fastReadOf } from "../../src/http/fast-reads.js";
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
      {
        storelink: new InMemoryStoreLink(),
        keys,
        recorder,
        orderCap: new OrderCap({ perHour: 0 }),
      },
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

const CASES: [string, Case][] = [
  [
    "stock across stores",
    { name: "get_stock_position", args: { sku: "8847291", store_ids: ["47", "102", "128"] } },
  ],
  [
    "stock with numeric ids",
    { name: "get_stock_position", args: { sku: 8847291, store_ids: [47] } },
  ],
  ["an unknown SKU", { name: "get_stock_position", args: { sku: "0000000", store_ids: ["47"] } }],
  [
    "a SKU not ranged",
    { name: "get_stock_position", args: { sku: "8847291", store_ids: ["999"] } },
  ],
  ["invalid arguments", { name: "get_stock_position", args: { sku: "8847291", store_ids: "47" } }],
  ["no arguments", { name: "lookup_sku" }],
  ["a lookup", { name: "lookup_sku", args: { query: "butter" } }],
  ["a lookup with a string id", { id: "abc", name: "lookup_sku", args: { query: "88" } }],
  [
    "a status read, not found",
    { name: "get_replenishment_status", args: { store_id: "47", order_id: "RPL-47-009" } },
  ],
  [
    "no credentials",
    { name: "get_replenishment_status", args: { store_id: "128", order_id: "RPL-128-001" } },
  ],
  [
    "JSON only in Accept",
    { name: "lookup_sku", args: { query: "x" }, headers: { accept: "application/json" } },
  ],
  [
    "a charset in Content-Type",
    {
      name: "lookup_sku",
      args: { query: "x" },
      headers: { "content-type": "application/json; charset=utf-8" },
    },
  ],
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
  ["a missing Mcp-Name", { name: "lookup_sku", args: { query: "x" }, headers: { "mcp-name": "" } }],
  [
    "a mismatched Mcp-Name",
    { name: "lookup_sku", args: { query: "x" }, headers: { "mcp-name": "get_stock_position" } },
  ],
  [
    "no MCP-Protocol-Version",
    { name: "lookup_sku", args: { query: "x" }, headers: { "mcp-protocol-version": "" } },
  ],
  ["an extra param", { name: "lookup_sku", args: { query: "x" }, params: { requestState: "x" } }],
  [
    "an extra _meta key",
    {
      name: "lookup_sku",
      args: { query: "x" },
      meta: { "io.modelcontextprotocol/logLevel": "info" },
    },
  ],
  ["array arguments", { name: "lookup_sku", args: [1] }],
  ["a fractional id", { id: 1.5, name: "lookup_sku", args: { query: "x" } }],
  [
    "event streams only in Accept",
    { name: "lookup_sku", args: { query: "x" }, headers: { accept: "text/event-stream" } },
  ],
  ["no Accept", { name: "lookup_sku", args: { query: "x" }, headers: { accept: "" } }],
  ["a null id", { id: null, name: "lookup_sku", args: { query: "x" } }],
];

type Shape = (c: Case) => { headers: Record<string, string>; body: unknown };

function requestOf(c: Case): ReturnType<Shape> {
  const headers: Record<string, string> = { ...HEADERS, "mcp-name": c.name, ...(c.headers ?? {}) };
  for (const [k, v] of Object.entries(headers)) if (v === "") delete headers[k];
  const params = {
    name: c.name,
    ...(c.args === undefined ? {} : { arguments: c.args }),
    ...(c.params ?? {}),
    _meta: { ...META, ...(c.meta ?? {}) },
  };
  const id = "id" in c ? c.id : 7;
  return { headers, body: { jsonrpc: "2.0", id, method: "tools/call", params } };
}

/** A 2025 request: no envelope, no MCP headers unless the case sets them. */
function legacyRequestOf(c: Case): ReturnType<Shape> {
  const headers: Record<string, string> = { ...MCP_HEADERS, ...(c.headers ?? {}) };
  for (const [k, v] of Object.entries(headers)) if (v === "") delete headers[k];
  const params = {
    name: c.name,
    ...(c.args === undefined ? {} : { arguments: c.args }),
    ...(c.params ?? {}),
    ...(c.meta === undefined ? {} : { _meta: c.meta }),
  };
  const id = "id" in c ? c.id : 7;
  return { headers, body: { jsonrpc: "2.0", id, method: "tools/call", params } };
}

const LEGACY_CASES: [string, Case][] = [
  [
    "stock across stores",
    { name: "get_stock_position", args: { sku: "8847291", store_ids: ["47", "102", "128"] } },
  ],
  ["an unknown SKU", { name: "get_stock_position", args: { sku: "0000000", store_ids: ["47"] } }],
  ["invalid arguments", { name: "get_stock_position", args: { sku: "8847291", store_ids: "47" } }],
  ["no arguments", { name: "lookup_sku" }],
  ["a lookup with a string id", { id: "abc", name: "lookup_sku", args: { query: "88" } }],
  [
    "no credentials",
    { name: "get_replenishment_status", args: { store_id: "128", order_id: "RPL-128-001" } },
  ],
  [
    "a 2025 MCP-Protocol-Version",
    { name: "lookup_sku", args: { query: "x" }, headers: { "mcp-protocol-version": "2025-06-18" } },
  ],
  [
    "a charset in Content-Type",
    {
      name: "lookup_sku",
      args: { query: "x" },
      headers: { "content-type": "application/json; charset=utf-8" },
    },
  ],
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
  [
    "an unsupported MCP-Protocol-Version",
    { name: "lookup_sku", args: { query: "x" }, headers: { "mcp-protocol-version": "1999-01-01" } },
  ],
  [
    "JSON only in Accept",
    { name: "lookup_sku", args: { query: "x" }, headers: { accept: "application/json" } },
  ],
  [
    "no Content-Type",
    { name: "lookup_sku", args: { query: "x" }, headers: { "content-type": "" } },
  ],
  ["a progress token", { name: "lookup_sku", args: { query: "x" }, meta: { progressToken: 1 } }],
  ["an unknown tool", { name: "no_such_tool", args: {} }],
  ["array arguments", { name: "lookup_sku", args: [1] }],
  ["a fractional id", { id: 1.5, name: "lookup_sku", args: { query: "x" } }],
  ["a null id", { id: null, name: "lookup_sku", args: { query: "x" } }],
];

const LEGACY_FAST = new Set(
  LEGACY_CASES.slice(
    0,
    LEGACY_CASES.findIndex(([name]) => name.startsWith("the write")),
  ).map(([name]) => name),
);

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

/** The cases the fast path takes; every other one goes to the SDK in both apps. */
const FAST = new Set(
  CASES.slice(
    0,
    CASES.findIndex(([name]) => name.startsWith("the write")),
  ).map(([name]) => name),
);

const takes = (shape: Shape, c: Case): boolean => {
  const { headers, body } = shape(c);
  return fastReadOf(body, headers) !== undefined;
};

describe("which requests the fast path takes", () => {
  it.each(CASES)("2026-07-28: %s", (name, c) => {
    expect(takes(requestOf, c)).toBe(FAST.has(name));
  });
  it.each(LEGACY_CASES)("2025: %s", (name, c) => {
    expect(takes(legacyRequestOf, c)).toBe(LEGACY_FAST.has(name));
  });
});

function sameAsReference(c: Case, shape: Shape): Promise<void> {
  const { headers, body } = shape(c);
  return answersAlike(headers, JSON.stringify(body));
}

describe("fast reads answer exactly as the SDK's path does", () => {
  it.each(CASES)("2026-07-28: %s", (_name, c) => sameAsReference(c, requestOf));
  it.each(LEGACY_CASES)("2025: %s", (_name, c) => sameAsReference(c, legacyRequestOf));
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
  const meta = fc
    .record({ version, clientInfo, capabilities })
    .map(({ version: v, clientInfo: ci, capabilities: cc }) => {
      const m: Record<string, unknown> = {};
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
