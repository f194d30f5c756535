import type { ApiKey } from "../../src/keys/api-key.js";
import type { CreatedOrder, OrderRequest } from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import type { EmulatorFaults } from "../../src/storelink-emulator.js";
import { startRecordingStoreLink } from "./recording-storelink.js";

/**
 * The seeded StoreLink, whose order creation takes `delay` ms before the order exists, or, when
 * `delay` is "held", waits until the test calls `release()`: a test then lets the write finish
 * at the event it needs (the server said it is stopping), never after a fixed time.
 */
export class DelayedOrders extends InMemoryStoreLink {
  /** Create requests received (the write reached StoreLink). */
  received = 0;
  /** Orders created, by id. */
  readonly created: string[] = [];
  #released = false;
  #held: (() => void)[] = [];
  constructor(private readonly delay: number | "held") {
    super();
  }

  /** Lets every held create through, and every later one at once. */
  release(): void {
    this.#released = true;
    for (const go of this.#held.splice(0)) go();
  }

  override async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    this.received++;
    const delay = this.delay;
    if (delay !== "held") await new Promise((resolve) => setTimeout(resolve, delay));
    else if (!this.#released) await new Promise<void>((resolve) => this.#held.push(resolve));
    const created = await super.createOrder(request, key);
    this.created.push(created.order.order_id);
    return created;
  }
}

/**
 * The StoreLink emulator (the real HTTP app) in this process over `DelayedOrders`, for spawned
 * MCP processes with STORELINK_URL set to `baseUrl`.
 */
export async function startDelayedEmulator(delay: number | "held"): Promise<{
  storelink: DelayedOrders;
  baseUrl: string;
  faults: EmulatorFaults;
  close(): Promise<void>;
}> {
  const storelink = new DelayedOrders(delay);
  const { url, faults, close } = await startRecordingStoreLink(storelink);
  // A create still held when the test ends is let go, so the emulator can close.
  const closeAll = (): Promise<void> => {
    storelink.release();
    return close();
  };
  return { storelink, baseUrl: url, faults, close: closeAll };
}

/** Polls `check` every 10 ms until it holds, or fails after `timeoutMs`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
