import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toToolError } from "../../src/errors.js";
import { ApiKey } from "../../src/keys/api-key.js";
import type { StoreLinkClient } from "../../src/storelink/client.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { RUNS, validOrder } from "../helpers/arbitraries.js";
import { connect, errorOf, type Harness } from "../helpers/harness.js";
import {
  type RecordingStoreLink,
  startRecordingStoreLink,
} from "../helpers/recording-storelink.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * An id must never change the StoreLink route. `encodeURIComponent` leaves `.`
 * alone and URL normalisation resolves dot segments, so `sku: ".."` used to make StoreLink receive
 * GET /v1/ (and the model an `internal` error, the write an UNCERTAIN audit line). Every id is now
 * checked by one rule, in the tool schemas and in both StoreLink clients: a hostile id is refused
 * as invalid_arguments, identically for both, and the HTTP StoreLink receives no request at all.
 */

const key47 = new ApiKey(SEED_ACCEPTED_KEYS["47"] as string);

let recording: RecordingStoreLink;
let viaHttp: Harness;
let inMemory: Harness;
let scripted: ScriptedStoreLink;

beforeAll(async () => {
  recording = await startRecordingStoreLink();
  viaHttp = await connect({ storelink: new HttpStoreLinkClient({ baseUrl: recording.url }) });
  scripted = new ScriptedStoreLink();
  inMemory = await connect({ storelink: scripted });
});
afterAll(async () => {
  await viaHttp.close();
  await inMemory.close();
  await recording.close();
});

/** Ids that would change the route (dot segments, separators, escapes) or carry control text. */
const HOSTILE = [
  ".",
  "..",
  "...",
  "../..",
  "./47",
  "47/..",
  "../47",
  "47/../63",
  "a/b",
  "a\\b",
  "..\\..",
  "%2e%2e",
  "%2E",
  "47%2F..",
  "47?x=1",
  "47#x",
  "47;x",
  "4 7",
  "\u0000",
  "47\u0000",
  "4\n7",
  "4\u20287",
  "4\u00857",
  "\uff0e\uff0e",
  "\u3002",
  ".47",
  "47.",
  "4.7",
  "-",
  "-47",
  "47_",
  "",
  "   ",
];

type Call = [tool: string, args: Record<string, unknown>, field: string];

/** Every place an id from the model reaches StoreLink, with `id` in that place. */
const callsWith = (id: string): Call[] => [
  ["get_stock_position", { sku: id, store_ids: ["47"] }, "sku"],
  ["get_stock_position", { sku: "8847291", store_ids: ["47", id] }, "store_ids.1"],
  ["create_replenishment_order", { ...validOrder(), store_id: id }, "store_id"],
  ["create_replenishment_order", { ...validOrder(), sku: id }, "sku"],
  ["get_replenishment_status", { store_id: id, order_id: "RPL-47-001" }, "store_id"],
  ["get_replenishment_status", { store_id: "47", order_id: id }, "order_id"],
];

/** Calls the tool on both StoreLinks and checks the refusal is invalid_arguments, sent nowhere. */
async function expectRefusedOnBoth([tool, args, field]: Call): Promise<void> {
  const sentBefore = recording.requests.length;
  const scriptedBefore = scripted.sent.length;
  const auditsBefore = viaHttp.recorder.audits.length + inMemory.recorder.audits.length;
  const http: CallToolResult = await viaHttp.call(tool, args);
  const memory: CallToolResult = await inMemory.call(tool, args);
  const error = errorOf(http);
  expect(error.type, `${tool} ${JSON.stringify(args)}`).toBe("invalid_arguments");
  expect(error.retryable).toBe(false);
  expect(error.message).toContain(`${field}:`);
  // Identical answers from both StoreLinks: the rule does not depend on which one is behind.
  expect(memory).toEqual(http);
  expect(recording.requests.slice(sentBefore)).toEqual([]);
  expect(scripted.sent.slice(scriptedBefore)).toEqual([]);
  if (tool === "create_replenishment_order") {
    const audits = [...viaHttp.recorder.audits, ...inMemory.recorder.audits].slice(auditsBefore);
    // A refusal before StoreLink is REJECTED, never UNCERTAIN: nothing was sent.
    for (const audit of audits) expect(audit.outcome).toBe("REJECTED");
  }
}

describe("ids cannot change the StoreLink route (through the SDK client)", () => {
  it("the seeded ids still work over HTTP: the rule admits them", async () => {
    const sentBefore = recording.requests.length;
    const made = await viaHttp.call("create_replenishment_order", validOrder());
    expect(made.isError).toBeFalsy();
    const orderId = (made.structuredContent as { order_id: string }).order_id;
    expect(orderId).toMatch(/^RPL-47-\d{3}$/);
    const read = await viaHttp.call("get_replenishment_status", {
      store_id: "47",
      order_id: orderId,
    });
    expect(read.isError).toBeFalsy();
    expect(recording.requests.slice(sentBefore).map((r) => r.target)).toContain(
      `/v1/stores/47/orders/${orderId}`,
    );
  });

  for (const id of HOSTILE) {
    it(`refuses ${JSON.stringify(id)} everywhere an id goes, sending nothing`, async () => {
      for (const call of callsWith(id)) await expectRefusedOnBoth(call);
    });
  }

  it("property: generated hostile ids are refused identically and never sent", async () => {
    const safe = fc.constantFrom(..."aZ09-_");
    const routing = fc.constantFrom(
      ".",
      "/",
      "\\",
      "%",
      "?",
      "#",
      ";",
      ":",
      "@",
      "&",
      "+",
      "=",
      " ",
      "\u0000",
      "\u001f",
      "\u007f",
      "\n",
      "\t",
      "\u0085",
      "\u2028",
      "\u202e",
      "\uff0e",
      "\uff0f",
      "\u2215",
    );
    const hostileId = fc
      .oneof(
        fc
          .tuple(
            fc.array(fc.constantFrom(".", "..", "a", "47"), { minLength: 1, maxLength: 4 }),
            fc.constantFrom("/", "\\", ""),
          )
          .map(([parts, separator]) => parts.join(separator)),
        fc
          .tuple(
            fc.array(safe, { maxLength: 4 }),
            routing,
            fc.array(fc.oneof(safe, routing), { maxLength: 4 }),
          )
          .map(([head, bad, tail]) => `${head.join("")}${bad}${tail.join("")}`),
      )
      // Independent of the implementation: after trimming, something other than a letter,
      // digit, - or _ is left, so the id could name another route or carry control text.
      .filter((id) => /[^A-Za-z0-9_-]/.test(id.trim()));
    const call = fc.tuple(hostileId, fc.integer({ min: 0, max: 5 }));
    await fc.assert(
      fc.asyncProperty(call, async ([id, which]) => {
        await expectRefusedOnBoth(callsWith(id)[which] as Call);
      }),
      RUNS,
    );
  });
});

describe("the StoreLink clients refuse hostile ids themselves (defence in depth)", () => {
  /** The outcome of a direct client call: the refusal's text, or "sent". */
  async function outcome(call: () => Promise<unknown>): Promise<string> {
    try {
      await call();
      return "answered";
    } catch (error) {
      // As a tool reports it (errors.ts): the caller's mistake, never internal.
      const reported = toToolError(error, "req_test");
      if (reported.type === "invalid_arguments") return `refused: ${reported.message}`;
      return `failed: ${error instanceof Error ? error.name : String(error)}`;
    }
  }

  const direct = (client: StoreLinkClient, id: string) => [
    () => client.getSku(id),
    () => client.getStock(id, "8847291", key47),
    () => client.getStock("47", id, key47),
    () => client.getOrder(id, "RPL-47-001", key47),
    () => client.getOrder("47", id, key47),
    () => client.createOrder({ ...validOrder(), store_id: id }, key47),
    () => client.createOrder({ ...validOrder(), sku: id }, key47),
  ];

  it("both clients refuse the same ids with the same invalid_arguments error, sending nothing", async () => {
    const http = new HttpStoreLinkClient({ baseUrl: recording.url });
    const memory = new InMemoryStoreLink();
    // Untrimmed: a caller that skipped the schema does not get " 47" trimmed for it.
    for (const id of [...HOSTILE, " 47", "47 ", "x".repeat(65)]) {
      const sentBefore = recording.requests.length;
      const viaHttpClient = await Promise.all(direct(http, id).map((call) => outcome(call)));
      const viaMemory = await Promise.all(direct(memory, id).map((call) => outcome(call)));
      for (const result of viaHttpClient) expect(result, JSON.stringify(id)).toMatch(/^refused: /);
      expect(viaMemory).toEqual(viaHttpClient);
      expect(recording.requests.slice(sentBefore)).toEqual([]);
    }
  });

  it("property: whatever the id, the request goes to exactly the route it names, or nowhere", async () => {
    const http = new HttpStoreLinkClient({ baseUrl: recording.url });
    const memory = new InMemoryStoreLink();
    const anyId = fc.oneof(
      // The dot segments themselves: the only ids encoding alone lets through to another route.
      fc.constantFrom(".", "..", "%2e%2e", "../", "./orders"),
      fc.string({ maxLength: 12 }),
      fc.string({ unit: "grapheme", maxLength: 6 }),
      fc
        .array(fc.constantFrom(".", "..", "/", "\\", "%2e", "%2f", "a", "47", "-", "_"), {
          maxLength: 6,
        })
        .map((parts) => parts.join("")),
    );
    await fc.assert(
      fc.asyncProperty(anyId, async (id) => {
        const sentBefore = recording.requests.length;
        const overHttp = await outcome(() => http.getOrder("47", id, key47));
        const sent = recording.requests.slice(sentBefore);
        if (overHttp.startsWith("refused: ")) {
          expect(sent).toEqual([]);
        } else {
          // Sent: one request, and its last path segment decodes to exactly the id.
          expect(sent).toHaveLength(1);
          const target = sent[0]?.target ?? "";
          const prefix = "/v1/stores/47/orders/";
          expect(target.startsWith(prefix)).toBe(true);
          expect(decodeURIComponent(target.slice(prefix.length))).toBe(id);
        }
        // The in-memory StoreLink refuses exactly the same ids.
        const inProcess = await outcome(() => memory.getOrder("47", id, key47));
        expect(inProcess.startsWith("refused: ")).toBe(overHttp.startsWith("refused: "));
      }),
      RUNS,
    );
  });
});

describe("lookup_sku's free-text query is encoded, not routed", () => {
  it("a query full of URL syntax arrives as one q parameter, exactly as typed", async () => {
    const query = "a/../b?x=1&q=2#frag %2e. +;";
    const sentBefore = recording.requests.length;
    const http = await viaHttp.call("lookup_sku", { query });
    const memory = await inMemory.call("lookup_sku", { query });
    expect(http.isError).toBeFalsy();
    expect(memory).toEqual(http);
    const sent = recording.requests.slice(sentBefore);
    expect(sent).toHaveLength(1);
    const url = new URL(sent[0]?.target ?? "", "http://storelink.test");
    expect(url.pathname).toBe("/v1/skus");
    expect(url.searchParams.getAll("q")).toEqual([query]);
  });

  it("a lone surrogate in a query is not an internal error over HTTP", async () => {
    // encodeURIComponent throws URIError on it; the client now sends U+FFFD instead.
    const query = "butter\ud800";
    const http = await viaHttp.call("lookup_sku", { query });
    const memory = await inMemory.call("lookup_sku", { query });
    expect(http.isError).toBeFalsy();
    expect(memory).toEqual(http);
  });
});

describe("the emulator refuses ids outside the rule from clients that do not check them", () => {
  it("answers 400 invalid_request (never 500, which reads as 'may have landed') and creates nothing", async () => {
    const storelink = new InMemoryStoreLink();
    const emulator = await startRecordingStoreLink(storelink);
    try {
      const headers = { "X-StoreLink-Key": SEED_ACCEPTED_KEYS["47"] as string };
      const reads = [
        "/v1/skus/a%20b",
        "/v1/stores/47/stock/8847291%00",
        "/v1/stores/4%2F7/orders/x",
      ];
      for (const path of reads) {
        const res = await fetch(`${emulator.url}${path}`, { headers });
        expect(res.status, path).toBe(400);
        expect(await res.json()).toMatchObject({ error: { code: "invalid_request" } });
      }
      const write = await fetch(`${emulator.url}/v1/stores/47/orders`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ ...validOrder(), store_id: undefined, sku: "../8847291" }),
      });
      expect(write.status).toBe(400);
      // Nothing was created: the first valid order is still number 001.
      const created = await storelink.createOrder(validOrder(), key47);
      expect(created.order.order_id).toBe("RPL-47-001");
    } finally {
      await emulator.close();
    }
  });
});
