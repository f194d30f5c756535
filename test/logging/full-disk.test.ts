import { appendFileSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LineFile } from "../../src/logging/line-file.js";
import { createRecorder } from "../../src/logging/recorder.js";
import type { AuditRecord } from "../../src/logging/records.js";
import { callFields } from "../helpers/records.js";
import { runSyncOk } from "../helpers/spawn.js";

/**
 * A full disk, for real: a small tmpfs mounted for the test and filled up. A line is on disk whole
 * or not at all (never cut after the bytes that fit, never joined to the next line), an intent is
 * ended only once its audit line is whole, and when space returns every attempt has exactly one
 * whole line.
 */

function canMount(): boolean {
  if (process.getuid?.() !== 0) return false;
  const probe = mkdtempSync(join(tmpdir(), "korral-mount-probe-"));
  try {
    runSyncOk("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], { stdio: "ignore" });
    runSyncOk("umount", [probe], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

const mounts: string[] = [];
afterEach(() => {
  for (const dir of mounts.splice(0)) {
    try {
      runSyncOk("umount", ["-l", dir], { stdio: "ignore" });
    } catch {}
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A 256 kB file system of its own, and a way to fill it to the last byte and empty it again. */
function smallDisk() {
  const dir = mkdtempSync(join(tmpdir(), "korral-full-disk-"));
  runSyncOk("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", dir]);
  mounts.push(dir);
  const filler = join(dir, "filler");
  return {
    dir,
    fill() {
      const page = Buffer.alloc(4096, 0x2e);
      try {
        for (;;) appendFileSync(filler, page);
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe("ENOSPC");
      }
    },
    free: () => unlinkSync(filler),
  };
}

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
