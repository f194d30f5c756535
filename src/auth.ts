import { authFailed, noCredentials } from "./errors.js";
import type { ApiKey } from "./keys/api-key.js";
import type { StoreKeyProvider } from "./keys/provider.js";
import { rememberSentKey, scrubSentKeys } from "./keys/sent-keys.js";
import { isStoreLinkError } from "./storelink/client.js";

/**
 * Runs one store-scoped StoreLink call with that store's key, and returns its answer with that
 * key, and every other key this process has sent, scrubbed out of every text in any encoding
 * (a StoreLink that echoes the key in an order's reason).
 *
 * On a 401 the key is reloaded (bypassing any cache) and the call retried exactly once, so a
 * rotation mid-call recovers invisibly. Only a 401 is retried: a 401 means StoreLink refused the
 * call before acting, whereas any other failure of the write might already have loaded a truck.
 */
export async function withStoreKey<T>(
  keys: StoreKeyProvider,
  storeId: string,
  call: (key: ApiKey) => Promise<T>,
): Promise<T> {
  const key = await keys.getKey(storeId);
  if (!key) throw noCredentials(storeId);
  try {
    rememberSentKey(key);
    return scrubSentKeys(await call(key), key);
  } catch (error) {
    if (!isStoreLinkError(error, "unauthorized")) throw error;
  }

  const reloaded = await keys.getKey(storeId, { fresh: true });
  if (!reloaded) throw noCredentials(storeId);
  try {
    rememberSentKey(reloaded);
    return scrubSentKeys(await call(reloaded), reloaded);
  } catch (error) {
    if (isStoreLinkError(error, "unauthorized")) throw authFailed(storeId);
    throw error;
  }
}
