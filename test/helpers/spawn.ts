import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

export const DIST = fileURLToPath(new URL("../../dist/", import.meta.url));

/** A free 127.0.0.1 port (there is a small race, acceptable for tests). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, "close");
  return port;
}

export interface Spawned {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
  stop(): Promise<number | null>;
}

/** Built entries spawned by the current test file and not yet exited. */
const running = new Set<ChildProcess>();

/** Tracks a spawned process until it exits, so `killSpawned` can end it. */
export function tracked<T extends ChildProcess>(child: T): T {
  running.add(child);
  child.once("exit", () => running.delete(child));
  return child;
}

/**
 * Kills every tracked process still running (the set-up file calls it after each test file):
 * a test that failed before its own stop (a start-up wait that timed out) leaves no server.
 */
export function killSpawned(): void {
  for (const child of running) child.kill("SIGKILL");
  running.clear();
}

/** Spawns a built entry (e.g. "http.js") with extra env; always killed by stop(). */
export function spawnDist(entry: string, env: Record<string, string>): Spawned {
  const child = tracked(
    spawn(process.execPath, [`${DIST}${entry}`], {
      env: { ...process.env, LOG_LEVEL: "info", ...env },
      stdio: ["pipe", "pipe", "pipe"],
    }),
  );
  let out = "";
  let err = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exit,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      const code = await exit;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Polls until GET url answers 200 or the deadline passes. */
export async function waitForHealthy(url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} not healthy within ${timeoutMs} ms`);
}

/** Runs a built entry with `env` (on a free port, loopback) to its exit; killed after 15 s. */
export async function runToExit(entry: string, env: Record<string, string>) {
  const run = spawnDist(entry, { PORT: "0", HOST: "127.0.0.1", ...env });
  const guard = setTimeout(() => run.child.kill("SIGKILL"), 15_000);
  const code = await run.exit;
  clearTimeout(guard);
  return { code, stderr: run.stderr(), stdout: run.stdout() };
}

/** The JSON-RPC messages a spawned stdio server wrote so far, one per stdout line. */
export const stdoutMessages = (run: Spawned) =>
  run
    .stdout()
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line));
