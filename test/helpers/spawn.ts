import { AsyncLocalStorage } from "node:async_hooks";
import {
  type ChildProcess,
  type SpawnSyncReturns,
  type StdioOptions,
  spawn,
  spawnSync,
} from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  StdioClientTransport,
  type StdioServerParameters,
} from "@modelcontextprotocol/sdk/client/stdio.js";

/**
 * The one way a test starts a process (test/meta/spawn-rule.test.ts holds that no other file
 * imports `node:child_process` or builds a `StdioClientTransport`). Its rule: a process a test
 * starts never outlives it.
 *
 * - A wait on a process that fails (a ready line that never comes, an exit first) kills it
 *   before rejecting.
 * - Whatever a test started and did not stop is killed when the test ends; what a `beforeAll`
 *   started, when its file ends (`test/setup/quiet-ops-log.ts` calls `endOfTest`/`endOfFile`).
 * - The kernel kills it when the process that started it dies (a vitest worker killed at a
 *   timeout): every command runs under `setpriv --pdeathsig KILL`, which then execs it, so its
 *   pid is the command's own.
 */

export const DIST = fileURLToPath(new URL("../../dist/", import.meta.url));

const SETPRIV = "/usr/bin/setpriv";

/** Whether the parent-death signal can be set (util-linux's setpriv, 2.33 or later). */
export const PARENT_DEATH_KILL = ((): boolean => {
  const works =
    existsSync(SETPRIV) &&
    spawnSync(SETPRIV, ["--pdeathsig", "KILL", "--", "true"], { stdio: "ignore" }).status === 0;
  if (works) return true;
  const why = `${SETPRIV} --pdeathsig is missing (apt-get install util-linux)`;
  if (process.env.CI === "true") throw new Error(`${why}; CI must have it`);
  console.warn(`${why}: a test process outlives a killed test worker`);
  return false;
})();

/** `command args` run so that the kernel kills it with its parent. */
function guarded(command: string, args: readonly string[]): [string, string[]] {
  if (!PARENT_DEATH_KILL) return [command, [...args]];
  // A credential change clears the signal: a setpriv that changes them is given it itself (it
  // sets it after its change).
  if (command === SETPRIV || command === "setpriv") {
    return [command, ["--pdeathsig", "KILL", ...args]];
  }
  return [SETPRIV, ["--pdeathsig", "KILL", "--", command, ...args]];
}

/** Something started that must be ended by the scope that started it. */
interface Owned {
  end(): Promise<void>;
}

type Scope = Set<Owned>;

/** What the current test started (undefined outside a test: then it is its file's). */
let testScope: Scope | undefined;
const fileScope: Scope = new Set();
/** A scope chosen for a piece of work (`inScope`), over the test's. */
const chosen = new AsyncLocalStorage<Scope>();

/** The scope what is started now belongs to. */
export function currentScope(): Scope {
  return chosen.getStore() ?? testScope ?? fileScope;
}

/**
 * Runs `start` with what it starts owned by `scope` (from `currentScope()`): a replica or a
 * Redis restarted by a test in place of one its file started stays the file's.
 */
export function inScope<T>(scope: Scope, start: () => Promise<T>): Promise<T> {
  return chosen.run(scope, start);
}

/** What `start` starts is its file's: a restart, in a test, of a process a `beforeAll` started. */
export function forTheFile<T>(start: () => Promise<T>): Promise<T> {
  return inScope(fileScope, start);
}

/** Puts `owned` in the current scope; the returned function takes it out (it ended itself). */
function own(owned: Owned): () => void {
  const scope = currentScope();
  scope.add(owned);
  return () => scope.delete(owned);
}

async function endAll(scope: Scope | undefined): Promise<void> {
  if (!scope) return;
  const left = [...scope];
  scope.clear();
  await Promise.all(left.map((owned) => owned.end()));
}

/** A test begins: what it starts is ended when it ends. */
export function startOfTest(): void {
  testScope = new Set();
}

/** A test ended (passed or failed): whatever it started and did not stop is killed. */
export function endOfTest(): Promise<void> {
  const scope = testScope;
  testScope = undefined;
  return endAll(scope);
}

/** A file ended: whatever its `beforeAll`s started and did not stop is killed. */
export async function endOfFile(): Promise<void> {
  await endOfTest();
  await endAll(fileScope);
}

/** A free 127.0.0.1 port (there is a small race, acceptable for tests). */
/** The kernel's ephemeral range: where listen(0) and every outgoing connection take a port. */
const EPHEMERAL_START = ((): number => {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0]);
  } catch {
    return 32_768;
  }
})();
/** Ports below the ephemeral range, a block for each vitest worker (VITEST_POOL_ID, 1 to n). */
const PORT_BLOCKS = { base: 20_000, size: 1_000 } as const;
const poolId = Number(process.env.VITEST_POOL_ID ?? 0);
const portBlock =
  Number.isInteger(poolId) &&
  poolId >= 0 &&
  PORT_BLOCKS.base + PORT_BLOCKS.size * (poolId + 1) <= EPHEMERAL_START
    ? PORT_BLOCKS.base + PORT_BLOCKS.size * poolId
    : undefined;
let nextInBlock = 0;

/** Whether 127.0.0.1:`port` can be listened on now (`port` 0: the kernel's pick). */
async function bindable(port: number): Promise<number | undefined> {
  const server = createServer();
  const bound = await new Promise<number | undefined>((resolve) => {
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
  });
  if (bound === undefined) return undefined;
  server.close();
  await once(server, "close");
  return bound;
}

/** Ports handed out, by any test run on this machine: `<port>` holds the pid that took it. */
const PORT_CLAIMS = join(tmpdir(), "korral-test-ports");

/** Whether `pid` is a live process. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Claims `port` for this process among concurrent test runs (another clone's CI, a helper's run):
 * false while a live process other than this one holds it.
 */
function claim(port: number): boolean {
  mkdirSync(PORT_CLAIMS, { recursive: true });
  const file = join(PORT_CLAIMS, String(port));
  for (let tries = 0; tries < 3; tries++) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx" });
      return true;
    } catch {}
    let holder: number;
    try {
      holder = Number(readFileSync(file, "utf8"));
    } catch {
      continue; // released meanwhile: try again
    }
    if (holder === process.pid) return true;
    // Empty: being written by its claimant right now.
    if (!(holder > 0) || alive(holder)) return false;
    // A run that ended: its claim is taken over.
    rmSync(file, { force: true });
  }
  return false;
}

/**
 * A loopback port for a server a test starts itself. Taken from this worker's block, below the
 * ephemeral range, and claimed against other test runs on the machine: a port released by
 * listen(0) can be taken by another file's (or run's) server before the test's own binds it,
 * and the test then talks to a server it never started. (listen(0) when this machine's
 * ephemeral range leaves no room for the blocks.)
 */
export async function freePort(): Promise<number> {
  if (portBlock === undefined) return (await bindable(0)) as number;
  for (let tries = 0; tries < PORT_BLOCKS.size; tries++) {
    const port = portBlock + nextInBlock;
    nextInBlock = (nextInBlock + 1) % PORT_BLOCKS.size;
    if (claim(port) && (await bindable(port)) !== undefined) return port;
  }
  throw new Error(`no free port in ${portBlock} to ${portBlock + PORT_BLOCKS.size - 1}`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Spawned {
  child: ChildProcess;
  pid: number;
  stdout: () => string;
  stderr: () => string;
  /** Its exit code (null when a signal ended it), once its stdout and stderr are whole. */
  exit: Promise<number | null>;
  /**
   * Polls `check` every 10 ms until it holds. Fails (and kills the process first) after
   * `timeoutMs`, or once the process has exited and closed its output without `check` holding.
   */
  until(check: () => boolean | Promise<boolean>, what: string, timeoutMs?: number): Promise<void>;
  /** Waits (as `until`) for `pattern` in its stderr, then its stdout; returns the match. */
  ready(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** SIGTERM, then SIGKILL if it has not exited after 5 s. */
  stop(): Promise<number | null>;
  /** SIGKILL (also a stopped process), and its exit. */
  kill(): Promise<void>;
}

export interface SpawnOptions {
  /** The whole environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Its stdin: a pipe (default, for the stdio entry) or nothing. */
  stdin?: "pipe" | "ignore";
}

/** Starts `command args` under the rule above; its stdout and stderr are kept. */
export function spawnProcess(
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): Spawned {
  const [file, argv] = guarded(command, args);
  const child = spawn(file, argv, {
    env: options.env ?? process.env,
    cwd: options.cwd,
    stdio: [options.stdin ?? "pipe", "pipe", "pipe"],
  });
  // A command that cannot start (no such cwd) ends as a process that exited.
  child.on("error", () => {});
  let out = "";
  let err = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    err += chunk.toString();
  });
  // Its exit, once its output is whole too (its pipes closed).
  let closed = false;
  const exit = new Promise<number | null>((resolve) => {
    child.once("close", (code) => {
      closed = true;
      resolve(code);
    });
    child.once("error", () => {
      closed = true;
      resolve(child.exitCode);
    });
  });
  const running = () => child.exitCode === null && child.signalCode === null && !closed;
  const kill = async () => {
    if (!running()) return;
    child.kill("SIGKILL");
    await exit;
  };
  const disown = own({ end: kill });
  void exit.then(disown);
  const name = [command, ...args].join(" ").slice(0, 120);
  const until: Spawned["until"] = async (check, what, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await check()) return;
      const failure = closed
        ? `exited (${child.exitCode ?? child.signalCode}) before ${what}`
        : Date.now() > deadline
          ? `did not show ${what} within ${timeoutMs} ms`
          : undefined;
      if (failure) {
        await kill();
        throw new Error(`${name} (pid ${child.pid}) ${failure}; its stderr:\n${err.slice(-4_000)}`);
      }
      await sleep(10);
    }
  };
  return {
    child,
    pid: child.pid ?? -1,
    stdout: () => out,
    stderr: () => err,
    exit,
    until,
    async ready(pattern, timeoutMs) {
      const seen: { match?: RegExpExecArray } = {};
      await until(
        () => {
          seen.match = pattern.exec(err) ?? pattern.exec(out) ?? undefined;
          return seen.match !== undefined;
        },
        String(pattern),
        timeoutMs,
      );
      return seen.match as RegExpExecArray;
    },
    async stop() {
      if (running()) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      const code = await exit;
      clearTimeout(timer);
      return code;
    },
    kill,
  };
}

/** Spawns a built entry (e.g. "http.js") with this process's environment, LOG_LEVEL info and `env`. */
export function spawnDist(entry: string, env: Record<string, string>): Spawned {
  return spawnProcess(process.execPath, [`${DIST}${entry}`], {
    env: { ...process.env, LOG_LEVEL: "info", ...env },
  });
}

/** The line the HTTP entry logs once it listens, with its port. */
export const LISTENING = /"port":([1-9]\d*)[^\n]*listening on HTTP/;

export interface Listening extends Spawned {
  port: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
}

/** Waits for `run`'s listening line (killing it if it never comes); its port and base URL. */
export async function listening(run: Spawned, timeoutMs?: number): Promise<Listening> {
  const port = Number((await run.ready(LISTENING, timeoutMs))[1]);
  return Object.assign(run, { port, url: `http://127.0.0.1:${port}` });
}

/** The built HTTP entry on a port of its own (loopback), once it listens. */
export function startHttp(env: Record<string, string>, timeoutMs?: number): Promise<Listening> {
  return listening(spawnDist("http.js", { PORT: "0", HOST: "127.0.0.1", ...env }), timeoutMs);
}

/**
 * Waits until `run` says it listens on `url`'s port and GET url answers 200 (killing `run` if it
 * never does): a 200 from a server on that port that is not `run` does not count. The line is
 * logged at info, so `run` must not log at warn or above.
 */
export async function waitForHealthy(run: Spawned, url: string, timeoutMs = 30_000): Promise<void> {
  const { port } = new URL(url);
  await run.ready(new RegExp(`"port":${port}[,}][^\\n]*listening on HTTP`), timeoutMs);
  await run.until(
    async () => {
      try {
        return (await fetch(url)).ok;
      } catch {
        return false; // not listening yet
      }
    },
    `${url} healthy`,
    timeoutMs,
  );
}

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `command args` to its exit, under the rule above; killed after `timeoutMs`. */
export async function runProcess(
  command: string,
  args: readonly string[],
  options: SpawnOptions & { timeoutMs?: number } = {},
): Promise<Ran> {
  const run = spawnProcess(command, args, { stdin: "ignore", ...options });
  // Its output is whole once its pipes close.
  const closed = once(run.child, "close").catch(() => {});
  const guard = setTimeout(() => run.child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
  const code = await run.exit;
  clearTimeout(guard);
  // A grandchild still holding its pipes does not hold the test.
  let late: NodeJS.Timeout | undefined;
  await Promise.race([closed, new Promise((resolve) => (late = setTimeout(resolve, 5_000)))]);
  clearTimeout(late);
  return { code, signal: run.child.signalCode, stdout: run.stdout(), stderr: run.stderr() };
}

/** As `runProcess`, but a failure (not exit 0) rejects, naming the command and its stderr. */
export async function runOk(
  command: string,
  args: readonly string[],
  options: SpawnOptions & { timeoutMs?: number } = {},
): Promise<Ran> {
  const ran = await runProcess(command, args, options);
  if (ran.code !== 0) {
    throw new Error(
      `${command} ${args.join(" ")} failed (${ran.code ?? ran.signal}):\n${ran.stderr}`,
    );
  }
  return ran;
}

/**
 * Runs a built entry with `env` (on a free port, loopback) to its exit; killed after 15 s (or
 * `timeoutMs`). Its stdin stays open unless `stdin` is "ignore" (then the stdio entry sees its end).
 */
export async function runToExit(
  entry: string,
  env: Record<string, string>,
  options: { timeoutMs?: number; stdin?: "pipe" | "ignore" } = {},
) {
  const { code, stderr, stdout } = await runProcess(process.execPath, [`${DIST}${entry}`], {
    env: { ...process.env, LOG_LEVEL: "info", PORT: "0", HOST: "127.0.0.1", ...env },
    stdin: options.stdin ?? "pipe",
    timeoutMs: options.timeoutMs ?? 15_000,
  });
  return { code, stderr, stdout };
}

/**
 * Runs a short command to its exit, synchronously (the test waits on nothing else meanwhile);
 * killed after `timeoutMs`, and by the kernel with this process.
 */
export function runSync(
  command: string,
  args: readonly string[],
  options: {
    env?: NodeJS.ProcessEnv;
    cwd?: string;
    input?: string;
    stdio?: StdioOptions;
    timeoutMs?: number;
  } = {},
): SpawnSyncReturns<string> {
  const [file, argv] = guarded(command, args);
  return spawnSync(file, argv, {
    env: options.env ?? process.env,
    cwd: options.cwd,
    input: options.input,
    stdio: options.stdio ?? "pipe",
    encoding: "utf8",
    timeout: options.timeoutMs ?? 60_000,
    killSignal: "SIGKILL",
  });
}

/** As `runSync`, but a failure (not exit 0) throws, naming the command; returns its stdout. */
export function runSyncOk(
  command: string,
  args: readonly string[],
  options: Parameters<typeof runSync>[2] = {},
): string {
  const ran = runSync(command, args, options);
  if (ran.error) throw ran.error;
  if (ran.status !== 0) {
    throw new Error(
      `${command} ${args.join(" ")} failed (${ran.status ?? ran.signal}):\n${ran.stderr ?? ""}`,
    );
  }
  return ran.stdout ?? "";
}

/** A client stdio transport class: the SDK v1's (the default) or v2's. */
type StdioTransportClass<T> = new (server: StdioServerParameters) => T;

/**
 * The SDK client's stdio transport for `server`, under the rule above: closed when the test (or
 * the file, from a `beforeAll`) ends, and killed by the kernel with this process.
 */
export function stdioTransport(server: StdioServerParameters): StdioClientTransport;
export function stdioTransport<T extends { close(): Promise<void> }>(
  server: StdioServerParameters,
  Transport: StdioTransportClass<T>,
): T;
export function stdioTransport(
  server: StdioServerParameters,
  Transport: StdioTransportClass<{ close(): Promise<void> }> = StdioClientTransport,
): { close(): Promise<void> } {
  const [command, args] = guarded(server.command, server.args ?? []);
  const transport = new Transport({ ...server, command, args });
  // close() is idempotent: a transport the test closed itself is closed again for nothing.
  own({ end: () => transport.close() });
  return transport;
}

/** The JSON-RPC messages a spawned stdio server wrote so far, one per stdout line. */
export const stdoutMessages = (run: Spawned) =>
  run
    .stdout()
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line));
