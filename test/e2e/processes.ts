import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { DIST, type Listening, listening, spawnProcess } from "../helpers/spawn.js";

/** The built dist/*.js programs on 127.0.0.1:0, with only PATH of this environment. */

export type Child = Listening;

/** How long a start may take on a loaded machine before it counts as failed (and is killed). */
const START_MS = 45_000;

const start = (script: string, env: Record<string, string>) =>
  spawnProcess(process.execPath, [join(DIST, script)], {
    env: { PATH: process.env.PATH ?? "", HOST: "127.0.0.1", PORT: "0", ...env },
    stdin: "ignore",
  });

export async function startEmulatorProcess(env: Record<string, string> = {}): Promise<Child> {
  const run = start("storelink-emulator.js", env);
  const [, url] = await run.ready(/storelink-emulator listening on (http:\/\/\S+)/, START_MS);
  return Object.assign(run, { port: Number(new URL(url as string).port), url: url as string });
}

export function startMcpHttpProcess(env: Record<string, string>): Promise<Child> {
  return listening(start("http.js", env), START_MS);
}

/** A temp dir with keys.json (the given keys) and an empty log dir, removed by cleanup(). */
export function tempWorkspace(keys: Record<string, string>): {
  keysFile: string;
  logDir: string;
  cleanup(): void;
} {
  const dir = mkdtempSync(join(tmpdir(), "korral-e2e-"));
  const keysFile = join(dir, "keys.json");
  writeFileSync(keysFile, JSON.stringify(keys));
  const logDir = join(dir, "log");
  return { keysFile, logDir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** One MCP tool call over streamable HTTP with the real SDK client (a fresh client per call). */
export async function callTool(
  baseUrl: string,
  name: string,
  args: Record<string, unknown>,
): Promise<CallToolResult> {
  const client = new Client({ name: "e2e", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", baseUrl)));
  try {
    return (await client.callTool({ name, arguments: args })) as CallToolResult;
  } finally {
    await client.close();
  }
}
