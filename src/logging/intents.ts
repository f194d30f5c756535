import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  fdatasyncSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { type FileHandle, lstat, open, readdir, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { type FileLock, tryLock } from "./file-lock.js";
import type { IntentRecord } from "./records.js";

/**
 * The write-intent journal: a durable line for each order as it is handed to StoreLink, and a
 * line once its audit line is whole on disk. A process killed in between (SIGKILL, out of memory,
 * power) leaves an intent without an outcome; a server on the same log directory appends one
 * UNCERTAIN line to audit.log for each, once the writer is provably gone. audit.log keeps exactly
 * one line per attempt.
 *
 * - **Never shared.** Each process writes its own journal, `intents-<random>.jsonl`.
 * - **A live journal is never recovered.** Its writer holds an exclusive lock on it from before
 *   the name exists until it exits (logging/file-lock.ts); the lock, not a clock, a PID or a
 *   namespace id, says the writer is alive, so a paused writer, a skewed clock or a writer on
 *   another host keeps its journal. A journal is recovered by whoever takes its lock, held for the
 *   whole recovery. A writer that cannot lock says so (`lockFailure`) and writes
 *   `intents-<random>.unlocked.jsonl`, which no server recovers: nothing proves its writer dead.
 * - **Recovery loses nothing.** An intent whose outcome is already in audit.log (a kill after its
 *   audit line, before its "done" line) gets no second line; a recoverer killed mid-way leaves the
 *   journal, unlocked, for the next one. An unreadable line costs that line only.
 * - **Recovery is bounded.** A journal larger than MAX_JOURNAL_BYTES, or one that cannot be
 *   opened, is set aside (renamed `set-aside-<name>`, never claimed again) and reported once; a
 *   path that is not a regular file is reported once and never opened. A writer empties its
 *   journal whenever it has no open intent and the file has grown past COMPACT_BYTES, so a live
 *   journal stays far below the bound.
 */

const PREFIX = "intents-";
/** A locked writer's journal. */
const LOCKED = /^intents-[0-9a-f]{16}\.jsonl$/;
/** A writer that could not lock. */
const UNLOCKED = /^intents-[0-9a-f]{16}\.unlocked\.jsonl$/;
/** An earlier release's journal (`intents-<ns>-<pid>-<random>`): its writer touched it every 2 s. */
const LEGACY = /^intents-\d+-\d+-[0-9a-f]+\.jsonl$/;
const LEGACY_LEASE_MS = 10_000;
/** Renamed so, a journal is never claimed again. */
export const SET_ASIDE_PREFIX = "set-aside-";

/** Past this, a journal is set aside rather than read (bounded time and memory). */
export const MAX_JOURNAL_BYTES = 8 * 1024 * 1024;
/** A writer with no open intent empties its journal once it is this large. */
const COMPACT_BYTES = 1024 * 1024;

/**
 * How an intent line is read back, one rule per field of IntentRecord (typed over all of them, so
 * a field added to the record is named here by the compiler, and carried through a kill -9). On
 * disk the request id is the line's `intent`; every other field keeps its name. A value of the
 * wrong type reads as null (the audit line says "-"), never as the line's loss.
 */
const INTENT_FIELDS: {
  [K in keyof Required<IntentRecord>]: (line: Record<string, unknown>) => IntentRecord[K] | null;
} = {
  request_id: (line) => text(line.intent),
  // A journal of an earlier release names nobody: its writes were made before principals.
  by: (line) => text(line.by) ?? "unknown",
  client: (line) => text(line.client) ?? undefined,
  ts: (line) => text(line.ts),
  store_id: (line) => text(line.store_id),
  sku: (line) => text(line.sku),
  quantity: (line) => (typeof line.quantity === "number" ? line.quantity : null),
  reason: (line) => text(line.reason),
  // A journal of an earlier release sent no key.
  idempotency_key: (line) => text(line.idempotency_key) ?? undefined,
};
const INTENT_KEYS = Object.keys(INTENT_FIELDS) as (keyof IntentRecord)[];

const text = (value: unknown): string | null => (typeof value === "string" ? value : null);

/** An intent's line on disk: the record, its request id as `intent`. */
function intentLine({ request_id, ...rest }: IntentRecord): object {
  return { intent: request_id, ...rest };
}

/** The intent a line records, its sending time `sentAt` when the line has none. */
function readIntent(line: Record<string, unknown>, sentAt: string): IntentRecord {
  const read: Partial<Record<keyof IntentRecord, unknown>> = {};
  for (const key of INTENT_KEYS) read[key] = INTENT_FIELDS[key](line);
  read.ts ??= sentAt;
  return read as IntentRecord;
}

const random = (): string => randomBytes(8).toString("hex");

type Warn = (message: string, fields: Record<string, unknown>) => void;

export class IntentJournal {
  #path: string | undefined;
  #fd: number | undefined;
  #size = 0;
  #lock: FileLock | undefined;
  #open = new Set<string>();
  #broken = false;

  constructor(
    readonly dir: string,
    private readonly warn: Warn,
  ) {}

  /** The journal's path once it exists. */
  get path(): string | undefined {
    return this.#path;
  }

  /**
   * Creates the journal and locks it before its name appears (so no recoverer ever sees it
   * unlocked). Resolves to why it could not lock, or undefined when locked. Never rejects.
   */
  async start(): Promise<string | undefined> {
    if (this.#fd !== undefined) return undefined;
    const id = random();
    const hidden = join(this.dir, `.${PREFIX}${id}.new`);
    let fd: number;
    try {
      mkdirSync(this.dir, { recursive: true });
      fd = openSync(hidden, "a", 0o640);
    } catch (error) {
      return `cannot create the journal (error ${code(error)})`;
    }
    const result = await tryLock(fd);
    if (result.kind !== "held") {
      closeSync(fd);
      try {
        unlinkSync(hidden);
      } catch {}
      return result.kind === "busy" ? "the lock is taken" : result.why;
    }
    const path = join(this.dir, `${PREFIX}${id}.jsonl`);
    try {
      renameSync(hidden, path);
    } catch (error) {
      await result.lock.release();
      closeSync(fd);
      return `cannot name the journal (error ${code(error)})`;
    }
    this.#fd = fd;
    this.#path = path;
    this.#lock = result.lock;
    result.lock.unref();
    result.lock.onLost(() =>
      this.warn(
        "the write-intent journal's lock holder was killed; other servers may recover its writes as UNCERTAIN",
        { file: path },
      ),
    );
    return undefined;
  }

  /** Written and synced before the order is sent: the one fsync a write pays for this. */
  begin(intent: IntentRecord): void {
    this.#write(intentLine(intent), true);
    this.#open.add(intent.request_id);
  }

  /** The write's audit line is whole on disk: its intent has an outcome. */
  end(requestId: string): void {
    if (!this.#open.delete(requestId)) return;
    if (this.#open.size === 0 && this.#size >= COMPACT_BYTES && this.#fd !== undefined) {
      // Nothing open: every line here is settled, so the journal can start again empty.
      try {
        ftruncateSync(this.#fd, 0);
        this.#size = 0;
        return;
      } catch {
        // Left to grow; the done line below still settles the intent.
      }
    }
    // Not synced: lost, it only costs a spurious UNCERTAIN after a crash (the safe direction).
    this.#write({ done: requestId }, false);
  }

  /** A clean stop: every intent has its outcome (or its UNCERTAIN line), so none is left. */
  close(): void {
    const fd = this.#fd;
    if (fd === undefined) return;
    this.#fd = undefined;
    if (this.#open.size === 0 && this.#path !== undefined) {
      try {
        unlinkSync(this.#path);
      } catch {
        // Already gone.
      }
    }
    // The lock ends with this process; released now, a recoverer may take a journal left open.
    void this.#lock?.release();
    try {
      closeSync(fd);
    } catch {}
  }

  #write(line: object, durable: boolean): void {
    try {
      if (this.#fd === undefined) {
        // Not started (or it could not lock): a journal no server will recover on its own.
        this.#path ??= join(this.dir, `${PREFIX}${random()}.unlocked.jsonl`);
        mkdirSync(this.dir, { recursive: true });
        this.#fd = openSync(this.#path, "a", 0o640);
        this.#size = fstatSync(this.#fd).size;
      }
      const data = Buffer.from(`${JSON.stringify(line)}\n`, "utf8");
      try {
        let offset = 0;
        while (offset < data.length) offset += writeSync(this.#fd, data, offset);
      } catch (error) {
        // A line is whole or absent: cut what fitted (ENOSPC), so the next line starts clean.
        try {
          ftruncateSync(this.#fd, this.#size);
        } catch {}
        throw error;
      }
      this.#size += data.length;
      if (durable) fdatasyncSync(this.#fd);
    } catch (error) {
      // Never fails a write: without the journal only a kill -9 loses the audit line.
      if (!this.#broken) {
        this.#broken = true;
        this.warn(
          "cannot write the write-intent journal; a write interrupted by a kill will have no audit line",
          { file: this.#path ?? this.dir, code: code(error) },
        );
      }
    }
  }
}

function code(error: unknown): string {
  const raw = (error as { code?: unknown } | null)?.code;
  return typeof raw === "string" ? raw : "unknown";
}

/** What recovery tells the ops log, once per journal: never a journal's content. */
export type RecoveryNotice =
  | { kind: "not a regular file"; file: string }
  | { kind: "unreadable lines"; file: string; lines: number }
  | { kind: "set aside"; file: string; why: string }
  | { kind: "cannot be proven dead"; file: string };

export interface RecoverOptions {
  /** Writes the UNCERTAIN line of one intent (durably): whether it is whole on disk now. */
  recover(intent: IntentRecord): Promise<boolean>;
  /**
   * Intents whose UNCERTAIN line this server already handed to `recover`, written or waiting
   * for the disk: never handed over twice (the journal stays until every line is written).
   */
  handed?: Set<string>;
  /** Which of these request ids already have an outcome line (audit.log's `req=`). */
  outcomes(ids: ReadonlySet<string>): Promise<Set<string>>;
  notice(notice: RecoveryNotice): void;
  /** Paths already reported: each is said once and never looked at again by this server. */
  reported?: Set<string>;
  /** This server cannot lock: nothing is recovered, every foreign journal is only reported. */
  cannotLock?: boolean;
  /** This server's own journal, never recovered by it. */
  own?: () => string | undefined;
}

/**
 * The intents without an outcome in the journals whose writer is provably gone (their lock could
 * be taken), each handed to `recover` once and only if audit.log has no outcome for it; a journal
 * is removed once its lines are written. A torn last line (the kill came mid-write) is skipped:
 * its intent was never synced, so its order was not sent.
 */
export async function recoverIntents(dir: string, options: RecoverOptions): Promise<number> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return 0;
  }
  const reported = options.reported ?? new Set<string>();
  const once = (path: string, notice: RecoveryNotice): void => {
    if (reported.has(path)) return;
    reported.add(path);
    options.notice(notice);
  };
  let recovered = 0;
  for (const name of names) {
    const path = join(dir, name);
    if (!name.startsWith(PREFIX) || path === options.own?.()) continue;
    if (reported.has(path)) continue;
    const legacy = LEGACY.test(name);
    if (UNLOCKED.test(name) || (options.cannotLock && (legacy || LOCKED.test(name)))) {
      once(path, { kind: "cannot be proven dead", file: path });
      continue;
    }
    if (!legacy && !LOCKED.test(name)) continue;
    let stats: Awaited<ReturnType<typeof lstat>>;
    try {
      stats = await lstat(path);
    } catch {
      continue;
    }
    if (!stats.isFile()) {
      once(path, { kind: "not a regular file", file: path });
      continue;
    }
    if (legacy && Date.now() - stats.mtimeMs < LEGACY_LEASE_MS) continue;
    recovered += await recoverJournal(path, stats.ino, options, once);
  }
  return recovered;
}

async function recoverJournal(
  path: string,
  ino: number,
  options: RecoverOptions,
  once: (path: string, notice: RecoveryNotice) => void,
): Promise<number> {
  // Renamed only under its lock (its writer is gone); one that cannot be opened cannot be
  // locked either, so it stays where it is and this server leaves it alone from now on.
  const setAside = async (why: string, locked: boolean): Promise<void> => {
    if (locked) {
      try {
        await rename(path, join(dirname(path), `${SET_ASIDE_PREFIX}${basename(path)}`));
      } catch {}
    }
    once(path, { kind: "set aside", file: path, why });
  };
  let handle: FileHandle;
  try {
    // O_NONBLOCK: a FIFO swapped in after the lstat opens at once instead of waiting for a writer.
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const c = code(error);
    if (c !== "ENOENT") await setAside(`it cannot be opened (error ${c})`, false);
    return 0;
  }
  let lock: FileLock | undefined;
  try {
    const result = await tryLock(handle.fd);
    if (result.kind !== "held") return 0;
    lock = result.lock;
    const stats = await handle.stat();
    // Recovered and removed by another server between our lstat and our lock: not this file.
    if (stats.ino !== ino || stats.nlink === 0 || !stats.isFile()) return 0;
    if (stats.size > MAX_JOURNAL_BYTES) {
      await setAside(`it is ${stats.size} bytes, over the ${MAX_JOURNAL_BYTES}-byte bound`, true);
      return 0;
    }
    const pending = new Map<string, Record<string, unknown>>();
    let unreadable = 0;
    let text: string;
    try {
      text = await handle.readFile("utf8");
    } catch (error) {
      await setAside(`it cannot be read (error ${code(error)})`, true);
      return 0;
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
      const entry = line as Record<string, unknown>;
      if (typeof entry.done === "string") pending.delete(entry.done);
      else if (typeof entry.intent === "string") pending.set(entry.intent, entry);
      else unreadable++;
    }
    if (unreadable > 0) once(path, { kind: "unreadable lines", file: path, lines: unreadable });
    const outcomes =
      pending.size > 0 ? await options.outcomes(new Set(pending.keys())) : new Set<string>();
    let recovered = 0;
    let allWritten = true;
    const handed = options.handed ?? new Set<string>();
    for (const [id, line] of pending) {
      if (outcomes.has(id)) continue;
      if (handed.has(id)) {
        allWritten = false;
        continue;
      }
      handed.add(id);
      const written = await options.recover(readIntent(line, stats.mtime.toISOString()));
      if (written) handed.delete(id);
      else allWritten = false;
      recovered++;
    }
    // Kept while a line waits for the disk: killed meanwhile, the next server recovers it.
    if (allWritten) {
      try {
        await unlink(path);
      } catch {
        // Already gone.
      }
    }
    return recovered;
  } finally {
    await lock?.release();
    await handle.close().catch(() => {});
  }
}

/**
 * Which of `ids` audit.log already has an outcome line for (`req=<id>`), read as a stream: time
 * grows with the file, memory does not, and the event loop keeps serving meanwhile.
 */
export async function auditedRequestIds(
  auditPath: string,
  ids: ReadonlySet<string>,
): Promise<Set<string>> {
  const found = new Set<string>();
  let handle: FileHandle;
  try {
    if (!(await lstat(auditPath)).isFile()) return found;
    handle = await open(auditPath, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return found;
  }
  try {
    const lines = createInterface({ input: handle.createReadStream(), crlfDelay: Infinity });
    for await (const line of lines) {
      for (const match of line.matchAll(/ req=(\S+)/g)) {
        if (ids.has(match[1] as string)) found.add(match[1] as string);
      }
      if (found.size === ids.size) break;
    }
  } catch {
    // Unreadable midway: what was found stands; the rest may get an UNCERTAIN (the safe side).
  } finally {
    await handle.close().catch(() => {});
  }
  return found;
}
