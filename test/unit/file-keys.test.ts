import { closeSync, constants, openSync, writeFileSync, writeSync } from "node:fs";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { FileKeyProvider } from "../../src/keys/file.js";
import { KeySourceError } from "../../src/keys/provider.js";
import { runSyncOk } from "../helpers/spawn.js";

let dir: string;
let path: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-keys-"));
  path = join(dir, "keys.json");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("FileKeyProvider", () => {
  it("returns the key for a store and undefined for a store without one", async () => {
    await writeFile(path, JSON.stringify({ "47": "slk_47_a" }));
    const keys = new FileKeyProvider(path);
    expect((await keys.getKey("47"))?.reveal()).toBe("slk_47_a");
    expect(await keys.getKey("128")).toBeUndefined();
  });

  it("re-reads the file on every lookup: a rotation is picked up by the next call", async () => {
    await writeFile(path, JSON.stringify({ "47": "old" }));
    const keys = new FileKeyProvider(path);
    expect((await keys.getKey("47"))?.reveal()).toBe("old");
    // An operator's atomic replace, as a rotation script would do it.
    await writeFile(join(dir, "next.json"), JSON.stringify({ "47": "new" }));
    await rename(join(dir, "next.json"), path);
    expect((await keys.getKey("47"))?.reveal()).toBe("new");
  });

  it("treats a missing file as no credentials, not a crash", async () => {
    expect(await new FileKeyProvider(join(dir, "absent.json")).getKey("47")).toBeUndefined();
  });

  it("discards the parser's message on malformed JSON: it could quote a key", async () => {
    await writeFile(path, '{ "47": "slk_SECRET_VALUE_123", oops }');
    const error = await new FileKeyProvider(path).getKey("47").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KeySourceError);
    const text = `${(error as Error).message} ${(error as Error).stack} ${inspect(error)}`;
    expect(text).not.toContain("SECRET");
    expect(text).not.toContain("oops");
    expect((error as KeySourceError).storeId).toBe("47");
  });

  it.each([
    ["an array", "[]"],
    ["a string", '"slk"'],
    ["null", "null"],
  ])("rejects a file holding %s", async (_what, text) => {
    await writeFile(path, text);
    await expect(new FileKeyProvider(path).getKey("47")).rejects.toBeInstanceOf(KeySourceError);
  });

  it("rejects a non-string or empty entry without echoing it", async () => {
    await writeFile(path, JSON.stringify({ "47": 12345, "63": "  " }));
    const keys = new FileKeyProvider(path);
    await expect(keys.getKey("47")).rejects.toThrow(/not a non-empty string/);
    await expect(keys.getKey("63")).rejects.toThrow(/not a non-empty string/);
  });

  it("does not treat inherited object properties as stores", async () => {
    await writeFile(path, "{}");
    expect(await new FileKeyProvider(path).getKey("constructor")).toBeUndefined();
    expect(await new FileKeyProvider(path).getKey("__proto__")).toBeUndefined();
  });
});

describe("FileKeyProvider under concurrency", () => {
  // A FIFO as the key file makes every read visible: each open blocks until one write feeds it.
  const fifo = () => {
    const path = join(dir, "keys.fifo");
    runSyncOk("mkfifo", [path]);
    return path;
  };
  // Synchronous: an asynchronous write would wait for a thread-pool slot the readers may hold.
  const feed = (path: string, keys: Record<string, string>) =>
    writeFileSync(path, JSON.stringify(keys));
  // Feeds any reader still blocked on the FIFO, so a failing test cannot hang the worker.
  const unblockReaders = (path: string) => {
    for (let i = 0; i < 10; i++) {
      let fd: number;
      try {
        fd = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
      } catch {
        return; // ENXIO: nobody is reading
      }
      writeSync(fd, "{}");
      closeSync(fd);
    }
  };

  it("lets lookups that arrive during a read share it: five stores, one read", async () => {
    const path = fifo();
    const keys = new FileKeyProvider(path);
    const lookups = Promise.all(["47", "63", "102", "111", "128"].map((id) => keys.getKey(id)));
    try {
      feed(path, { "47": "a", "63": "b", "102": "c", "111": "d" });
      // A second read would block on the FIFO; one feed must answer all five.
      const found = await Promise.race([
        lookups,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error("a lookup started a read of its own")), 2000),
        ),
      ]);
      expect(found.map((k) => k?.reveal())).toEqual(["a", "b", "c", "d", undefined]);
    } finally {
      unblockReaders(path);
    }
  });
});

describe("ApiKey", () => {
  it("never prints its value by accident", () => {
    const key = new ApiKey("slk_CANARY");
    const renderings = [
      String(key),
      `${key}`,
      JSON.stringify({ key }),
      inspect(key),
      inspect({ key }),
    ];
    for (const text of renderings) expect(text).not.toContain("CANARY");
    expect(key.reveal()).toBe("slk_CANARY");
  });
});
