import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Global set-up of `npm test`: the run leaves nothing behind. Spawned servers that inherit the
 * environment log to a directory of the run's own (never the clone's `log/`); at the end, the
 * run fails, naming them, if a process a test started is still alive (each is killed, so it
 * cannot linger either) or if anything was written into the clone's `log/`.
 */

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const CLONE_LOG = join(ROOT, "log");

interface Proc {
  pid: number;
  ppid: number;
  sid: number;
  command: string;
}

function processes(): Proc[] {
  const found: Proc[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The fields after the command's closing parenthesis: state ppid pgrp session ...
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const command = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      if (fields[0] === "Z" || command === "") continue;
      found.push({ pid: Number(entry), ppid: Number(fields[1]), sid: Number(fields[3]), command });
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** This process's ancestors (npm, the shell, CI): in its session, but not the tests'. */
function ancestors(): Set<number> {
  const chain = new Set<number>();
  let pid = process.pid;
  while (pid > 1 && !chain.has(pid)) {
    chain.add(pid);
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      pid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    } catch {
      break;
    }
  }
  return chain;
}

/**
 * Processes the tests started: below this process (a worker's child), orphans of this session
 * (a child whose worker has exited is re-parented to init), or anything running this clone's
 * files. Another program of the same session (a shell's next command) is none of these.
 */
function leftovers(sid: number, keep: Set<number>): Proc[] {
  const all = processes();
  const below = new Set<number>([process.pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) {
      if (below.has(p.ppid) && !below.has(p.pid)) {
        below.add(p.pid);
        grew = true;
      }
    }
  }
  return all.filter(
    (p) =>
      !keep.has(p.pid) &&
      (below.has(p.pid) || (p.sid === sid && p.ppid === 1) || p.command.includes(ROOT)),
  );
}

const cloneLogEntries = (): string[] => {
  try {
    return readdirSync(CLONE_LOG).filter((name) => name !== ".gitkeep");
  } catch {
    return [];
  }
};

export default function setup(): () => Promise<void> {
  const logDir = mkdtempSync(join(tmpdir(), "korral-test-logs-"));
  process.env.KORRAL_LOG_DIR = logDir;
  const before = new Set(cloneLogEntries());
  const keep = ancestors();
  const stat = readFileSync(`/proc/${process.pid}/stat`, "utf8");
  const sid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[3]);
  // Whatever already ran before the suite (another run, a server a developer started) is not ours.
  for (const p of leftovers(sid, keep)) keep.add(p.pid);

  return async () => {
    rmSync(logDir, { recursive: true, force: true });
    // A server told to stop at a test's end may still be finishing: give stragglers a moment.
    let left = leftovers(sid, keep);
    for (let i = 0; i < 50 && left.length > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      left = leftovers(sid, keep);
    }
    const problems: string[] = [];
    if (left.length > 0) {
      for (const p of left) {
        try {
          process.kill(p.pid, "SIGKILL");
        } catch {}
      }
      problems.push(
        `processes started by tests were still running (now killed):\n${left
          .map((p) => `  ${p.pid} ${p.command.slice(0, 200)}`)
          .join("\n")}`,
      );
    }
    const written = cloneLogEntries().filter((name) => !before.has(name));
    if (written.length > 0) {
      problems.push(`tests wrote into the clone's log/: ${written.join(", ")}`);
    }
    if (problems.length > 0) {
      // A global teardown's error is printed but does not fail the run by itself.
      process.exitCode = 1;
      throw new Error(`npm test left things behind:\n${problems.join("\n")}`);
    }
  };
}
