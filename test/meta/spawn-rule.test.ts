import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/delayed-emulator.js";
import { REDIS_AVAILABLE, startRedis } from "../helpers/redis.js";
import {
  freePort,
  PARENT_DEATH_KILL,
  type Spawned,
  spawnProcess,
  startHttp,
  stdioTransport,
} from "../helpers/spawn.js";

/**
 * The rule of test/helpers/spawn.ts, held: a process a test starts never outlives it, whether its
 * start-up wait fails, its test ends without stopping it, or the worker that started it dies; and
 * every test starts its processes through that one helper.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const NEVER_READY = fileURLToPath(new URL("../fixtures/never-ready.mjs", import.meta.url));
const WORKER = fileURLToPath(new URL("../fixtures/spawning-worker.ts", import.meta.url));

/** Whether `pid` is gone: no such process (our own children are reaped as they exit). */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/** Whether `pid` still runs (an orphan's zombie is dead, waiting for init to reap it). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** The pid a failed wait names in its error. */
async function pidOfFailure(wait: Promise<unknown>): Promise<number> {
  const error = await wait.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(Error);
  const pid = Number(/\(pid (\d+)\)/.exec(String((error as Error).message))?.[1]);
  expect(pid, String(error)).toBeGreaterThan(0);
  return pid;
}

/** Running processes whose command line contains `text`. */
function commandsWith(text: string): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(text);
      } catch {
        return false;
      }
    })
    .map(Number)
    .filter(running);
}

describe("a start-up wait that fails kills the process before it rejects", () => {
  it("a program that never says it is ready", async () => {
    const run = spawnProcess(process.execPath, [NEVER_READY]);
    expect(gone(run.pid)).toBe(false);
    await expect(run.ready(/ready/, 500)).rejects.toThrow(/did not show \/ready\/ within 500 ms/);
    expect(gone(run.pid)).toBe(true);
  });

  it("a program that exits first fails the wait at once, saying so", async () => {
    const run = spawnProcess(process.execPath, ["-e", "process.exit(3)"]);
    await expect(run.ready(/ready/, 60_000)).rejects.toThrow(/exited \(3\) before \/ready\//);
  });

  it("the built HTTP entry, not listening yet when its wait ends", async () => {
    const pid = await pidOfFailure(startHttp({}, 1));
    expect(gone(pid)).toBe(true);
  });

  it.runIf(REDIS_AVAILABLE)("a Redis listening elsewhere than waited for", async () => {
    const elsewhere = String(await freePort());
    const pid = await pidOfFailure(
      startRedis({ args: ["--port", elsewhere], startWithinMs: 1_000 }),
    );
    expect(gone(pid)).toBe(true);
    expect(commandsWith(`:${elsewhere}`)).toEqual([]);
  });
});

describe("a process its test did not stop is killed when the test ends", () => {
  let fromBeforeAll: Spawned;
  const leftByTheFirst: number[] = [];
  beforeAll(() => {
    fromBeforeAll = spawnProcess(process.execPath, [NEVER_READY]);
  });
  afterAll(() => fromBeforeAll.kill());

  it("(a test that starts two and stops neither)", async () => {
    leftByTheFirst.push(spawnProcess(process.execPath, [NEVER_READY]).pid);
    const transport = stdioTransport({
      command: process.execPath,
      args: [NEVER_READY],
      stderr: "ignore",
    });
    await transport.start();
    leftByTheFirst.push(transport.pid as number);
  });

  it("the next test finds them gone, and what a beforeAll started still running", () => {
    expect(leftByTheFirst, "the test before this one ran").toHaveLength(2);
    for (const pid of leftByTheFirst) expect(gone(pid), `pid ${pid}`).toBe(true);
    expect(gone(fromBeforeAll.pid)).toBe(false);
  });
});

describe.runIf(PARENT_DEATH_KILL)("a worker that dies takes its processes with it", () => {
  it("a hung start and a listening server, their worker killed by SIGKILL", async () => {
    const worker = spawnProcess(process.execPath, ["--import", "tsx", WORKER], { cwd: ROOT });
    const [, line] = await worker.ready(/^(\{"pids".*)$/m, 60_000);
    const { pids } = JSON.parse(line as string) as { pids: number[] };
    expect(pids.filter(running)).toEqual(pids);
    try {
      worker.child.kill("SIGKILL");
      await worker.exit;
      await until(() => !pids.some(running), "the worker's processes to end");
    } finally {
      for (const pid of pids.filter(running)) process.kill(pid, "SIGKILL");
    }
  }, 90_000);
});

describe("every process a test starts goes through test/helpers/spawn.ts", () => {
  const TEST = join(ROOT, "test");
  const files = (readdirSync(TEST, { recursive: true }) as string[])
    .map((file) => file.split("\\").join("/"))
    .filter((file) => /\.(ts|mjs|js)$/.test(file) && file !== "helpers/spawn.ts");

  it("reads the test files", () => {
    expect(files).toContain("meta/spawn-rule.test.ts");
    expect(files.length).toBeGreaterThan(100);
  });

  it("no other file starts a process itself", () => {
    // Pieced together, so this file does not match itself.
    const starts = new RegExp(
      [
        ...["node:child_process", "cross-spawn"].map((module) => `from "${module}"`),
        `new ${"StdioClientTransport"}\\(`,
      ].join("|"),
    );
    const offenders = files.filter((file) => starts.test(readFileSync(join(TEST, file), "utf8")));
    expect(offenders).toEqual([]);
  });
});
