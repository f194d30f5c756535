import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import type { ApiKey } from "../../src/keys/api-key.js";
import { createRecorder } from "../../src/logging/recorder.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { NO_LIMIT } from "../../src/policy/rate-limit.js";
import { stateSigner } from "../../src/policy/request-state.js";
import type {
  CreatedOrder,
  FenceResult,
  Order,
  OrderRequest,
  OrderRequestRecord,
  Sku,
  StockReading,
  Store,
} from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { filesUnder } from "../helpers/canary.js";
import { connect, HERO_REASON, MapKeyProvider } from "../helpers/harness.js";
import { listen } from "../helpers/listen.js";
import { captureOpsLog } from "../helpers/ops-log.js";

/**
 * A StoreLink that echoes the key it was sent, in every encoding an echo takes (raw, percent-
 * escaped, every byte as %XX, hex, base64 and base64url with the key at byte offsets 0, 1 and 2
 * of a longer blob, each as is, upper-cased and lower-cased), into every text field of every
 * answer, appended to the true value and in its place. On both eras (a 2025-06-18 client in
 * process; a 2026-07-28 client over HTTP, the buyer accepting), no form of the key reaches a
 * tool result (content and structuredContent), trace.jsonl, audit.log, the ops log or stderr.
 *
 * Keyless answers (directory, catalogue) echo the last key this StoreLink was sent: a StoreLink
 * only knows what it has seen, so the run starts with one keyed read.
 */

const KEY = `slk_47_Canary${randomBytes(12).toString("hex")}`;

type Encoding = { name: string; encode(key: string): string; core(key: string): string };

/** Characters of base64(o bytes, key, ...) made of the key's bits alone: found in any such blob. */
const b64Core = (key: string, offset: number, encoding: "base64" | "base64url") =>
  Buffer.concat([Buffer.alloc(offset, 0x20), Buffer.from(key)])
    .toString(encoding)
    .replace(/=+$/, "")
    .slice(4, -4);

const ENCODINGS: Encoding[] = [
  { name: "raw", encode: (k) => k, core: (k) => k },
  { name: "percent", encode: (k) => encodeURIComponent(k), core: (k) => encodeURIComponent(k) },
  {
    name: "percent-every-byte",
    encode: (k) => Buffer.from(k).toString("hex").replace(/../g, "%$&"),
    core: (k) => Buffer.from(k).toString("hex").replace(/../g, "%$&"),
  },
  {
    name: "hex",
    encode: (k) => Buffer.from(k).toString("hex"),
    core: (k) => Buffer.from(k).toString("hex"),
  },
  ...[0, 1, 2].flatMap((offset) =>
    (["base64", "base64url"] as const).map((encoding) => ({
      name: `${encoding}@${offset}`,
      encode: (k: string) =>
        Buffer.concat([randomBytes(offset), Buffer.from(k), randomBytes(2)]).toString(encoding),
      core: (k: string) => b64Core(k, offset, encoding),
    })),
  ),
];
const CASES = [
  { name: "as is", apply: (t: string) => t },
  { name: "upper", apply: (t: string) => t.toUpperCase() },
  { name: "lower", apply: (t: string) => t.toLowerCase() },
];

/** Every text field of every StoreLink answer. */
const FIELDS = {
  stores: ["store_id", "name"],
  sku: ["sku", "name", "category", "unit"],
  stock: ["store_id", "sku", "as_of"],
  created: ["order_id", "store_id", "sku", "reason", "status", "created_at"],
  order: ["order_id", "store_id", "sku", "reason", "status", "created_at"],
} as const;
type Answer = keyof typeof FIELDS;

interface Echo {
  answer: Answer;
  field: string;
  place: "appended" | "instead";
  text: (key: string) => string;
}

/** Seeded StoreLink whose answers carry the key it was sent, where `echo` says. */
class EchoingStoreLink extends InMemoryStoreLink {
  echo: Echo | undefined;
  injected = 0;
  #lastKey: string | undefined;

  #apply<T extends object>(answer: Answer, value: T, key: string | undefined): T {
    const echo = this.echo;
    if (!echo || echo.answer !== answer || key === undefined) return value;
    const record = value as Record<string, unknown>;
    if (!(echo.field in record)) return value;
    this.injected += 1;
    const text = echo.text(key);
    const original = String(record[echo.field]);
    return { ...value, [echo.field]: echo.place === "instead" ? text : `${original} ${text}` };
  }
  #seen(key: ApiKey): string {
    this.#lastKey = key.reveal();
    return this.#lastKey;
  }
  override async listStores(): Promise<Store[]> {
    return (await super.listStores()).map((s) =>
      s.store_id === "47" ? this.#apply("stores", s, this.#lastKey) : s,
    );
  }
  override async lookupSku(query: string): Promise<Sku[]> {
    return (await super.lookupSku(query)).map((s) => this.#apply("sku", s, this.#lastKey));
  }
  override async getSku(sku: string): Promise<Sku> {
    return this.#apply("sku", await super.getSku(sku), this.#lastKey);
  }
  override async getStock(storeId: string, sku: string, key: ApiKey): Promise<StockReading> {
    return this.#apply("stock", await super.getStock(storeId, sku, key), this.#seen(key));
  }
  override async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    const created = await super.createOrder(request, key);
    return { ...created, order: this.#apply("created", created.order, this.#seen(key)) };
  }
  override async getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order> {
    return this.#apply("order", await super.getOrder(storeId, orderId, key), this.#seen(key));
  }
  // The order a read by key returns is the create's answer again: the same echo.
  override async getOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<OrderRequestRecord> {
    const record = await super.getOrderRequest(storeId, idempotencyKey, key);
    const seen = this.#seen(key);
    if (record.state !== "created") return record;
    return { ...record, order: this.#apply("created", record.order, seen) };
  }
  override async fenceOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<FenceResult> {
    const result = await super.fenceOrderRequest(storeId, idempotencyKey, key);
    const seen = this.#seen(key);
    if (result.state !== "created") return result;
    return { ...result, order: this.#apply("created", result.order, seen) };
  }
}

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

/** The tool calls that read each answer. */
const CALLS: Record<Answer, { name: string; arguments: Record<string, unknown> }[]> = {
  stores: [
    { name: "get_stock_position", arguments: { sku: "8847291", store_ids: ["47"] } },
    { name: "get_replenishment_status", arguments: { store_id: "47", order_id: "RPL-47-001" } },
    { name: "create_replenishment_order", arguments: ORDER },
  ],
  sku: [
    { name: "lookup_sku", arguments: { query: "butter" } },
    { name: "get_stock_position", arguments: { sku: "8847291", store_ids: ["47"] } },
    { name: "create_replenishment_order", arguments: ORDER },
  ],
  stock: [
    { name: "get_stock_position", arguments: { sku: "8847291", store_ids: ["47"] } },
    // A preview, and a write (its confirmation quotes the live reading), read stock too.
    { name: "create_replenishment_order", arguments: { ...ORDER, dry_run: true } },
    { name: "create_replenishment_order", arguments: ORDER },
  ],
  created: [{ name: "create_replenishment_order", arguments: ORDER }],
  order: [
    { name: "get_replenishment_status", arguments: { store_id: "47", order_id: "RPL-47-001" } },
  ],
};

/**
 * Free text kept (scrubbed) or not read at all: every call reading it still answers. An echo in
 * any other field puts the answer off the contract: every call reading it fails.
 */
const ANSWERS_DESPITE_ECHO = new Set([
  "stores.name",
  "sku.name",
  "sku.category",
  "created.reason",
  "order.reason",
]);

const ECHOES: (Echo & { label: string })[] = (Object.keys(FIELDS) as Answer[]).flatMap((answer) =>
  FIELDS[answer].flatMap((field) =>
    (["appended", "instead"] as const).flatMap((place) =>
      ENCODINGS.flatMap((encoding) =>
        CASES.map((c) => ({
          answer,
          field,
          place,
          text: (key: string) => c.apply(encoding.encode(key)),
          label: `${answer}.${field} ${place}, ${encoding.name} ${c.name}`,
        })),
      ),
    ),
  ),
);

/**
 * For the 2026-07-28 run (slower: HTTP, and two rounds per create), one place per field: appended
 * to free text, instead of every other value. Below the protocol both eras run the same code.
 */
const ONE_PLACE = ECHOES.filter(
  (e) => (e.place === "appended") === ANSWERS_DESPITE_ECHO.has(`${e.answer}.${e.field}`),
);

/** The forms of the key found in `text`, ignoring case as the echoes vary it. */
const leaksIn = (where: string, text: string): string[] => {
  const lower = text.toLowerCase();
  return ENCODINGS.filter((e) => lower.includes(e.core(KEY).toLowerCase())).map(
    (e) => `${where}: ${e.name}`,
  );
};

type Call = (
  name: string,
  args: Record<string, unknown>,
) => Promise<{ isError?: boolean; structuredContent?: unknown }>;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-echo-enc-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Open = (
  storelink: EchoingStoreLink,
  recorder: ReturnType<typeof createRecorder>,
) => Promise<{ call: Call; close(): Promise<void> }>;

/** The order the status reads, and one keyed read: now StoreLink has seen the key. */
async function prepare(call: Call): Promise<void> {
  const first = await call("create_replenishment_order", ORDER);
  expect(first.isError, JSON.stringify(first)).toBeFalsy();
  expect(await call("get_stock_position", CALLS.stock[0]?.arguments ?? {})).not.toHaveProperty(
    "isError",
    true,
  );
}

/** Drives one echo's calls; records their results and anything but the echo's fate. */
async function driveEcho(
  storelink: EchoingStoreLink,
  call: Call,
  echo: Echo & { label: string },
  outputs: unknown[],
  wrong: string[],
): Promise<void> {
  storelink.echo = echo;
  const before = storelink.injected;
  const results = [];
  /** Whether each call was handed the echo (a 2025 write reads no stock, for one). */
  const echoed: boolean[] = [];
  for (const c of CALLS[echo.answer]) {
    const at = storelink.injected;
    results.push(await call(c.name, c.arguments));
    echoed.push(storelink.injected > at);
  }
  outputs.push(results);
  if (storelink.injected === before) wrong.push(`${echo.label}: never echoed`);
  // Every call handed the echo: answered despite a free-text echo, else refused.
  const answers = ANSWERS_DESPITE_ECHO.has(`${echo.answer}.${echo.field}`);
  results.forEach((result, i) => {
    if (echoed[i] && (result.isError === true) === answers) {
      wrong.push(`${echo.label}, call ${i}: isError ${result.isError}`);
    }
  });
  if (echo.answer === "created" && !answers) {
    // Off the contract in the create's answer and in every read by key: the outcome stays unknown.
    const type = (results[0]?.structuredContent as { error?: { type?: string } })?.error?.type;
    if (type !== "outcome_unknown") wrong.push(`${echo.label}: ${type}, not outcome_unknown`);
  }
}

/** How many echoes of a create run side by side, each on its own StoreLink and client. */
const SIDE_BY_SIDE = 30;

/**
 * Runs every echo through `open`'s client; returns what must hold no key, and each echo's fate.
 * An echo in a create's answer makes the write ask StoreLink by key for up to ~2 s before it
 * answers UNCERTAIN: those run side by side, each on a StoreLink of its own (the echo is its
 * state); the rest one after another on one.
 */
async function runEra(era: string, echoes: readonly (Echo & { label: string })[], open: Open) {
  const fresh = () => new EchoingStoreLink({ acceptedKeys: { "47": KEY } });
  const logDir = join(dir, era);
  const recorder = createRecorder({ dir: logDir });
  const ops = captureOpsLog();
  let stderr = "";
  const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: unknown) => {
    stderr += String(chunk);
    return true;
  });
  const outputs: unknown[] = [];
  const wrong: string[] = [];
  let opsText = "";
  const alone = async (echoesHere: readonly (Echo & { label: string })[]) => {
    const storelink = fresh();
    const { call, close } = await open(storelink, recorder);
    try {
      await prepare(call);
      for (const echo of echoesHere) await driveEcho(storelink, call, echo, outputs, wrong);
    } finally {
      await close();
    }
  };
  try {
    await alone(echoes.filter((e) => e.answer !== "created"));
    const creates = echoes.filter((e) => e.answer === "created");
    for (let i = 0; i < creates.length; i += SIDE_BY_SIDE) {
      await Promise.all(creates.slice(i, i + SIDE_BY_SIDE).map((echo) => alone([echo])));
    }
  } finally {
    await recorder.close();
    spy.mockRestore();
    opsText = ops.text();
    ops.restore();
  }
  const files = await filesUnder(logDir);
  return { outputs, wrong, files, ops: opsText, stderr };
}

function expectNoKey(run: Awaited<ReturnType<typeof runEra>>): void {
  const files = run.files.map((f) => f.path.slice(f.path.lastIndexOf("/") + 1));
  expect(files).toEqual(expect.arrayContaining(["trace.jsonl", "audit.log"]));
  expect([
    ...leaksIn("tool results", JSON.stringify(run.outputs)),
    ...run.files.flatMap((f) => leaksIn(f.path.slice(dir.length), f.text)),
    ...leaksIn("ops log", run.ops),
    ...leaksIn("stderr", run.stderr),
  ]).toEqual([]);
  // Every echo was made, and met its fate: answered without it, or refused as off the contract.
  expect(run.wrong).toEqual([]);
  const audit = run.files.find((f) => f.path.endsWith("audit.log"))?.text ?? "";
  // Both fates of a write were taken: created (an echo in the reason) and uncertain (off-contract).
  expect(audit).toContain(" CREATED ");
  expect(audit).toContain(" UNCERTAIN ");
}

describe("a StoreLink echoing the key in every encoding, in every text field of every answer", () => {
  it("2025-06-18: no form of the key in any result, trace, audit line, ops line or stderr", async () => {
    const run = await runEra("2025", ECHOES, async (storelink, recorder) => {
      const h = await connect({
        storelink,
        keys: new MapKeyProvider({ "47": KEY }),
        recorder,
        // Some two thousand calls: the per-caller backstop is not what this test is about.
        limiter: NO_LIMIT,
      });
      return { call: (name, args) => h.call(name, args), close: () => h.close() };
    });
    expectNoKey(run);
  }, 240_000);

  it("2026-07-28: no form of the key in any result, trace, audit line, ops line or stderr", async () => {
    const run = await runEra("2026", ONE_PLACE, async (storelink, recorder) => {
      const listening = await listen(
        createApp(
          composeDeps({
            storelink,
            keys: new MapKeyProvider({ "47": KEY }),
            recorder,
            limiter: NO_LIMIT,
            orderCap: new OrderCap({ perHour: 0 }),
            signer: stateSigner(undefined),
          }),
        ),
      );
      const client = new Client(
        { name: "echo-test", version: "1" },
        {
          versionNegotiation: { mode: { pin: "2026-07-28" } },
          capabilities: { elicitation: { form: {} } },
        },
      );
      client.setRequestHandler("elicitation/create", async () => ({
        action: "accept",
        content: { confirm: true },
      }));
      await client.connect(new StreamableHTTPClientTransport(new URL(listening.url)));
      expect(client.getProtocolEra()).toBe("modern");
      return {
        call: (name, args) =>
          client.callTool({ name, arguments: args }) as Promise<{
            isError?: boolean;
            structuredContent?: unknown;
          }>,
        close: async () => {
          await client.close();
          await listening.close();
        },
      };
    });
    expectNoKey(run);
  }, 240_000);
});

describe("the korral://stores resource", () => {
  it("carries no form of the key StoreLink echoes in a store's name", async () => {
    const storelink = new EchoingStoreLink({ acceptedKeys: { "47": KEY } });
    const h = await connect({ storelink, keys: new MapKeyProvider({ "47": KEY }) });
    const texts: string[] = [];
    try {
      // One keyed read first: now StoreLink has seen the key.
      await h.call("get_stock_position", { sku: "8847291", store_ids: ["47"] });
      for (const encoding of ENCODINGS) {
        for (const c of CASES) {
          storelink.echo = {
            answer: "stores",
            field: "name",
            place: "appended",
            text: (key) => c.apply(encoding.encode(key)),
          };
          const read = await h.client.readResource({ uri: "korral://stores" });
          texts.push(JSON.stringify(read));
        }
      }
    } finally {
      await h.close();
    }
    expect(storelink.injected).toBe(ENCODINGS.length * CASES.length);
    expect(texts.join("")).toContain("[REDACTED]");
    expect(leaksIn("resources/read", texts.join(""))).toEqual([]);
  });
});
