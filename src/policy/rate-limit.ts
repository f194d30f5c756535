/**
 * The tool-call backstop the MCP tools spec asks for: a token bucket per caller, per process.
 * A caller may burst up to `perMinute` calls, then gets `perMinute / 60` a second. Large by
 * default so a buyer's agent never meets it; it stops a runaway loop, not a determined attacker.
 */
export interface CallLimiter {
  /** Takes one call for `caller`: null if allowed, else whole seconds until one would be. */
  take(caller: string): { retryAfterSeconds: number } | null;
}

interface Bucket {
  tokens: number;
  updatedMs: number;
}

export class TokenBucketLimiter implements CallLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly refillPerMs: number;
  private lastSweepMs: number;

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
    /** Hard cap on remembered callers; past it, the longest-idle are forgotten first. */
    private readonly maxCallers = 10_000,
  ) {
    if (!(perMinute > 0)) throw new RangeError("perMinute must be positive");
    this.refillPerMs = perMinute / 60_000;
    this.lastSweepMs = now();
  }

  /** How many callers are remembered (for tests of the memory bound). */
  get size(): number {
    return this.buckets.size;
  }

  take(caller: string): { retryAfterSeconds: number } | null {
    const nowMs = this.now();
    this.sweep(nowMs);
    const bucket = this.buckets.get(caller);
    let tokens = this.perMinute;
    if (bucket) {
      tokens = Math.min(
        this.perMinute,
        bucket.tokens + (nowMs - bucket.updatedMs) * this.refillPerMs,
      );
      // Re-insert so Map order stays least-recently-used first, for the cap below.
      this.buckets.delete(caller);
    } else if (this.buckets.size >= this.maxCallers) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
    if (tokens < 1) {
      this.buckets.set(caller, { tokens, updatedMs: nowMs });
      return { retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / this.refillPerMs / 1000)) };
    }
    this.buckets.set(caller, { tokens: tokens - 1, updatedMs: nowMs });
    return null;
  }

  /**
   * A caller idle for a minute has refilled completely, which is the same as being unknown, so
   * forgetting it changes nothing. Sweeps at most once a minute; memory stays bounded by the
   * callers active in the last two minutes (and by maxCallers).
   */
  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweepMs < 60_000) return;
    this.lastSweepMs = nowMs;
    for (const [caller, bucket] of this.buckets) {
      if (nowMs - bucket.updatedMs >= 60_000) this.buckets.delete(caller);
    }
  }
}

/** The configured backstop: `KORRAL_RATE_LIMIT_PER_MIN`, where 0 means none. */
export const limiterFor = (perMinute: number): CallLimiter | undefined =>
  perMinute > 0 ? new TokenBucketLimiter(perMinute) : undefined;
