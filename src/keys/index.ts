import { type Config, ConfigError } from "../config.js";
import { opsLog } from "../logging/ops.js";
import { FileKeyProvider } from "./file.js";
import type { StoreKeyProvider } from "./provider.js";
import { type SecretAccessClient, SecretManagerKeyProvider } from "./secret-manager.js";

/**
 * The key provider the configuration asks for. The Secret Manager client (and its gRPC stack) is
 * loaded only when that source is chosen; tests inject a fake `secretClient`.
 */
export async function createKeyProvider(
  config: Pick<Config, "keySource" | "keysFile" | "secretManager">,
  inject: { secretClient?: SecretAccessClient } = {},
): Promise<StoreKeyProvider> {
  if (config.keySource === "file") {
    opsLog.debug({ key_source: "file", keys_file: config.keysFile }, "store keys from a file");
    return new FileKeyProvider(config.keysFile);
  }
  const client = inject.secretClient ?? (await startSecretManagerClient());
  const { project, namePattern, cacheSeconds, deadlineMs } = config.secretManager;
  opsLog.info(
    { key_source: "secret-manager", project, name_pattern: namePattern, cacheSeconds, deadlineMs },
    "store keys from Secret Manager",
  );
  return new SecretManagerKeyProvider({ client, project, namePattern, cacheSeconds, deadlineMs });
}

/**
 * Builds the real client and settles its credentials now. Left to the first call, the library
 * creates its stub promise unobserved: without credentials that rejection is unhandled and kills
 * the process. Awaited here, a deployment without credentials fails startup instead.
 */
async function startSecretManagerClient(): Promise<SecretAccessClient> {
  const { SecretManagerServiceClient } = await import("@google-cloud/secret-manager");
  const client = new SecretManagerServiceClient();
  try {
    await client.initialize();
  } catch {
    throw new ConfigError(
      "Invalid configuration: KORRAL_KEY_SOURCE: secret-manager needs Google Cloud credentials (Application Default Credentials), and none were found",
    );
  }
  return client;
}
