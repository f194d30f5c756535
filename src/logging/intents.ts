import {
  closeSync,
  fdatasyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import type { IntentFields } from "./records.js";

/**
 * The write-intent journal: a durable line for each order as it is handed to StoreLink, and a
 * line once its audit line is on disk. A process killed in between (SIGKILL, out of memory, power)
 * leaves an intent without an outcome; the next server started on the same log directory appends
 * one UNCERTAIN line to audit.log for each. audit.log itself keeps exactly one line per attempt.
 *
 * One journal per process (`intents-<pid>.jsonl`), so servers sharing a log directory never
 * recover each other's writes while they run. A clean exit removes its journal.
 */

const PREFIX = "intents-";
const SUFFIX = ".jsonl";

interface IntentLine extends IntentFields {
  intent: string;
  ts: string;
}

export class IntentJournal {
  readonly path: string;
  #fd: number | undefined;
  #open = new Set<string>();
  #broken = false;

  constructor(
    readonly dir: string,
    private readonly warn: (message: string, fields: Record<string, unknown>) => void,
  ) {
    this.path = join(dir, `${PREFIX}${process.pid}${SUFFIX}`);
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
        this.#fd = openSync(this.path, "a", 0o640);
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

/** Whether process `pid` is running (EPERM: it is, as another user). */
function running(pid: number): boolean {
  if (pid === process.pid) return false; // a journal of an earlier process that had our pid
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The intents without an outcome in the journals of processes no longer running, each handed to
 * `recover` (their journals are removed once it has written them). A torn last line
 * (the kill came mid-write) is skipped: its intent was never synced, so its order was not sent.
 */
export async function recoverIntents(
  dir: string,
  recover: (fields: IntentFields, requestId: string, sentAt: string) => Promise<void>,
): Promise<number> {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  let recovered = 0;
  for (const name of names) {
    const pid = Number(name.slice(PREFIX.length, -SUFFIX.length));
    if (!name.startsWith(PREFIX) || !name.endsWith(SUFFIX) || !Number.isInteger(pid)) continue;
    if (running(pid)) continue;
    // Claimed by renaming: of two servers starting at once, one recovers it, never both.
    const path = join(dir, `${name}.recovering-${process.pid}`);
    try {
      renameSync(join(dir, name), path);
    } catch {
      continue;
    }
    const pending = new Map<string, IntentLine>();
    try {
      for (const text of readFileSync(path, "utf8").split("\n")) {
        let line: Partial<IntentLine> & { done?: string };
        try {
          line = JSON.parse(text) as typeof line;
        } catch {
          continue;
        }
        if (typeof line.done === "string") pending.delete(line.done);
        else if (typeof line.intent === "string") pending.set(line.intent, line as IntentLine);
      }
    } catch {
      continue;
    }
    for (const intent of pending.values()) {
      const { store_id = null, sku = null, quantity = null, reason = null } = intent;
      await recover({ store_id, sku, quantity, reason }, intent.intent, intent.ts);
      recovered++;
    }
    unlinkSync(path);
  }
  return recovered;
}
