import { hash } from "node:crypto";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import type { RedisLimits } from "../limits/redis.js";

/** What the shared limiter needs of the limits store. */
type SharedStore = Pick<RedisLimits, "client" | "health" | "deadline" | "describe">;

/**
 * The tool-call backstop the MCP tools spec asks for: at most `perMinute` calls per caller in
 * each minute, the minute starting at the caller's first call (rate-limiter-flexible's fixed
 * window). Counted on the shared limits store when there is one (the window's expiry on Redis's
 * clock, one script per call), else in this process. Large by default so a buyer's agent never
 * meets it; it stops a runaway loop, not a determined attacker.
 *
 * It fails open: when the shared store does not answer, the call is counted by this process's
 * own limiter instead (reads go on; writes are held by the order cap, which fails closed).
 */
export interface CallLimiter {
  /** Takes one call for `caller`: null if allowed, else whole seconds until one would be. */
  take(caller: string): Promise<{ retryAfterSeconds: number } | null>;
}

type Limiter = RateLimiterMemory | RateLimiterRedis;

const WINDOW_SECONDS = 60;

/**
 * A caller's key in either limiter: 128 bits of SHA-256 in base64url, 22 characters whatever the
 * identity (an unverified token's `email` is the caller's to choose), so no caller grows the
 * store, or this process, by choosing a long one.
 */
export const callerKey = (caller: string): string =>
  hash("sha256", caller, "base64url").slice(0, 22);

async function takeFrom(
  limiter: Limiter,
  caller: string,
): Promise<{ retryAfterSeconds: number } | null> {
  try {
    await limiter.consume(callerKey(caller));
    return null;
  } catch (refused) {
    if (refused instanceof RateLimiterRes) {
      return { retryAfterSeconds: Math.max(1, Math.ceil(refused.msBeforeNext / 1000)) };
    }
    throw refused;
  }
}

/** The per-process limiter: memory holds only the callers of the last minute. */
export class MemoryCallLimiter implements CallLimiter {
  readonly #limiter: RateLimiterMemory;

  constructor(perMinute: number) {
    if (!(perMinute > 0)) throw new RangeError("perMinute must be positive");
    this.#limiter = new RateLimiterMemory({ points: perMinute, duration: WINDOW_SECONDS });
  }

  take(caller: string): Promise<{ retryAfterSeconds: number } | null> {
    return takeFrom(this.#limiter, caller);
  }
}

/** The fleet's limiter on the shared store, with this process's own as its fallback. */
export class SharedCallLimiter implements CallLimiter {
  readonly #shared: RateLimiterRedis;
  readonly #fallback: MemoryCallLimiter;

  constructor(
    perMinute: number,
    private readonly store: SharedStore,
  ) {
    this.#fallback = new MemoryCallLimiter(perMinute);
    this.#shared = new RateLimiterRedis({
      storeClient: store.client,
      useRedisPackage: true,
      // Refused at once while the connection is down, instead of waiting out the deadline.
      rejectIfRedisNotReady: true,
      keyPrefix: "korral:rate",
      points: perMinute,
      duration: WINDOW_SECONDS,
    });
  }

  async take(caller: string): Promise<{ retryAfterSeconds: number } | null> {
    try {
      const taken = await this.store.deadline(takeFrom(this.#shared, caller));
      this.store.health.answered();
      return taken;
    } catch (error) {
      this.store.health.failed(this.store.describe(error));
      return this.#fallback.take(caller);
    }
  }
}

const ALLOWED = Promise.resolve(null);

/** The backstop switched off: every call is allowed. */
export const NO_LIMIT: CallLimiter = { take: () => ALLOWED };

/** The configured backstop: `KORRAL_RATE_LIMIT_PER_MIN`, where 0 means none. */
export function limiterFor(perMinute: number, shared?: SharedStore): CallLimiter {
  if (!(perMinute > 0)) return NO_LIMIT;
  return shared ? new SharedCallLimiter(perMinute, shared) : new MemoryCallLimiter(perMinute);
}
