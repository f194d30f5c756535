import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { validateManifest } from "@anthropic-ai/mcpb";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { manifestEntries } from "../../scripts/texts.js";
import { VARIABLES } from "../../src/config.js";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { connect, type Harness } from "../helpers/harness.js";

/**
 * manifest.json (the desktop bundle's) stays in step with package.json and with what the server
 * really lists. Its `tools` and `prompts` are written by `npm run texts` (scripts/texts.ts; the
 * freshness check is test/meta/generated-texts.test.ts): here, what that generator writes is
 * what the server serves over the protocol.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const read = (file: string) => JSON.parse(readFileSync(join(ROOT, file), "utf8"));

/** An mcpb substitution variable, `${name}` in the manifest, replaced by the host at start. */
const mcpbVar = (name: string) => `\${${name}}`;

/** The manifest's tool description: the first two sentences of the server's own. */
function summary(description: string): string {
  return description
    .split(/(?<!\be\.g|\bi\.e)(?<=\.)\s+/)
    .slice(0, 2)
    .join(" ");
}

describe("manifest.json", () => {
  const manifest = read("manifest.json");
  const pkg = read("package.json");
  let harness: Harness;
  let tools: Tool[];

  beforeAll(async () => {
    harness = await connect();
    tools = (await harness.client.listTools()).tools;
  });
  afterAll(() => harness.close());

  it("passes the mcpb CLI's validation (also a CI step)", () => {
    // validateManifest reports on the console: keep it out of the test output.
    const printed: unknown[] = [];
    const spies = [vi.spyOn(console, "log"), vi.spyOn(console, "error")];
    for (const spy of spies) spy.mockImplementation((...args) => printed.push(args));
    try {
      expect(validateManifest(join(ROOT, "manifest.json")), JSON.stringify(printed)).toBe(true);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });

  it("carries package.json's version and description", () => {
    expect(manifest.version, "set manifest.json's version to package.json's").toBe(pkg.version);
    expect(manifest.description).toBe(pkg.description);
  });

  it("generates the server's tools with the first two sentences of their descriptions", () => {
    expect(manifestEntries().tools).toEqual(
      tools.map((tool) => ({ name: tool.name, description: summary(tool.description ?? "") })),
    );
    expect(manifest.tools).toHaveLength(TOOL_NAMES.length);
  });

  it("starts the stdio entry with node, settings passed as the variables config.ts reads", () => {
    expect(manifest.server.type).toBe("node");
    expect(manifest.server.entry_point).toBe("dist/stdio.js");
    expect(manifest.server.mcp_config.command).toBe("node");
    expect(manifest.server.mcp_config.args).toEqual([`${mcpbVar("__dirname")}/dist/stdio.js`]);
    expect(manifest.server.mcp_config.env).toEqual({
      KORRAL_KEYS_FILE: mcpbVar("user_config.keys_file"),
      KORRAL_LOG_DIR: mcpbVar("user_config.log_dir"),
      STORELINK_URL: mcpbVar("user_config.storelink_url"),
      // The bundle says which StoreLink it wants: an inherited NODE_ENV=production must not stop it.
      KORRAL_STORELINK: "desktop",
    });
    for (const name of Object.keys(manifest.server.mcp_config.env)) {
      expect(Object.keys(VARIABLES)).toContain(name);
    }
  });

  it("generates the workflow prompt exactly as the server serves it, and has a privacy policy", async () => {
    const { prompts } = await harness.client.listPrompts();
    expect(prompts).toHaveLength(1);
    const [served] = prompts;
    const got = await harness.client.getPrompt({
      name: served?.name ?? "",
      arguments: { product: mcpbVar("arguments.product"), stores: mcpbVar("arguments.stores") },
    });
    expect(manifestEntries().prompts).toEqual([
      {
        name: served?.name,
        description: served?.description,
        arguments: served?.arguments?.map((a) => a.name),
        text: (got.messages[0]?.content as { text?: string } | undefined)?.text,
      },
    ]);
    expect(manifest.prompts_generated).toBe(false);
    expect(manifest.privacy_policies).toEqual([expect.stringMatching(/^https:\/\//)]);
  });

  it("asks for the key file and log folder, and leaves the StoreLink URL optional", () => {
    const { keys_file, log_dir, storelink_url } = manifest.user_config;
    expect(keys_file).toMatchObject({ type: "file", required: true });
    expect(log_dir).toMatchObject({ type: "directory", required: true });
    // An empty default: an optional setting left unset must not reach the server as the literal
    // variable text (mcpb substitutes only values it has); empty reads as unset.
    expect(storelink_url).toMatchObject({ type: "string", required: false, default: "" });
  });
});
