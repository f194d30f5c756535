import { readFile } from "node:fs/promises";
import { ApiKey } from "./api-key.js";
import { KeySourceError, type StoreKeyProvider } from "./provider.js";

/**
 * Keys from a JSON file mapping store id to key, re-read on every lookup: no cache, so a key an
 * operator rotates in the file is used by the very next call, with no restart.
 */
export class FileKeyProvider implements StoreKeyProvider {
  constructor(readonly path: string) {}

  async getKey(storeId: string): Promise<ApiKey | undefined> {
    let text: string;
    try {
      // Asynchronous on purpose: a slow or network-mounted disk must not stall every other
      // request of the process. (Measured: the synchronous read bought nothing outside noise.)
      text = await readFile(this.path, "utf8");
    } catch (error) {
      // No file means no keys at all: every store reports "No credentials", nothing crashes.
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new KeySourceError(storeId, "key file could not be read");
    }

    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      // The parser's message is discarded on purpose: it can quote the file, which is credentials.
      throw new KeySourceError(storeId, "key file is not valid JSON");
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new KeySourceError(storeId, "key file is not a JSON object of store id to key");
    }

    if (!Object.hasOwn(parsed, storeId)) return undefined;
    const value = (parsed as Record<string, unknown>)[storeId];
    if (typeof value !== "string" || value.trim() === "") {
      throw new KeySourceError(storeId, "key file entry is not a non-empty string");
    }
    return new ApiKey(value.trim());
  }
}
