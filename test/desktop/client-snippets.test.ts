import { existsSync, readFileSync } from "node:fs";
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { HERO_STORE_47, type Launch, runDemoFlow } from "./demo-flow.js";

/**
 * Every desktop snippet in docs/clients.md's "From a clone" section, run as written: the placeholder
 * replaced by this checkout's path, exactly the snippet's command, arguments and env, started by
 * the SDK client from a directory that is not the repository (as Claude Desktop and Claude Code
 * do), through the demo flow. The setup step the section asks for (a built dist/, npm test builds
 * it; keys.json copied from keys.example.json) is done first.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "");
const PLACEHOLDER = "/absolute/path/to/korral-storelink-mcp";

function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/clients.md has no "${heading}" section`);
  const next = markdown.slice(start + heading.length + 2).search(/\n#{2,3} /);
  return next < 0
    ? markdown.slice(start)
    : markdown.slice(start, start + heading.length + 2 + next);
}

function codeBlocks(markdown: string, lang: string): string[] {
  return [...markdown.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, "g"))].map(
    (m) => m[1] ?? "",
  );
}

const substitute = (text: string) => text.split(PLACEHOLDER).join(ROOT);

interface Snippet {
  name: string;
  launch: Omit<Launch, "cwd">;
}

/** `{ "mcpServers": { name: { command, args, env } } }` as in claude_desktop_config.json. */
function fromJson(block: string): Snippet[] {
  const config = JSON.parse(substitute(block)) as {
    mcpServers: Record<string, { command: string; args?: string[]; env?: Record<string, string> }>;
  };
  return Object.entries(config.mcpServers).map(([name, s]) => ({
    name,
    launch: { command: s.command, args: s.args ?? [], env: s.env ?? {} },
  }));
}

/** `claude mcp add <name> [--env K=V]... -- <command> [args...]`. */
function fromClaudeCode(line: string): Snippet {
  const words = substitute(line).trim().split(/\s+/);
  expect(words.slice(0, 3)).toEqual(["claude", "mcp", "add"]);
  const dashes = words.indexOf("--");
  expect(dashes, "the server command follows --").toBeGreaterThan(3);
  const options = words.slice(3, dashes);
  const env: Record<string, string> = {};
  let name = "";
  for (let i = 0; i < options.length; i++) {
    const word = options[i] ?? "";
    if (word === "--env" || word === "-e") {
      const [key = "", ...value] = (options[++i] ?? "").split("=");
      env[key] = value.join("=");
    } else {
      name = word;
    }
  }
  const [command = "", ...args] = words.slice(dashes + 1);
  return { name, launch: { command, args, env } };
}

const clients = readFileSync(join(ROOT, "docs/clients.md"), "utf8");
const fromClone = section(clients, "## From a clone");
const snippets: Snippet[] = [
  ...codeBlocks(fromClone, "json").flatMap(fromJson),
  ...codeBlocks(fromClone, "bash")
    .flatMap((block) => block.split("\n"))
    .filter((line) => line.startsWith("claude mcp add"))
    .map(fromClaudeCode),
];

describe("docs/clients.md desktop snippets, run as written from another directory", () => {
  let cwd: string;
  let createdKeys = false;
  const keysFile = join(ROOT, "keys.json");

  beforeAll(async () => {
    expect(existsSync(join(ROOT, "dist/stdio.js")), "npm test builds dist/ first").toBe(true);
    // The section's setup step. A developer's own keys.json is left alone.
    if (!existsSync(keysFile)) {
      await copyFile(join(ROOT, "keys.example.json"), keysFile);
      createdKeys = true;
    }
    cwd = await mkdtemp(join(tmpdir(), "korral-client-cwd-"));
  });

  afterAll(async () => {
    if (createdKeys) await rm(keysFile, { force: true });
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  it("the section says how to get dist/ and keys.json before any snippet works", () => {
    const setup = codeBlocks(fromClone, "bash")[0] ?? "";
    expect(setup).toContain("npm run build");
    expect(setup).toContain("cp keys.example.json keys.json");
    expect(fromClone).toContain("No credentials for store");
  });

  it("finds the built, from-source and Claude Code snippets", () => {
    expect(snippets).toHaveLength(3);
    const launched = snippets.map((s) => [s.launch.command, ...s.launch.args].join(" "));
    expect(launched.some((l) => l.endsWith(`${ROOT}/dist/stdio.js`))).toBe(true);
    expect(launched.some((l) => l.endsWith(`${ROOT}/src/stdio.ts`))).toBe(true);
    for (const s of snippets) expect(s.name).toBe("korral-storelink");
  });

  it.each(snippets.map((s, i) => [`#${i + 1} ${s.launch.command} ${s.launch.args.at(-1)}`, s]))(
    "snippet %s answers the demo flow with live stock",
    async (_label, snippet) => {
      // As written, but logging outside the clone (npm test writes nothing into its log/).
      const { launch } = snippet as Snippet;
      const env = { ...launch.env, KORRAL_LOG_DIR: join(cwd, "log") };
      const run = await runDemoFlow({ ...launch, env, cwd });
      expect(run.protocolErrors).toEqual([]);
      expect(run.toolNames).toHaveLength(TOOL_NAMES.length);
      expect(run.lookup.isError).not.toBe(true);
      expect(JSON.stringify(run.lookup.structuredContent)).toContain('"sku":"8847291"');
      expect(run.stock.isError, JSON.stringify(run.stock.content)).not.toBe(true);
      const stores = (run.stock.structuredContent as { stores: unknown[] }).stores;
      expect(stores).toEqual([expect.objectContaining(HERO_STORE_47)]);
    },
    60_000,
  );
});
