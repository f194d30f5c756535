import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { tempWorkspace } from "../helpers/fixtures.js";
import { runSyncOk, spawnDist } from "../helpers/spawn.js";

/**
 * An audit or trace path that is not a regular file is refused at start with one line: a FIFO
 * would block every audited write until something read it; a device would swallow the trail.
 */

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function logDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "korral-logpaths-"));
  dirs.push(d);
  return d;
}

async function startWith(dir: string, entry: "stdio.js" | "http.js") {
  const run = spawnDist(entry, { KORRAL_LOG_DIR: dir, PORT: "0", HOST: "127.0.0.1" });
  const guard = setTimeout(() => run.child.kill("SIGKILL"), 10_000);
  const code = await run.exit;
  clearTimeout(guard);
  return { code, stderr: run.stderr(), stdout: run.stdout() };
}

describe.each(["stdio.js", "http.js"] as const)("dist/%s", (entry) => {
  it.each([
    ["audit.log as a FIFO", "audit.log", (path: string) => runSyncOk("mkfifo", [path])],
    ["trace.jsonl as a FIFO", "trace.jsonl", (path: string) => runSyncOk("mkfifo", [path])],
    ["audit.log as a directory", "audit.log", (path: string) => mkdir(path)],
    [
      "audit.log as a link to /dev/null",
      "audit.log",
      (path: string) => runSyncOk("ln", ["-s", "/dev/null", path]),
    ],
  ])("%s: exit 2 with one line naming it", async (_name, file, make) => {
    const dir = await logDir();
    await make(join(dir, file));
    const run = await startWith(dir, entry);
    expect(run.code).toBe(2);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`KORRAL_LOG_DIR: ${join(dir, file)} is`);
    expect(lines[0]).toMatch(/not a regular file/);
    expect(run.stdout).toBe("");
  });
});

describe("a clean stop leaves no write-intent journal behind", () => {
  it("after a session with a write", async () => {
    const dir = await logDir();
    const ws = await tempWorkspace();
    dirs.push(ws.dir);
    const run = spawnDist("stdio.js", { KORRAL_LOG_DIR: dir, KORRAL_KEYS_FILE: ws.keysFile });
    const call = {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name: "create_replenishment_order",
        arguments: {
          store_id: "102",
          sku: "8847291",
          quantity: 2,
          reason: "Gap check at store 102: on_hand 9 vs 5 sold. Buyer approved 2.",
        },
      },
    };
    run.child.stdin?.end(`${JSON.stringify(call)}\n`);
    expect(await run.exit).toBe(0);
    expect(run.stdout()).toContain("RPL-102-001");
    expect((await readdir(dir)).filter((f) => f.startsWith("intents-"))).toEqual([]);
  });
});
