import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { getMcpConfigForManifest, type McpbManifestAny } from "@anthropic-ai/mcpb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { runOk } from "../helpers/spawn.js";
import { HERO_STORE_47, type Launch, runDemoFlow } from "./demo-flow.js";

/**
 * The desktop bundle as a buyer's client gets it: `scripts/pack-desktop.mjs` (what
 * `npm run pack:desktop` runs after the build) packs it, `mcpb unpack` unpacks it into a temp
 * directory, and the server is started exactly as its manifest says, resolved by the mcpb
 * library's own getMcpConfigForManifest (the code Claude Desktop uses): ${__dirname} is the unpacked
 * directory, user_config the values a buyer enters at install.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const MCPB_CLI = join(ROOT, "node_modules/@anthropic-ai/mcpb/dist/cli/cli.js");

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((file) => statSync(join(dir, file)).isFile())
    .map((file) => file.split(sep).join("/"));
}

describe("desktop bundle (korral-storelink.mcpb)", () => {
  let work: string;
  let unpacked: string;
  let files: string[];
  let manifest: McpbManifestAny;
  let userConfig: { keys_file: string; log_dir: string };
  let launch: Launch;
  let bundleBytes: number;

  beforeAll(async () => {
    expect(existsSync(join(ROOT, "dist/stdio.js")), "npm test builds dist/ first").toBe(true);
    work = await mkdtemp(join(tmpdir(), "korral-mcpb-test-"));
    const bundle = join(work, "korral-storelink.mcpb");
    await runOk(process.execPath, [join(ROOT, "scripts/pack-desktop.mjs"), bundle], { cwd: ROOT });
    bundleBytes = statSync(bundle).size;
    unpacked = join(work, "installed");
    await runOk(process.execPath, [MCPB_CLI, "unpack", bundle, unpacked]);
    files = filesUnder(unpacked);
    manifest = JSON.parse(readFileSync(join(unpacked, "manifest.json"), "utf8"));

    // What the buyer picks in the install dialog: the key file from Korral IT (here the demo
    // keys) and a log folder.
    userConfig = { keys_file: join(work, "my-keys.json"), log_dir: join(work, "logs") };
    await copyFile(join(ROOT, "keys.example.json"), userConfig.keys_file);
    const clientCwd = join(work, "client-cwd");
    await mkdir(clientCwd);
    const config = await getMcpConfigForManifest({
      manifest,
      extensionPath: unpacked,
      systemDirs: { HOME: work },
      userConfig,
      pathSeparator: sep,
    });
    if (!config) throw new Error("the manifest gave no mcp_config for a complete user_config");
    launch = {
      command: config.command,
      args: config.args ?? [],
      env: config.env ?? {},
      cwd: clientCwd,
    };
  }, 180_000);

  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("holds the manifest, package.json, compiled dist/ and runtime node_modules, nothing else", () => {
    const top = new Set(files.map((file) => file.split("/")[0]));
    expect([...top].sort()).toEqual(["dist", "manifest.json", "node_modules", "package.json"]);
    const own = files.filter((file) => !file.startsWith("node_modules/"));
    for (const file of own) {
      expect(file, "only compiled JavaScript under dist/").toMatch(
        /^(manifest\.json|package\.json|dist\/.+\.js)$/,
      );
    }
    expect(own).toContain("dist/stdio.js");
  });

  it("is the size docs/clients.md says, packed and unpacked, and holds as many files", () => {
    // docs/clients.md states the figures a buyer or an admin plans with; each must be within a
    // quarter of what the bundle measures, so a dependency that doubles it makes the doc false here.
    const clients = readFileSync(join(ROOT, "docs/clients.md"), "utf8");
    const stated =
      /`korral-storelink\.mcpb` \(about ([\d.]+) MB; ([\d.]+) MB and about ([\d,]+) files unpacked\)/.exec(
        clients,
      );
    expect(stated, "docs/clients.md states the bundle's size and file count").not.toBeNull();
    const [, packedMb = "", unpackedMb = "", fileCount = ""] = stated ?? [];
    const MB = 1024 * 1024;
    const unpackedBytes = files.reduce((sum, file) => sum + statSync(join(unpacked, file)).size, 0);
    const measured = {
      packedMb: bundleBytes / MB,
      unpackedMb: unpackedBytes / MB,
      files: files.length,
    };
    const docs = {
      packedMb: Number(packedMb),
      unpackedMb: Number(unpackedMb),
      files: Number(fileCount.replaceAll(",", "")),
    };
    for (const key of Object.keys(measured) as (keyof typeof measured)[]) {
      const ratio = docs[key] / measured[key];
      expect(
        ratio,
        `${key}: the doc says ${docs[key]}, the bundle has ${measured[key]}`,
      ).toBeGreaterThan(0.75);
      expect(
        ratio,
        `${key}: the doc says ${docs[key]}, the bundle has ${measured[key]}`,
      ).toBeLessThan(1.25);
    }
  });

  it("carries no keys, logs, secrets, source, tests or source maps", () => {
    const forbidden = [
      /(^|\/)keys(\.example)?\.json$/,
      /(^|\/)\.env/,
      /(^|\/)\.npmrc$/,
      /^log\//,
      /^(src|test)\//,
      /\.map$/,
      /\.mcpb$/,
    ];
    for (const file of files) {
      for (const pattern of forbidden) expect(file).not.toMatch(pattern);
    }
    // keys.example.json's stale store-63 key exists only in that file: it must not travel.
    const staleKey = JSON.parse(readFileSync(join(ROOT, "keys.example.json"), "utf8"))["63"];
    for (const file of files.filter((f) => !f.startsWith("node_modules/"))) {
      expect(readFileSync(join(unpacked, file), "utf8")).not.toContain(staleKey);
    }
  });

  it("installs production dependencies only, without the Secret Manager client", () => {
    const modules = join(unpacked, "node_modules");
    for (const dev of ["typescript", "vitest", "tsx", "esbuild", "@biomejs", "@anthropic-ai"]) {
      expect(existsSync(join(modules, dev)), dev).toBe(false);
    }
    expect(existsSync(join(modules, "@google-cloud"))).toBe(false);
    expect(existsSync(join(modules, "pino/package.json"))).toBe(true);
  });

  it("carries manifest.json as checked in, at package.json's version", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    expect(manifest).toEqual(JSON.parse(readFileSync(join(ROOT, "manifest.json"), "utf8")));
    expect(manifest.version).toBe(pkg.version);
  });

  it("will not start without the required key file and log folder", async () => {
    const withoutKeys = await getMcpConfigForManifest({
      manifest,
      extensionPath: unpacked,
      systemDirs: {},
      userConfig: { log_dir: userConfig.log_dir },
      pathSeparator: sep,
    });
    expect(withoutKeys).toBeUndefined();
  });

  it("resolves to node <install>/dist/stdio.js with the buyer's settings", () => {
    expect(launch.command).toBe("node");
    expect(launch.args).toEqual([join(unpacked, "dist/stdio.js")]);
    expect(launch.env).toEqual({
      KORRAL_KEYS_FILE: userConfig.keys_file,
      KORRAL_LOG_DIR: userConfig.log_dir,
      // Optional and left empty: the server reads an empty variable as unset.
      STORELINK_URL: "",
      KORRAL_STORELINK: "desktop",
    });
  });

  it("runs as the manifest says: every tool, the demo flow and an order, protocol-only stdout, logs where asked", async () => {
    const result = await runDemoFlow(launch, { order: true });
    expect(result.protocolErrors).toEqual([]);
    expect(result.toolNames.sort()).toEqual(
      (manifest.tools ?? []).map((tool: { name: string }) => tool.name).sort(),
    );
    expect(result.toolNames).toHaveLength(TOOL_NAMES.length);
    expect(result.lookup.isError).not.toBe(true);
    expect(JSON.stringify(result.lookup.structuredContent)).toContain('"sku":"8847291"');
    expect(result.stock.isError, JSON.stringify(result.stock.content)).not.toBe(true);
    expect((result.stock.structuredContent as { stores: unknown[] }).stores).toEqual([
      expect.objectContaining(HERO_STORE_47),
    ]);
    expect(result.order?.isError, JSON.stringify(result.order?.content)).not.toBe(true);
    expect(result.order?.structuredContent).toMatchObject({
      mode: "submitted",
      order_id: "RPL-47-001",
    });
    expect(result.stderr).toContain("running on stdio");
    expect(result.stderr).not.toMatch(/Cannot find (module|package)/);
    // The trace went to the folder the buyer chose, not into the installed extension.
    expect(readdirSync(userConfig.log_dir).sort()).toEqual(["audit.log", "trace.jsonl"]);
    expect(readFileSync(join(userConfig.log_dir, "audit.log"), "utf8")).toContain("CREATED");
    expect(existsSync(join(unpacked, "log"))).toBe(false);
    expect(relative(unpacked, userConfig.log_dir).startsWith("..")).toBe(true);
  });
});
