import { hash } from "node:crypto";

/**
 * Verified tokens, so that a client's next call costs a hash and a lookup instead of a signature
 * check. Keyed by the SHA-256 of the token, never the token itself; an entry lives until the
 * token's `exp` and no longer; at most `limit` entries, the oldest dropped first.
 */
export interface TokenCache<T> {
  get(token: string): T | undefined;
  set(token: string, value: T, expiresAtSeconds: number): void;
  readonly size: number;
}

export const tokenDigest = (token: string): string => hash("sha256", token, "base64url");

export function tokenCache<T>(limit: number, nowMs: () => number = Date.now): TokenCache<T> {
  const entries = new Map<string, { value: T; expiresAtMs: number }>();
  return {
    get(token) {
      const key = tokenDigest(token);
      const entry = entries.get(key);
      if (entry === undefined) return undefined;
      if (entry.expiresAtMs <= nowMs()) {
        entries.delete(key);
        return undefined;
      }
      return entry.value;
    },
    set(token, value, expiresAtSeconds) {
      const expiresAtMs = expiresAtSeconds * 1000;
      if (!(expiresAtMs > nowMs())) return;
      const key = tokenDigest(token);
      entries.delete(key);
      // Map order is insertion order: the first key is the oldest.
      while (entries.size >= limit) {
        const oldest = entries.keys().next().value;
        if (oldest === undefined) break;
        entries.delete(oldest);
      }
      entries.set(key, { value, expiresAtMs });
    },
    get size() {
      return entries.size;
    },
  };
}
