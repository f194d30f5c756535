import type { ApiKey } from "./api-key.js";

/**
 * Where per-store StoreLink keys come from. Implementations re-read their source on every call
 * (an operator's rotation is picked up by the very next tool call) unless a deliberately enabled
 * short cache says otherwise; `fresh: true` always bypasses any cache (the reload after a 401).
 */
export interface StoreKeyProvider {
  /**
   * The key for `storeId`, or `undefined` when the source has no key for that store.
   * Throws `KeySourceError` when the source itself cannot be read.
   */
  getKey(storeId: string, options?: { fresh?: boolean }): Promise<ApiKey | undefined>;
}

/**
 * The key source failed (unreadable file, Secret Manager error, deadline). The message names the
 * store and a cause category only: never key material, never a parser's or gRPC's raw text.
 */
export class KeySourceError extends Error {
  override readonly name = "KeySourceError";
  constructor(
    readonly storeId: string,
    /** Short, secret-free cause category for operators, e.g. "key file is not valid JSON". */
    readonly reason: string,
    /** True when retrying shortly can help (a deadline, Secret Manager unavailable or throttled). */
    readonly transient = false,
  ) {
    super(`Key source failed for store ${storeId}: ${reason}`);
  }
}

/**
 * A key source holds an entry for the store, but it is not a usable key (it could not be sent in
 * a header). Not transient: the entry must be fixed. The reason never quotes the value.
 */
export class UnusableKeyError extends KeySourceError {
  constructor(storeId: string, where: string) {
    super(
      storeId,
      `${where} is not a usable key: only visible ASCII characters (no spaces, line breaks or other Unicode) can be sent to StoreLink`,
      false,
    );
  }
}
