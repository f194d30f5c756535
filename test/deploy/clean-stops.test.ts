import { describe, expect, it } from "vitest";
import { until } from "../helpers/delayed-emulator.js";
import { undoAfterEach } from "../helpers/fixtures.js";
import { type Spawned, spawnDist } from "../helpers/spawn.js";

/**
 * A clean stop is never killed: many idle servers of each built entry, stopped at once (so their
 * teardowns compete for the two cores, as on a busy machine), every one exits 0: never SIGKILL (an
 * exit watchdog that fired on a slow but clean teardown), never the signal itself (a signal that
 * came before its handler). The ready line is the earliest a client can act on: stdio's SIGTERM is
 * sent from inside the handler that sees it. `npm run bench:stops` runs 50 in a row per kind.
 * And a teardown that is slow but working (test/fixtures/slow-exit.mjs), far past the watchdog's
 * deadline, is waited for: slow is not stuck (hung-exit.test.ts holds the stuck one).
 */

const { defer, workspace } = undoAfterEach();
/** Servers per kind, all stopped at the same moment. */
const AT_ONCE = 8;
const READY = { "http.js": /listening on HTTP/, "stdio.js": /MCP server running on stdio/ };

type Stop = "SIGTERM" | "SIGINT" | "SIGHUP" | "end of stdin";

/** Starts `AT_ONCE` servers; each is stopped by `stop` the moment its ready line is complete. */
async function stopsAtReady(entry: "http.js" | "stdio.js", stop: Stop) {
  const ws = await workspace();
  const servers: Spawned[] = [];
  for (let i = 0; i < AT_ONCE; i++) {
    const server = spawnDist(entry, {
      KORRAL_KEYS_FILE: ws.keysFile,
      KORRAL_LOG_DIR: `${ws.logDir}-${i}`,
      HOST: "127.0.0.1",
      PORT: "0",
    });
    defer(() => server.stop());
    servers.push(server);
  }
  const readyOnes = servers.map(
    (server) =>
      new Promise<void>((resolve) => {
        let seen = "";
        const onData = (chunk: Buffer) => {
          seen += chunk.toString();
          if (!READY[entry].test(seen)) return;
          server.child.stderr?.off("data", onData);
          resolve();
        };
        server.child.stderr?.on("data", onData);
        server.exit.then(() => resolve());
      }),
  );
  if (entry === "stdio.js") {
    // No waiting for the rest: the stop is sent from the handler that saw the line.
    for (const [i, ready] of readyOnes.entries()) {
      void ready.then(() => sendStop(servers[i] as Spawned, stop));
    }
  } else {
    // All listening first, then all stopped at once: their teardowns overlap.
    await Promise.all(readyOnes);
    for (const server of servers) sendStop(server, stop);
  }
  return Promise.all(
    servers.map(async (server) => ({
      code: await server.exit,
      signal: server.child.signalCode,
      stderr: server.stderr(),
    })),
  );
}

function sendStop(server: Spawned, stop: Stop): void {
  if (stop === "end of stdin") server.child.stdin?.end();
  else server.child.kill(stop);
}

describe("clean stops of idle servers, many at once", () => {
  it.each([
    ["http.js", "SIGTERM"],
    ["http.js", "SIGINT"],
    ["http.js", "SIGHUP"],
    ["stdio.js", "SIGTERM"],
    ["stdio.js", "end of stdin"],
  ] as const)(
    "%s stopped by %s: every one exits 0",
    async (entry, stop) => {
      const outcomes = await stopsAtReady(entry, stop);
      const unclean = outcomes.filter((o) => o.code !== 0);
      expect(
        unclean.map((o) => o.signal ?? `exit ${o.code}`),
        unclean[0]?.stderr,
      ).toEqual([]);
    },
    120_000,
  );
});

const SLOW_EXIT = new URL("../fixtures/slow-exit.mjs", import.meta.url).href;

describe("a clean stop whose exit is slow but working", () => {
  it.each(["http.js", "stdio.js"] as const)(
    "%s still exits 0",
    async (entry) => {
      const ws = await workspace();
      const server = spawnDist(entry, {
        KORRAL_KEYS_FILE: ws.keysFile,
        KORRAL_LOG_DIR: ws.logDir,
        HOST: "127.0.0.1",
        PORT: "0",
        // The watchdog's deadline is the grace plus 1.3 s from the stop; the exit works for longer.
        KORRAL_SHUTDOWN_GRACE_MS: "100",
        KORRAL_TEST_SLOW_EXIT_MS: "5000",
        NODE_OPTIONS: `--import=${SLOW_EXIT}`,
      });
      defer(() => server.stop());
      await until(() => READY[entry].test(server.stderr()), "the ready line");
      server.child.kill("SIGTERM");
      expect(await server.exit, server.child.signalCode ?? "").toBe(0);
    },
    60_000,
  );
});
