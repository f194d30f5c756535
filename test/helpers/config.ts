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
