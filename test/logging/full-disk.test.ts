import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LineFile } from "../../src/logging/line-file.js";
import { createRecorder } from "../../src/logging/recorder.js";
import type { AuditRecord } from "../../src/logging/records.js";
import { callFields } from "../helpers/records.js";
import { canMount, smallDisk } from "../helpers/small-disk.js";

/**
 * A full disk, for real (helpers/small-disk.ts). A line is on disk whole or not at all (never cut
 * after the bytes that fit, never joined to the next line), an intent is ended only once its audit
 * line is whole, and when space returns every attempt has exactly one whole line.
 */

const lines = (path: string) => readFileSync(path, "utf8");
/** Longer than what is left of the file's last page: a write of it is cut short on a full disk. */
const long = (tag: string) => `${tag} ${"x".repeat(6_000)}`;

describe.runIf(canMount())("a full disk", () => {
  it("never tears or joins a line; the lines it refused are written whole, in order, when space returns", async () => {
    const disk = smallDisk();
    const path = join(disk.dir, "audit.log");
    const file = new LineFile(path, () => {}, { retain: true });
    expect(await file.append("one")).toBe(true);
    disk.fill();
    expect(await file.append(long("two"), { durable: true })).toBe(false);
    // Cut back to where it started: no torn "two" at the end of the file.
    expect(lines(path)).toBe("one\n");
    expect(await file.append(long("three"))).toBe(false);
    expect(lines(path)).toBe("one\n");
    disk.free();
    expect(await file.append("four")).toBe(true);
    expect(lines(path)).toBe(`one\n${long("two")}\n${long("three")}\nfour\n`);
    await file.close();
  });

  it("a trace line the disk refused is dropped whole, never left torn", async () => {
    const disk = smallDisk();
    const path = join(disk.dir, "trace.jsonl");
    const file = new LineFile(path, () => {});
    await file.append('{"n":1}');
    disk.fill();
    expect(await file.append(long('{"n":2}'))).toBe(false);
    disk.free();
    expect(await file.append('{"n":3}')).toBe(true);
    expect(lines(path)).toBe('{"n":1}\n{"n":3}\n');
    await file.close();
  });

  it("an intent ends only once its audit line is whole on disk, which happens when space returns", async () => {
    const disk = smallDisk();
    const warnings: string[] = [];
    const recorder = createRecorder({ dir: disk.dir, warn: (m) => warnings.push(m) });
    expect(await recorder.startJournal()).toBeUndefined();
    const journal = recorder.journalPath() as string;
    const fields = { store_id: "47", sku: "8847291", quantity: 24, reason: long("because") };
    recorder.intend({
      ...fields,
      ...callFields("req_1"),
      ts: new Date().toISOString(),
    });
    disk.fill();
    const created: AuditRecord = {
      ts: new Date().toISOString(),
      outcome: "CREATED",
      order_id: "RPL-47-001",
      ...callFields("req_1"),
      confirmed: "agent",
      ...fields,
    };
    expect(await recorder.audit(created)).toBe(false);
    // Not ended: a kill now leaves the intent for recovery (an UNCERTAIN line, not none).
    expect(lines(journal)).not.toContain('"done"');
    expect(warnings.some((w) => w.includes("wait in memory"))).toBe(true);
    disk.free();
    const rejected: AuditRecord = {
      ...created,
      outcome: "REJECTED",
      order_id: null,
      ...callFields("req_2"),
      detail: "x",
    };
    expect(await recorder.audit(rejected)).toBe(true);
    const audit = lines(join(disk.dir, "audit.log")).split("\n").filter(Boolean);
    expect(audit.map((l) => / (CREATED|REJECTED) .* req=(\S+)/.exec(l)?.slice(1))).toEqual([
      ["CREATED", "req_1"],
      ["REJECTED", "req_2"],
    ]);
    expect(lines(journal)).toContain('{"done":"req_1"}');
    await recorder.close();
  });
});
