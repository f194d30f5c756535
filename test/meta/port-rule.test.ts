import { once } from "node:events";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { freePort, spawnDist, spawnProcess, waitForHealthy } from "../helpers/spawn.js";

/**
 * The port rule of test/helpers/spawn.ts, held: a test that starts a server on a port it chose
 * talks to that server or fails, never to another file's server that took the port first.
 */

const [ephemeralStart] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
  .trim()
  .split(/\s+/)
  .map(Number);

describe("freePort", () => {
  it("hands this worker ports of its own, below the range listen(0) and outgoing connections use", async () => {
    const ports = [await freePort(), await freePort(), await freePort()];
    expect(new Set(ports).size).toBe(3);
    const pool = Number(process.env.VITEST_POOL_ID);
    for (const port of ports) {
      expect(port).toBeLessThan(ephemeralStart as number);
      expect(Math.floor((port - 20_000) / 1_000)).toBe(pool);
    }
  });

  it("skips a port of the block something already listens on", async () => {
    const taken = await freePort();
    const squatter = createServer();
    // The next port of the block, taken before it is handed out.
    squatter.listen(taken + 1, "127.0.0.1");
    await once(squatter, "listening");
    try {
      expect(await freePort()).toBe(taken + 2);
    } finally {
      squatter.close();
    }
  });
});

describe("freePort among concurrent test runs (another clone's, a helper's)", () => {
  const claims = join(tmpdir(), "korral-test-ports");

  it("skips a port a live process of another run claimed, and takes over a dead run's claim", async () => {
    const first = await freePort();
    const live = join(claims, String(first + 1));
    const dead = join(claims, String(first + 2));
    const ended = spawnProcess(process.execPath, ["-e", "0"]);
    await ended.exit;
    try {
      // pid 1 lives as long as the machine; `ended` has exited.
      writeFileSync(live, "1");
      writeFileSync(dead, String(ended.pid));
      expect(await freePort()).toBe(first + 2);
      expect(readFileSync(dead, "utf8")).toBe(String(process.pid));
    } finally {
      rmSync(live, { force: true });
    }
  });
});

describe("waitForHealthy", () => {
  it("refuses a healthy answer from a server on the port that is not the one started", async () => {
    const port = await freePort();
    const other = createServer((_req, res) => res.end("ok"));
    other.listen(port, "127.0.0.1");
    await once(other, "listening");
    try {
      const server = spawnDist("http.js", { PORT: String(port), HOST: "127.0.0.1" });
      await expect(waitForHealthy(server, `http://127.0.0.1:${port}/healthz`)).rejects.toThrow(
        /exited \(\d+\) before/,
      );
    } finally {
      other.close();
    }
  });
});
