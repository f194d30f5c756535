import { closeSync, constants, existsSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/delayed-emulator.js";
import { undoAfterEach } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { listening, runSyncOk, spawnDist, spawnProcess } from "../helpers/spawn.js";

/**
 * SIGTERM ends the process even when a read hangs in the thread pool (the key file a FIFO, as a
 * stuck mount behaves): `process.exit` would wait for that read forever; the exit watchdog ends
 * the process once everything owed is audited. Also as the container runs it: the image's
 * ENTRYPOINT and CMD as PID 1 of a PID namespace of their own, where a SIGKILL from inside the
 * namespace cannot end its init. (How soon it ends is measured by `npm run bench:stops -- --hung`:
 * tests never assert on wall-clock time.)
 */

const { defer, workspace } = undoAfterEach();
const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** A FIFO nobody writes, as the key file; given a writer after the test, so nothing hangs on. */
async function hungKeyFile(): Promise<{ fifo: string; logDir: string }> {
  const ws = await workspace();
  const fifo = join(ws.logDir, "..", "hung-keys.json");
  runSyncOk("mkfifo", [fifo]);
  defer(async () => {
    try {
      closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // No reader left (ENXIO): nothing hangs on it.
    }
  });
  return { fifo, logDir: ws.logDir };
}

/** The runtime stage's exec-form ENTRYPOINT and CMD, as `docker run` joins them. */
function imageCommand(): string[] {
  const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
  const execForm = (op: string) =>
    [...dockerfile.matchAll(new RegExp(`^${op} (\\[.*\\])$`, "gm"))].map(
      (m) => JSON.parse(m[1] as string) as string[],
    );
  return [...(execForm("ENTRYPOINT").at(-1) ?? []), ...(execForm("CMD").at(-1) ?? [])];
}

describe("a key read hung in the thread pool, then SIGTERM", () => {
  it.each(["http.js", "stdio.js"] as const)(
    "%s still ends, with the write audited",
    async (entry) => {
      const { fifo, logDir } = await hungKeyFile();
      const server = spawnDist(entry, {
        KORRAL_KEYS_FILE: fifo,
        KORRAL_KEY_DEADLINE_MS: "200",
        KORRAL_SHUTDOWN_GRACE_MS: "500",
        KORRAL_LOG_DIR: logDir,
        HOST: "127.0.0.1",
        PORT: "0",
      });
      defer(() => server.stop());
      const body = JSON.stringify(toolCall(5, "create_replenishment_order", ORDER));
      if (entry === "http.js") {
        const { port } = await listening(server, 10_000);
        const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
          method: "POST",
          headers: MCP_HEADERS,
          body,
        });
        const answer = (await res.json()) as { result: { isError?: boolean } };
        expect(answer.result.isError).toBe(true);
      } else {
        server.child.stdin?.write(`${body}\n`);
        await until(() => server.stdout().includes('"id":5'), "the answer");
      }
      const audit = join(logDir, "audit.log");
      await until(() => existsSync(audit), "the audit line");
      server.child.kill("SIGTERM");
      let cut = false;
      const guard = setTimeout(() => {
        cut = true;
        server.child.kill("SIGKILL");
      }, 20_000);
      const code = await server.exit;
      clearTimeout(guard);
      expect(cut, "the process had to be killed from outside").toBe(false);
      expect(code === null ? server.child.signalCode : code).not.toBeNull();
      expect(readFileSync(audit, "utf8")).toMatch(/ REJECTED - store=47 /);
    },
    40_000,
  );
});

const IMAGE_COMMAND = imageCommand();
/** The image's init (its ENTRYPOINT's program), when node is not the first word. */
const init = IMAGE_COMMAND[0] === "node" ? undefined : IMAGE_COMMAND[0];
const canRun = existsSync("/usr/bin/unshare") && process.getuid?.() === 0;
const initMissing = init !== undefined && !existsSync(init);
if (canRun && initMissing && process.env.CI === "true") {
  throw new Error(`${init} is missing; CI must have it (apt-get install tini)`);
}
if (canRun && initMissing) {
  console.warn(`PID-1 stop test skipped: ${init} is not installed (apt-get install tini)`);
}

describe.runIf(canRun && !initMissing)(
  "the image's command as PID 1 of its own PID namespace",
  () => {
    it("a stop whose exit hangs still ends, with the write audited", async () => {
      const { fifo, logDir } = await hungKeyFile();
      // The machine's node in place of the image's; run from the app directory, as the image does.
      const command = IMAGE_COMMAND.map((word) => (word === "node" ? process.execPath : word));
      // --kill-child: when unshare goes, so does the namespace, whatever the test's outcome.
      const child = spawnProcess(
        "unshare",
        ["--pid", "--fork", "--mount-proc", "--kill-child", ...command],
        {
          cwd: ROOT,
          env: {
            ...process.env,
            KORRAL_KEYS_FILE: fifo,
            KORRAL_KEY_DEADLINE_MS: "200",
            KORRAL_SHUTDOWN_GRACE_MS: "500",
            KORRAL_LOG_DIR: logDir,
            HOST: "127.0.0.1",
            PORT: "0",
          },
          stdin: "ignore",
        },
      );
      defer(() => child.kill());
      const { port } = await listening(child, 10_000);
      expect(child.stderr()).not.toContain("running as PID 1");
      const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
        method: "POST",
        headers: MCP_HEADERS,
        body: JSON.stringify(toolCall(5, "create_replenishment_order", ORDER)),
      });
      expect(((await res.json()) as { result: { isError?: boolean } }).result.isError).toBe(true);
      const audit = join(logDir, "audit.log");
      await until(() => existsSync(audit), "the audit line");
      // What `docker stop` and Cloud Run do: SIGTERM to the container's PID 1.
      const pid1 = Number(runSyncOk("pgrep", ["-P", String(child.pid)]));
      process.kill(pid1, "SIGTERM");
      let cut = false;
      const guard = setTimeout(() => {
        cut = true;
        child.child.kill("SIGKILL");
      }, 20_000);
      const code = await child.exit;
      clearTimeout(guard);
      expect(cut, "the namespace had to be ended from outside").toBe(false);
      // node ended by its watchdog (SIGKILL), as tini reports it: 128 + 9.
      expect(code).toBe(137);
      expect(readFileSync(audit, "utf8")).toMatch(/ REJECTED - store=47 /);
    }, 40_000);

    it("node run as PID 1 itself says at start that a hung exit cannot be ended", async () => {
      const ws = await workspace();
      const child = spawnProcess(
        "unshare",
        ["--pid", "--fork", "--mount-proc", "--kill-child", process.execPath, "dist/http.js"],
        {
          cwd: ROOT,
          env: { ...process.env, KORRAL_LOG_DIR: ws.logDir, HOST: "127.0.0.1", PORT: "0" },
          stdin: "ignore",
        },
      );
      defer(() => child.kill());
      await listening(child, 10_000);
      expect(child.stderr()).toMatch(
        /running as PID 1 with no init: a stop whose exit hangs cannot be ended/,
      );
    }, 40_000);
  },
);
