import { close, open, read } from "node:fs";
import { opsLog } from "../logging/ops.js";
import { ApiKey, isSendableKey } from "./api-key.js";
import { KeySourceError, type StoreKeyProvider, UnusableKeyError } from "./provider.js";

/** One read of the file: its keys (null when there is no file), or why it could not be used. */
type Snapshot = { keys: object | null } | { failure: string; transient?: boolean };

export interface FileKeyOptions {
  /** A read that takes longer (a hung network mount) fails the lookup; the next one reads anew. */
  deadlineMs?: number;
  /** Told of each change of the file's state: a problem (never the file's content), or null. */
  report?: (problem: string | null, path: string) => void;
}

/** The longest a key read may take before the lookup fails with the usual safe message. */
export const KEY_READ_DEADLINE_MS = 2_000;

/**
 * Reads of a hung file still holding a thread-pool worker: past this many, a lookup fails at
 * once instead of starting another (the pool is shared with every other file operation).
 */
const MAX_HUNG_READS = 2;

/** Says a key-file problem once on stderr (operational log), and once when it is gone. */
function reportOnce(problem: string | null, path: string): void {
  if (problem === null) opsLog.info({ keys_file: path }, "key file readable again");
  else opsLog.warn({ keys_file: path, problem }, `key file problem: ${problem}`);
}

/**
 * Keys from a JSON file mapping store id to key, re-read for every lookup: no cache, so a key an
 * operator rotates in the file is used by the very next call, with no restart.
 *
 * Lookups that arrive while a read is already in flight share it (a get_stock_position across
 * five stores reads the file once, not five times); nothing outlives the read. A lookup that
 * must see the file as it is now (`fresh`: the reload after a 401) always starts its own read.
 */
export class FileKeyProvider implements StoreKeyProvider {
  #inFlight: Promise<Snapshot> | undefined;
  /** Raw reads not yet finished, a hung one included. */
  #outstanding = 0;
  /** The problem last reported (undefined: nothing read yet). */
  #reported: string | null | undefined;
  readonly #deadlineMs: number;
  readonly #report: NonNullable<FileKeyOptions["report"]>;

  constructor(
    readonly path: string,
    options: FileKeyOptions = {},
  ) {
    this.#deadlineMs = options.deadlineMs ?? KEY_READ_DEADLINE_MS;
    this.#report = options.report ?? reportOnce;
  }

  async getKey(storeId: string, options?: { fresh?: boolean }): Promise<ApiKey | undefined> {
    const snapshot = await (options?.fresh === true ? this.#read() : this.#shared());
    if ("failure" in snapshot) {
      throw new KeySourceError(storeId, snapshot.failure, snapshot.transient === true);
    }
    // No file means no keys at all: every store reports "No credentials", nothing crashes.
    if (snapshot.keys === null || !Object.hasOwn(snapshot.keys, storeId)) return undefined;
    const value = (snapshot.keys as Record<string, unknown>)[storeId];
    if (typeof value !== "string" || value.trim() === "") {
      throw new KeySourceError(storeId, "key file entry is not a non-empty string");
    }
    const key = value.trim();
    // Refused here, not at fetch: a key a header cannot carry would fail every call before it is
    // sent, and the operator needs to hear "fix this entry", not "StoreLink unavailable".
    if (!isSendableKey(key)) throw new UnusableKeyError(storeId, "key file entry");
    return new ApiKey(key);
  }

  #shared(): Promise<Snapshot> {
    if (!this.#inFlight) {
      this.#inFlight = this.#read().finally(() => {
        this.#inFlight = undefined;
      });
    }
    return this.#inFlight;
  }

  /** One read and parse of the file, its state reported when it changed. Never rejects. */
  async #read(): Promise<Snapshot> {
    const snapshot = await this.#readOnce();
    const problem =
      "failure" in snapshot
        ? snapshot.failure
        : snapshot.keys === null
          ? "key file does not exist (every store reports No credentials)"
          : null;
    // The first read reports only a problem; later ones each change, back to fine included.
    if (problem !== this.#reported && (problem !== null || this.#reported !== undefined)) {
      this.#report(problem, this.path);
    }
    this.#reported = problem;
    return snapshot;
  }

  async #readOnce(): Promise<Snapshot> {
    if (this.#outstanding >= MAX_HUNG_READS) {
      return { failure: "key file reads are hanging (a stuck mount?)", transient: true };
    }
    let text: string;
    this.#outstanding++;
    try {
      // Asynchronous on purpose: a slow or network-mounted disk must not stall every other
      // request of the process.
      const reading = readWhole(this.path).finally(() => {
        this.#outstanding--;
      });
      text = await withDeadline(reading, this.#deadlineMs);
    } catch (error) {
      if (error === DEADLINE) {
        return { failure: `key file read took over ${this.#deadlineMs} ms`, transient: true };
      }
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { keys: null };
      return { failure: "key file could not be read" };
    }
    // An editor's UTF-8 byte-order mark is not part of the JSON.
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      // The parser's message is discarded on purpose: it can quote the file, which is credentials.
      return { failure: "key file is not valid JSON" };
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      return { failure: "key file is not a JSON object of store id to key" };
    }
    return { keys: parsed };
  }
}

const DEADLINE = Symbol("deadline");

/** `promise`, or a rejection with DEADLINE after `ms` (the promise itself runs on, unobserved). */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(DEADLINE), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

// Larger than a key file of a few hundred stores: one read usually takes it whole.
const CHUNK = 16 * 1024;

/**
 * The file's text, read with open, read and close on the callback API rather than
 * `fs.promises.readFile` (a FileHandle, an fstat and a promise per step), since this runs on every
 * tool call. A read shorter than asked is the end of a regular
 * file, so a lookup waits for two trips to the thread pool (open, read), not five.
 */
function readWhole(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    open(path, "r", (openError, fd) => {
      if (openError) return reject(openError);
      const chunks: Buffer[] = [];
      const finish = (error: Error | null): void => {
        close(fd, () => {});
        if (error) reject(error);
        else resolve(Buffer.concat(chunks).toString("utf8"));
      };
      const next = (): void => {
        const buffer = Buffer.allocUnsafe(CHUNK);
        read(fd, buffer, 0, CHUNK, null, (readError, bytes) => {
          if (readError) return finish(readError);
          chunks.push(buffer.subarray(0, bytes));
          if (bytes < CHUNK) return finish(null);
          next();
        });
      };
      next();
    });
  });
}
