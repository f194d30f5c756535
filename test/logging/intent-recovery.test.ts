import {
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { tryLock } from "../../src/logging/file-lock.js";
import {
  auditedRequestIds,
  IntentJournal,
  MAX_JOURNAL_BYTES,
  type RecoveryNotice,
  recoverIntents,
} from "../../src/logging/intents.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { tempWorkspace } from "../e2e/processes.js";
import { startDelayedEmulator, until } from "../helpers/delayed-emulator.js";
import { HERO_REASON } from "../helpers/harness.js";
import { callFields } from "../helpers/records.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { DIST, listening, runSyncOk, spawnProcess } from "../helpers/spawn.js";

/**
 * Recovery of the write-intent journal as an unlucky operator meets it: a writer paused, or with
 * its clock skewed, or on another host whose PID and namespace collide with ours, never loses its
 * live journal (the writer's lock says it is alive, nothing else); a dead writer's journal is
 * recovered at once; a kill between an audit line and its "done" line; unreadable lines; a FIFO
 * where a journal should be; a recovery cut off mid-way; a journal too large to read.
 */

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});
async function dir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "korral-intents-"));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

const FIELDS = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const intentOf = (requestId: string, fields: typeof FIELDS) => ({
  ...fields,
  ...callFields(requestId),
  ts: new Date().toISOString(),
});
const intent = (id: string) =>
  JSON.stringify({ intent: id, ts: "2026-12-01T08:00:00.000Z", ...FIELDS });
const name = (hex: string) => `intents-${hex.padEnd(16, "0").slice(0, 16)}.jsonl`;

function recorder(d: string, options: { cannotLock?: boolean } = {}) {
  const recovered: string[] = [];
  const notices: RecoveryNotice[] = [];
  const reported = new Set<string>();
  const run = () =>
    recoverIntents(d, {
      recover: async ({ request_id: requestId }) => {
        recovered.push(requestId);
        return true;
      },
      outcomes: (ids) => auditedRequestIds(join(d, "audit.log"), ids),
      notice: (n) => notices.push(n),
      reported,
      ...options,
    });
  return { recovered, notices, run };
}

/** Ages (or, negative, dates into the future) a file's mtime: a paused writer, a skewed clock. */
const shiftMtime = (path: string, byMs: number) => {
  const t = new Date(Date.now() - byMs);
  utimesSync(path, t, t);
};

describe("which journals are recovered", () => {
  it("a journal whose writer holds its lock is never recovered, however old or new it looks", async () => {
    const d = await dir();
    const writer = new IntentJournal(d, () => {});
    expect(await writer.start()).toBeUndefined();
    writer.begin(intentOf("req_live", FIELDS));
    const path = writer.path as string;
    const r = recorder(d);
    // A writer paused for an hour, and one whose clock runs a minute ahead.
    for (const shift of [3_600_000, -60_000]) {
      shiftMtime(path, shift);
      expect(await r.run()).toBe(0);
      expect(existsSync(path)).toBe(true);
    }
    // The writer exits with the intent open: its lock ends, and the journal is recovered once.
    // The lock is released as the writer closes, not before close() returns: try until it is.
    writer.close();
    expect(existsSync(path)).toBe(true);
    let recovered = 0;
    await until(async () => {
      recovered = await r.run();
      return recovered > 0;
    }, "the closed writer's lock released");
    expect(recovered).toBe(1);
    expect(await r.run()).toBe(0);
    expect(r.recovered).toEqual(["req_live"]);
    expect(readdirSync(d)).toEqual([]);
  });

  it("an intent comes back from a dead writer's journal exactly as it was begun, every field", async () => {
    const d = await dir();
    const writer = new IntentJournal(d, () => {});
    expect(await writer.start()).toBeUndefined();
    const begun = intentOf("req_whole", FIELDS);
    writer.begin(begun);
    writer.close();
    const back: unknown[] = [];
    // The writer's lock is released as it closes, not before close() returns: try until it is.
    const deadline = Date.now() + 10_000;
    while (back.length === 0 && Date.now() < deadline) {
      await recoverIntents(d, {
        recover: async (recovered) => {
          back.push(recovered);
          return true;
        },
        outcomes: async () => new Set(),
        notice: () => {},
      });
      if (back.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(back).toEqual([begun]);
  });

  it("a journal nobody holds is recovered at once, however recently it was written", async () => {
    const d = await dir();
    writeFileSync(join(d, name("0123456789abcdef")), `${intent("req_a")}\n`);
    const r = recorder(d);
    expect(await r.run()).toBe(1);
    expect(r.recovered).toEqual(["req_a"]);
  });

  it("two journals of one process never share a name, and a live one is left alone", async () => {
    const d = await dir();
    const a = new IntentJournal(d, () => {});
    const b = new IntentJournal(d, () => {});
    await Promise.all([a.start(), b.start()]);
    expect(a.path).not.toBe(b.path);
    a.begin(intentOf("req_inflight", FIELDS));
    expect(await recorder(d).run()).toBe(0);
    a.end("req_inflight");
    a.close();
    b.close();
    expect(readdirSync(d)).toEqual([]);
  });

  it("a server that cannot lock recovers nothing, and says so once per journal", async () => {
    const d = await dir();
    const dead = join(d, name("aa"));
    writeFileSync(dead, `${intent("req_a")}\n`);
    const r = recorder(d, { cannotLock: true });
    expect(await r.run()).toBe(0);
    expect(await r.run()).toBe(0);
    expect(existsSync(dead)).toBe(true);
    expect(r.notices).toEqual([{ kind: "cannot be proven dead", file: dead }]);
  });

  it("a journal written without a lock is never recovered, only reported", async () => {
    const d = await dir();
    const unlocked = new IntentJournal(d, () => {});
    unlocked.begin(intentOf("req_u", FIELDS)); // never started: it could not lock
    const path = unlocked.path as string;
    expect(path).toMatch(/\.unlocked\.jsonl$/);
    const r = recorder(d);
    expect(await r.run()).toBe(0);
    expect(r.notices).toEqual([{ kind: "cannot be proven dead", file: path }]);
    unlocked.end("req_u");
    unlocked.close();
  });

  it("a journal another server is recovering (its lock held) is left to it", async () => {
    const d = await dir();
    const path = join(d, name("bb"));
    writeFileSync(path, `${intent("req_b")}\n`);
    const fd = openSync(path, "r");
    const held = await tryLock(fd);
    expect(held.kind).toBe("held");
    const r = recorder(d);
    expect(await r.run()).toBe(0);
    if (held.kind === "held") await held.lock.release();
    closeSync(fd);
    expect(await r.run()).toBe(1);
  });
});

describe("one line per write attempt after any crash", () => {
  it("an intent whose outcome is already in audit.log gets no UNCERTAIN line", async () => {
    const d = await dir();
    writeFileSync(
      join(d, "audit.log"),
      `2026-12-01T08:00:01.000Z CREATED RPL-47-001 store=47 sku=8847291 qty=24 req=req_done reason="x"\n`,
    );
    writeFileSync(join(d, name("11")), `${intent("req_done")}\n${intent("req_open")}\n`);
    const r = recorder(d);
    expect(await r.run()).toBe(1);
    expect(r.recovered).toEqual(["req_open"]);
  });

  it("a recovered line the disk refused keeps its journal and is never handed over twice", async () => {
    const d = await dir();
    const path = join(d, name("12"));
    writeFileSync(path, `${intent("req_1")}\n`);
    const handed = new Set<string>();
    let calls = 0;
    const run = () =>
      recoverIntents(d, {
        recover: async () => {
          calls++;
          return false;
        },
        outcomes: (ids) => auditedRequestIds(join(d, "audit.log"), ids),
        notice: () => {},
        handed,
      });
    await run();
    await run();
    expect(calls).toBe(1);
    expect(existsSync(path)).toBe(true);
  });
});

describe("recovery loses nothing", () => {
  it("a null, a number or a garbled line costs that line only, and is said once", async () => {
    const d = await dir();
    const file = join(d, name("22"));
    writeFileSync(
      file,
      [
        intent("req_1"),
        "null",
        "7",
        "{not json",
        intent("req_2"),
        '{"done":"req_1"}',
        intent("req_3"),
      ]
        .join("\n")
        .concat("\n"),
    );
    const r = recorder(d);
    expect(await r.run()).toBe(2);
    expect(r.recovered).toEqual(["req_2", "req_3"]);
    expect(r.notices).toEqual([{ kind: "unreadable lines", file, lines: 3 }]);
  });

  it("a FIFO named like a journal is skipped, never opened, and said once", async () => {
    const d = await dir();
    const fifo = join(d, name("33"));
    runSyncOk("mkfifo", [fifo]);
    writeFileSync(join(d, name("44")), `${intent("req_x")}\n`);
    const r = recorder(d);
    expect(await r.run()).toBe(1);
    expect(await r.run()).toBe(0);
    expect(r.notices).toEqual([{ kind: "not a regular file", file: fifo }]);
  });

  it("a recovery cut off mid-way leaves the journal to the next one, with no second line", async () => {
    const d = await dir();
    const path = join(d, name("55"));
    writeFileSync(path, `${intent("req_1")}\n${intent("req_2")}\n`);
    // The first recoverer writes req_1's line, then dies before req_2's (its recover throws).
    const written: string[] = [];
    let calls = 0;
    await expect(
      recoverIntents(d, {
        recover: async ({ request_id: id }) => {
          if (++calls === 2) throw new Error("killed");
          written.push(id);
          writeFileSync(join(d, "audit.log"), ` UNCERTAIN - store=47 req=${id} reason="x"\n`, {
            flag: "a",
          });
          return true;
        },
        outcomes: (ids) => auditedRequestIds(join(d, "audit.log"), ids),
        notice: () => {},
      }),
    ).rejects.toThrow("killed");
    expect(existsSync(path)).toBe(true);
    const next = recorder(d);
    expect(await next.run()).toBe(1);
    expect(next.recovered).toEqual(["req_2"]);
    expect(written).toEqual(["req_1"]);
  });
});

describe("recovery is bounded", () => {
  it("a journal too large to read is set aside unread, said once with its path, never claimed again", async () => {
    const d = await dir();
    const huge = join(d, name("66"));
    // 700 MB, sparse: a journal no server could read within bounded time and memory.
    const fd = openSync(huge, "w");
    ftruncateSync(fd, 700 * 1024 * 1024);
    closeSync(fd);
    writeFileSync(join(d, name("77")), `${intent("req_ok")}\n`);
    const r = recorder(d);
    expect(await r.run()).toBe(1);
    expect(await r.run()).toBe(0);
    expect(r.recovered).toEqual(["req_ok"]);
    expect(r.notices).toEqual([
      {
        kind: "set aside",
        file: huge,
        why: `it is ${700 * 1024 * 1024} bytes, over the ${MAX_JOURNAL_BYTES}-byte bound`,
      },
    ]);
    expect(readdirSync(d)).toEqual([`set-aside-${name("66")}`]);
  });

  it("a writer with nothing open empties a journal that has grown, so a live one stays small", async () => {
    const d = await dir();
    const writer = new IntentJournal(d, () => {});
    await writer.start();
    const reason = "x".repeat(20_000);
    for (let i = 0; i < 100; i++) {
      writer.begin(intentOf(`req_${i}`, { ...FIELDS, reason }));
      writer.end(`req_${i}`);
    }
    const size = readFileSync(writer.path as string).length;
    writer.close();
    expect(size).toBeLessThan(MAX_JOURNAL_BYTES / 4);
  });
});

/** The built HTTP server on a port of its own (run by `wrap`, if given), its stderr kept. */
function startServer(env: Record<string, string>, wrap: string[] = []) {
  const [command = "", ...prefix] = [...wrap, process.execPath];
  const run = spawnProcess(command, [...prefix, join(DIST, "http.js")], {
    env: { HOST: "127.0.0.1", PORT: "0", ...env },
    stdin: "ignore",
  });
  cleanups.push(() => run.kill());
  return {
    child: run.child,
    stderr: run.stderr,
    listening: async () => String((await listening(run, 20_000)).port),
  };
}

async function writeSetUp() {
  const emulator = await startDelayedEmulator("held");
  cleanups.push(() => emulator.close());
  const ws = tempWorkspace({ ...SEED_ACCEPTED_KEYS });
  cleanups.push(() => ws.cleanup());
  const env = {
    PATH: process.env.PATH ?? "",
    STORELINK_URL: emulator.baseUrl,
    STORELINK_TIMEOUT_MS: "60000",
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: ws.logDir,
  };
  const audit = join(ws.logDir, "audit.log");
  const lines = () =>
    existsSync(audit) ? readFileSync(audit, "utf8").split("\n").filter(Boolean) : [];
  const order = (port: string) =>
    void fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers: MCP_HEADERS,
      body: JSON.stringify(toolCall(1, "create_replenishment_order", { ...FIELDS })),
    }).catch(() => {});
  const journals = () => readdirSync(ws.logDir).filter((f) => f.startsWith("intents-"));
  return { emulator, env, lines, order, journals, logDir: ws.logDir };
}

describe("servers sharing a log directory", () => {
  it("a writer paused with its journal looking an hour old keeps it: its write has one line, CREATED", async () => {
    const s = await writeSetUp();
    const a = startServer(s.env);
    s.order(await a.listening());
    await until(() => s.emulator.storelink.received === 1, "A's write at StoreLink");
    // A is frozen (SIGSTOP: a frozen container, a swap stall) and its journal looks abandoned.
    a.child.kill("SIGSTOP");
    for (const journal of s.journals()) shiftMtime(join(s.logDir, journal), 3_600_000);
    // B starts on the same directory: its start-up recovery has run once it listens.
    const b = startServer(s.env);
    await b.listening();
    expect(s.lines()).toEqual([]);
    expect(b.stderr()).not.toContain("audited UNCERTAIN");
    a.child.kill("SIGCONT");
    s.emulator.storelink.release();
    await until(() => s.lines().length > 0, "A's audit line", 20_000);
    expect(s.lines()).toHaveLength(1);
    expect(s.lines()[0]).toMatch(/ CREATED RPL-47-001 /);
  }, 60_000);

  it("a writer killed mid-write: the server still running recovers it, one UNCERTAIN line", async () => {
    const s = await writeSetUp();
    const b = startServer(s.env);
    await b.listening();
    const a = startServer(s.env);
    s.order(await a.listening());
    await until(() => s.emulator.storelink.received === 1, "A's write at StoreLink");
    a.child.kill("SIGKILL");
    await until(() => s.lines().length > 0, "B's recovery", 30_000);
    expect(s.lines()).toHaveLength(1);
    expect(s.lines()[0]).toMatch(/ UNCERTAIN - store=47 /);
    await until(() => b.stderr().includes("audited UNCERTAIN"), "B's ops line");
  }, 60_000);

  it("without flock(1), a server says once that it cannot lock, and leaves a dead writer's journal", async () => {
    const s = await writeSetUp();
    const dead = join(s.logDir, name("88"));
    mkdirSync(s.logDir, { recursive: true });
    writeFileSync(dead, `${intent("req_dead")}\n`);
    const b = startServer({ ...s.env, PATH: "/nonexistent" });
    await b.listening();
    expect(b.stderr().match(/cannot lock write-intent journals/g)).toHaveLength(1);
    expect(existsSync(dead)).toBe(true);
    expect(s.lines()).toEqual([]);
  }, 60_000);

  it.runIf(existsSync("/usr/bin/unshare") && process.getuid?.() === 0)(
    "two servers in two PID namespaces, both PID 1: neither takes the other's live journal",
    async () => {
      const s = await writeSetUp();
      // Each in its own PID namespace, as two containers from one image (or two hosts): the
      // same PID, and --kill-child so that killing unshare never leaves the server behind.
      const wrap = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"];
      const a = startServer(s.env, wrap);
      s.order(await a.listening());
      await until(() => s.emulator.storelink.received === 1, "A's write at StoreLink");
      const b = startServer(s.env, wrap);
      await b.listening();
      s.emulator.storelink.release();
      await until(() => s.lines().length > 0, "A's line", 20_000);
      expect(s.lines()).toHaveLength(1);
      expect(s.lines()[0]).toMatch(/ CREATED RPL-47-001 /);
      expect(b.stderr()).not.toContain("audited UNCERTAIN");
    },
    60_000,
  );
});
