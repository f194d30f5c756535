import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import { sharedLimitsFor } from "../../src/limits/index.js";
import { connectRedisLimits, type RedisLimits } from "../../src/limits/redis.js";
import {
  HOUR_MS,
  MAX_HOLDERS,
  MemorySlotBook,
  PENDING_MS,
  SENDING_MS,
  type SlotBook,
} from "../../src/limits/slots.js";
import { until } from "../helpers/delayed-emulator.js";
import { MapKeyProvider } from "../helpers/harness.js";
import {
  connectedLimits,
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
} from "../helpers/redis.js";

/**
 * The slot book's rules, held alike by the per-process book and by the shared one on a real
 * Redis (its script): the same contract, so the fleet counts as one process would.
 */

let redis: RunningRedis | undefined;
const opened: RedisLimits[] = [];
const readyLimits = async (url: string) => {
  const limits = await connectedLimits(url);
  opened.push(limits);
  return limits;
};

beforeAll(async () => {
  if (REDIS_AVAILABLE) redis = await startRedis();
});
afterAll(async () => {
  for (const limits of opened) await limits.close();
  await redis?.kill();
});

let bucketSeq = 0;
const fresh = (): string => `test-${process.pid}-${++bucketSeq}`;

const books: [string, () => Promise<SlotBook>][] = [["memory", async () => new MemorySlotBook()]];
if (REDIS_AVAILABLE) {
  books.push(["redis", async () => (await readyLimits((redis as RunningRedis).url)).slots]);
}

describe.each(books)("the slot book (%s)", (name, makeBook) => {
  it("takes up to the limit, then refuses with the counts; a held name is never refused", async () => {
    const book = await makeBook();
    const bucket = fresh();
    expect(await book.take(bucket, "a", 3, "a")).toMatchObject({ kind: "taken", inFlight: 0 });
    expect(await book.take(bucket, "b", 3, "b")).toMatchObject({ kind: "taken", inFlight: 1 });
    await book.settle(bucket, "a", "count", "a");
    await book.settle(bucket, "b", "uncertain", "b");
    expect(await book.take(bucket, "c", 3, "c")).toMatchObject({ kind: "taken" });
    expect(await book.take(bucket, "d", 3, "d")).toEqual({
      kind: "full",
      placed: 1,
      uncertain: 1,
      inFlight: 1,
    });
    // Each held name, pending, counted or uncertain, joins its slot, at the cap too.
    for (const name of ["a", "b", "c"]) {
      expect((await book.take(bucket, name, 3, `retry-${name}`)).kind).toBe("held");
      expect((await book.peek(bucket, name, 3)).kind).toBe("held");
    }
    expect((await book.peek(bucket, "d", 3)).kind).toBe("full");
    // Buckets are apart.
    expect((await book.take(fresh(), "d", 3, "d")).kind).toBe("taken");
  });

  it("release frees only a pending slot; count and uncertain write even a lost one", async () => {
    const book = await makeBook();
    const bucket = fresh();
    await book.take(bucket, "a", 1, "a");
    await book.settle(bucket, "a", "release", "a");
    expect((await book.take(bucket, "b", 1, "b")).kind).toBe("taken");
    await book.settle(bucket, "b", "count", "b");
    await book.settle(bucket, "b", "release", "b");
    expect(await book.peek(bucket, "c", 1)).toMatchObject({ kind: "full", placed: 1 });

    const other = fresh();
    // A settle of a slot that is gone (a holder's release raced a joiner's count) still counts.
    await book.settle(other, "ghost", "uncertain", "ghost");
    expect(await book.peek(other, "x", 5)).toMatchObject({ uncertain: 1, placed: 0 });
    await book.settle(other, "ghost", "landed", "ghost");
    expect(await book.peek(other, "x", 5)).toMatchObject({ uncertain: 0, placed: 1 });
    // An uncertain settle never downgrades a counted slot.
    await book.settle(other, "ghost", "uncertain", "ghost");
    expect(await book.peek(other, "x", 5)).toMatchObject({ uncertain: 0, placed: 1 });
  });

  it("a pending slot goes only when every attempt holding it has let go, and only by its own token", async () => {
    const book = await makeBook();
    const bucket = fresh();
    expect((await book.take(bucket, "k", 1, "first")).kind).toBe("taken");
    // A retry with the same key joins; a release by a token that holds nothing frees nothing.
    expect((await book.take(bucket, "k", 1, "retry")).kind).toBe("held");
    await book.settle(bucket, "k", "release", "stranger");
    await book.settle(bucket, "k", "landed", "stranger");
    expect(await book.peek(bucket, "x", 1)).toMatchObject({ kind: "full", inFlight: 1 });
    // The first attempt refused unsent: the retry is still sending under the slot.
    await book.settle(bucket, "k", "release", "first");
    expect(await book.peek(bucket, "x", 1)).toMatchObject({ kind: "full", inFlight: 1 });
    await book.settle(bucket, "k", "release", "retry");
    expect(await book.peek(bucket, "x", 1)).toMatchObject({ kind: "taken", inFlight: 0 });

    // A joiner's replay lets go of its own hold; the slot stays while its first attempt sends.
    await book.take(bucket, "j", 1, "first");
    await book.take(bucket, "j", 1, "retry");
    await book.settle(bucket, "j", "landed", "retry");
    expect(await book.peek(bucket, "x", 1)).toMatchObject({ kind: "full", inFlight: 1 });
    await book.settle(bucket, "j", "count", "first");
    await book.settle(bucket, "j", "release", "first");
    expect(await book.peek(bucket, "x", 1)).toMatchObject({ kind: "full", placed: 1 });
  });

  it("holders past the most a slot lists make it one no release frees", async () => {
    const book = await makeBook();
    const bucket = fresh();
    const holders = Array.from({ length: MAX_HOLDERS + 2 }, (_, i) => `h${i}`);
    for (const holder of holders) await book.take(bucket, "k", 1, holder);
    for (const holder of holders) await book.settle(bucket, "k", "release", holder);
    expect(await book.peek(bucket, "x", 1)).toMatchObject({ kind: "full", inFlight: 1 });
  });

  it("a reconciler's settle of an attempt another settled first changes nothing, and says so", async () => {
    const book = await makeBook();
    const bucket = fresh();
    const attempt = { id: "req-settled-twice", record: "{}" };
    await book.take(bucket, "k", 3, "writer", attempt);
    expect(await book.settle(bucket, "k", "uncertain", "writer", attempt.id)).toBe(true);
    // The first resolver found the key fenced: the slot is given back, the attempt gone.
    expect(await book.settle(bucket, "k", "void", "writer", attempt.id)).toBe(true);
    expect((await book.attempts()).entries.filter((e) => e.bucket === bucket)).toEqual([]);
    // A second resolver, holding a stale view of the same attempt, settles it again.
    expect(await book.settle(bucket, "k", "confirmed", "writer", attempt.id)).toBe(false);
    expect(await book.settle(bucket, "k", "void", "writer", attempt.id)).toBe(false);
    expect(await book.peek(bucket, "x", 3)).toMatchObject({ placed: 0, uncertain: 0, inFlight: 0 });
  });

  it("peek takes nothing", async () => {
    const book = await makeBook();
    const bucket = fresh();
    for (let i = 0; i < 5; i++) expect((await book.peek(bucket, `p${i}`, 1)).kind).toBe("taken");
    expect((await book.take(bucket, "a", 1, "a")).kind).toBe("taken");
    expect((await book.take(bucket, "b", 1, "b")).kind).toBe("full");
  });

  it("40 concurrent takes of distinct names at a limit of 3: exactly 3 taken", async () => {
    // On Redis, four connections (four replicas); in memory, one process's book.
    const books = await Promise.all(
      Array.from({ length: name === "redis" ? 4 : 1 }, () => makeBook()),
    );
    const bucket = fresh();
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (books[i % books.length] as SlotBook).take(bucket, `n${i}`, 3, `n${i}`),
      ),
    );
    expect(results.filter((r) => r.kind === "taken")).toHaveLength(3);
    expect(results.filter((r) => r.kind === "full")).toHaveLength(37);
  });
});

describe("the per-process slot book's hour", () => {
  it("a counted slot stops counting an hour after its count; a pending one after the hour and the write's longest", async () => {
    let now = 1_000_000;
    const book = new MemorySlotBook(() => now);
    await book.take("b", "counted", 2, "counted");
    await book.take("b", "pending", 2, "pending");
    expect(await book.peek("b", "x", 2)).toMatchObject({ inFlight: 2, uncertain: 0 });
    now += 10 * 60_000;
    await book.settle("b", "counted", "count", "counted");
    now += HOUR_MS - 1;
    // Held long past the longest send, the pending slot is told as an unknown outcome.
    expect(await book.peek("b", "x", 2)).toMatchObject({
      kind: "full",
      placed: 1,
      uncertain: 1,
      inFlight: 0,
    });
    now += 1;
    expect(await book.peek("b", "x", 2)).toMatchObject({ kind: "taken", placed: 0, uncertain: 1 });
    now += PENDING_MS - 10 * 60_000;
    expect(await book.peek("b", "x", 2)).toMatchObject({ kind: "taken", uncertain: 0 });
  });

  it("a pending slot is a write being submitted only until the longest a send takes", async () => {
    let now = 1_000_000;
    const book = new MemorySlotBook(() => now);
    await book.take("b", "slow", 3, "slow");
    now += SENDING_MS;
    expect(await book.peek("b", "x", 3)).toMatchObject({ inFlight: 1, uncertain: 0 });
    now += 1;
    expect(await book.peek("b", "x", 3)).toMatchObject({ inFlight: 0, uncertain: 1 });
  });
});

describe.runIf(REDIS_AVAILABLE)("the shared slot book on hostile state", () => {
  it("garbage under a bucket's key decides nothing: the store's error, never a slot", async () => {
    const limits = await readyLimits((redis as RunningRedis).url);
    const bucket = fresh();
    await limits.client.set(`korral:cap:{${bucket}}`, "not a hash");
    await expect(limits.slots.take(bucket, "a", 3, "a")).rejects.toThrow();
    // A malformed slot inside a bucket is dropped, and counts for nothing.
    const other = fresh();
    await limits.client.hSet(`korral:cap:{${other}}`, { junk: "zz", worse: "c:notanumber" });
    expect(await limits.slots.take(other, "a", 1, "a")).toMatchObject({ kind: "taken", placed: 0 });
  });

  it("a take whose answer comes after the deadline fails for the caller, and its slot still counts", async () => {
    const limits = await readyLimits((redis as RunningRedis).url);
    const impatient = connectRedisLimits({ url: (redis as RunningRedis).url, timeoutMs: 100 });
    opened.push(impatient);
    await until(() => impatient.health.state === "ok", "the connection");
    const bucket = fresh();
    // Writes wait on the server until UNPAUSE: the take runs after its caller gave up on it.
    await limits.client.sendCommand(["CLIENT", "PAUSE", "5000", "WRITE"]);
    await expect(impatient.slots.take(bucket, "lost-reply", 3, "lost-reply")).rejects.toThrow(
      /no answer within/,
    );
    // Once the server goes on, the take has run: the slot whose answer was lost is counted.
    await limits.client.sendCommand(["CLIENT", "UNPAUSE"]);
    let seen = await limits.slots.peek(bucket, "other", 3);
    for (let i = 0; i < 100 && seen.inFlight === 0; i++)
      seen = await limits.slots.peek(bucket, "other", 3);
    expect(seen).toMatchObject({ kind: "taken", inFlight: 1 });
    expect((await limits.slots.peek(bucket, "lost-reply", 3)).kind).toBe("held");
  });

  it("a take answered after the deadline is undone by its own holder's release, sent after it", async () => {
    const limits = await readyLimits((redis as RunningRedis).url);
    const impatient = connectRedisLimits({ url: (redis as RunningRedis).url, timeoutMs: 100 });
    opened.push(impatient);
    // Connected and its eviction policy checked: only then does it take slots.
    await until(() => impatient.health.state === "ok", "the store checked");
    const bucket = fresh();
    await limits.client.sendCommand(["CLIENT", "PAUSE", "5000", "WRITE"]);
    await expect(impatient.slots.take(bucket, "late", 3, "late-holder")).rejects.toThrow(
      /no answer within/,
    );
    // On the same connection the release runs after the take, however late both are.
    const release = impatient.slots.settle(bucket, "late", "release", "late-holder");
    release.catch(() => {});
    await limits.client.sendCommand(["CLIENT", "UNPAUSE"]);
    // A command on the same connection, answered: everything queued before it has run.
    await impatient.client.ping();
    expect(await limits.client.exists(`korral:cap:{${bucket}}`)).toBe(0);
  });

  it("a wrong password is refused by the store, and its text never carries the password", async () => {
    const url = `redis://:${encodeURIComponent("wrong-password-zzz9")}@127.0.0.1:${(redis as RunningRedis).port}`;
    const limits = connectRedisLimits({ url, timeoutMs: 300 });
    opened.push(limits);
    await until(() => limits.health.down, "the failed AUTH to be noticed");
    const error = await limits.slots.take(fresh(), "a", 3, "a").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(limits.describe(new Error(`boom ${url} wrong-password-zzz9`))).not.toContain(
      "wrong-password-zzz9",
    );
  });
});

describe("the process's shared limits store", () => {
  it("is refused, not silently per process, when KORRAL_REDIS_URL is set but no store was opened", () => {
    const config = loadConfig({ KORRAL_REDIS_URL: "redis://:pw-never-shown@127.0.0.1:1" });
    expect(() => sharedLimitsFor(config)).toThrow(ConfigError);
    expect(() => composeDeps({ keys: new MapKeyProvider() }, config)).toThrow(
      /KORRAL_REDIS_URL is set but the limits store was not opened/,
    );
    try {
      sharedLimitsFor(config);
    } catch (error) {
      expect(String(error)).not.toContain("pw-never-shown");
    }
    expect(sharedLimitsFor(loadConfig({}))).toBeUndefined();
  });
});
