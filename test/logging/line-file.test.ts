import { existsSync } from "node:fs";
import { mkdtemp, open, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LineFile } from "../../src/logging/line-file.js";

let dir: string;
let warnings: { message: string; fields: Record<string, unknown> }[];
const warn = (message: string, fields: Record<string, unknown>) => {
  warnings.push({ message, fields });
};

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-linefile-"));
  warnings = [];
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("LineFile", () => {
  it("creates a missing directory and appends whole lines", async () => {
    const file = new LineFile(join(dir, "nested", "deeper", "x.log"), warn);
    await file.append("one");
    await file.append("two", { durable: true });
    await file.close();
    expect(await readFile(join(dir, "nested", "deeper", "x.log"), "utf8")).toBe("one\ntwo\n");
    expect(warnings).toEqual([]);
  });

  it("syncs durable lines to disk and leaves plain lines to the OS", async () => {
    const probe = await open(join(dir, "probe"), "w");
    const prototype = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> };
    await probe.close();
    const datasync = vi.spyOn(prototype, "datasync");
    try {
      const file = new LineFile(join(dir, "s.log"), warn);
      await file.append("trace-like");
      await file.append("another");
      expect(datasync).not.toHaveBeenCalled();
      await file.append("audit-like", { durable: true });
      expect(datasync).toHaveBeenCalledTimes(1);
      await file.close();
    } finally {
      datasync.mockRestore();
    }
  });

  it("keeps 200 concurrent lines whole, each exactly once", async () => {
    const path = join(dir, "c.jsonl");
    const file = new LineFile(path, warn);
    // Long lines make a torn or interleaved write visible.
    const lines = Array.from({ length: 200 }, (_, i) =>
      JSON.stringify({ i, pad: String(i % 10).repeat(2000 + i) }),
    );
    await Promise.all(lines.map((line, i) => file.append(line, { durable: i % 3 === 0 })));
    await file.close();
    const written = (await readFile(path, "utf8")).split("\n");
    expect(written.pop()).toBe("");
    expect(written).toHaveLength(200);
    const seen = written.map((line) => JSON.parse(line) as { i: number; pad: string });
    expect(seen.map((r) => r.i).sort((a, b) => a - b)).toEqual(lines.map((_, i) => i));
    for (const r of seen) expect(r.pad).toBe(String(r.i % 10).repeat(2000 + r.i));
  });

  it("keeps lines whole across two writers on the same file (two processes' view)", async () => {
    const path = join(dir, "shared.log");
    const a = new LineFile(path, warn);
    const b = new LineFile(path, warn);
    await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        (i % 2 ? a : b).append(`${i % 2 ? "A" : "B"}${"x".repeat(5000)}${i}`),
      ),
    );
    await Promise.all([a.close(), b.close()]);
    const written = (await readFile(path, "utf8")).trimEnd().split("\n");
    expect(written).toHaveLength(60);
    for (const line of written) expect(line).toMatch(/^[AB]x{5000}\d+$/);
  });

  it("warns once when the directory is a file, and never rejects", async () => {
    const notADir = join(dir, "log");
    await writeFile(notADir, "I am a file");
    const file = new LineFile(join(notADir, "audit.log"), warn);
    for (let i = 0; i < 5; i++)
      await expect(file.append(`l${i}`, { durable: true })).resolves.toBe(false);
    await file.close();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.fields.code).toMatch(/^(ENOTDIR|EEXIST)$/);
    expect(await readFile(notADir, "utf8")).toBe("I am a file");
  });

  it("warns once when the directory cannot be created", async () => {
    await writeFile(join(dir, "blocker"), "");
    const file = new LineFile(join(dir, "blocker", "sub", "trace.jsonl"), warn);
    await Promise.all([file.append("a"), file.append("b"), file.append("c")]);
    await file.append("d");
    expect(warnings).toHaveLength(1);
    expect(existsSync(join(dir, "blocker", "sub"))).toBe(false);
  });

  it("warns once on a full disk (ENOSPC via /dev/full)", async () => {
    if (!existsSync("/dev/full")) return;
    const path = join(dir, "full.log");
    await symlink("/dev/full", path);
    const file = new LineFile(path, warn);
    for (let i = 0; i < 4; i++) await file.append(`line ${i}`, { durable: i % 2 === 0 });
    await file.close();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.fields.code).toBe("ENOSPC");
  });

  it("survives a warn callback that throws", async () => {
    await writeFile(join(dir, "f"), "");
    const file = new LineFile(join(dir, "f", "x.log"), () => {
      throw new Error("stderr is gone too");
    });
    await expect(file.append("x")).resolves.toBe(false);
  });

  describe("a file moved away (rotated by a rename), noticed within a second", () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it.each([
      ["with nothing put in its place", false],
      ["with a new empty file in its place (logrotate's create)", true],
    ])(
      "%s: the lines until then stay in the moved file, the next go to the path, one warning",
      async (_, create) => {
        vi.useFakeTimers({ toFake: ["performance"] });
        const path = join(dir, "audit.log");
        const moved = `${path}.1`;
        const file = new LineFile(path, warn, { retain: true });
        expect(await file.append("a", { durable: true })).toBe(true);
        await rename(path, moved);
        if (create) await writeFile(path, "");
        // Within the second: still the open (moved) file.
        expect(await file.append("b", { durable: true })).toBe(true);
        vi.advanceTimersByTime(1_000);
        expect(await file.append("c", { durable: true })).toBe(true);
        expect(await file.append("d", { durable: true })).toBe(true);
        await file.close();
        expect(await readFile(moved, "utf8")).toBe("a\nb\nc\n");
        expect(await readFile(path, "utf8")).toBe("d\n");
        expect(warnings.map((w) => w.message)).toEqual([
          `log file ${path} was moved away (rotated?); the lines until now are in the moved file, the next ones at ${path}`,
        ]);
      },
    );

    it("a file that stays where it is is never reopened", async () => {
      vi.useFakeTimers({ toFake: ["performance"] });
      const path = join(dir, "trace.jsonl");
      const file = new LineFile(path, warn);
      for (let i = 0; i < 5; i++) {
        expect(await file.append(String(i))).toBe(true);
        vi.advanceTimersByTime(1_000);
      }
      await file.close();
      expect(await readFile(path, "utf8")).toBe("0\n1\n2\n3\n4\n");
      expect(warnings).toEqual([]);
    });
  });
  describe("plain lines batched (batchMs)", () => {
    afterEach(() => {
      vi.useRealTimers();
    });
    // Fake setTimeout: the batch's time is up only when the test says so.
    const batched = (path: string) => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      return new LineFile(path, warn, { batchMs: 60_000 });
    };

    it("wait for the batch's time, then go out together, in order", async () => {
      const path = join(dir, "trace.jsonl");
      const file = batched(path);
      const a = file.append("a");
      const b = file.append("b");
      await new Promise((resolve) => setImmediate(resolve));
      expect(existsSync(path)).toBe(false);
      vi.advanceTimersByTime(60_000);
      expect(await Promise.all([a, b])).toEqual([true, true]);
      expect(await readFile(path, "utf8")).toBe("a\nb\n");
      await file.close();
    });

    it("a durable line takes the waiting ones with it at once", async () => {
      const path = join(dir, "audit.log");
      const file = batched(path);
      const a = file.append("a");
      expect(await file.append("b", { durable: true })).toBe(true);
      expect(await a).toBe(true);
      expect(await readFile(path, "utf8")).toBe("a\nb\n");
      await file.close();
    });

    it("close() writes the waiting lines before it resolves", async () => {
      const path = join(dir, "trace.jsonl");
      const file = batched(path);
      const a = file.append("a");
      await file.close();
      expect(await a).toBe(true);
      expect(await readFile(path, "utf8")).toBe("a\n");
    });
  });
});
