import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { tracked } from "../helpers/spawn.js";

/** Spawns the built dist/*.js programs on 127.0.0.1:0 and finds their ports from stderr. */

const DIST = fileURLToPath(new URL("../../dist/", import.meta.url));

export interface Child {
  proc: ChildProcess;
  url: string;
  stderr(): string;
  stop(): Promise<void>;
}

async function spawnListening(
  script: string,
  env: Record<string, string>,
  urlFrom: (stderr: string) => string | undefined,
): Promise<Child> {
  const proc = tracked(
    spawn(process.execPath, [join(DIST, script)], {
      env: { PATH: process.env.PATH ?? "", HOST: "127.0.0.1", PORT: "0", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    }),
  );
  let stderr = "";
  proc.stderr?.setEncoding("utf8");
  const url = await new Promise<string>((resolve, reject) => {
    // A start that never comes is killed: a failed wait must not leave a server running.
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`${script} did not start: ${stderr}`));
    }, 45_000);
    proc.stderr?.on("data", (chunk: string) => {
      stderr += chunk;
      const found = urlFrom(stderr);
      if (found) {
        clearTimeout(timer);
        resolve(found);
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${code}: ${stderr}`));
    });
  });
  return {
    proc,
    url,
    stderr: () => stderr,
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        const timer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
        proc.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
        proc.kill("SIGTERM");
      }),
  };
}

export function startEmulatorProcess(env: Record<string, string> = {}): Promise<Child> {
  return spawnListening(
    "storelink-emulator.js",
    env,
    (s) => /storelink-emulator listening on (http:\/\/\S+)/.exec(s)?.[1],
  );
}

export function startMcpHttpProcess(env: Record<string, string>): Promise<Child> {
  return spawnListening("http.js", env, (s) => {
    const port = /"port":(\d+)[^\n]*listening on HTTP/.exec(s)?.[1];
    return port ? `http://127.0.0.1:${port}` : undefined;
  });
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
