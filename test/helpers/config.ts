import { expect } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";

/** The message of the ConfigError `env` must cause; fails the test if it loads. */
export function configErrorOf(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).message;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

/**
 * An authentication mode for production HTTP starts that never call /mcp (production refuses
 * KORRAL_AUTH=none): Google ID tokens for a made-up audience, and the store policy every verified
 * mode needs (named only: nothing is read or fetched at start).
 */
export const PRODUCTION_AUTH = {
  KORRAL_AUTH: "google",
  KORRAL_GOOGLE_AUDIENCES: "https://korral-storelink.test.invalid",
  KORRAL_POLICY_FILE: "/etc/korral/policy.json",
} as const;
