import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HEALTH_PATHS } from "../../src/http/app.js";

/** Every variable config.ts reads is documented in docs/configuration.md and DEPLOYMENT.md (and no stale ones). */
const root = join(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(join(root, file), "utf8");

// The keys of the zod schema object: two-space-indented `NAME:` lines in config.ts.
const configVariables = [...read("src/config.ts").matchAll(/^ {2}([A-Z][A-Z0-9_]+):/gm)].map(
  (m) => m[1] as string,
);
// Variables another engineer's issue adds; DEPLOYMENT.md names them ahead of config.ts.
const ANNOUNCED = ["KORRAL_RATE_LIMIT_PER_MIN", "KORRAL_ALLOWED_HOSTS", "KORRAL_ALLOWED_ORIGINS"];

/** The variable names in the first column of the table under `heading`. */
function tableVariables(file: string, heading: string): string[] {
  const text = read(file);
  const start = text.indexOf(`${heading}\n`);
  expect(start, `${file} has "${heading}"`).toBeGreaterThanOrEqual(0);
  const rest = text.slice(start + heading.length);
  const end = rest.search(/\n#{2,3} /);
  const section = end === -1 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1] as string);
}
const TABLES: [string, string][] = [
  ["docs/configuration.md", "## Variables"],
  ["DEPLOYMENT.md", "### Environment variables"],
];

describe("configuration documentation", () => {
  it("finds the variables in config.ts", () => {
    expect(configVariables).toEqual(expect.arrayContaining(["PORT", "KORRAL_KEY_SOURCE"]));
  });

  it.each(TABLES)("%s has a row for every variable (%s)", (file, heading) => {
    const documented = tableVariables(file, heading);
    for (const name of configVariables) expect(documented, name).toContain(name);
  });

  it.each(TABLES)("%s documents no variable config.ts lacks (%s)", (file, heading) => {
    for (const name of tableVariables(file, heading)) {
      // Node reads these itself.
      if (["NODE_ENV", "NODE_EXTRA_CA_CERTS"].includes(name) || ANNOUNCED.includes(name)) continue;
      expect(configVariables, name).toContain(name);
    }
  });
});

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
