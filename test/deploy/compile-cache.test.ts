import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { DIST, listening, runProcess, spawnProcess } from "../helpers/spawn.js";

/**
 * The image's compile cache (Dockerfile, `scripts/warm-compile-cache.mjs`), rehearsed on the Node
 * 22 the image runs (the conformance suite's, which `.ci/run` installs; Node 20 has no compile
 * cache): the warm-up starts the service once as the CMD does and fills the cache; a later start
 * then reads every module of `dist/` it loads from the cache and compiles none of them again.
 */
const root = fileURLToPath(new URL("../..", import.meta.url));
const NODE_22 = join(root, "conformance/node_modules/node/bin/node");
const WARM = join(root, "scripts/warm-compile-cache.mjs");
const CMD_FLAGS = ["--min-semi-space-size=8", "--max-semi-space-size=8"];

const work = mkdtempSync(join(tmpdir(), "compile-cache-test-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("Node's compile cache, as the image warms it", () => {
  it("is available: the conformance suite's Node 22 is installed", () => {
    // Without it nothing below can run; `npm ci --prefix conformance` installs it.
    expect(existsSync(NODE_22), NODE_22).toBe(true);
  });

  it("a start after the warm-up reads every module of dist/ it loads from the cache", async () => {
    const cache = join(work, "cache");
    const env = { PATH: process.env.PATH ?? "", NODE_COMPILE_CACHE: cache };
    const warm = await runProcess(NODE_22, [WARM, NODE_22, ...CMD_FLAGS, join(DIST, "http.js")], {
      env,
      timeoutMs: 60_000,
    });
    expect(warm.code, warm.stderr).toBe(0);
    expect(warm.stdout).toMatch(/warm-compile-cache: \d+ entries in /);
    expect(readdirSync(cache, { recursive: true }).length).toBeGreaterThan(50);

    const run = await listening(
      spawnProcess(NODE_22, [...CMD_FLAGS, join(DIST, "http.js")], {
        env: {
          ...env,
          PORT: "0",
          HOST: "127.0.0.1",
          KORRAL_LOG_DIR: join(work, "log"),
          NODE_DEBUG_NATIVE: "COMPILE_CACHE",
        },
      }),
    );
    expect(await run.stop()).toBe(0);
    const lines = `${run.stderr()}\n${run.stdout()}`.split("\n");
    const dist = `file://${DIST}`;
    const read = lines.filter(
      (l) => /\[compile cache\] reading cache from /.test(l) && l.includes(dist),
    );
    // The HTTP entry and its chunks at least; each found in the cache, none compiled again.
    expect(read.length).toBeGreaterThan(20);
    expect(read.filter((l) => /no such file|mismatch|reject/i.test(l))).toEqual([]);
    const hits = lines.filter((l) => l.includes(dist) && /because cache was the same/.test(l));
    expect(hits.length).toBe(read.length);
    expect(lines.filter((l) => /writing cache for/.test(l) && l.includes(dist))).toEqual([]);
  });

  it("fails the build, with the server's output, when the start never listens", async () => {
    const cache = join(work, "broken");
    const ran = await runProcess(
      NODE_22,
      [WARM, NODE_22, "-e", "console.error('no such start'); process.exit(3)"],
      { env: { PATH: process.env.PATH ?? "", NODE_COMPILE_CACHE: cache }, timeoutMs: 60_000 },
    );
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/did not listen and stop cleanly \(listening: false, exit 3/);
    expect(ran.stderr).toContain("no such start");
  });
});
