import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HEALTH_PATHS } from "../../src/http/app.js";

/**
 * DEPLOYMENT.md's health checks use paths the app answers. (Its variable table, and
 * docs/configuration.md's, are generated from src/config.ts: test/meta/generated-texts.test.ts.)
 */
const root = join(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(join(root, file), "utf8");

describe("health paths in DEPLOYMENT.md", () => {
  const doc = read("DEPLOYMENT.md");

  it("probes only paths the app answers", () => {
    const probes = [...doc.matchAll(/httpGet\.path=([^,\s]+)/g)].map((m) => m[1]);
    expect(probes.length).toBeGreaterThan(0);
    for (const path of probes) expect(HEALTH_PATHS, `probe ${path}`).toContain(path);
  });

  it("checks health through the service URL on a path Cloud Run's front end does not reserve", () => {
    const checked = [...doc.matchAll(/curl -sS "\$URL(\/[a-z]+)"/g)].map((m) => m[1] as string);
    expect(checked.length).toBeGreaterThan(0);
    for (const path of checked) {
      expect(HEALTH_PATHS, path).toContain(path);
      expect(path.endsWith("z"), `${path} ends in z`).toBe(false);
    }
  });
});
