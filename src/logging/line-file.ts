import {
  closeSync,
  fdatasyncSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readSync,
  type Stats,
  writeSync,
} from "node:fs";
import { type FileHandle, mkdir, open, stat } from "node:fs/promises";
import { dirname } from "node:path";

export type Warn = (message: string, fields: Record<string, unknown>) => void;

interface Pending {
  data: string;
  durable: boolean;
  /** The first attempt's result: whole on disk, or not (yet). */
  done: (written: boolean) => void;
  /** Called once the line is whole on disk (at once, or on a later attempt). */
  written?: () => void;
}

export interface AppendOptions {
  /** Resolve only after the line is synced to disk. */
  durable?: boolean;
  /** Called once the line is whole on disk, at once or when a later attempt writes it. */
  written?: () => void;
}

export interface LineFileOptions {
  /** Lines a failed attempt left wait in memory and are written once the disk takes lines. */
  retain?: boolean;
  /**
   * A plain line waits up to this long to go out in one write with the lines after it (a durable
   * line, and close(), send it at once). 0: every line goes as soon as no write is in flight.
   */
  batchMs?: number;
}

/** At most this many lines wait for the disk to take them again; older ones are dropped first. */
const MAX_RETAINED = 10_000;

// After a failed open or write, wait this long before trying again (the directory may be fixed).
const REOPEN_AFTER_MS = 5_000;

// How often, at most, the path is checked for a file moved away (rotated by rename).
const MOVED_CHECK_MS = 1_000;

/**
 * An append-only file of whole lines.
 *
 * - Lines queued while a write is in flight go out together in ONE write of whole lines (group
 *   commit), so concurrent records never interleave or tear, and one fdatasync covers them all.
 * - `append(line, { durable: true })` resolves only after the line is on disk; plain lines are
 *   handed to the OS and not synced, which keeps the cost off the read paths.
 * - A line is on disk whole or not at all: a write cut short (ENOSPC) is cut back to where it
 *   started before anything else is appended, so no line is torn and none is joined to another.
 * - Never throws and never rejects. Any failure (directory missing and uncreatable, a file where
 *   the directory should be, no permission, ENOSPC) is reported ONCE per file through `warn`.
 *   With `retain`, lines that could not be written wait (up to MAX_RETAINED) and are written,
 *   first and in order, once the file takes lines again; otherwise they are dropped. A later, new
 *   problem (after a successful write) is reported again.
 * - The file deleted under it (`rm -rf` of the log directory) is noticed after the next write:
 *   the open handle would otherwise keep writing into an unlinked inode nobody can read. It
 *   reopens (recreating the directory), writes those lines again into the new file, and warns.
 *   If it cannot reopen (a file where the directory was), the warning says lines are dropped.
 * - The file moved away (rotated by a rename, as logrotate does by default) is noticed within
 *   MOVED_CHECK_MS after a write: the lines until then are in the moved file, the next ones go to
 *   a file at the path (the one the rotation created, or a new one), and it warns once.
 * - A file left ending mid-line (its writer was killed in the middle of a write) gets a newline
 *   first, so the torn line stays a torn line and the first line written here is whole.
 * - Once `close()` has been called, a line is still written: synchronously (and synced, if
 *   durable) before `append` returns, so a line made while the process stops (the audit of a
 *   write abandoned at the end of the shutdown grace) is on disk before it exits.
 */
export class LineFile {
  readonly path: string;
  readonly #warn: Warn;
  #handle: FileHandle | undefined;
  #openFailedAt = Number.NEGATIVE_INFINITY;
  #queue: Pending[] = [];
  #flushing: Promise<void> | undefined;
  #warned = false;
  #closed = false;
  /** performance.now() after which the next write checks the path (see #movedAway). */
  #checkPathAt = 0;

  readonly #retain: boolean;
  /** Lines a failed attempt left, written before any newer line. */
  #retained: Pending[] = [];
  #retry: NodeJS.Timeout | undefined;
  readonly #batchMs: number;
  /** Set while plain lines wait for the batch to fill (see LineFileOptions.batchMs). */
  #batch: NodeJS.Timeout | undefined;
  /** Whether #queue holds a durable line (kept, not searched for: checked on every append). */
  #durableQueued = false;

  constructor(path: string, warn: Warn, options: LineFileOptions = {}) {
    this.path = path;
    this.#warn = warn;
    this.#retain = options.retain === true;
    this.#batchMs = options.batchMs ?? 0;
  }

  /**
   * Queues one line (without its newline). Resolves once attempted: true when it is whole on
   * disk (and synced, if durable), false when it is not (yet: see `retain`).
   */
  append(line: string, options: AppendOptions = {}): Promise<boolean> {
    const durable = options.durable === true;
    if (this.#closed) {
      const written = this.#appendNow(`${line}\n`, durable);
      if (written) options.written?.();
      return Promise.resolve(written);
    }
    return new Promise<boolean>((done) => {
      this.#queue.push({ data: `${line}\n`, durable, done, written: options.written });
      if (durable) this.#durableQueued = true;
      this.#flush();
    });
  }

  /** Starts a write of what is queued: now if it is due, else when the batch's time is up. */
  #flush(): void {
    if (this.#flushing) return;
    if (this.#due()) {
      clearTimeout(this.#batch);
      this.#batch = undefined;
      this.#flushing = this.#drain();
    } else if (this.#queue.length > 0) {
      this.#batch ??= setTimeout(() => {
        this.#batch = undefined;
        this.#flushing ??= this.#drain(true);
      }, this.#batchMs);
    }
  }

  /** Whether the queued lines go without waiting: a durable one waits for nothing. */
  #due(): boolean {
    if (this.#queue.length === 0) return false;
    return this.#batchMs === 0 || this.#closed || this.#durableQueued;
  }

  /**
   * Stops queueing: from now on `append` writes synchronously (see the class comment); then
   * writes what is queued and closes the file handle.
   */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    // Lines waiting for their batch go now.
    this.#flush();
    // A drain started before close() may still pick up lines queued before it: wait for them all.
    while (this.#flushing) await this.#flushing;
    const handle = this.#handle;
    this.#handle = undefined;
    await handle?.close().catch(() => {});
    // A last try for lines the disk refused; what still fails is left to the intent journal.
    const retained = this.#retained;
    this.#retained = [];
    for (const pending of retained) {
      if (this.#appendNow(pending.data, pending.durable)) pending.written?.();
    }
  }

  /** One whole line, written (and synced) before returning; for lines made after close(). */
  #appendNow(data: string, durable: boolean): boolean {
    let fd: number | undefined;
    try {
      mkdirSync(dirname(this.path), { recursive: true });
      fd = openSync(this.path, "a+", 0o640);
      const buffer = Buffer.from(data, "utf8");
      let offset = 0;
      try {
        while (offset < buffer.length) offset += writeSync(fd, buffer, offset);
      } catch (error) {
        undoTornSync(fd, buffer, offset);
        throw error;
      }
      if (durable) fdatasyncSync(fd);
      this.#warned = false;
      return true;
    } catch (error) {
      this.#fail(error);
      return false;
    } finally {
      if (fd !== undefined) {
        try {
          closeSync(fd);
        } catch {}
      }
    }
  }

  /** `now`: the queued lines go in the first write even if they are not due (the batch is up). */
  async #drain(now = false): Promise<void> {
    while ((now && this.#queue.length > 0) || this.#due() || this.#dueRetained()) {
      now = false;
      // Lines a failed attempt left go first, so the file keeps the order lines were made in.
      const batch = this.#retained.concat(this.#queue);
      this.#retained = [];
      this.#queue = [];
      this.#durableQueued = false;
      let written = false;
      try {
        written = await this.#write(batch);
      } catch (error) {
        this.#fail(error);
      }
      for (const pending of batch) {
        if (written) pending.written?.();
        pending.done(written);
      }
      if (!written && this.#retain) this.#keep(batch);
      if (!written) break;
    }
    // Cleared in the same tick as the queue check, so no append can be left unflushed.
    this.#flushing = undefined;
    this.#flush();
  }

  /** Retained lines are retried with the next line, or after REOPEN_AFTER_MS on their own. */
  #dueRetained = (): boolean => this.#retained.length > 0 && this.#retry === undefined;

  #keep(batch: Pending[]): void {
    const noop = (): void => {};
    this.#retained = batch.map((pending) => ({ ...pending, done: noop }));
    const over = this.#retained.length - MAX_RETAINED;
    if (over > 0) {
      this.#retained.splice(0, over);
      this.#report(
        `log file ${this.path}: ${over} lines waiting for the disk were dropped`,
        "ENOSPC",
      );
    }
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.#flushing ??= this.#drain();
    }, REOPEN_AFTER_MS);
    this.#retry.unref();
  }

  /** Whether the batch is whole on disk. */
  async #write(batch: Pending[]): Promise<boolean> {
    let handle = await this.#open();
    if (!handle) return false;
    const buffer = Buffer.from(batch.map((p) => p.data).join(""), "utf8");
    await writeAll(handle, buffer);
    const opened = await handle.stat();
    // nlink 0: the file was deleted while open, so these lines went nowhere readable.
    if (opened.nlink === 0) {
      this.#handle = undefined;
      await handle.close().catch(() => {});
      // Reported after the fact, so the warning says what happened: rewritten, or dropped.
      handle = await this.#open("it was deleted");
      if (!handle) return false;
      await writeAll(handle, buffer);
      this.#report(
        `log file ${this.path} was deleted; it was recreated and its lines are written there`,
        "ENOENT",
      );
    }
    if (batch.some((p) => p.durable)) await handle.datasync();
    // Written: a later, different problem deserves its own warning.
    this.#warned = false;
    if (opened.nlink > 0 && (await this.#movedAway(opened))) {
      // The next write opens the file now at the path.
      this.#handle = undefined;
      await handle.close().catch(() => {});
      this.#report(
        `log file ${this.path} was moved away (rotated?); the lines until now are in the moved file, the next ones at ${this.path}`,
        "EMOVED",
      );
    }
    return true;
  }

  /** Whether the path no longer names the open file (checked at most every MOVED_CHECK_MS). */
  async #movedAway(opened: Stats): Promise<boolean> {
    const now = performance.now();
    if (now < this.#checkPathAt) return false;
    this.#checkPathAt = now + MOVED_CHECK_MS;
    try {
      const atPath = await stat(this.path);
      return atPath.ino !== opened.ino || atPath.dev !== opened.dev;
    } catch (error) {
      // Nothing at the path (moved, no new file in its place): the next write creates one.
      return (error as { code?: unknown }).code === "ENOENT";
    }
  }

  /** `incident`: what led here, to open the warning if this fails too. */
  async #open(incident?: string): Promise<FileHandle | undefined> {
    if (this.#handle) return this.#handle;
    if (Date.now() - this.#openFailedAt < REOPEN_AFTER_MS) return undefined;
    try {
      await mkdir(dirname(this.path), { recursive: true });
      const handle = await open(this.path, "a+", 0o640);
      await endTornLine(handle);
      this.#handle = handle;
      return this.#handle;
    } catch (error) {
      this.#openFailedAt = Date.now();
      this.#fail(error, incident);
      return undefined;
    }
  }

  /**
   * Says what actually happens: nothing is written (nor recreated) while the problem lasts, and
   * the next lines try again (opening: after REOPEN_AFTER_MS), so writing resumes once it is
   * fixed. Always starts `cannot write log file`, the text operators grep for.
   */
  #fail(error: unknown, incident?: string): void {
    // A handle that failed a write may be fine for the next one (space freed); keep it.
    const raw = (error as { code?: unknown } | null)?.code;
    const code = typeof raw === "string" ? raw : "unknown";
    // mkdir of a path that is a file: EEXIST; open beneath one: ENOTDIR.
    const cause =
      code === "EEXIST" || code === "ENOTDIR"
        ? `log directory ${dirname(this.path)} is not a directory`
        : `error ${code}`;
    this.#report(
      `cannot write log file ${this.path}: ${incident === undefined ? "" : `${incident}, and `}` +
        `${cause}; its lines ${this.#retain ? "wait in memory until that is fixed, then are written" : "are being dropped until that is fixed"}; the service carries on`,
      code,
    );
  }

  /** Warns once until the next successful write. */
  #report(message: string, code: string): void {
    if (this.#warned) return;
    this.#warned = true;
    try {
      this.#warn(message, { file: this.path, code });
    } catch {
      // A broken warning channel must not break the caller either.
    }
  }
}

/**
 * A regular file takes the whole buffer in one write; a short write (the disk filled up) is
 * finished or, failing that, cut back (see undoTornSync), so the file never ends mid-line.
 */
async function writeAll(handle: FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  try {
    while (offset < buffer.length) {
      const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset);
      if (bytesWritten <= 0) throw Object.assign(new Error("short write"), { code: "ENOSPC" });
      offset += bytesWritten;
    }
  } catch (error) {
    undoTornSync(handle.fd, buffer, offset);
    throw error;
  }
}

/**
 * Removes the `written` bytes of `buffer` a failed append left at the end of the file. Only if
 * they are still its last bytes (read back): another process appending to the same file since
 * must not lose its line. Best effort: a file it cannot cut is reported by the caller's failure.
 */
function undoTornSync(fd: number, buffer: Buffer, written: number): void {
  if (written <= 0) return;
  try {
    const size = fstatSync(fd).size;
    if (size < written) return;
    const tail = Buffer.alloc(written);
    readSync(fd, tail, 0, written, size - written);
    if (tail.equals(buffer.subarray(0, written))) ftruncateSync(fd, size - written);
  } catch {
    // Opened append-only for writing: cannot read back, so it is left (and reported) as is.
  }
}

/** Ends the file's last line if a killed writer left it torn (no newline at the end). */
async function endTornLine(handle: FileHandle): Promise<void> {
  const { size } = await handle.stat();
  if (size === 0) return;
  const last = Buffer.alloc(1);
  await handle.read(last, 0, 1, size - 1);
  if (last[0] !== 0x0a) await handle.write("\n");
}
