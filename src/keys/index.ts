import { type Config, ConfigError } from "../config.js";
import { opsLog } from "../logging/ops.js";
import { FileKeyProvider } from "./file.js";
import { KeySourceError, type StoreKeyProvider } from "./provider.js";
import { type SecretAccessClient, SecretManagerKeyProvider } from "./secret-manager.js";

/** The Secret Manager client a test hands in instead of the real one. */
export interface KeyInjection {
  secretClient?: SecretAccessClient | Promise<SecretAccessClient>;
}

/**
 * The key provider the configuration asks for. The Secret Manager client (and its gRPC stack) is
 * loaded only when that source is chosen; tests inject a fake `secretClient` (or the promise of
 * one, to stand for a client still starting or failing to).
 */
export async function createKeyProvider(
  config: Pick<Config, "keySource" | "keysFile" | "secretManager">,
  inject: KeyInjection = {},
): Promise<StoreKeyProvider> {
  if (config.keySource === "file") {
    opsLog.debug({ key_source: "file", keys_file: config.keysFile }, "store keys from a file");
    return new FileKeyProvider(config.keysFile);
  }
  const client = await (inject.secretClient ?? startSecretManagerClient());
  const { project, namePattern, cacheSeconds, deadlineMs } = config.secretManager;
  opsLog.info(
    { key_source: "secret-manager", project, name_pattern: namePattern, cacheSeconds, deadlineMs },
    "store keys from Secret Manager",
  );
  return new SecretManagerKeyProvider({ client, project, namePattern, cacheSeconds, deadlineMs });
}

/**
 * The same choice, without waiting: for dependencies composed without an entry (the test
 * harness). The Secret Manager client starts in the background; a lookup waits for it,
 * and if it cannot start, every lookup fails as that store's credentials error (never a crash,
 * never an unhandled rejection).
 */
export function keyProviderFor(
  config: Pick<Config, "keySource" | "keysFile" | "secretManager">,
  inject: KeyInjection = {},
): StoreKeyProvider {
  if (config.keySource === "file") return new FileKeyProvider(config.keysFile);
  const started = createKeyProvider(config, inject);
  started.catch(() => {});
  return {
    async getKey(storeId, options) {
      let provider: StoreKeyProvider;
      try {
        provider = await started;
      } catch {
        throw new KeySourceError(storeId, "Secret Manager client could not start");
      }
      return provider.getKey(storeId, options);
    },
  };
}

/**
 * Builds the real client and settles its credentials now. Left to the first call, the library
 * creates its stub promise unobserved: without credentials that rejection is unhandled and kills
 * the process. Awaited here, a deployment without credentials fails startup instead. `setting`
 * names what asked for Secret Manager in that failure.
 */
export async function startSecretManagerClient(
  setting = "KORRAL_KEY_SOURCE: secret-manager",
): Promise<SecretAccessClient> {
  const { SecretManagerServiceClient } = await import("@google-cloud/secret-manager");
  const client = new SecretManagerServiceClient();
  try {
    await client.initialize();
  } catch {
    throw new ConfigError(
      `Invalid configuration: ${setting} needs Google Cloud credentials (Application Default Credentials), and none were found`,
    );
  }
  return client;
}
