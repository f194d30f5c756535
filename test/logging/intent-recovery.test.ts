import { execFileSync, spawn } from "node:child_process";
import {
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  auditedRequestIds,
  IntentJournal,
  LEASE_MS,
  type RecoveryNotice,
  recoverIntents,
} from "../../src/logging/intents.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { tempWorkspace } from "../e2e/processes.js";
import { startDelayedEmulator, until } from "../helpers/delayed-emulator.js";
import { HERO_REASON } from "../helpers/harness.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { DIST } from "../helpers/spawn.js";

/**
 * Recovery of the write-intent journal as an unlucky operator meets it: journals of live writers
 * in other PID namespaces on one volume, a kill between an audit line and its "done" line,
 * unreadable lines, a FIFO where a journal should be, a recovery cut off mid-way.
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

const OWN_NS = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? "0";
const FIELDS = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const intent = (id: string) =>
  JSON.stringify({ intent: id, ts: "2026-12-01T08:00:00.000Z", ...FIELDS });
/** A PID nobody has: above the kernel's largest. */
const DEAD_PID = 4_194_304 + 17;

function recorder(d: string) {
  const recovered: string[] = [];
  const notices: RecoveryNotice[] = [];
  const reported = new Set<string>();
  const run = () =>
    recoverIntents(d, {
      recover: async (_fields, requestId) => {
        recovered.push(requestId);
      },
      outcomes: () => auditedRequestIds(join(d, "audit.log")),
      notice: (n) => notices.push(n),
      reported,
    });
  return { recovered, notices, run };
}

const ageBeyondLease = (path: string) => {
  const old = new Date(Date.now() - LEASE_MS - 5_000);
  utimesSync(path, old, old);
};

describe("which journals are recovered", () => {
  it("a journal touched within the lease, from another PID namespace, is its writer's: never recovered", async () => {
    const d = await dir();
    const live = join(d, `intents-99999999-1-00aa00aa00aa00aa.jsonl`);
    writeFileSync(live, `${intent("req_live")}\n`);
    const r = recorder(d);
    expect(await r.run()).toBe(0);
    expect(existsSync(live)).toBe(true);
    // Its writer stops touching it (gone): now it is recovered, once.
    ageBeyondLease(live);
    expect(await r.run()).toBe(1);
    expect(r.recovered).toEqual(["req_live"]);
    expect(readdirSync(d)).toEqual([]);
  });

  it("in our own namespace, a journal whose PID is not running is recovered at once", async () => {
    const d = await dir();
    writeFileSync(
      join(d, `intents-${OWN_NS}-${DEAD_PID}-0123456789abcdef.jsonl`),
      `${intent("req_a")}\n`,
    );
    const r = recorder(d);
    expect(await r.run()).toBe(1);
    expect(r.recovered).toEqual(["req_a"]);
  });

  it("two journals of one process never share a name, and the live one is left alone", async () => {
    const d = await dir();
    const a = new IntentJournal(d, () => {});
    const b = new IntentJournal(d, () => {});
    expect(a.path).not.toBe(b.path);
    a.begin("req_inflight", FIELDS);
    const r = recorder(d);
    expect(await r.run()).toBe(0);
    a.end("req_inflight");
    a.close();
    b.close();
  });
});

describe("one line per write attempt after any crash", () => {
  it("an intent whose outcome is already in audit.log gets no UNCERTAIN line", async () => {
    const d = await dir();
    writeFileSync(
      join(d, "audit.log"),
      `2026-12-01T08:00:01.000Z CREATED RPL-47-001 store=47 sku=8847291 qty=24 req=req_done reason="x"\n`,
    );
    writeFileSync(
      join(d, `intents-${OWN_NS}-${DEAD_PID}-1111111111111111.jsonl`),
      `${intent("req_done")}\n${intent("req_open")}\n`,
    );
    const r = recorder(d);
    expect(await r.run()).toBe(1);
    expect(r.recovered).toEqual(["req_open"]);
  });
});

describe("recovery loses nothing", () => {
  it("a null, a number or a garbled line costs that line only, and is said once", async () => {
    const d = await dir();
    const name = `intents-${OWN_NS}-${DEAD_PID}-2222222222222222.jsonl`;
    writeFileSync(
      join(d, name),
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
    expect(r.notices).toEqual([{ kind: "unreadable lines", file: join(d, name), lines: 3 }]);
  });

  it("a FIFO named like a journal is skipped, never opened, and said once", async () => {
    const d = await dir();
    const fifo = join(d, `intents-${OWN_NS}-${DEAD_PID}-3333333333333333.jsonl`);
    execFileSync("mkfifo", [fifo]);
    writeFileSync(
      join(d, `intents-${OWN_NS}-${DEAD_PID}-4444444444444444.jsonl`),
      `${intent("req_x")}\n`,
    );
    const r = recorder(d);
    expect(await r.run()).toBe(1);
    expect(await r.run()).toBe(0);
    expect(r.notices).toEqual([{ kind: "not a regular file", file: fifo }]);
  });

  it("a recovery cut off mid-way leaves a journal the next recovery finishes, with no second line", async () => {
    const d = await dir();
    writeFileSync(
      join(d, `intents-${OWN_NS}-${DEAD_PID}-5555555555555555.jsonl`),
      `${intent("req_1")}\n${intent("req_2")}\n`,
    );
    // The first recoverer writes req_1's line, then is killed before req_2's (simulated by a
    // recover that never returns the second time), leaving its claimed journal behind.
    const written: string[] = [];
    let calls = 0;
    void recoverIntents(d, {
      recover: async (_f, id) => {
        if (++calls === 2) await new Promise(() => {});
        written.push(id);
        writeFileSync(join(d, "audit.log"), ` UNCERTAIN - store=47 req=${id} reason="x"\n`, {
          flag: "a",
        });
      },
      outcomes: () => auditedRequestIds(join(d, "audit.log")),
      notice: () => {},
    });
    await until(() => calls === 2, "the first recovery to stall");
    // Its claimed journal is a journal of a live writer (this process): aged past the lease, as
    // it is once that process is dead, the next recovery takes it.
    const [claimed] = readdirSync(d).filter((f) => f.startsWith("intents-"));
    ageBeyondLease(join(d, claimed as string));
    const next = recorder(d);
    expect(await next.run()).toBe(1);
    expect(next.recovered).toEqual(["req_2"]);
    expect(written).toEqual(["req_1"]);
  });
});

describe.runIf(existsSync("/usr/bin/unshare") && process.getuid?.() === 0)(
  "two servers in two PID namespaces over one log directory",
  () => {
    it("neither recovers the other's live journal: the in-flight write has one line, CREATED", async () => {
      const emulator = await startDelayedEmulator(3_000);
      cleanups.push(() => emulator.close());
      const ws = tempWorkspace({ ...SEED_ACCEPTED_KEYS });
      cleanups.push(() => ws.cleanup());
      const env = {
        PATH: process.env.PATH ?? "",
        STORELINK_URL: emulator.baseUrl,
        STORELINK_TIMEOUT_MS: "10000",
        KORRAL_KEYS_FILE: ws.keysFile,
        KORRAL_LOG_DIR: ws.logDir,
        HOST: "127.0.0.1",
      };
      const start = (port: number) => {
        // Each its own PID namespace: both are PID 1 there, as two containers from one image.
        // --kill-child: the server (the namespace's init) dies with unshare, and everything in
        // the namespace with it; killing unshare alone left both servers listening for good.
        const child = spawn(
          "unshare",
          [
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            process.execPath,
            join(DIST, "http.js"),
          ],
          { env: { ...env, PORT: String(port) }, stdio: ["ignore", "ignore", "pipe"] },
        );
        let err = "";
        child.stderr?.on("data", (c) => (err += c));
        const exited = new Promise((resolve) => child.once("exit", resolve));
        cleanups.push(async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
          await exited;
        });
        return { child, stderr: () => err };
      };
      const a = start(0);
      await until(() => /listening on HTTP/.test(a.stderr()), "A listening");
      const port = /"port":(\d+)[^\n]*listening on HTTP/.exec(a.stderr())?.[1];
      void fetch(`http://127.0.0.1:${port}/mcp`, {
        method: "POST",
        headers: MCP_HEADERS,
        body: JSON.stringify(toolCall(1, "create_replenishment_order", { ...FIELDS })),
      }).catch(() => {});
      await until(() => emulator.storelink.received === 1, "A's write at StoreLink");
      // B starts on the same directory while A's write is in flight.
      const b = start(0);
      await until(() => /listening on HTTP/.test(b.stderr()), "B listening");
      await until(() => emulator.storelink.created.length === 1, "the order", 20_000);
      const audit = join(ws.logDir, "audit.log");
      await until(
        () => existsSync(audit) && readFileSync(audit, "utf8").includes("CREATED"),
        "A's line",
      );
      const lines = readFileSync(audit, "utf8").split("\n").filter(Boolean);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/ CREATED RPL-47-001 /);
      expect(b.stderr()).not.toContain("audited UNCERTAIN");
    }, 60_000);
  },
);
