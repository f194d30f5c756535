import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { cacheUse, cmdOf, NODE_22 } from "../helpers/compile-cache.js";
import { DIST, listening, runProcess, spawnProcess } from "../helpers/spawn.js";

/**
 * `scripts/warm-compile-cache.mjs`, which the image's build runs (the Dockerfile's steps and its
 * runtime user are rehearsed in runtime-rehearsal.test.ts), on the Node 22 the image runs (Node 20
 * has no compile cache): it starts the service once and fills the cache, so a later start reads
 * every module of `dist/` it loads from there and compiles none of them again; a start that
 * never listens, or that caches nothing, fails it.
 */
const root = fileURLToPath(new URL("../..", import.meta.url));
const WARM = join(root, "scripts/warm-compile-cache.mjs");
const { flags } = cmdOf(readFileSync(join(root, "Dockerfile"), "utf8"));

const work = mkdtempSync(join(tmpdir(), "compile-cache-test-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const warm = (cache: string, command: string[]) =>
  runProcess(NODE_22, [WARM, ...command], {
    env: { PATH: process.env.PATH ?? "", NODE_COMPILE_CACHE: cache },
    timeoutMs: 60_000,
  });

describe("the compile cache's warm-up", () => {
  it("is testable: the conformance suite's Node 22 is installed", () => {
    // Without it nothing below can run; `npm ci --prefix conformance` installs it.
    expect(existsSync(NODE_22), NODE_22).toBe(true);
  });

  it("fills the cache, and a later start reads every module of dist/ it loads from it", async () => {
    const cache = join(work, "cache");
    const warmed = await warm(cache, [NODE_22, ...flags, join(DIST, "http.js")]);
    expect(warmed.code, warmed.stderr).toBe(0);
    expect(warmed.stdout).toMatch(/warm-compile-cache: \d+ entries in /);
    const files = readdirSync(cache, { recursive: true, withFileTypes: true });
    expect(files.filter((f) => f.isFile()).length).toBeGreaterThan(50);

    const run = await listening(
      spawnProcess(NODE_22, [...flags, join(DIST, "http.js")], {
        env: {
          PATH: process.env.PATH ?? "",
          NODE_COMPILE_CACHE: cache,
          PORT: "0",
          HOST: "127.0.0.1",
          KORRAL_LOG_DIR: join(work, "log"),
          NODE_DEBUG_NATIVE: "COMPILE_CACHE",
        },
      }),
    );
    expect(await run.stop()).toBe(0);
    const use = cacheUse(`${run.stderr()}\n${run.stdout()}`, `file://${DIST}`);
    // The HTTP entry and its chunks at least; each found in the cache, none compiled again.
    expect(use.read).toBeGreaterThan(20);
    expect(use.unusable).toEqual([]);
    expect(use.hits).toBe(use.read);
    expect(use.written).toEqual([]);
  });

  it("fails, with the server's output, when the start never listens", async () => {
    const ran = await warm(join(work, "broken"), [
      NODE_22,
      "-e",
      "console.error('no such start'); process.exit(3)",
    ]);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/did not listen and stop cleanly \(listening: false, exit 3/);
    expect(ran.stderr).toContain("no such start");
  });

  it("fails when the start listens but caches nothing", async () => {
    // A stand-in that says it listens and stops cleanly, and loads no module at all.
    const ran = await warm(join(work, "empty"), [
      "sh",
      "-c",
      'trap "exit 0" TERM; echo "listening on HTTP"; while :; do sleep 0.1; done',
    ]);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/listening: true, exit 0, 0 cache entries/);
  });
});
