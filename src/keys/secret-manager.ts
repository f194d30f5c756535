import { opsLog } from "../logging/ops.js";
import { ApiKey, isSendableKey } from "./api-key.js";
import { KeySourceError, type StoreKeyProvider, UnusableKeyError } from "./provider.js";

/**
 * The one method of `SecretManagerServiceClient` (@google-cloud/secret-manager 6) this provider
 * uses. Injected, so tests pass a fake and the gRPC stack loads only when Secret Manager is chosen.
 */
export interface SecretAccessClient {
  accessSecretVersion(
    request: { name: string },
    options?: { timeout?: number },
  ): Promise<readonly [{ payload?: { data?: Uint8Array | string | null } | null }, ...unknown[]]>;
}

export interface SecretManagerKeyProviderOptions {
  client: SecretAccessClient;
  /** Resource name with `{store}` (and usually `{project}`) placeholders. */
  namePattern: string;
  project?: string | undefined;
  /** 0 (the default) re-reads the secret on every lookup. */
  cacheSeconds?: number;
  /** Upper bound on one lookup, retries included. */
  deadlineMs?: number;
  /** Clock for the cache; injectable so tests need no waiting. */
  now?: () => number;
}

// Store ids go into a resource name: letters and digits only, so no id can reach another path.
const SAFE_STORE_ID = /^[A-Za-z0-9]{1,32}$/;

// gRPC status codes (google.rpc.Code).
export const NOT_FOUND = 5;

/**
 * A short, secret-free category per gRPC status; the raw gRPC text is never kept. `secret` says
 * whose secret was denied (the store policy reads its own through this too).
 */
export function categorise(
  code: unknown,
  secret = "the store's secret",
): { reason: string; transient: boolean } {
  switch (code) {
    case 7:
      return { reason: `permission denied on ${secret}`, transient: false };
    case 16:
      return { reason: "not authenticated to Secret Manager", transient: false };
    case 9:
      return { reason: "secret version is disabled or destroyed", transient: false };
    case 3:
      return { reason: "secret name rejected by Secret Manager", transient: false };
    case 4:
      return { reason: "Secret Manager deadline exceeded", transient: true };
    case 8:
      return { reason: "Secret Manager quota exhausted", transient: true };
    case 14:
      return { reason: "Secret Manager unavailable", transient: true };
    default:
      return { reason: "Secret Manager request failed", transient: true };
  }
}

class Deadline extends Error {}

/**
 * Per-store StoreLink keys from GCP Secret Manager, one secret per store, `versions/latest` read on
 * every lookup so a rotation (a new version) is used by the very next call. An optional short cache
 * (off by default) saves quota at scale; `fresh: true` (the reload after a 401) always bypasses it.
 * Only present keys are cached: a newly granted store is seen at once.
 */
export class SecretManagerKeyProvider implements StoreKeyProvider {
  readonly #client: SecretAccessClient;
  readonly #namePattern: string;
  readonly #project: string;
  readonly #cacheMs: number;
  readonly #deadlineMs: number;
  readonly #now: () => number;
  readonly #cache = new Map<string, { key: ApiKey; expires: number }>();

  constructor(options: SecretManagerKeyProviderOptions) {
    this.#client = options.client;
    this.#namePattern = options.namePattern;
    this.#project = options.project ?? "";
    this.#cacheMs = (options.cacheSeconds ?? 0) * 1000;
    this.#deadlineMs = options.deadlineMs ?? 3000;
    this.#now = options.now ?? Date.now;
  }

  /** The secret version resource name for a store, or undefined for an id unfit for one. */
  secretName(storeId: string): string | undefined {
    if (!SAFE_STORE_ID.test(storeId)) return undefined;
    return this.#namePattern.replaceAll("{project}", this.#project).replaceAll("{store}", storeId);
  }

  async getKey(storeId: string, options?: { fresh?: boolean }): Promise<ApiKey | undefined> {
    const name = this.secretName(storeId);
    // No secret can exist for such an id: the same answer as a store without a key.
    if (name === undefined) return undefined;

    if (this.#cacheMs > 0 && options?.fresh !== true) {
      const hit = this.#cache.get(storeId);
      if (hit && hit.expires > this.#now()) return hit.key;
    }

    const key = await this.#access(storeId, name);
    if (this.#cacheMs > 0) {
      if (key) this.#cache.set(storeId, { key, expires: this.#now() + this.#cacheMs });
      else this.#cache.delete(storeId);
    }
    return key;
  }

  async #access(storeId: string, name: string): Promise<ApiKey | undefined> {
    let data: Uint8Array | string | null | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      // `timeout` caps the library's own retries; the race bounds the call even if it ignores it.
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Deadline()), this.#deadlineMs);
      });
      const [version] = await Promise.race([
        this.#client.accessSecretVersion({ name }, { timeout: this.#deadlineMs }),
        deadline,
      ]);
      data = version.payload?.data;
    } catch (error) {
      if (error instanceof Deadline) {
        throw this.#fail(
          storeId,
          `no answer from Secret Manager within ${this.#deadlineMs} ms`,
          true,
        );
      }
      const code = (error as { code?: unknown } | null)?.code;
      if (code === NOT_FOUND) return undefined;
      const { reason, transient } = categorise(code);
      throw this.#fail(storeId, reason, transient);
    } finally {
      clearTimeout(timer);
    }

    const value = (
      typeof data === "string" ? data : Buffer.from(data ?? []).toString("utf8")
    ).trim();
    if (value === "") throw this.#fail(storeId, "secret payload is empty", false);
    if (!isSendableKey(value)) throw this.#logged(new UnusableKeyError(storeId, "secret payload"));
    return new ApiKey(value);
  }

  #fail(storeId: string, reason: string, transient: boolean): KeySourceError {
    return this.#logged(new KeySourceError(storeId, reason, transient));
  }

  #logged<E extends KeySourceError>(error: E): E {
    // The tool result says only "could not read the credentials"; operators need the category.
    opsLog.warn(
      { store_id: error.storeId, reason: error.reason },
      "Secret Manager key lookup failed",
    );
    return error;
  }
}
