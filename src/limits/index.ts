import type { Config } from "../config.js";
import { connectRedisLimits, type RedisLimits } from "./redis.js";

/**
 * The process's shared limits store: one connection to KORRAL_REDIS_URL, made on first use and
 * kept for the process's life; none without the variable (the limits are then per process).
 */
let shared: RedisLimits | undefined;

export function sharedLimitsFor(
  config: Pick<Config, "redisUrl" | "redisTimeoutMs">,
): RedisLimits | undefined {
  if (config.redisUrl === undefined) return undefined;
  shared ??= connectRedisLimits({ url: config.redisUrl, timeoutMs: config.redisTimeoutMs });
  return shared;
}
