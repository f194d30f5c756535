import { spawn } from "node:child_process";
import type { Server as HttpServer } from "node:http";
import { opsLog } from "../logging/ops.js";
import { type InflightCalls, inflightCalls } from "./inflight.js";

/**
 * Cloud Run sends SIGTERM and SIGKILLs 10 s later; finish well inside that. The default of
 * KORRAL_SHUTDOWN_GRACE_MS (config.ts).
 */
export const SHUTDOWN_GRACE_MS = 8_000;

/** Signals that stop the server by draining (SIGHUP too: its default would kill mid-write). */
export const STOP_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/** After the grace, how long the logs get to flush before the abandoned writes are audited. */
const FLUSH_MS = 1_000;
/**
 * How long telemetry's export may take at a stop, after the audit lines are synced: inside the
 * flush's own bound, so a collector that is down or slow never delays the exit past it.
 */
export const TELEMETRY_FLUSH_MS = 700;

export interface StopOptions {
  /** Flushes the logs (closes the recorder); runs once, on both the clean and the forced path. */
  afterClose?: () => Promise<void>;
  graceMs?: number;
  /** The running tool calls to wait for (default: the process's). */
  calls?: InflightCalls;
  /** Called when the grace ends first (HTTP: cut the remaining connections). */
  onGraceExceeded?: () => void;
}

/**
 * The end of every stop: waits for `settled` (requests answered, tool calls returned) for at most
 * `graceMs`, flushes the logs, and exits 0. Past the grace, it flushes what it can, then audits
 * every write still running as UNCERTAIN (written and synced before exit: the recorder, closed,
 * writes synchronously, and no later StoreLink answer can run in between, so each write keeps
 * exactly one line) and exits 1, so an operator can tell a clean stop from a forced one.
 */
export async function finishAndExit(
  settled: Promise<unknown>,
  {
    afterClose = async () => {},
    graceMs = SHUTDOWN_GRACE_MS,
    calls = inflightCalls,
    onGraceExceeded,
  }: StopOptions,
): Promise<never> {
  // Armed when the stop begins: its deadline counts from the stop, not from `process.exit`.
  armExitWatchdog(graceMs + EXIT_BUDGET_MS);
  let timer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), graceMs);
  });
  const clean = await Promise.race([settled.then(() => true as const), graceOver]);
  clearTimeout(timer);
  if (!clean) {
    opsLog.error(
      { grace_ms: graceMs, running_tool_calls: calls.size },
      "shutdown grace exceeded; stopping with tool calls still running",
    );
    onGraceExceeded?.();
  }
  const flushed = afterClose().catch((error: unknown) =>
    opsLog.error({ err: error }, "shutdown flush failed"),
  );
  // A hung disk must not keep the process past Cloud Run's SIGKILL (10 s).
  await Promise.race([flushed, new Promise((resolve) => setTimeout(resolve, FLUSH_MS).unref())]);
  if (!clean) {
    const abandoned = calls.abandonAll();
    if (abandoned > 0) {
      opsLog.error(
        { abandoned_writes: abandoned },
        "writes still waiting for StoreLink were audited UNCERTAIN",
      );
    }
  }
  opsLog.flush();
  process.exit(clean ? 0 : 1);
}

/**
 * How long past the grace a stop may take to exit (flushing included) before the watchdog may
 * judge it stuck: the grace plus this stays under the grace plus 2 s.
 */
const EXIT_BUDGET_MS = 1_300;

/** A stop still working (using CPU) past its budget gets at most this much more. */
const EXIT_CAP_MS = 10_000;

/**
 * The watchdog, run by a second node: argv is the server's pid, then the deadline and the cap as
 * `process.hrtime` nanoseconds (CLOCK_MONOTONIC, one clock for every process of the machine). From
 * 150 ms before the deadline it reads the server's threads every 50 ms; past the deadline it
 * SIGKILLs the server once three readings in a row show no thread running or runnable (R) and the
 * same CPU time and thread count (stuck: every thread asleep, as behind a read that never ends),
 * or without /proc at once; past the cap, whatever it shows. Slow is not stuck: a teardown waiting
 * for CPU on a busy machine has a runnable thread. The server exiting closes the pipe on stdin,
 * and the watchdog leaves.
 */
const WATCHDOG_SOURCE = `"use strict";
const fs = require("node:fs");
const [pid, deadline, cap] = process.argv.slice(1);
const now = () => process.hrtime.bigint();
const reading = () => {
  let tasks;
  try {
    tasks = fs.readdirSync("/proc/" + pid + "/task");
  } catch (error) {
    // Its task list gone while /proc is there: the server has exited. No /proc: undefined.
    return error && error.code === "ENOENT" && fs.existsSync("/proc/self") ? "gone" : undefined;
  }
  let cpu = 0, threads = 0, running = false;
  for (const task of tasks) {
    try {
      const stat = fs.readFileSync("/proc/" + pid + "/task/" + task + "/stat", "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "R") running = true;
      cpu += Number(fields[11]) + Number(fields[12]);
      threads += 1;
    } catch {
      // A thread ending between the list and its read: the process is changing, not stuck.
      running = true;
    }
  }
  return { running, work: cpu + "/" + threads };
};
let last, still = 0;
const check = () => {
  const read = reading();
  if (read === "gone") process.exit(0);
  still = read && !read.running && last && read.work === last.work ? still + 1 : 0;
  last = read;
  const at = now();
  if (at >= BigInt(cap) || (at >= BigInt(deadline) && (read === undefined || still >= 2))) {
    try { process.kill(Number(pid), "SIGKILL"); } catch {}
    process.exit(0);
  }
  setTimeout(check, 50);
};
setTimeout(check, Math.max(0, Number((BigInt(deadline) - now()) / 1000000n) - 150));
const leave = () => process.exit(0);
process.stdin.on("end", leave).on("error", leave).resume();
`;

/**
 * A read that hangs in the thread pool (a FIFO or a stuck mount as the key file) makes
 * `process.exit` itself wait for it, forever, with the event loop stopped. So the stop is watched
 * from outside: a small child (WATCHDOG_SOURCE) holds a pipe from this process and ends it
 * (SIGKILL, exit 137) if it is still there and stuck `budgetMs` after the stop began; everything
 * owed is audited and flushed before then. Not as PID 1: the kernel drops a SIGKILL sent to a PID
 * namespace's init from inside the namespace, so there an init must run node (the image's tini).
 */
function armExitWatchdog(budgetMs: number): void {
  if (process.pid === 1) return;
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(budgetMs) * 1_000_000n;
  const cap = deadline + BigInt(EXIT_CAP_MS) * 1_000_000n;
  try {
    const watchdog = spawn(
      process.execPath,
      ["-e", WATCHDOG_SOURCE, String(process.pid), String(deadline), String(cap)],
      // No env: NODE_OPTIONS and the like are the server's, not the watchdog's.
      { stdio: ["pipe", "ignore", "ignore"], detached: true, env: {} },
    );
    watchdog.on("error", () => {});
    watchdog.stdin?.on("error", () => {});
    watchdog.unref();
  } catch {
    // No watchdog: exiting goes on as it would without one.
  }
}

/** Said once at start when this process is a PID namespace's init (see armExitWatchdog). */
export function warnWhenInit(): void {
  if (process.pid !== 1) return;
  opsLog.warn(
    "running as PID 1 with no init: a stop whose exit hangs cannot be ended from inside (the kernel ignores a SIGKILL sent to a namespace's init from within it); start node under an init, as the image does with tini",
  );
}

/**
 * Stops an HTTP listener gracefully: no new connections, idle keep-alive connections closed,
 * in-flight requests and tool calls (a write whose client went away included) allowed to finish
 * and be audited, then `afterClose` (flush logs) and exit 0; see `finishAndExit` for the forced
 * path.
 */
export function drainAndExit(listener: HttpServer, options: StopOptions = {}): void {
  opsLog.info("shutting down: refusing new connections, finishing in-flight requests");
  const calls = options.calls ?? inflightCalls;
  const socketsClosed = new Promise<void>((resolve) => listener.close(() => resolve()));
  // Keep-alive connections with no request in flight would otherwise hold close() open.
  listener.closeIdleConnections();
  // A connection that goes idle after its in-flight response must not linger either.
  const sweep = setInterval(() => listener.closeIdleConnections(), 100);
  sweep.unref();
  // Sockets first: a request still reading its body has not started its tool call yet.
  void finishAndExit(
    socketsClosed.then(() => calls.whenIdle()),
    { ...options, calls, onGraceExceeded: () => listener.closeAllConnections() },
  );
}
