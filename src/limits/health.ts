import { opsLog } from "../logging/ops.js";

/**
 * The shared limits store's state, as /healthz shows it and the ops log tells it.
 *
 * - `ok` only once a connection has answered and its eviction policy was checked
 *   (limits/redis.ts), and no command has failed since: otherwise every write is refused.
 * - Each cause of failure (`tls`, `auth`, `timeout`, `refused`, `network`, `closed`, `reply`,
 *   `other`) is named once per outage (a `limits store failed` line): a reconnect loop repeats
 *   none of them.
 * - `limits store unreachable` (what the documented alert matches) is written once per outage,
 *   and only for a real one: at once when the store had answered before, or when the cause is
 *   the configuration (a certificate the client refuses, a refused AUTH string), which waiting
 *   never mends; otherwise only when the store has not answered for `warmupMs` since start, so
 *   Direct VPC egress warming up at an instance's start (up to a minute) alerts no one.
 */
export type LimitsState = "ok" | "unavailable";

/** The causes that are a configuration to fix, not a network to wait for. */
const CONFIGURATION_CAUSES = new Set(["tls", "auth"]);

const PHRASES: Record<string, string> = {
  tls: "its TLS certificate was refused (check the CA in NODE_EXTRA_CA_CERTS and the host in KORRAL_REDIS_URL)",
  auth: "it refused the AUTH string (check the password in KORRAL_REDIS_URL)",
  timeout: "no answer within the deadline",
  refused: "the connection was refused (nothing listens at that address and port)",
  network: "the address cannot be reached or resolved (no route or no DNS answer yet)",
  closed: "the connection was closed by the other end",
  reply: "it answered with an error",
};

export class LimitsHealth {
  /** An outage was declared: the `unreachable` line is written. */
  #down = false;
  /** A connection answered and its eviction policy is checked. */
  #usable = false;
  #everUsable = false;
  #said = new Set<string>();
  #lastCause: string | undefined;
  #warmup: NodeJS.Timeout | undefined;
  /**
   * When a command or the connection last failed (performance.now()). It starts at the start:
   * a process just started cannot know of an outage before it (a replica restarted after one).
   */
  #troubleAt = performance.now();

  constructor(warmupMs = 120_000) {
    this.#warmup = setTimeout(() => {
      this.#warmup = undefined;
      if (!this.#everUsable) {
        this.#declare(
          this.#lastCause ?? "timeout: no connection",
          `for ${warmupMs} ms since start`,
        );
      }
    }, warmupMs);
    this.#warmup.unref();
  }

  /**
   * A command or the connection failed. `cause` is `kind: Class CODE` (limits/redis.ts's
   * `describe`): never the URL, the password or a server's text.
   */
  failed(cause: string): void {
    this.#troubleAt = performance.now();
    const kind = cause.split(":", 1)[0] ?? "other";
    this.#lastCause = cause;
    // "unconnected" (a call while the connection is down) is no cause: the connection's is said.
    if (kind !== "unconnected" && !this.#said.has(kind)) {
      this.#said.add(kind);
      opsLog.warn(
        { limits_store: "redis", cause },
        `limits store failed: ${PHRASES[kind] ?? "an unexpected error"}`,
      );
    }
    if (this.#down) return;
    if (this.#everUsable || CONFIGURATION_CAUSES.has(kind) || this.#warmup === undefined) {
      this.#declare(cause);
    }
  }

  /** The connection dropped: writes are refused until it is back and checked. */
  lost(cause: string): void {
    this.#usable = false;
    this.failed(cause);
  }

  /** A connection answered and passed the eviction-policy check. */
  connected(): void {
    this.#usable = true;
    if (this.#warmup !== undefined) clearTimeout(this.#warmup);
    this.#warmup = undefined;
    if (!this.#everUsable) {
      this.#everUsable = true;
      if (!this.#down) opsLog.info({ limits_store: "redis" }, "limits store connected");
    }
    this.answered();
  }

  /** A command answered. */
  answered(): void {
    if (!this.#usable) return;
    this.#said.clear();
    if (!this.#down) return;
    this.#down = false;
    opsLog.info({ limits_store: "redis" }, "limits store reachable again: orders resume");
  }

  get down(): boolean {
    return this.#down;
  }

  /** How long the store has answered without a failure, or since this started. */
  get quietForMs(): number {
    return performance.now() - this.#troubleAt;
  }

  /** Whether writes can be checked now (what /healthz says). */
  get state(): LimitsState {
    return this.#usable && !this.#down ? "ok" : "unavailable";
  }

  #declare(cause: string, since?: string): void {
    if (this.#down) return;
    this.#down = true;
    opsLog.error(
      { limits_store: "redis", cause, ...(since ? { since } : {}) },
      "limits store unreachable: orders are refused (nothing is sent to StoreLink) and the rate limit is per instance until it answers again",
    );
  }
}
