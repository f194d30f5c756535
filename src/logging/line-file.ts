import { closeSync, fdatasyncSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { type FileHandle, mkdir, open } from "node:fs/promises";
import { dirname } from "node:path";

export type Warn = (message: string, fields: Record<string, unknown>) => void;

interface Pending {
  data: string;
  durable: boolean;
  done: () => void;
}

// After a failed open, wait this long before trying again (the directory may be fixed).
const REOPEN_AFTER_MS = 5_000;

/**
 * An append-only file of whole lines.
 *
 * - Lines queued while a write is in flight go out together in ONE write of whole lines (group
 *   commit), so concurrent records never interleave or tear, and one fdatasync covers them all.
 * - `append(line, { durable: true })` resolves only after the line is on disk; plain lines are
 *   handed to the OS and not synced, which keeps the cost off the read paths.
 * - Never throws and never rejects. Any failure (directory missing and uncreatable, a file where
 *   the directory should be, no permission, ENOSPC) is reported ONCE per file through `warn`;
 *   later lines are dropped or, if the problem clears, written again. A later, new problem (after
 *   a successful write) is reported again.
 * - The file deleted under it (`rm -rf` of the log directory) is noticed after the next write:
 *   the open handle would otherwise keep writing into an unlinked inode nobody can read. It
 *   reopens (recreating the directory), writes those lines again into the new file, and warns.
 *   If it cannot reopen (a file where the directory was), the warning says lines are dropped.
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

  constructor(path: string, warn: Warn) {
    this.path = path;
    this.#warn = warn;
  }

  /** Queues one line (without its newline). Resolves when written (and synced, if durable). */
  append(line: string, options: { durable?: boolean } = {}): Promise<void> {
    if (this.#closed) {
      this.#appendNow(`${line}\n`, options.durable === true);
      return Promise.resolve();
    }
    return new Promise<void>((done) => {
      this.#queue.push({ data: `${line}\n`, durable: options.durable === true, done });
      this.#flushing ??= this.#drain();
    });
  }

  /**
   * Stops queueing: from now on `append` writes synchronously (see the class comment); then
   * writes what is queued and closes the file handle.
   */
  async close(): Promise<void> {
    this.#closed = true;
    // A drain started before close() may still pick up lines queued before it: wait for them all.
    while (this.#flushing) await this.#flushing;
    const handle = this.#handle;
    this.#handle = undefined;
    await handle?.close().catch(() => {});
  }

  /** One whole line, written (and synced) before returning; for lines made after close(). */
  #appendNow(data: string, durable: boolean): void {
    let fd: number | undefined;
    try {
      mkdirSync(dirname(this.path), { recursive: true });
      fd = openSync(this.path, "a", 0o640);
      // writeFileSync on a descriptor writes all of it, looping over short writes.
      writeFileSync(fd, data);
      if (durable) fdatasyncSync(fd);
      this.#warned = false;
    } catch (error) {
      this.#fail(error);
    } finally {
      if (fd !== undefined) {
        try {
          closeSync(fd);
        } catch {}
      }
    }
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue;
      this.#queue = [];
      try {
        await this.#write(batch);
      } catch (error) {
        this.#fail(error);
      } finally {
        for (const pending of batch) pending.done();
      }
    }
    // Cleared in the same tick as the empty-queue check, so no append can be left unflushed.
    this.#flushing = undefined;
  }

  async #write(batch: Pending[]): Promise<void> {
    let handle = await this.#open();
    if (!handle) return;
    const buffer = Buffer.from(batch.map((p) => p.data).join(""), "utf8");
    await writeAll(handle, buffer);
    // nlink 0: the file was deleted while open, so these lines went nowhere readable.
    if ((await handle.stat()).nlink === 0) {
      this.#handle = undefined;
      await handle.close().catch(() => {});
      // Reported after the fact, so the warning says what happened: rewritten, or dropped.
      handle = await this.#open("it was deleted");
      if (!handle) return;
      await writeAll(handle, buffer);
      this.#report(
        `log file ${this.path} was deleted; it was recreated and its lines are written there`,
        "ENOENT",
      );
    }
    if (batch.some((p) => p.durable)) await handle.datasync();
    // Written: a later, different problem deserves its own warning.
    this.#warned = false;
  }

  /** `incident`: what led here, to open the warning if this fails too. */
  async #open(incident?: string): Promise<FileHandle | undefined> {
    if (this.#handle) return this.#handle;
    if (Date.now() - this.#openFailedAt < REOPEN_AFTER_MS) return undefined;
    try {
      await mkdir(dirname(this.path), { recursive: true });
      this.#handle = await open(this.path, "a", 0o640);
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
        `${cause}; its lines are being dropped until that is fixed; the service carries on`,
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

/** A regular file takes the whole buffer in one write; the loop only covers a short write. */
async function writeAll(handle: FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset);
    if (bytesWritten <= 0) throw new Error("short write");
    offset += bytesWritten;
  }
}
