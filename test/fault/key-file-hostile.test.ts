import { closeSync, constants, openSync } from "node:fs";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FileKeyProvider } from "../../src/keys/file.js";
import { KeySourceError } from "../../src/keys/provider.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { runSyncOk } from "../helpers/spawn.js";

/** The key file as an unlucky operator leaves it: hung, BOM-prefixed, missing, broken. */

const KEY_47 = SEED_ACCEPTED_KEYS["47"] as string;
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function dir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "korral-keys-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

async function failureOf(promise: Promise<unknown>): Promise<KeySourceError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof KeySourceError) return error;
    throw error;
  }
  throw new Error("expected a KeySourceError");
}

describe("a key read that never finishes", () => {
  it("fails the lookup at the deadline, and the next lookup reads the repaired file", async () => {
    const d = await dir();
    const path = join(d, "keys.json");
    // A FIFO with no writer: opening it for reading blocks, as a read on a hung mount does.
    runSyncOk("mkfifo", [path]);
    const keys = new FileKeyProvider(path, { deadlineMs: 200, report: () => {} });
    // The failure names the deadline it hit; a lookup that waited on the read would never end.
    const hung = await failureOf(keys.getKey("47"));
    expect(hung.transient).toBe(true);
    expect(hung.reason).toMatch(/took over 200 ms/);

    // The operator repairs it: the next lookup reads the new file at once.
    await rename(path, `${path}.hung`);
    await writeFile(path, JSON.stringify({ "47": KEY_47 }));
    expect((await keys.getKey("47"))?.reveal()).toBe(KEY_47);
    // Release the hung read (a writer appears), so its thread-pool worker is freed.
    closeSync(openSync(`${path}.hung`, constants.O_WRONLY | constants.O_NONBLOCK));
  });

  it("does not pile hung reads onto the thread pool: past two it fails at once", async () => {
    const d = await dir();
    const path = join(d, "keys.json");
    runSyncOk("mkfifo", [path]);
    const keys = new FileKeyProvider(path, { deadlineMs: 1_000, report: () => {} });
    await failureOf(keys.getKey("47", { fresh: true }));
    await failureOf(keys.getKey("47", { fresh: true }));
    // Not a third read waiting for its deadline (that failure says "took over"): refused before
    // any read starts.
    const third = await failureOf(keys.getKey("47", { fresh: true }));
    expect(third.reason).toMatch(/hanging/);
    // A writer releases both hung reads.
    closeSync(openSync(path, constants.O_WRONLY | constants.O_NONBLOCK));
  });
});

describe("the key file's bytes", () => {
  it("a UTF-8 byte-order mark is read past", async () => {
    const path = join(await dir(), "keys.json");
    await writeFile(path, `\uFEFF${JSON.stringify({ "47": KEY_47 })}`);
    const keys = new FileKeyProvider(path, { report: () => {} });
    expect((await keys.getKey("47"))?.reveal()).toBe(KEY_47);
  });
});

describe("a missing, unreadable or malformed key file is said once", () => {
  it("once per state change, naming the file and the problem, never the content", async () => {
    const path = join(await dir(), "keys.json");
    const said: [string | null, string][] = [];
    const keys = new FileKeyProvider(path, {
      report: (problem, file) => said.push([problem, file]),
    });
    for (let i = 0; i < 3; i++) expect(await keys.getKey("47")).toBeUndefined();
    await writeFile(path, `{"47": "${KEY_47}",`);
    for (let i = 0; i < 3; i++) await failureOf(keys.getKey("47"));
    await writeFile(path, JSON.stringify({ "47": KEY_47 }));
    for (let i = 0; i < 3; i++) expect((await keys.getKey("47"))?.reveal()).toBe(KEY_47);
    expect(said).toEqual([
      ["key file does not exist (every store reports No credentials)", path],
      ["key file is not valid JSON", path],
      [null, path],
    ]);
    expect(JSON.stringify(said)).not.toContain(KEY_47);
  });

  it("a file that was fine from the start is never reported", async () => {
    const path = join(await dir(), "keys.json");
    await writeFile(path, JSON.stringify({ "47": KEY_47 }));
    const said: unknown[] = [];
    const keys = new FileKeyProvider(path, { report: (problem) => said.push(problem) });
    await keys.getKey("47");
    await keys.getKey("102");
    expect(said).toEqual([]);
  });
});
