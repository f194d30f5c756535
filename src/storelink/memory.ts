import type { ApiKey } from "../keys/api-key.js";
import {
  type CreatedOrder,
  type Order,
  type OrderRequest,
  type Sku,
  type StockReading,
  type Store,
  type StoreLinkClient,
  StoreLinkError,
} from "./client.js";
import { checkId } from "./ids.js";
import { SEED_ACCEPTED_KEYS, SEED_SKUS, SEED_STOCK, SEED_STORES } from "./seed.js";

/** How long an identical request without an idempotency key is folded into the first. */
export const DEFAULT_DEDUPE_WINDOW_MS = 10 * 60_000;

export interface InMemoryStoreLinkOptions {
  acceptedKeys?: Readonly<Record<string, string>>;
  now?: () => Date;
  /** Window for folding identical key-less orders (store, SKU, quantity, reason); 0 turns it off. */
  dedupeWindowMs?: number;
}

/**
 * The seeded, in-process StoreLink. Orders live for the life of the process: one instance is
 * shared by every request of a process so an order made in one call is read back in the next.
 * Ids are checked by the same rule as the HTTP client's (ids.ts), so both refuse the same ids.
 */
export class InMemoryStoreLink implements StoreLinkClient {
  readonly #acceptedKeys: Readonly<Record<string, string>>;
  readonly #now: () => Date;
  readonly #stores = new Map(SEED_STORES.map((s) => [s.store_id, s]));
  readonly #skus = new Map(SEED_SKUS.map((s) => [s.sku, s]));
  readonly #orders = new Map<string, Order>();
  readonly #sequence = new Map<string, number>();
  readonly #idempotency = new Map<string, { fingerprint: string; orderId: string }>();
  /** Latest order per fingerprint, for folding key-less retries within the dedupe window. */
  readonly #recent = new Map<string, { orderId: string; at: number }>();
  readonly #dedupeWindowMs: number;

  constructor(options: InMemoryStoreLinkOptions = {}) {
    this.#acceptedKeys = options.acceptedKeys ?? SEED_ACCEPTED_KEYS;
    this.#now = options.now ?? (() => new Date());
    this.#dedupeWindowMs = options.dedupeWindowMs ?? DEFAULT_DEDUPE_WINDOW_MS;
  }

  async listStores(): Promise<Store[]> {
    return [...this.#stores.values()].map((s) => ({ ...s }));
  }

  async lookupSku(query: string): Promise<Sku[]> {
    const q = query.trim().toLowerCase();
    if (q === "") return [];
    return [...this.#skus.values()]
      .filter((s) => s.sku.startsWith(q) || s.name.toLowerCase().includes(q))
      .map((s) => ({ ...s }));
  }

  async getSku(sku: string): Promise<Sku> {
    checkId(sku);
    const found = this.#skus.get(sku);
    if (!found) throw new StoreLinkError("unknown_sku", `Unknown SKU ${sku}.`);
    return { ...found };
  }

  async getStock(storeId: string, sku: string, key: ApiKey): Promise<StockReading> {
    checkId(storeId);
    checkId(sku);
    this.#authenticate(storeId, key);
    const [onHand, sold] = this.#ranged(storeId, sku);
    return {
      store_id: storeId,
      sku,
      on_hand: onHand,
      units_sold_last_24h: sold,
      as_of: this.#now().toISOString(),
    };
  }

  /**
   * Dedupe lives here, in StoreLink, not in the MCP process: it must hold across replicas and
   * after a lost answer. With a key: same key + same parameters replays, different parameters
   * conflict. Without one: an identical request within the window replays the first order.
   * The body has no await, so concurrent identical requests cannot both create.
   */
  async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    checkId(request.store_id);
    checkId(request.sku);
    this.#authenticate(request.store_id, key);
    this.#ranged(request.store_id, request.sku);

    const fingerprint = JSON.stringify([
      request.store_id,
      request.sku,
      request.quantity,
      request.reason,
    ]);
    if (request.idempotency_key !== undefined) {
      const scoped = `${request.store_id}\u0000${request.idempotency_key}`;
      const previous = this.#idempotency.get(scoped);
      if (previous) {
        if (previous.fingerprint !== fingerprint) {
          throw new StoreLinkError(
            "idempotency_conflict",
            "This idempotency key was already used for a different order.",
          );
        }
        const order = this.#orders.get(previous.orderId);
        if (order) return { order: { ...order }, replayed: true };
      }
    } else if (this.#dedupeWindowMs > 0) {
      const recent = this.#recent.get(fingerprint);
      const order = recent && this.#orders.get(recent.orderId);
      if (recent && order && this.#now().getTime() - recent.at < this.#dedupeWindowMs) {
        return { order: { ...order }, replayed: true };
      }
    }

    const seq = (this.#sequence.get(request.store_id) ?? 0) + 1;
    this.#sequence.set(request.store_id, seq);
    const order: Order = {
      order_id: `RPL-${request.store_id}-${String(seq).padStart(3, "0")}`,
      store_id: request.store_id,
      sku: request.sku,
      quantity: request.quantity,
      reason: request.reason,
      status: "submitted",
      created_at: this.#now().toISOString(),
    };
    this.#orders.set(order.order_id, order);
    this.#recent.set(fingerprint, { orderId: order.order_id, at: this.#now().getTime() });
    if (request.idempotency_key !== undefined) {
      this.#idempotency.set(`${request.store_id}\u0000${request.idempotency_key}`, {
        fingerprint,
        orderId: order.order_id,
      });
    }
    return { order: { ...order }, replayed: false };
  }

  async getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order> {
    checkId(storeId);
    checkId(orderId);
    this.#authenticate(storeId, key);
    const order = this.#orders.get(orderId);
    // Scope check: another store's order is indistinguishable from one that does not exist.
    if (!order || order.store_id !== storeId) {
      throw new StoreLinkError("order_not_found", `No order ${orderId} for store ${storeId}.`);
    }
    return { ...order };
  }

  #authenticate(storeId: string, key: ApiKey): void {
    if (!this.#stores.has(storeId)) {
      throw new StoreLinkError("unknown_store", `Unknown store ${storeId}.`);
    }
    if (this.#acceptedKeys[storeId] !== key.reveal()) {
      throw new StoreLinkError("unauthorized", `StoreLink rejected the key for store ${storeId}.`);
    }
  }

  #ranged(storeId: string, sku: string): readonly [number, number] {
    const bySku = SEED_STOCK[sku];
    if (!bySku || !this.#skus.has(sku)) {
      throw new StoreLinkError("unknown_sku", `Unknown SKU ${sku}.`);
    }
    const reading = bySku[storeId];
    if (!reading) {
      throw new StoreLinkError("not_ranged", `SKU ${sku} is not ranged at store ${storeId}.`);
    }
    return reading;
  }
}
