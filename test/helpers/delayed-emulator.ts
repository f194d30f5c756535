import type { ApiKey } from "../../src/keys/api-key.js";
import type { CreatedOrder, OrderRequest } from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { startRecordingStoreLink } from "./recording-storelink.js";

/** The seeded StoreLink, whose order creation takes `delayMs` before the order exists. */
export class DelayedOrders extends InMemoryStoreLink {
  /** Create requests received (the write reached StoreLink). */
  received = 0;
  /** Orders created, by id. */
  readonly created: string[] = [];
  constructor(private readonly delayMs: number) {
    super();
  }

  override async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    this.received++;
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    const created = await super.createOrder(request, key);
    this.created.push(created.order.order_id);
    return created;
  }
}

/**
 * The StoreLink emulator (the real HTTP app) in this process over `DelayedOrders`, for spawned
 * MCP processes with STORELINK_URL set to `baseUrl`.
 */
export async function startDelayedEmulator(
  delayMs: number,
): Promise<{ storelink: DelayedOrders; baseUrl: string; close(): Promise<void> }> {
  const storelink = new DelayedOrders(delayMs);
  const { url, close } = await startRecordingStoreLink(storelink);
  return { storelink, baseUrl: url, close };
}

/** Polls `check` every 10 ms until it holds, or fails after `timeoutMs`. */
export async function until(check: () => boolean, what: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
