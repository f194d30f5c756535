import { randomBytes } from "node:crypto";
import {
  closeSync,
  fdatasyncSync,
  futimesSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  unlinkSync,
  utimesSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import type { IntentFields } from "./records.js";

/**
 * The write-intent journal: a durable line for each order as it is handed to StoreLink, and a
 * line once its audit line is on disk. A process killed in between (SIGKILL, out of memory, power)
 * leaves an intent without an outcome; a server on the same log directory appends one UNCERTAIN
 * line to audit.log for each, once its writer is gone. audit.log keeps exactly one line per attempt.
 *
 * - **Never shared.** Each process writes its own journal, named by its PID namespace, its PID and
 *   a random part (`intents-<ns>-<pid>-<random>.jsonl`): PIDs repeat across containers over one
 *   volume, the random part never does.
 * - **A live journal is never recovered.** Its writer touches it every HEARTBEAT_MS; a journal is
 *   its writer's until it has gone LEASE_MS untouched, or (in our own PID namespace) its PID is
 *   not running. A clean exit removes its journal.
 * - **Recovery loses nothing.** A journal is claimed by renaming it to a journal of the claimer's
 *   own (so a claimer killed mid-recovery leaves a journal the next server recovers), and an intent
 *   whose outcome is already in audit.log (a kill after its audit line, before its "done" line)
 *   gets no second line. An unreadable line costs that line only; a path that is not a regular
 *   file is skipped, never opened.
 */

const PREFIX = "intents-";
const SUFFIX = ".jsonl";
/** How often a writer touches its journal. */
export const HEARTBEAT_MS = 2_000;
/** How long a journal may go untouched before its writer counts as gone. */
export const LEASE_MS = 10_000;

interface IntentLine extends IntentFields {
  intent: string;
  ts: string;
}

/** This process's PID namespace (Linux), so a PID is read only where it means this process. */
function pidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? "0";
  } catch {
    return "0";
  }
}

const OWN_NAMESPACE = pidNamespace();

/** A fresh journal name of this process's. */
const ownName = (): string =>
  `${PREFIX}${OWN_NAMESPACE}-${process.pid}-${randomBytes(8).toString("hex")}${SUFFIX}`;

const NAME = /^intents-(\d+)-(\d+)-[0-9a-f]+\.jsonl$/;

export class IntentJournal {
  readonly path: string;
  #fd: number | undefined;
  #open = new Set<string>();
  #broken = false;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(
    readonly dir: string,
    private readonly warn: (message: string, fields: Record<string, unknown>) => void,
  ) {
    this.path = join(dir, ownName());
  }

  /** Written and synced before the order is sent: the one fsync a write pays for this. */
  begin(requestId: string, fields: IntentFields): void {
    this.#write({ intent: requestId, ts: new Date().toISOString(), ...fields }, true);
    this.#open.add(requestId);
  }

  /** The write's audit line is durable: its intent has an outcome. */
  end(requestId: string): void {
    if (!this.#open.delete(requestId)) return;
    // Not synced: lost, it only costs a spurious UNCERTAIN after a crash (the safe direction).
    this.#write({ done: requestId }, false);
  }

  /** A clean stop: every intent has its outcome (or its UNCERTAIN line), so none is left. */
  close(): void {
    clearInterval(this.#heartbeat);
    if (this.#fd === undefined) return;
    closeSync(this.#fd);
    this.#fd = undefined;
    if (this.#open.size === 0) {
      try {
        unlinkSync(this.path);
      } catch {
        // Already gone.
      }
    }
  }

  #write(line: object, durable: boolean): void {
    try {
      if (this.#fd === undefined) {
        mkdirSync(this.dir, { recursive: true });
        const fd = openSync(this.path, "a", 0o640);
        this.#fd = fd;
        this.#heartbeat = setInterval(() => {
          try {
            const now = new Date();
            futimesSync(fd, now, now);
          } catch {
            // Closed, or the disk is gone: the write path reports it.
          }
        }, HEARTBEAT_MS);
        this.#heartbeat.unref();
      }
      writeSync(this.#fd, `${JSON.stringify(line)}\n`);
      if (durable) fdatasyncSync(this.#fd);
    } catch (error) {
      // Never fails a write: without the journal only a kill -9 loses the audit line.
      if (!this.#broken) {
        this.#broken = true;
        this.warn(
          "cannot write the write-intent journal; a write interrupted by a kill will have no audit line",
          { file: this.path, code: (error as NodeJS.ErrnoException).code ?? "error" },
        );
      }
    }
  }
}

/** Whether process `pid` of our namespace is running (EPERM: it is, as another user). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether a journal's writer is gone: by its PID in our namespace, else by its heartbeat. */
function writerGone(name: string, mtimeMs: number, now: number): boolean {
  const match = NAME.exec(name);
  if (!match) return false;
  const [, ns, pid] = match;
  if (ns === OWN_NAMESPACE && Number(pid) !== process.pid && !running(Number(pid))) return true;
  return now - mtimeMs >= LEASE_MS;
}

/** What recovery tells the ops log: a journal it would not open, or lines it could not read. */
export type RecoveryNotice =
  | { kind: "not a regular file"; file: string }
  | { kind: "unreadable lines"; file: string; lines: number };

export interface RecoverOptions {
  /** Writes the UNCERTAIN line of one intent (durably). */
  recover(fields: IntentFields, requestId: string, sentAt: string): Promise<void>;
  /** The request ids that already have an outcome line (audit.log's `req=`), read on demand. */
  outcomes(): Set<string>;
  notice(notice: RecoveryNotice): void;
  /** Journals already reported as not regular files, so each is said once. */
  reported?: Set<string>;
}

/**
 * The intents without an outcome in the journals whose writer is gone, each handed to `recover`
 * once and only if audit.log has no outcome for it; a journal is removed once its lines are
 * written. A torn last line (the kill came mid-write) is skipped: its intent was never synced, so
 * its order was not sent.
 */
export async function recoverIntents(dir: string, options: RecoverOptions): Promise<number> {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  let recovered = 0;
  let outcomes: Set<string> | undefined;
  const now = Date.now();
  for (const name of names) {
    if (!name.startsWith(PREFIX) || !name.endsWith(SUFFIX)) continue;
    const path = join(dir, name);
    let stats: ReturnType<typeof lstatSync>;
    try {
      stats = lstatSync(path);
    } catch {
      continue;
    }
    if (!stats.isFile()) {
      if (!options.reported?.has(path)) {
        options.reported?.add(path);
        options.notice({ kind: "not a regular file", file: path });
      }
      continue;
    }
    if (!writerGone(name, stats.mtimeMs, now)) continue;
    // Claimed by renaming it to a journal of our own, touched: of two servers, one recovers it;
    // killed now, it is a dead process's journal the next server recovers.
    const claimed = join(dir, ownName());
    try {
      renameSync(path, claimed);
      const touched = new Date();
      utimesSync(claimed, touched, touched);
      if (!lstatSync(claimed).isFile()) continue;
    } catch {
      continue;
    }
    const pending = new Map<string, IntentLine>();
    let unreadable = 0;
    let text: string;
    try {
      text = readFileSync(claimed, "utf8");
    } catch {
      continue;
    }
    const lines = text.split("\n");
    for (const [index, raw] of lines.entries()) {
      if (raw === "") continue;
      let line: unknown;
      try {
        line = JSON.parse(raw);
      } catch {
        // The last line may be torn by the kill: not an intent that was ever synced.
        if (index < lines.length - 1) unreadable++;
        continue;
      }
      if (typeof line !== "object" || line === null) {
        unreadable++;
        continue;
      }
      const entry = line as Partial<IntentLine> & { done?: unknown };
      if (typeof entry.done === "string") pending.delete(entry.done);
      else if (typeof entry.intent === "string") pending.set(entry.intent, entry as IntentLine);
      else unreadable++;
    }
    if (unreadable > 0) options.notice({ kind: "unreadable lines", file: path, lines: unreadable });
    if (pending.size > 0) outcomes ??= options.outcomes();
    for (const intent of pending.values()) {
      if (outcomes?.has(intent.intent)) continue;
      const str = (value: unknown): string | null => (typeof value === "string" ? value : null);
      await options.recover(
        {
          store_id: str(intent.store_id),
          sku: str(intent.sku),
          quantity: typeof intent.quantity === "number" ? intent.quantity : null,
          reason: str(intent.reason),
        },
        intent.intent,
        typeof intent.ts === "string" ? intent.ts : new Date(stats.mtimeMs).toISOString(),
      );
      outcomes?.add(intent.intent);
      recovered++;
    }
    try {
      unlinkSync(claimed);
    } catch {
      // Already gone.
    }
  }
  return recovered;
}

/** The request ids of audit.log's lines (`req=<id>`), for recovery's "already has an outcome". */
export function auditedRequestIds(auditPath: string): Set<string> {
  const ids = new Set<string>();
  let text: string;
  try {
    if (!lstatSync(auditPath).isFile()) return ids;
    text = readFileSync(auditPath, "utf8");
  } catch {
    return ids;
  }
  for (const match of text.matchAll(/ req=(\S+)/g)) ids.add(match[1] as string);
  return ids;
}
