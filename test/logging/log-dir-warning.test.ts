import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createRecorder, type Recorder } from "../../src/logging/recorder.js";
import { validOrder } from "../helpers/arbitraries.js";
import { connect, type Harness } from "../helpers/harness.js";

/**
 * The one warning an operator gets about a broken log directory must say what the service is
 * actually doing. With the directory replaced by a file (`rm -rf log && touch log`), it used to
 * say "recreating it and writing there" while every line was dropped.
 */

let base: string;
let logDir: string;
let warnings: { message: string; fields: Record<string, unknown> }[];
let recorder: Recorder;
let h: Harness;

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "korral-logwarn-"));
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
const createdIn = async (): Promise<string[]> =>
  (await readFile(auditFile(), "utf8").catch(() => ""))
    .split("\n")
    .filter((l) => l.split(" ")[1] === "CREATED")
    .map((l) => l.split(" ")[2] as string);

describe("the log-directory warning tells the truth", () => {
  it("directory replaced by a file: says lines are dropped until fixed, and they are; then resume", async () => {
    await order(1);
    await replaceDirWithFile();

    expect(await order(2)).toBe("RPL-47-002");
    expect(await order(3)).toBe("RPL-47-003");

    // One warning for the audit file, and it describes what happens.
    const [warning, ...more] = auditWarnings();
    expect(more).toEqual([]);
    expect(warning?.message).toBe(
      `cannot write log file ${auditFile()}: it was deleted, and log directory ${logDir} is not ` +
        "a directory; its lines are being dropped until that is fixed; the service carries on",
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
    expect(await createdIn()).toEqual(["RPL-47-004"]);
  });

  it("a file where the directory should be from the start: the same truthful warning", async () => {
    await writeFile(logDir, "not a directory");
    expect(await order(1)).toBe("RPL-47-001");
    expect(auditWarnings().map((w) => w.message)).toEqual([
      `cannot write log file ${auditFile()}: log directory ${logDir} is not a directory; its ` +
        "lines are being dropped until that is fixed; the service carries on",
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
    expect(await createdIn()).toEqual(["RPL-47-002"]);
  });
});
