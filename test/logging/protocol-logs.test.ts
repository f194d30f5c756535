import { mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createRecorder, type Recorder } from "../../src/logging/recorder.js";
import type { TraceRecord } from "../../src/logging/records.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import type { Deps } from "../../src/tools/define.js";
import { connect, errorOf, HERO_REASON, MapKeyProvider } from "../helpers/harness.js";
import { callFields } from "../helpers/records.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

let dir: string;
let warnings: { message: string; fields: Record<string, unknown> }[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-logs-"));
  warnings = [];
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function recorderIn(logDir: string): Recorder {
  return createRecorder({
    dir: logDir,
    warn: (message, fields) => warnings.push({ message, fields }),
  });
}

async function session(recorder: Recorder, overrides: Partial<Deps> = {}) {
  return connect({ ...overrides, recorder });
}

async function traces(): Promise<TraceRecord[]> {
  const text = await readFile(join(dir, "trace.jsonl"), "utf8");
  return text
    .trimEnd()
    .split("\n")
    .map((line) => JSON.parse(line) as TraceRecord);
}
async function auditLines(): Promise<string[]> {
  return (await readFile(join(dir, "audit.log"), "utf8")).trimEnd().split("\n");
}
const reqOf = (line: string): string => /\breq=(\S+)/.exec(line)?.[1] ?? "";

describe("trace.jsonl over the real protocol", () => {
  it("traces every call, read or write, success or failure, with the spec's fields", async () => {
    const recorder = recorderIn(dir);
    const h = await session(recorder);
    await h.call("lookup_sku", { query: "butter" });
    await h.call("get_stock_position", { sku: "8847291", store_ids: ["47", "102", "111"] });
    await h.call("get_stock_position", { sku: "0000000", store_ids: ["47"] });
    await h.call("create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: HERO_REASON,
    });
    await h.call("get_replenishment_status", { store_id: "47", order_id: "RPL-47-001" });
    await h.close();
    await recorder.close();

    const t = await traces();
    expect(t.map((r) => [r.tool, r.status])).toEqual([
      ["lookup_sku", "ok"],
      ["get_stock_position", "ok"],
      ["get_stock_position", "error"],
      ["create_replenishment_order", "ok"],
      ["get_replenishment_status", "ok"],
    ]);
    for (const r of t) {
      expect(Object.keys(r)).toEqual([
        "ts",
        "request_id",
        "tool",
        "store_id",
        "status",
        "error",
        "duration_ms",
        "args",
        "by",
      ]);
      expect(r.request_id).toMatch(/^req_[0-9a-f]{32}$/);
      expect(new Date(r.ts).toISOString()).toBe(r.ts);
      expect(typeof r.duration_ms).toBe("number");
      expect(r.store_id === null || typeof r.store_id === "string").toBe(true);
    }
    expect(new Set(t.map((r) => r.request_id)).size).toBe(5);
    // Multi-store: store_id is null, the full store_ids stay in args.
    expect(t[1]?.store_id).toBeNull();
    expect(t[1]?.args).toEqual({ sku: "8847291", store_ids: ["47", "102", "111"] });
    expect(t[2]?.error).toMatch(/^unknown_sku: /);
    expect(t[3]).toMatchObject({ store_id: "47", error: null });
    expect(t[3]?.args).toEqual({
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: HERO_REASON,
    });
    expect(t[4]?.store_id).toBe("47");
  });
});

describe("audit.log over the real protocol", () => {
  it("writes CREATED, REJECTED and UNCERTAIN lines that join the trace on request_id", async () => {
    const recorder = recorderIn(dir);
    const ok = await session(recorder);
    const created = await ok.call("create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: HERO_REASON,
    });
    expect(created.isError).toBeFalsy();
    const rejected = await ok.call("create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: "n/a",
    });
    expect(errorOf(rejected).type).toBe("invalid_arguments");
    const noKey = await session(recorder, { keys: new MapKeyProvider({}) });
    expect(
      errorOf(
        await noKey.call("create_replenishment_order", {
          store_id: "128",
          sku: "8847291",
          quantity: 7,
          reason: "Knife edge at 128, buyer approved 7 units.",
        }),
      ).type,
    ).toBe("no_credentials");

    // The write is sent and lands, then the answer is lost.
    const faulty = new ScriptedStoreLink().fail("createOrder", { after: "outcome_unknown" });
    // Nor can StoreLink say by the key within the write's budget: the line stays UNCERTAIN.
    for (let i = 0; i < 4; i++) faulty.fail("getOrderRequest", { kind: "unavailable" });
    const lost = await session(recorder, { storelink: faulty });
    const uncertain = await lost.call("create_replenishment_order", {
      store_id: "111",
      sku: "8847291",
      quantity: 3,
      reason: "Mild gap of 3 at store 111; buyer approved 3 units.",
    });
    expect(errorOf(uncertain).type).toBe("outcome_unknown");
    expect(faulty.attemptsOf("createOrder")).toBe(1);
    expect(faulty.landed).toHaveLength(1);
    await Promise.all([ok.close(), noKey.close(), lost.close()]);
    await recorder.close();

    const lines = await auditLines();
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(
      /^\S+Z CREATED RPL-47-001 store=47 sku=8847291 qty=24 req=req_[0-9a-f]{32} by=local:direct key=korral-[0-9a-f-]{36} confirmed=agent reason="Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold\. Buyer approved 24\."$/,
    );
    expect(lines[1]).toMatch(
      /^\S+Z REJECTED - store=47 sku=8847291 qty=24 req=req_\w+ by=local:direct detail="Invalid arguments for create_replenishment_order: reason: [^"]+" reason="n\/a"$/,
    );
    expect(lines[2]).toMatch(
      /^\S+Z REJECTED - store=128 sku=8847291 qty=7 req=\S+ by=local:direct key=korral-[0-9a-f-]{36} detail="No credentials for store 128\. Ask Korral IT for access\." reason=/,
    );
    expect(lines[3]).toMatch(
      /^\S+Z UNCERTAIN - store=111 sku=8847291 qty=3 req=\S+ by=local:direct key=korral-[0-9a-f-]{36} detail="The order was sent/,
    );

    // Every audit line joins exactly one trace line of the same write call.
    const byRequest = new Map((await traces()).map((r) => [r.request_id, r]));
    for (const line of lines) {
      const trace = byRequest.get(reqOf(line));
      expect(trace?.tool).toBe("create_replenishment_order");
      expect(trace?.status).toBe(line.includes(" CREATED ") ? "ok" : "error");
    }
  });

  it("redacts a pasted credential in both files", async () => {
    const recorder = recorderIn(dir);
    const h = await session(recorder);
    const secret = "sk-live-51Hx9QvLkT3dPz8Wq";
    const result = await h.call("create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 5,
      reason: `Buyer approved 5; ops pasted token ${secret} by mistake`,
    });
    expect(result.isError).toBeFalsy();
    await h.close();
    await recorder.close();
    const audit = await auditLines();
    expect(audit[0]).toMatch(
      / reason="Buyer approved 5; ops pasted token \[REDACTED\] by mistake"$/,
    );
    const trace = await readFile(join(dir, "trace.jsonl"), "utf8");
    expect(trace).toContain("ops pasted token [REDACTED] by mistake");
    expect(trace + audit.join("\n")).not.toContain(secret);
  });

  it("has the CREATED line on disk when the tool result arrives, before close()", async () => {
    const recorder = recorderIn(dir);
    const h = await session(recorder);
    await h.call("create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason: HERO_REASON,
    });
    // No close, no flush: the result was only sent after audit() resolved.
    expect(await auditLines()).toEqual([expect.stringMatching(/ CREATED RPL-47-001 /)]);
    await h.close();
    await recorder.close();
  });
});

describe("durability cost stays on the write path", () => {
  it("never syncs for reads, and syncs the audit line of a write", async () => {
    const probe = await open(join(dir, "probe"), "w");
    const prototype = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> };
    await probe.close();
    const datasync = vi.spyOn(prototype, "datasync");
    try {
      const recorder = recorderIn(dir);
      const h = await session(recorder);
      await h.call("lookup_sku", { query: "butter" });
      await h.call("get_stock_position", { sku: "8847291", store_ids: ["47", "102"] });
      await h.call("get_replenishment_status", { store_id: "47", order_id: "RPL-47-009" });
      expect(datasync).not.toHaveBeenCalled();
      await h.call("create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity: 24,
        reason: HERO_REASON,
      });
      expect(datasync).toHaveBeenCalled();
      await h.close();
      await recorder.close();
    } finally {
      datasync.mockRestore();
    }
  });

  it("does not let a recorder's input break a call: odd records are formatted, not thrown", async () => {
    const recorder = recorderIn(dir);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    recorder.trace({
      ts: "t",
      ...callFields("req_x"),
      tool: "lookup_sku",
      store_id: null,
      status: "ok",
      error: null,
      duration_ms: Number.NaN,
      args: cyclic,
    });
    await recorder.close();
    expect(JSON.parse((await readFile(join(dir, "trace.jsonl"), "utf8")).trim())).toMatchObject({
      duration_ms: 0,
      args: { self: "[Circular]" },
    });
    expect(warnings).toEqual([]);
  });
});

describe("a broken log directory", () => {
  it("warns once per file, and the order is still created and readable", async () => {
    const notADir = join(dir, "log");
    await writeFile(notADir, "");
    const recorder = recorderIn(notADir);
    const storelink = new InMemoryStoreLink();
    const h = await session(recorder, { storelink });
    for (const quantity of [24, 6]) {
      const result = await h.call("create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity,
        reason: HERO_REASON,
      });
      expect(result.isError).toBeFalsy();
    }
    await h.call("lookup_sku", { query: "butter" });
    const status = await h.call("get_replenishment_status", {
      store_id: "47",
      order_id: "RPL-47-002",
    });
    expect(status.structuredContent).toMatchObject({ order_id: "RPL-47-002", quantity: 6 });
    await h.close();
    await recorder.close();
    expect(warnings.map((w) => w.fields.file).sort()).toEqual([
      join(notADir, "audit.log"),
      expect.stringMatching(new RegExp(`^${notADir}/intents-[0-9a-f]{16}\\.unlocked\\.jsonl$`)),
      join(notADir, "trace.jsonl"),
    ]);
  });
});

describe("concurrent calls", () => {
  it("keeps 40 concurrent writes and their traces whole and parseable", async () => {
    const recorder = recorderIn(dir);
    const h = await session(recorder);
    const stores = ["47", "63", "102", "111", "128"];
    const long = "Buyer approved after reviewing the gap. ".repeat(12);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        h.call("create_replenishment_order", {
          store_id: stores[i % 5],
          sku: "8847291",
          quantity: i + 1,
          reason: `${long}Order ${i}.`,
        }),
      ),
    );
    await h.close();
    await recorder.close();
    const audit = await auditLines();
    expect(audit).toHaveLength(40);
    const quantities = audit.map((line) => {
      expect(line).toMatch(
        /^\S+Z CREATED RPL-\d+-\d{3} store=\d+ sku=8847291 qty=\d+ req=\S+ by=local:direct key=korral-[0-9a-f-]{36} confirmed=agent reason="[^"]+"$/,
      );
      return Number(/ qty=(\d+) /.exec(line)?.[1]);
    });
    expect(quantities.sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    const t = await traces();
    expect(t).toHaveLength(40);
    expect(new Set(t.map((r) => r.request_id))).toEqual(new Set(audit.map(reqOf)));
  });
});
