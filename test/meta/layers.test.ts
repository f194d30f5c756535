import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The folders of src/ are layers, and imports point one way: entries -> transports (http/, stdio/)
 * -> the server factory (mcp/server.ts) -> deps.ts -> the call path (mcp/call-tool.ts) -> tools ->
 * policy -> limits / storelink / keys / logging -> config. This reads every import of src/ (type-only
 * imports too: they are coupling all the same) and holds exactly the rules docs/architecture.md
 * lists.
 */
const SRC = join(import.meta.dirname, "../../src");
const files = (readdirSync(SRC, { recursive: true }) as string[])
  .filter((file) => file.endsWith(".ts"))
  .map((file) => file.split("\\").join("/"));

const importsOf = (file: string): string[] =>
  [...readFileSync(join(SRC, file), "utf8").matchAll(/from "(\.{1,2}\/[^"]+)\.js"/g)].map((m) =>
    relative(SRC, resolve(dirname(join(SRC, file)), `${m[1]}.ts`))
      .split("\\")
      .join("/"),
  );
const graph = new Map(files.map((file) => [file, importsOf(file)]));

/** The layer of a module: its folder, or its own name at the root. */
const layerOf = (file: string): string =>
  file.includes("/") ? (file.split("/")[0] as string) : file.replace(/\.ts$/, "");

const ENTRIES = ["stdio", "http", "storelink-emulator"];
/** The transports' folders share their entries' names: `http/` and `stdio/`. */
const ABOVE_TOOLS = ["mcp", "lifecycle", "deps", ...ENTRIES];
/** Every layer of src/: its folders and the modules at its root. */
const LAYERS = [...new Set(files.map(layerOf))];
/** What each layer may never import. */
const NEVER: Record<string, string[]> = {
  // The bottom: config.ts and config/ read the environment and nothing else of src/.
  config: LAYERS.filter((layer) => layer !== "config"),
  storelink: ["tools", "policy", "limits", "errors", ...ABOVE_TOOLS],
  keys: ["tools", "policy", "storelink", "limits", "errors", ...ABOVE_TOOLS],
  logging: [
    "tools",
    "policy",
    "keys",
    "limits",
    "storelink",
    "errors",
    "telemetry",
    ...ABOVE_TOOLS,
  ],
  // Spans and metrics: below everything that makes them, above only config and the ops log.
  telemetry: ["tools", "policy", "keys", "limits", "storelink", "errors", ...ABOVE_TOOLS],
  limits: ["tools", "policy", "storelink", "keys", "errors", ...ABOVE_TOOLS],
  errors: ["tools", "policy", ...ABOVE_TOOLS],
  policy: ["tools", ...ABOVE_TOOLS],
  tools: ABOVE_TOOLS,
  lifecycle: ["tools", "mcp", "deps", ...ENTRIES],
  deps: ["mcp", ...ENTRIES],
  mcp: ENTRIES,
};

describe("src/ layers", () => {
  it("reads the imports of every module", () => {
    expect(graph.get("http.ts")).toContain("deps.ts");
    expect(files.length).toBeGreaterThan(40);
    expect(NEVER.config).toEqual(expect.arrayContaining(["http", "logging", "errors"]));
  });

  it("every import resolves to a module of src/", () => {
    for (const [file, imports] of graph) {
      for (const target of imports) expect(files, `${file} imports ${target}`).toContain(target);
    }
  });

  it.each(Object.keys(NEVER))("%s/ imports nothing above it", (layer) => {
    const wrong = [...graph]
      .filter(([file]) => layerOf(file) === layer)
      .flatMap(([file, imports]) =>
        imports.filter((t) => NEVER[layer]?.includes(layerOf(t))).map((t) => `${file} -> ${t}`),
      );
    expect(wrong).toEqual([]);
  });

  it("only the entries compose the dependencies: the factory and the app take a complete Deps", () => {
    const wrong = [...graph].flatMap(([file, imports]) =>
      imports
        .filter((t) => t === "deps.ts" && !ENTRIES.map((name) => `${name}.ts`).includes(file))
        .map((t) => `${file} -> ${t}`),
    );
    expect(wrong).toEqual([]);
  });

  it("the call path sits below the server factory: only the transports build a server", () => {
    const wrong = [...graph].flatMap(([file, imports]) =>
      imports
        .filter((t) => t === "mcp/server.ts" && !["http", "stdio"].includes(layerOf(file)))
        .map((t) => `${file} -> ${t}`),
    );
    expect(wrong).toEqual([]);
  });

  it("no module imports an entry (an entry's start-up code would land in a shared chunk)", () => {
    const entries = ENTRIES.map((name) => `${name}.ts`);
    const wrong = [...graph].flatMap(([file, imports]) =>
      imports.filter((t) => entries.includes(t)).map((t) => `${file} -> ${t}`),
    );
    expect(wrong).toEqual([]);
  });

  it("has no import cycle", () => {
    const cycles: string[] = [];
    const state = new Map<string, "open" | "done">();
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === "done") return;
      if (state.get(file) === "open") {
        cycles.push([...path.slice(path.indexOf(file)), file].join(" -> "));
        return;
      }
      state.set(file, "open");
      for (const target of graph.get(file) ?? []) visit(target, [...path, file]);
      state.set(file, "done");
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
  });
});
