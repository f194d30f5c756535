import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * No Docker engine runs here, so the Dockerfile's essentials are checked by reading it; the
 * runtime stage itself is rehearsed in runtime-rehearsal.test.ts.
 */
const root = join(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(join(root, file), "utf8");

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name: string | undefined;
  body: Instruction[];
}

/** Splits a Dockerfile into stages of instructions (comments dropped, continuations joined). */
function parseDockerfile(text: string): Stage[] {
  const logical = text
    .replace(/\\\r?\n/g, " ")
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  const stages: Stage[] = [];
  for (const line of logical) {
    const [, op = "", args = ""] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const instruction = { op: op.toUpperCase(), args };
    if (instruction.op === "FROM") {
      const [image = "", as, name] = args.split(/\s+/);
      stages.push({ from: image, name: as?.toUpperCase() === "AS" ? name : undefined, body: [] });
    } else {
      const stage = stages.at(-1);
      if (!stage) throw new Error(`${op} before FROM`);
      stage.body.push(instruction);
    }
  }
  return stages;
}

const stages = parseDockerfile(read("Dockerfile"));
const runtime = stages.at(-1) as Stage;
const all = (stage: Stage, op: string) => stage.body.filter((i) => i.op === op);

describe("Dockerfile", () => {
  it("is multi-stage, every stage on Node 22 LTS", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage.from).toMatch(/^node:22[-.\w]*$/);
  });

  it("the build stage installs everything and compiles", () => {
    const build = stages[0] as Stage;
    const runs = all(build, "RUN").map((i) => i.args);
    expect(runs.some((r) => /\bnpm ci\b/.test(r) && !r.includes("--omit=dev"))).toBe(true);
    expect(runs.some((r) => r.includes("npm run build"))).toBe(true);
  });

  it("the runtime stage installs production dependencies only and copies only dist from the build", () => {
    const runs = all(runtime, "RUN").map((i) => i.args);
    expect(runs.some((r) => /\bnpm ci\b.*--omit=dev/.test(r))).toBe(true);
    const copies = all(runtime, "COPY").map((i) => i.args.split(/\s+/));
    for (const args of copies) {
      const sources = args.filter((a) => !a.startsWith("--")).slice(0, -1);
      const fromBuild = args.some((a) => a.startsWith("--from="));
      if (fromBuild) expect(sources).toEqual(["/app/dist"]);
      else if (sources.length === 1) expect(sources).toEqual(["scripts/warm-compile-cache.mjs"]);
      else expect(sources.sort()).toEqual(["package-lock.json", "package.json"]);
    }
    expect(all(runtime, "ADD")).toEqual([]);
  });

  it("never copies keys, logs or tests, in any stage", () => {
    for (const stage of stages) {
      for (const { args } of [...all(stage, "COPY"), ...all(stage, "ADD")]) {
        expect(args).not.toMatch(/keys(\.example)?\.json|\blog\b|\btest\b|\.env|\s\.\s/);
      }
    }
  });

  it("sets production defaults and binds all interfaces for Cloud Run", () => {
    const env = all(runtime, "ENV")
      .map((i) => i.args)
      .join(" ");
    expect(env).toMatch(/\bNODE_ENV=production\b/);
    expect(env).toMatch(/\bHOST=0\.0\.0\.0\b/);
  });

  it("runs as a non-root user", () => {
    const users = all(runtime, "USER").map((i) => i.args);
    expect(users.length).toBeGreaterThan(0);
    expect(users.at(-1)).not.toMatch(/^(root|0)(:|$)/);
  });

  it("starts node with exec-form CMD under tini, so SIGTERM reaches it and node is not PID 1", () => {
    const cmds = all(runtime, "CMD");
    expect(cmds).toHaveLength(1);
    const cmd = JSON.parse(cmds[0]?.args ?? "") as string[];
    expect(cmd[0]).toBe("node");
    expect(cmd.at(-1)).toBe("dist/http.js");
    // tini passes signals on and exits with node's status (hung-exit.test.ts runs the two as PID 1).
    const entrypoints = all(runtime, "ENTRYPOINT").map((i) => JSON.parse(i.args) as string[]);
    expect(entrypoints).toEqual([["/usr/bin/tini", "--"]]);
    const runs = all(runtime, "RUN").map((i) => i.args);
    expect(runs.some((r) => /\bapt-get install\b.*\btini\b/.test(r))).toBe(true);
  });

  it("warms Node's compile cache with the CMD itself, as the runtime user, and leaves it read-only", () => {
    const env = all(runtime, "ENV")
      .map((i) => i.args)
      .join(" ");
    const dir = /\bNODE_COMPILE_CACHE=(\S+)/.exec(env)?.[1];
    expect(dir).toBe("/app/.compile-cache");
    const cmd = (JSON.parse(all(runtime, "CMD")[0]?.args ?? "") as string[]).join(" ");
    const warm = all(runtime, "RUN").find((i) => i.args.includes("warm-compile-cache.mjs"));
    const steps = (warm?.args ?? "").split(/\s*&&\s*/).map((step) => step.replace(/\s+/g, " "));
    // Warmed as the user the CMD runs as: the cache is kept per user id.
    const user = all(runtime, "USER").at(-1)?.args;
    expect(steps).toContain(
      `setpriv --reuid=${user} --regid=${user} --init-groups node scripts/warm-compile-cache.mjs ${cmd}`,
    );
    expect(steps.at(-2)).toBe(`chown -R root:root ${dir}`);
    // Node writes its entries 0600: the runtime user must still be able to read them.
    expect(steps.at(-1)).toBe(`chmod -R a+rX,a-w ${dir}`);
    expect(steps[0]).toMatch(/^--network=none /);
    // The warm-up runs after the code it compiles is in place, and before the image's user is set.
    const at = (found: Instruction | undefined) => runtime.body.indexOf(found as Instruction);
    const distCopy = all(runtime, "COPY").find((i) => i.args.includes("/app/dist"));
    expect(at(warm)).toBeGreaterThan(at(distCopy));
    expect(at(warm)).toBeLessThan(at(all(runtime, "USER").at(-1)));
  });

  it("runs the same command as `npm run start:http` (which the README and the benchmark use)", () => {
    const cmd = JSON.parse(all(runtime, "CMD")[0]?.args ?? "") as string[];
    const scripts = JSON.parse(read("package.json")).scripts as Record<string, string>;
    expect(scripts["start:http"]).toBe(cmd.join(" "));
  });
});

describe(".dockerignore", () => {
  const lines = read(".dockerignore")
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));

  it("is an allowlist: everything excluded, then only build inputs re-included", () => {
    expect(lines[0]).toBe("*");
    const included = lines.slice(1);
    for (const line of included) expect(line.startsWith("!")).toBe(true);
    expect(included.map((l) => l.slice(1).replace(/\/$/, "")).sort()).toEqual(
      [
        "package-lock.json",
        "package.json",
        "scripts/bundle.mjs",
        "scripts/node-bundle.mjs",
        "scripts/warm-compile-cache.mjs",
        "src",
        "tsconfig.json",
      ].sort(),
    );
  });

  it("lets in and copies every file the bundler reads beside itself", () => {
    const allowed = new Set(lines.slice(1).map((l) => l.slice(1)));
    const copied = all(stages[0] as Stage, "COPY")
      .map((i) => i.args)
      .join(" ");
    // Files it opens (`new URL("./x", import.meta.url)`) and modules it imports ("./x.mjs").
    const siblings = [
      ...read("scripts/bundle.mjs").matchAll(/(?:new URL\(|from )"\.\/([^"]+)"/g),
    ].map((m) => `scripts/${m[1]}`);
    expect(siblings).toContain("scripts/node-bundle.mjs");
    for (const file of siblings) {
      expect(allowed.has(file), file).toBe(true);
      expect(copied, file).toContain(file);
    }
  });

  it("everything the Dockerfile copies from the context is allowed in", () => {
    const allowed = new Set(lines.slice(1).map((l) => l.slice(1).replace(/\/$/, "")));
    for (const stage of stages) {
      for (const { args } of all(stage, "COPY")) {
        const parts = args.split(/\s+/);
        if (parts.some((a) => a.startsWith("--from="))) continue;
        for (const source of parts.filter((a) => !a.startsWith("--")).slice(0, -1)) {
          expect(allowed.has(source.replace(/^\.\//, "").replace(/\/$/, ""))).toBe(true);
        }
      }
    }
  });
});

describe("the documentation quotes the Dockerfile's CMD as it is", () => {
  const cmd = all(runtime, "CMD")[0]?.args ?? "";

  it.each(["docs/configuration.md", "DEPLOYMENT.md"])(
    "every CMD quote in %s equals the Dockerfile's",
    (file) => {
      // Quotes may wrap across lines in the prose: join whitespace runs before comparing.
      const quotes = [...read(file).matchAll(/`CMD (\[[^\]`]*\])`/g)].map((m) =>
        (m[1] as string).replace(/\s+/g, " "),
      );
      expect(quotes.length, `${file} quotes the CMD`).toBeGreaterThan(0);
      for (const quote of quotes) expect(quote).toBe(cmd);
    },
  );
});
