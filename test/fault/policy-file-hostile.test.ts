import { mkdtemp, rm, symlink, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import {
  CachedPolicySource,
  POLICY_RETRY_MS,
  type PolicyRead,
  policySourceFor,
  readPolicyFile,
} from "../../src/policy/policy-source.js";
import { POLICY_MAX_BYTES, type StorePolicy } from "../../src/policy/store-policy.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { runSyncOk } from "../helpers/spawn.js";

/**
 * The policy file as a careless or hostile hand leaves it: missing, a symbolic link, a FIFO, a
 * directory, a device, huge, not JSON, the wrong file. Each gives an unavailable policy (every
 * decision refused, fail closed) with a clear problem, never a crash, a hang or the file's text;
 * a repaired file is read again within seconds. And the cache's rules: a good read kept for the
 * cache, a failure for at most POLICY_RETRY_MS, calls arriving together sharing one read, a read
 * bounded by its deadline and no more than two left hanging.
 */

const GOOD = JSON.stringify({
  version: 1,
  groups: { dairy: { read: { stores: ["47"] }, order: { stores: ["47"] } } },
  principals: { "user:alice@korral.example": ["dairy"] },
});
const OTHER = JSON.stringify({
  version: 1,
  groups: { dairy: { read: { stores: ["63"] } } },
  principals: { "user:alice@korral.example": ["dairy"] },
});
const alice = { id: "user:alice@korral.example" };
const CANARY = SEED_ACCEPTED_KEYS["47"] as string;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function dir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "korral-policy-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

/** The problem an unavailable policy carries; fails the test for a loaded one. */
function problemOf(policy: StorePolicy): string {
  const decision = policy.may(alice, "read", "47");
  expect(policy.mode).toBe("unavailable");
  expect(decision.verdict).toBe("unavailable");
  return decision.reason.replace(/^store policy unavailable: /, "");
}

/** A file source with a clock the test moves, and what it reported. */
function fileSource(path: string, cacheSeconds = 60) {
  let now = 1_000_000;
  const said: (string | null)[] = [];
  const loaded: string[] = [];
  const source = new CachedPolicySource(path, () => readPolicyFile(path), {
    cacheSeconds,
    deadlineMs: 1_000,
    now: () => now,
    report: (problem) => said.push(problem),
    loaded: (_where, summary) => loaded.push(summary.sha256),
  });
  return { source, said, loaded, advance: (ms: number) => (now += ms) };
}

describe("a hostile policy file is an unavailable policy, never a crash", () => {
  it("missing: unavailable, and the file once written is read after the retry interval", async () => {
    const path = join(await dir(), "policy.json");
    const { source, said, advance } = fileSource(path);
    expect(problemOf(await source.current())).toBe("policy file does not exist");
    await writeFile(path, GOOD);
    advance(POLICY_RETRY_MS);
    expect((await source.current()).may(alice, "order", "47").allowed).toBe(true);
    expect(said).toEqual(["policy file does not exist", null]);
  });

  it("a symbolic link, even to a good policy: refused (give the file itself)", async () => {
    const d = await dir();
    await writeFile(join(d, "real.json"), GOOD);
    await symlink(join(d, "real.json"), join(d, "policy.json"));
    const { source } = fileSource(join(d, "policy.json"));
    expect(problemOf(await source.current())).toBe(
      "policy file is a symbolic link (give the file itself)",
    );
    // The link's target itself is fine.
    expect(Object.hasOwn(await readPolicyFile(join(d, "real.json")), "text")).toBe(true);
  });

  it("a FIFO with no writer: refused at once, not waited on until the deadline", async () => {
    const path = join(await dir(), "policy.json");
    runSyncOk("mkfifo", [path]);
    const { source } = fileSource(path);
    // A read that blocked on the FIFO would end at the deadline ("took over 1000 ms").
    expect(problemOf(await source.current())).toBe("policy file is not a regular file");
  });

  it("a directory or a device: not a regular file", async () => {
    expect(await readPolicyFile(await dir())).toEqual({
      failure: "policy file is not a regular file",
    });
    expect(await readPolicyFile("/dev/zero")).toEqual({
      failure: "policy file is not a regular file",
    });
  });

  it("larger than the limit (even valid JSON padded out): refused unread", async () => {
    const d = await dir();
    const sparse = join(d, "sparse.json");
    await writeFile(sparse, "");
    await truncate(sparse, POLICY_MAX_BYTES + 1);
    expect(await readPolicyFile(sparse)).toEqual({ failure: "policy file is larger than 1 MiB" });
    const padded = join(d, "padded.json");
    await writeFile(padded, GOOD.padEnd(POLICY_MAX_BYTES + 1, " "));
    expect(await readPolicyFile(padded)).toEqual({ failure: "policy file is larger than 1 MiB" });
    // At the limit exactly, it is read.
    await writeFile(padded, GOOD.padEnd(POLICY_MAX_BYTES, " "));
    expect(await readPolicyFile(padded)).toHaveProperty("text");
  });

  it("not JSON, empty, or the key file by mistake: unavailable, the file's text in no message", async () => {
    const path = join(await dir(), "policy.json");
    const log = captureOpsLog();
    try {
      const source = new CachedPolicySource(path, () => readPolicyFile(path), { cacheSeconds: 0 });
      for (const [text, problem] of [
        [`{"version": 1, "groups": "${CANARY}`, /^not valid JSON$/],
        ["", /^not valid JSON$/],
        [JSON.stringify(SEED_ACCEPTED_KEYS), /^not a store policy: /],
        [
          JSON.stringify({ version: 1, groups: {}, principals: { [CANARY]: [] } }),
          /^not a store policy: /,
        ],
      ] as const) {
        await writeFile(path, text);
        const said = problemOf(await source.current());
        expect(said).toMatch(problem);
        expect(said).not.toContain(CANARY);
      }
      // Each change of problem was said on the ops log, naming the file; never the content.
      expect(log.text()).toContain("store policy unavailable: not valid JSON");
      expect(log.text()).toContain(path);
      expect(log.text()).not.toContain(CANARY);
    } finally {
      log.restore();
    }
  });

  it("a byte-order mark is read past", async () => {
    const path = join(await dir(), "policy.json");
    await writeFile(path, `\uFEFF${GOOD}`);
    const { source } = fileSource(path);
    expect((await source.current()).mode).toBe("enforce");
  });
});

describe("the cache", () => {
  it("a good read is used for the cache's time; a change is in force after it", async () => {
    const path = join(await dir(), "policy.json");
    await writeFile(path, GOOD);
    const { source, loaded, advance } = fileSource(path, 10);
    expect((await source.current()).may(alice, "read", "47").allowed).toBe(true);
    await writeFile(path, OTHER);
    advance(9_999);
    expect((await source.current()).may(alice, "read", "47").allowed).toBe(true);
    advance(1);
    const now = await source.current();
    expect(now.may(alice, "read", "47").allowed).toBe(false);
    expect(now.may(alice, "read", "63").allowed).toBe(true);
    // Each new text was said once, with its digest; the same text again is not news.
    advance(10_000);
    await source.current();
    expect(loaded).toHaveLength(2);
    expect(loaded[0]).not.toBe(loaded[1]);
  });

  it("a broken policy is not kept for the cache's time: a repair is read after the retry interval", async () => {
    const path = join(await dir(), "policy.json");
    await writeFile(path, GOOD);
    const { source, said, advance } = fileSource(path, 300);
    await source.current();
    await writeFile(path, "{");
    advance(300_000);
    expect(problemOf(await source.current())).toBe("not valid JSON");
    await writeFile(path, GOOD);
    advance(POLICY_RETRY_MS - 1);
    expect((await source.current()).mode).toBe("unavailable");
    advance(1);
    expect((await source.current()).mode).toBe("enforce");
    expect(said).toEqual(["not valid JSON", null]);
  });

  it("with no cache, every call reads, and calls arriving together share one read", async () => {
    let reads = 0;
    const source = new CachedPolicySource(
      "test",
      async () => {
        reads++;
        await new Promise((resolve) => setTimeout(resolve, 10));
        return { text: GOOD };
      },
      { cacheSeconds: 0, report: () => {}, loaded: () => {} },
    );
    const together = await Promise.all([source.current(), source.current(), source.current()]);
    expect(reads).toBe(1);
    expect(together[0]).toBe(together[2]);
    await source.current();
    expect(reads).toBe(2);
  });

  it("a read that never ends fails at the deadline; past two hung, a call fails at once", async () => {
    let started = 0;
    let hang = true;
    const release: (() => void)[] = [];
    const source = new CachedPolicySource(
      "test",
      () => {
        started++;
        if (!hang) return Promise.resolve({ text: GOOD });
        return new Promise<PolicyRead>((resolve) => release.push(() => resolve({ text: GOOD })));
      },
      { cacheSeconds: 0, deadlineMs: 50, report: () => {} },
    );
    expect(problemOf(await source.current())).toBe("policy read took over 50 ms");
    expect(problemOf(await source.current())).toBe("policy read took over 50 ms");
    expect(problemOf(await source.current())).toMatch(/^policy reads are hanging/);
    expect(started).toBe(2);
    // Once the hung reads end, reads start again.
    hang = false;
    for (const r of release) r();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect((await source.current()).mode).toBe("enforce");
  });

  it("a reader that throws gives an unavailable policy, not a rejection", async () => {
    const source = new CachedPolicySource(
      "test",
      () => Promise.reject(new Error(`boom ${CANARY}`)),
      { report: () => {} },
    );
    expect(problemOf(await source.current())).toBe("policy could not be read");
  });
});

describe("from the configuration", () => {
  it("KORRAL_POLICY_FILE gives a file source; nothing configured gives none", async () => {
    const path = join(await dir(), "policy.json");
    await writeFile(path, GOOD);
    const source = policySourceFor(loadConfig({ KORRAL_POLICY_FILE: path }));
    expect((await source?.current())?.may(alice, "order", "47").allowed).toBe(true);
    expect(policySourceFor(loadConfig({}))).toBeUndefined();
  });
});
