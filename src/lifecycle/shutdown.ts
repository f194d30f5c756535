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
  armExitWatchdog(EXIT_WATCHDOG_MS);
  process.exit(clean ? 0 : 1);
}

/** How long exiting may take once the logs are flushed before the watchdog ends the process. */
const EXIT_WATCHDOG_MS = 1_500;

/**
 * A read that hangs in the thread pool (a FIFO or a stuck mount as the key file) makes
 * `process.exit` itself wait for it, forever, with the event loop stopped. So exiting is watched
 * from outside: a small child holds a pipe from this process and, if the pipe is still open after
 * `ms` (this process has not exited), kills it (SIGKILL, exit 137). Everything owed is already
 * audited and flushed by then. When this process exits, the pipe closes and the child goes too.
 */
function armExitWatchdog(ms: number): void {
  try {
    const watchdog = spawn(
      process.execPath,
      [
        "-e",
        `const t=setTimeout(()=>{try{process.kill(${process.pid},"SIGKILL")}catch{}process.exit(0)},${ms});` +
          "process.stdin.on('end',()=>{clearTimeout(t);process.exit(0)});process.stdin.on('error',()=>{clearTimeout(t);process.exit(0)});process.stdin.resume();",
      ],
      { stdio: ["pipe", "ignore", "ignore"], detached: true },
    );
    watchdog.on("error", () => {});
    watchdog.unref();
  } catch {
    // No watchdog: exiting goes on as it would without one.
  }
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
