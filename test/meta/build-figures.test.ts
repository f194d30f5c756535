import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The figures the documents state about the build, held against the built dist/ (npm test builds
 * it first). The desktop bundle's are held by test/desktop/bundle.test.ts, which packs it; the
 * suite's own duration is measured by whoever runs it, never asserted by a test.
 */
const ROOT = join(import.meta.dirname, "../..");
const DIST = join(ROOT, "dist");

/** Every dist file `entry` loads before its first line runs: its static imports, transitively. */
function staticClosure(entry: string): Set<string> {
  const seen = new Set<string>();
  const pending = [entry];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    const code = readFileSync(file, "utf8");
    // Minified ESM: `from"./chunk-X.js"` and bare `import"./chunk-Y.js"`; a dynamic
    // `import("./x.js")` is loaded later, only when called, and is not matched.
    for (const match of code.matchAll(/(?:from|import)\s*"(\.{1,2}\/[^"]+\.js)"/g)) {
      pending.push(join(dirname(file), match[1] ?? ""));
    }
  }
  return seen;
}

describe("docs/performance.md on the build", () => {
  it("is right that node-redis is a 0.5 MB chunk a start without KORRAL_REDIS_URL never loads", () => {
    expect(existsSync(join(DIST, "http.js")), "npm test builds dist/ first").toBe(true);
    const performance = readFileSync(join(ROOT, "docs/performance.md"), "utf8");
    const stated =
      /node-redis is loaded only when `KORRAL_REDIS_URL` is set: its ([\d.]+) MB chunk/.exec(
        performance,
      );
    expect(stated, "docs/performance.md states node-redis's size").not.toBeNull();
    const statedMb = Number(stated?.[1]);

    const start = new Set([
      ...staticClosure(join(DIST, "http.js")),
      ...staticClosure(join(DIST, "stdio.js")),
    ]);
    const redisOnly = [...staticClosure(join(DIST, "limits/redis.js"))].filter(
      (file) => !start.has(file),
    );
    // The Redis client itself is not in what either entry loads at start.
    expect(redisOnly).toContain(join(DIST, "limits/redis.js"));
    const mb = redisOnly.reduce((sum, file) => sum + statSync(file).size, 0) / (1024 * 1024);
    const ratio = statedMb / mb;
    expect(ratio, `the doc says ${statedMb} MB, the chunk is ${mb.toFixed(2)} MB`).toBeGreaterThan(
      0.75,
    );
    expect(ratio, `the doc says ${statedMb} MB, the chunk is ${mb.toFixed(2)} MB`).toBeLessThan(
      1.25,
    );
  });
});
