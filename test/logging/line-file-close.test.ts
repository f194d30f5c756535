import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LineFile } from "../../src/logging/line-file.js";
import { createRecorder } from "../../src/logging/recorder.js";
import { callFields } from "../helpers/records.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});
async function tempDir() {
  const dir = await mkdtemp(join(tmpdir(), "korral-close-"));
  dirs.push(dir);
  return dir;
}

describe("after close()", () => {
  it("a LineFile still writes a line, before append returns", async () => {
    const path = join(await tempDir(), "a.log");
    const file = new LineFile(path, () => {});
    await file.append("first");
    await file.close();
    // Not awaited: the line must already be in the file.
    void file.append("late", { durable: true });
    expect(await readFile(path, "utf8")).toBe("first\nlate\n");
  });

  it("the recorder still writes an audit line (the audit of a write abandoned at shutdown)", async () => {
    const dir = await tempDir();
    const recorder = createRecorder({ dir });
    await recorder.close();
    void recorder.audit({
      ts: "2026-01-01T00:00:00.000Z",
      outcome: "UNCERTAIN",
      order_id: null,
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      ...callFields("req_1"),
      reason: "Gap of 8 units at store 47.",
      detail: "stopped",
    });
    expect(await readFile(join(dir, "audit.log"), "utf8")).toContain("UNCERTAIN");
  });

  it("reports a line it cannot write after close() instead of dropping it silently", async () => {
    const dir = await tempDir();
    const warnings: string[] = [];
    // The parent is a file: the directory cannot be created.
    const file = new LineFile(join(dir, "a.log", "b.log"), (message) => warnings.push(message));
    const parent = new LineFile(join(dir, "a.log"), () => {});
    await parent.append("x");
    // Closed, not left to the collector (node warns when it closes a FileHandle).
    await parent.close();
    await file.close();
    void file.append("late");
    expect(warnings).toHaveLength(1);
  });
});
