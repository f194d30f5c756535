import type { Config } from "../config.js";
import type { StoreLinkClient } from "./client.js";
import { HttpStoreLinkClient } from "./http.js";
import { InMemoryStoreLink } from "./memory.js";

/**
 * The process's one StoreLink: over HTTP when STORELINK_URL is set, else the seeded in-memory
 * stub (whose orders die with the process; KORRAL_DEDUPE_WINDOW_MIN configures only this one,
 * since a real StoreLink owns its own dedupe window).
 */
export function createStoreLink(
  config: Pick<Config, "storelinkUrl" | "storelinkTimeoutMs" | "dedupeWindowMs">,
): StoreLinkClient {
  if (config.storelinkUrl === undefined) {
    return new InMemoryStoreLink({ dedupeWindowMs: config.dedupeWindowMs });
  }
  return new HttpStoreLinkClient({
    baseUrl: config.storelinkUrl,
    timeoutMs: config.storelinkTimeoutMs,
  });
}
