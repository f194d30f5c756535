import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createRecorder, type Recorder } from "../../src/logging/recorder.js";
import { validOrder } from "../helpers/arbitraries.js";
import { connect, type Harness } from "../helpers/harness.js";

/**
 * The log directory vanishing mid-run (`rm -rf` between calls), through the protocol with the
 * real file recorder. Logging must never fail an order: the next calls succeed and create their
 * orders; the operator is warned once per file; and the logs carry on in a recreated directory,
 * or, if the directory cannot be recreated, resume once it comes back. The one warning says what
 * actually happens (it used to say "recreating it and writing there" while lines were dropped).
 */

let base: string;
let logDir: string;
let warnings: { message: string; fields: Record<string, unknown> }[];
let recorder: Recorder;
let h: Harness;

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "korral-logdir-"));
  logDir = join(base, "log");
  warnings = [];
  recorder = createRecorder({
    dir: logDir,
    warn: (message, fields) => warnings.push({ message, fields }),
  });
  h = await connect({ recorder });
});
afterEach(async () => {
  vi.useRealTimers();
  await h.close();
  await recorder.close();
  await rm(base, { recursive: true, force: true });
});

const order = async (quantity: number): Promise<string> => {
  const result = await h.call("create_replenishment_order", { ...validOrder("47"), quantity });
  expect(result.isError, JSON.stringify(result)).toBeFalsy();
  return (result.structuredContent as { order_id: string }).order_id;
};

async function auditLines(): Promise<string[]> {
  const text = await readFile(join(logDir, "audit.log"), "utf8").catch(() => "");
  return text === "" ? [] : text.trimEnd().split("\n");
}

async function traceTools(): Promise<string[]> {
  // Trace lines are not awaited by the call: close() drains them.
  const text = await readFile(join(logDir, "trace.jsonl"), "utf8").catch(() => "");
  return text === ""
    ? []
    : text
        .trimEnd()
        .split("\n")
        .map((l) => (JSON.parse(l) as { tool: string }).tool);
}

/**
 * `rm -rf` of the live log directory, as an operator would. The previous call's trace line is
 * written after its answer (up to 5 ms, with the lines after it), so it may recreate the directory while rm runs (ENOTEMPTY); rm
 * retries then, as a second `rm -rf` would.
 */
const removeLogDir = () => rm(logDir, { recursive: true, force: true, maxRetries: 5 });

const createdIn = (lines: string[]) =>
  lines.filter((l) => l.split(" ")[1] === "CREATED").map((l) => l.split(" ")[2]);

/**
 * `rm -rf log && touch log`. The last call's trace line may still be on its way and recreate the
 * directory in between (the writer does that for a deleted file); then do it again, as an
 * operator would.
 */
async function replaceDirWithFile(): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await rm(logDir, { recursive: true, force: true, maxRetries: 5 });
    try {
      await writeFile(logDir, "not a directory");
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== "EISDIR" || attempt >= 5) throw error;
    }
  }
}
const auditFile = () => join(logDir, "audit.log");
const auditWarnings = () => warnings.filter((w) => w.fields.file === auditFile());
describe("the log directory vanishing mid-run", () => {
  it("rm -rf between calls: orders still created, one warning per file, logs carry on", async () => {
    expect(await order(24)).toBe("RPL-47-001");
    expect(createdIn(await auditLines())).toEqual(["RPL-47-001"]);
    // Its trace line is on disk before the directory goes, so the file holds exactly the calls after.
    await expect.poll(traceTools, { timeout: 10_000 }).toEqual(["create_replenishment_order"]);

    await removeLogDir();

    expect(await order(6)).toBe("RPL-47-002");
    const read = await h.call("lookup_sku", { query: "butter" });
    expect(read.isError).toBeFalsy();
    expect(await order(7)).toBe("RPL-47-003");

    // The audit lines written after the deletion are in a file someone can read, not lost in the
    // unlinked one: the directory was recreated and the lines went there.
    expect(createdIn(await auditLines())).toEqual(["RPL-47-002", "RPL-47-003"]);
    await recorder.close();
    expect(await traceTools()).toEqual([
      "create_replenishment_order",
      "lookup_sku",
      "create_replenishment_order",
    ]);
    expect(warnings.map((w) => w.fields.file).sort()).toEqual([
      join(logDir, "audit.log"),
      join(logDir, "trace.jsonl"),
    ]);
    expect(warnings[0]?.message).toMatch(/deleted|removed/);
  });

  it("deleted again later: warned again (a new incident), and still nothing lost", async () => {
    await order(1);
    for (const [quantity, expected] of [
      [2, "RPL-47-002"],
      [3, "RPL-47-003"],
    ] as const) {
      await removeLogDir();
      expect(await order(quantity)).toBe(expected);
      expect(createdIn(await auditLines())).toEqual([expected]);
    }
    expect(auditWarnings()).toHaveLength(2);
  });

  it("cannot be recreated (a file in its place): calls succeed, one warning, logs resume when it comes back", async () => {
    await order(1);
    // Its trace line (written up to 5 ms after the answer) must not recreate the directory
    // between the rm and the file taking its place.
    await expect.poll(traceTools, { timeout: 10_000 }).toEqual(["create_replenishment_order"]);
    await removeLogDir();
    await writeFile(logDir, "not a directory");

    expect(await order(2)).toBe("RPL-47-002");
    expect(await order(3)).toBe("RPL-47-003");
    expect(auditWarnings()).toHaveLength(1);

    // The directory comes back; the file retries opening after a back-off (moved past with a
    // fake clock, so nothing here waits on real time).
    await rm(logDir);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 60_000);
    expect(await order(4)).toBe("RPL-47-004");
    // The lines the disk could not take waited, and went first, in order: none is lost.
    expect(createdIn(await auditLines())).toEqual(["RPL-47-002", "RPL-47-003", "RPL-47-004"]);
    expect(auditWarnings()).toHaveLength(1);
  });
});

describe("the log-directory warning tells the truth", () => {
  it("directory replaced by a file: says audit lines wait until fixed, and they do; then all are written", async () => {
    await order(1);
    await replaceDirWithFile();

    expect(await order(2)).toBe("RPL-47-002");
    expect(await order(3)).toBe("RPL-47-003");

    // One warning for the audit file, and it describes what happens.
    const [warning, ...more] = auditWarnings();
    expect(more).toEqual([]);
    expect(warning?.message).toBe(
      `cannot write log file ${auditFile()}: it was deleted, and log directory ${logDir} is not ` +
        "a directory; its lines wait in memory until that is fixed, then are written; the service carries on",
    );
    expect(warning?.message).not.toMatch(/recreat|writing there/);
    // Reality matches: nothing was recreated or written anywhere.
    expect((await stat(logDir)).isFile()).toBe(true);
    expect(await readFile(logDir, "utf8")).toBe("not a directory");

    // "Until that is fixed": the directory comes back, and after the open back-off (moved past
    // with a fake clock) the next line is written there.
    await rm(logDir);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 60_000);
    expect(await order(4)).toBe("RPL-47-004");
    expect(createdIn(await auditLines())).toEqual(["RPL-47-002", "RPL-47-003", "RPL-47-004"]);
  });

  it("a file where the directory should be from the start: the same truthful warning", async () => {
    await writeFile(logDir, "not a directory");
    expect(await order(1)).toBe("RPL-47-001");
    expect(auditWarnings().map((w) => w.message)).toEqual([
      `cannot write log file ${auditFile()}: log directory ${logDir} is not a directory; its ` +
        "lines wait in memory until that is fixed, then are written; the service carries on",
    ]);
    expect(await readFile(logDir, "utf8")).toBe("not a directory");
  });

  it("directory removed and recreatable: says it was recreated, and the lines are there", async () => {
    await order(1);
    await rm(logDir, { recursive: true, force: true, maxRetries: 5 });
    expect(await order(2)).toBe("RPL-47-002");
    expect(auditWarnings().map((w) => w.message)).toEqual([
      `log file ${auditFile()} was deleted; it was recreated and its lines are written there`,
    ]);
    expect(createdIn(await auditLines())).toEqual(["RPL-47-002"]);
  });
});
