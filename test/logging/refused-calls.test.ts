import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createRecorder, type Recorder } from "../../src/logging/recorder.js";
import { FAILED_LIMITS } from "../../src/logging/redact.js";
import { MemoryCallLimiter } from "../../src/policy/rate-limit.js";
import type { Deps } from "../../src/tools/define.js";
import { connect, errorOf, HERO_REASON } from "../helpers/harness.js";

/**
 * What a refused call costs the logs. A refused call's arguments were never validated, so one
 * caller could send 240 kB reasons and have each written in full, and synced, to audit.log, to
 * trace.jsonl and to stdout. Failed records are capped; successful ones are written as sent.
 * And only writes that reached StoreLink are worth an fdatasync.
 */

let dir: string;
let structured: string[];
let recorder: Recorder;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-refused-"));
  structured = [];
  recorder = createRecorder({ dir, structured: (line) => structured.push(line) });
});
afterEach(async () => {
  vi.restoreAllMocks();
  await recorder.close();
  await rm(dir, { recursive: true, force: true });
});

const session = (overrides: Partial<Deps> = {}) => connect({ ...overrides, recorder });

/** Every line written, per log, once the recorder has drained. */
async function allLines(): Promise<Record<"audit" | "trace" | "stdout", string[]>> {
  await recorder.close();
  const read = async (name: string) =>
    (await readFile(join(dir, name), "utf8").catch(() => "")).split("\n").filter((l) => l !== "");
  return { audit: await read("audit.log"), trace: await read("trace.jsonl"), stdout: structured };
}

const bytes = (line: string): number => Buffer.byteLength(line, "utf8");

// 240 kB of words: a well-formed sentence, only far too long.
const HUGE_REASON = "Gap of 8 units, buyer approved. ".repeat(7_500);
const MARKER = `…[truncated, ${HUGE_REASON.length} chars]`;
const order = (reason: string) => ({ store_id: "47", sku: "8847291", quantity: 24, reason });

describe("a refused call's log lines are capped", () => {
  it("a 240 kB reason, invalid or rate-limited: about 1.5 kB per line (3 kB on stdout)", async () => {
    expect(HUGE_REASON.length).toBe(240_000);
    // A successful call first, on its own server: written as sent, a 1,000-character reason whole.
    const valid = `${HERO_REASON} ${"x".repeat(1_000 - HERO_REASON.length - 1)}`;
    expect(valid).toHaveLength(1_000);
    const ok = await session();
    expect((await ok.call("create_replenishment_order", order(valid))).isError).toBeFalsy();
    await ok.close();
    // One call a minute: the first (invalid) call takes the token, the second is rate-limited.
    const h = await session({ limiter: new MemoryCallLimiter(1) });
    expect(errorOf(await h.call("create_replenishment_order", order(HUGE_REASON))).type).toBe(
      "invalid_arguments",
    );
    expect(errorOf(await h.call("create_replenishment_order", order(HUGE_REASON))).type).toBe(
      "rate_limited",
    );
    await h.close();

    const all = await allLines();
    // The successful call's lines: nothing cut.
    const reasonOf = (line: string) => JSON.parse(line.slice(line.indexOf(" reason=") + 8));
    expect(reasonOf(all.audit[0] ?? "")).toBe(valid);
    expect((JSON.parse(all.trace[0] ?? "{}") as { args: { reason: string } }).args.reason).toBe(
      valid,
    );
    for (const line of all.stdout.slice(0, 2)) expect(line).not.toContain("truncated");
    const logs = {
      audit: all.audit.slice(1),
      trace: all.trace.slice(1),
      stdout: all.stdout.slice(2),
    };
    expect(logs.audit).toHaveLength(2);
    expect(logs.trace).toHaveLength(2);
    expect(logs.stdout).toHaveLength(4);
    for (const line of [...logs.audit, ...logs.trace]) expect(bytes(line)).toBeLessThan(2_000);
    // The stdout audit line carries the reason twice (the message is the audit line, and the
    // record's fields follow): 2 × 1,000 characters and the rest. It was 2 × 240 kB.
    for (const line of logs.stdout) expect(bytes(line)).toBeLessThan(3_000);
    // The start of the text is kept, with the original length; the rest is gone.
    const kept = HUGE_REASON.slice(0, FAILED_LIMITS.text);
    for (const line of logs.audit) {
      expect(line.split(" ")[1]).toBe("REJECTED");
      expect(reasonOf(line)).toBe(`${kept}${MARKER}`);
    }
    for (const line of logs.trace) {
      const args = (JSON.parse(line) as { args: { reason: string } }).args;
      expect(args.reason).toBe(`${kept}${MARKER}`);
    }
  });

  it("huge ids, many keys and deep nesting in a refused call stay bounded too", async () => {
    const h = await session();
    let deep: unknown = "bottom";
    for (let i = 0; i < 500; i++) deep = [deep];
    const wide = Object.fromEntries(
      Array.from({ length: 5_000 }, (_, i) => [`key_${i}_${"k".repeat(200)}`, "v".repeat(200)]),
    );
    const result = await h.call("create_replenishment_order", {
      store_id: "4".repeat(100_000),
      sku: "8".repeat(100_000),
      quantity: 24,
      reason: HUGE_REASON,
      deep,
      list: Array.from({ length: 5_000 }, () => "x".repeat(1_000)),
      wide,
    });
    expect(errorOf(result).type).toBe("invalid_arguments");
    const read = await h.call("lookup_sku", { query: HUGE_REASON, wide });
    expect(read.isError).toBe(true);
    await h.close();

    const logs = await allLines();
    expect(logs.audit).toHaveLength(1);
    expect(logs.trace).toHaveLength(2);
    // Store, SKU, detail and reason: four capped strings on the audit line.
    expect(bytes(logs.audit[0] ?? "")).toBeLessThan(5_000);
    for (const line of [...logs.trace, ...logs.stdout]) {
      // FAILED_LIMITS: 4,000 characters of args text, 200 values, depth 8, plus the columns.
      expect(bytes(line)).toBeLessThan(16_000);
    }
    const trace = JSON.parse(logs.trace[0] ?? "{}") as {
      store_id: string;
      args: Record<string, unknown> & { list: string[]; deep: unknown };
    };
    expect(trace.store_id).toBe(`${"4".repeat(1_000)}…[truncated, 100000 chars]`);
    expect(JSON.stringify(trace.args.deep)).toContain("[Truncated]");
    // The list used up the budget: it ends in a count, and `wide` is only counted.
    expect(trace.args.list.at(-1)).toMatch(/^\[truncated, \d+ more items\]$/);
    expect(Object.entries(trace.args).at(-1)).toEqual(["[truncated]", "1 more keys"]);
    const wideRead = JSON.parse(logs.trace[1] ?? "{}") as { args: { wide: object } };
    expect(Object.keys(wideRead.args.wide).at(-1)).toBe("[truncated]");
  });
});

describe("which audit lines are synced", () => {
  /** Counts fdatasync calls on every FileHandle of this process, the real ones included. */
  async function countDatasyncs(): Promise<{ count: () => number }> {
    const probe = await open(join(dir, "probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> };
    await probe.close();
    const spy = vi.spyOn(proto, "datasync");
    return { count: () => spy.mock.calls.length };
  }

  it("REJECTED and PREVIEW lines are not synced; CREATED lines are, before the answer", async () => {
    const syncs = await countDatasyncs();
    const h = await session();

    expect(errorOf(await h.call("create_replenishment_order", order("n/a"))).type).toBe(
      "invalid_arguments",
    );
    expect(errorOf(await h.call("create_replenishment_order", order(HUGE_REASON))).type).toBe(
      "invalid_arguments",
    );
    const preview = await h.call("create_replenishment_order", {
      ...order(HERO_REASON),
      dry_run: true,
    });
    expect(preview.isError).toBeFalsy();
    expect(syncs.count()).toBe(0);

    const created = await h.call("create_replenishment_order", order(HERO_REASON));
    expect(created.isError).toBeFalsy();
    // audit() resolved after the sync, so the count is up by the time the answer is here.
    expect(syncs.count()).toBe(1);
    await h.close();

    const logs = await allLines();
    expect(logs.audit.map((l) => l.split(" ")[1])).toEqual([
      "REJECTED",
      "REJECTED",
      "PREVIEW",
      "CREATED",
    ]);
    expect(syncs.count()).toBe(1);
  });
});
