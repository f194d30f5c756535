import { opsLog } from "../logging/ops.js";

/**
 * Whether the shared limits store answers, said in the ops log once when it stops (with what
 * failed) and once when it is back: an outage is two lines, however many calls meet it.
 */
export class LimitsHealth {
  #down = false;
  #connected = false;

  /** `cause` must already be free of the URL and the password (see limits/redis.ts). */
  failed(cause: string): void {
    if (this.#down) return;
    this.#down = true;
    opsLog.error(
      { limits_store: "redis", cause },
      "limits store unreachable: orders are refused (nothing is sent to StoreLink) and the rate limit is per instance until it answers again",
    );
  }

  answered(): void {
    if (!this.#connected) {
      this.#connected = true;
      if (!this.#down) opsLog.info({ limits_store: "redis" }, "limits store connected");
    }
    if (!this.#down) return;
    this.#down = false;
    opsLog.info({ limits_store: "redis" }, "limits store reachable again: orders resume");
  }

  get down(): boolean {
    return this.#down;
  }
}
