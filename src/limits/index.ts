import { type Config, ConfigError } from "../config.js";
import type { RedisLimits } from "./redis.js";

/**
 * The process's shared limits store: one connection to KORRAL_REDIS_URL, opened by the entries at
 * start (`connectSharedLimits`) and kept for the process's life; none without the variable (the
 * limits are then per process). node-redis is loaded only then: a start without it never pays
 * for the client's half a megabyte.
 */
let shared: { url: string; limits: RedisLimits } | undefined;

export async function connectSharedLimits(
  config: Pick<Config, "redisUrl" | "redisTimeoutMs"> & Partial<Pick<Config, "redisAlertAfterMs">>,
): Promise<RedisLimits | undefined> {
  if (config.redisUrl === undefined) return undefined;
  if (shared?.url !== config.redisUrl) {
    const { connectRedisLimits } = await import("./redis.js");
    let limits: RedisLimits;
    try {
      limits = connectRedisLimits({
        url: config.redisUrl,
        timeoutMs: config.redisTimeoutMs,
        ...(config.redisAlertAfterMs === undefined ? {} : { warmupMs: config.redisAlertAfterMs }),
      });
    } catch (error) {
      // config.ts checks the client's URL rules; should the client refuse one still, the start
      // stops naming the variable, never quoting the client's message (it may hold the URL).
      throw new ConfigError(
        `Invalid configuration: KORRAL_REDIS_URL: the Redis client cannot use it (${error instanceof Error ? error.name : "error"}; its text is not repeated here)`,
      );
    }
    shared = { url: config.redisUrl, limits };
  }
  return shared.limits;
}

/**
 * The store `connectSharedLimits` opened for this configuration. With KORRAL_REDIS_URL set and no
 * store opened, this refuses rather than count per process without a word.
 */
export function sharedLimitsFor(config: Pick<Config, "redisUrl">): RedisLimits | undefined {
  if (config.redisUrl === undefined) return undefined;
  if (shared?.url !== config.redisUrl) {
    throw new ConfigError(
      "Invalid configuration: KORRAL_REDIS_URL is set but the limits store was not opened; start the server through startDeps (as dist/http.js and dist/stdio.js do), or pass orderCap and limiter",
    );
  }
  return shared.limits;
}
