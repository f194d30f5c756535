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

/** What the start-up line and /healthz name as the StoreLink in use. */
export const EMBEDDED_STORELINK = "embedded demo";

/**
 * "embedded demo", or the StoreLink URL's host (and port) only: never its path, query or
 * userinfo, any of which could carry a credential.
 */
export function storelinkInUse(config: Pick<Config, "storelinkUrl">): string {
  if (config.storelinkUrl === undefined) return EMBEDDED_STORELINK;
  return new URL(config.storelinkUrl).host;
}
