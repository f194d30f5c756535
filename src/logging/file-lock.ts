import { type ChildProcess, spawn } from "node:child_process";

/**
 * An exclusive lock on an open file, held for as long as this process lives (or until released),
 * whatever its clock, its PID or its host: the proof a write-intent journal's writer is alive.
 *
 * Node has no file-lock call, so a small holder does it: util-linux `flock(1)` locks the file
 * behind the descriptor handed to it (`/dev/fd/3`: the same file, never created or replaced),
 * then waits on a pipe from this process. The lock is the holder's, so it lasts while this process
 * is paused (SIGSTOP, a frozen container) and ends when this process dies in any way (the pipe
 * closes). flock locks are NFS locks on NFS (Linux maps them to byte-range locks), so they hold
 * across hosts on a shared volume. The holder is in its own process group: a terminal's Ctrl-C
 * or a kill of our group does not drop the lock while this process still drains.
 */

export type LockResult =
  | { kind: "held"; lock: FileLock }
  /** Another live process holds it. */
  | { kind: "busy" }
  /** No lock can be taken here (no flock(1), or a file system without locks): why, for the ops log. */
  | { kind: "unsupported"; why: string };

/** flock(1)'s exit code for "held by someone else", apart from every error. */
const BUSY_EXIT = 75;

export interface FileLock {
  /** The holder no longer keeps this process running (a lock held until the process exits). */
  unref(): void;
  /** Resolves once the lock is released. */
  release(): Promise<void>;
  /** Called if the lock ends without `release()` (its holder was killed). */
  onLost(listener: () => void): void;
}

/** Tries (never waits) to lock the file open as `fd` exclusively. Never rejects. */
export function tryLock(fd: number): Promise<LockResult> {
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = spawn(
        "flock",
        [
          "--exclusive",
          "--nonblock",
          "--conflict-exit-code",
          String(BUSY_EXIT),
          "/dev/fd/3",
          "sh",
          "-c",
          "echo held; exec cat >/dev/null",
        ],
        { stdio: ["pipe", "pipe", "ignore", fd], detached: true },
      );
    } catch (error) {
      resolve({ kind: "unsupported", why: describe(error) });
      return;
    }
    let settled = false;
    let released = false;
    const lost: (() => void)[] = [];
    const settle = (result: LockResult): void => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    const exited = new Promise<void>((done) => child.once("close", () => done()));
    child.once("error", (error) => settle({ kind: "unsupported", why: describe(error) }));
    child.once("exit", (code) => {
      if (!settled) {
        settle(
          code === BUSY_EXIT
            ? { kind: "busy" }
            : { kind: "unsupported", why: `flock exited with code ${code ?? "signal"}` },
        );
        return;
      }
      if (!released) for (const listener of lost) listener();
    });
    const handles = [child, child.stdin, child.stdout] as unknown as {
      ref?: () => void;
      unref?: () => void;
    }[];
    child.stdout?.once("data", () => {
      settle({
        kind: "held",
        lock: {
          unref() {
            for (const handle of handles) handle?.unref?.();
          },
          release() {
            released = true;
            // Waited for: the holder and its pipes keep this process running until it is gone.
            for (const handle of handles) handle?.ref?.();
            child.stdin?.end();
            return exited;
          },
          onLost(listener) {
            lost.push(listener);
          },
        },
      });
    });
    child.stdin?.on("error", () => {});
  });
}

function describe(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "ENOENT" ? "flock(1) is not installed" : `error ${String(code ?? "unknown")}`;
}
