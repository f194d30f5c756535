import { close, open, read } from "node:fs";
import { ApiKey, isSendableKey, UnusableKeyError } from "./api-key.js";
import { KeySourceError, type StoreKeyProvider } from "./provider.js";

/** One read of the file: its keys (null when there is no file), or why it could not be used. */
type Snapshot = { keys: object | null } | { failure: string };

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

  constructor(readonly path: string) {}

  async getKey(storeId: string, options?: { fresh?: boolean }): Promise<ApiKey | undefined> {
    const snapshot = await (options?.fresh === true ? this.#read() : this.#shared());
    if ("failure" in snapshot) throw new KeySourceError(storeId, snapshot.failure);
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

  /** One read and parse of the file. Never rejects: failures are returned as a reason. */
  async #read(): Promise<Snapshot> {
    let text: string;
    try {
      // Asynchronous on purpose: a slow or network-mounted disk must not stall every other
      // request of the process.
      text = await readWhole(this.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { keys: null };
      return { failure: "key file could not be read" };
    }
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

// Larger than a key file of a few hundred stores: one read usually takes it whole.
const CHUNK = 16 * 1024;

/**
 * The file's text, read with open, read and close on the callback API: `fs.promises.readFile`
 * costs about four times the CPU per read on Node 20 (a FileHandle, an fstat and a promise per
 * step), and this runs on every tool call. A read shorter than asked is the end of a regular
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
