import type { ApiKey } from "../keys/api-key.js";
import {
  type CreatedOrder,
  type FenceResult,
  type Order,
  type OrderRequest,
  type OrderRequestRecord,
  type Sku,
  type StockReading,
  type Store,
  type StoreLinkClient,
  StoreLinkError,
} from "./client.js";
import { checkId, checkIdempotencyKey } from "./ids.js";
import { SEED_ACCEPTED_KEYS, SEED_SKUS, SEED_STOCK, SEED_STORES } from "./seed.js";

/** How long an identical request without an idempotency key is folded into the first. */
export const DEFAULT_DEDUPE_WINDOW_MS = 10 * 60_000;

/**
 * The contract's bound on a create's `in_progress` (openapi/storelink.yaml): after it the create
 * has created its order or failed. `inProgressMs` is kept under it.
 */
export const MAX_IN_PROGRESS_MS = 60_000;

/** What StoreLink did with one idempotency key at one store. */
type KeyRecord =
  | { state: "in_progress"; fingerprint: string; settled: Promise<void> }
  | { state: "created"; fingerprint: string; orderId: string }
  | { state: "fenced" };

export interface InMemoryStoreLinkOptions {
  acceptedKeys?: Readonly<Record<string, string>>;
  now?: () => Date;
  /** Window for folding identical key-less orders (store, SKU, quantity, reason); 0 turns it off. */
  dedupeWindowMs?: number;
  /**
   * How long a keyed create stays `in_progress` before it creates (for tests of that state);
   * 0, the default, creates at once with no await at all. At most MAX_IN_PROGRESS_MS.
   */
  inProgressMs?: number;
  /**
   * Instead of a time: a keyed create stays `in_progress` until this resolves (tests that must
   * act during the state, whatever the machine's speed).
   */
  inProgressUntil?: () => Promise<unknown>;
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
  /** One record per `store\0key`; every decision on it is taken with no await in between. */
  readonly #requests = new Map<string, KeyRecord>();
  /** Latest order per fingerprint, for folding key-less retries within the dedupe window. */
  readonly #recent = new Map<string, { orderId: string; at: number }>();
  readonly #dedupeWindowMs: number;
  readonly #inProgressMs: number;
  readonly #inProgressUntil: (() => Promise<unknown>) | undefined;

  constructor(options: InMemoryStoreLinkOptions = {}) {
    this.#acceptedKeys = options.acceptedKeys ?? SEED_ACCEPTED_KEYS;
    this.#now = options.now ?? (() => new Date());
    this.#dedupeWindowMs = options.dedupeWindowMs ?? DEFAULT_DEDUPE_WINDOW_MS;
    this.#inProgressMs = Math.min(options.inProgressMs ?? 0, MAX_IN_PROGRESS_MS);
    this.#inProgressUntil = options.inProgressUntil;
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
   * after a lost answer. With a key: a fenced key creates nothing, same key + same parameters
   * replays, different parameters conflict, and a create with the key still running is waited
   * for. Without one (or with a key this server made): an identical request within the window
   * replays the first order. Each decision runs with no await between the check and the record,
   * so concurrent creates and fences with one key cannot both win.
   */
  async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    checkId(request.store_id);
    checkId(request.sku);
    if (request.idempotency_key !== undefined) checkIdempotencyKey(request.idempotency_key);
    this.#authenticate(request.store_id, key);
    this.#ranged(request.store_id, request.sku);

    const fingerprint = JSON.stringify([
      request.store_id,
      request.sku,
      request.quantity,
      request.reason,
    ]);
    if (request.idempotency_key === undefined) {
      return this.#folded(fingerprint) ?? this.#create(request, fingerprint);
    }
    const scoped = `${request.store_id}\u0000${request.idempotency_key}`;
    for (;;) {
      const previous = this.#requests.get(scoped);
      if (previous?.state === "fenced") {
        throw new StoreLinkError(
          "idempotency_key_fenced",
          "This idempotency key was fenced: it never created an order and never can; place the order with a new key.",
        );
      }
      if (previous !== undefined && previous.fingerprint !== fingerprint) {
        throw new StoreLinkError(
          "idempotency_conflict",
          "This idempotency key was already used for a different order.",
        );
      }
      if (previous?.state === "in_progress") {
        // The same create is running: its outcome is this one's (decided again once it settles).
        await previous.settled;
        continue;
      }
      if (previous?.state === "created") {
        return { order: { ...this.#order(previous.orderId) }, replayed: true };
      }
      if (request.key_made_by_server === true) {
        const folded = this.#folded(fingerprint);
        if (folded) {
          this.#requests.set(scoped, {
            state: "created",
            fingerprint,
            orderId: folded.order.order_id,
          });
          return folded;
        }
      }
      const until = this.#inProgressUntil;
      if (this.#inProgressMs === 0 && until === undefined) {
        return this.#createUnder(scoped, request, fingerprint);
      }
      let settle = (): void => {};
      const settled = new Promise<void>((resolve) => {
        settle = resolve;
      });
      this.#requests.set(scoped, { state: "in_progress", fingerprint, settled });
      try {
        await (until?.() ?? new Promise((resolve) => setTimeout(resolve, this.#inProgressMs)));
        // In progress, the record is this create's alone: a fence was refused, a create waited.
        return this.#createUnder(scoped, request, fingerprint);
      } finally {
        if (this.#requests.get(scoped)?.state === "in_progress") this.#requests.delete(scoped);
        settle();
      }
    }
  }

  /**
   * What StoreLink did with an idempotency key at this store. Ids, then the store and its key (as
   * every store-scoped call), then the record.
   */
  async getOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<OrderRequestRecord> {
    const record = this.#requestRecord(storeId, idempotencyKey, key);
    if (record === undefined) {
      throw new StoreLinkError(
        "order_request_not_found",
        `No order request with this idempotency key at store ${storeId}.`,
      );
    }
    if (record.state === "created") {
      return {
        idempotency_key: idempotencyKey,
        state: "created",
        order: { ...this.#order(record.orderId) },
      };
    }
    return { idempotency_key: idempotencyKey, state: record.state };
  }

  /**
   * Makes sure the key never creates an order: records it fenced (also when it had no record),
   * answers the order it created, refuses while a create with it runs. Never cancels anything.
   */
  async fenceOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<FenceResult> {
    const record = this.#requestRecord(storeId, idempotencyKey, key);
    if (record?.state === "in_progress") {
      throw new StoreLinkError(
        "order_request_in_progress",
        `A create with this idempotency key is running at store ${storeId}; ask again shortly.`,
      );
    }
    if (record?.state === "created") {
      return { state: "created", order: { ...this.#order(record.orderId) } };
    }
    this.#requests.set(`${storeId}\u0000${idempotencyKey}`, { state: "fenced" });
    return { state: "fenced" };
  }

  #requestRecord(storeId: string, idempotencyKey: string, key: ApiKey): KeyRecord | undefined {
    checkId(storeId);
    checkIdempotencyKey(idempotencyKey);
    this.#authenticate(storeId, key);
    return this.#requests.get(`${storeId}\u0000${idempotencyKey}`);
  }

  /** The order an identical request made within the dedupe window, replayed; else undefined. */
  #folded(fingerprint: string): CreatedOrder | undefined {
    if (this.#dedupeWindowMs <= 0) return undefined;
    const recent = this.#recent.get(fingerprint);
    const order = recent && this.#orders.get(recent.orderId);
    if (recent && order && this.#now().getTime() - recent.at < this.#dedupeWindowMs) {
      return { order: { ...order }, replayed: true };
    }
    return undefined;
  }

  /** Creates the order and records the key (`scoped`) as having created it, in one step. */
  #createUnder(scoped: string, request: OrderRequest, fingerprint: string): CreatedOrder {
    const created = this.#create(request, fingerprint);
    this.#requests.set(scoped, { state: "created", fingerprint, orderId: created.order.order_id });
    return created;
  }

  /** Creates the order, numbered per store (synchronous: it is one step with its record). */
  #create(request: OrderRequest, fingerprint: string): CreatedOrder {
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
    return { order: { ...order }, replayed: false };
  }

  /** An order a record points at: orders are never deleted, so it exists. */
  #order(orderId: string): Order {
    const order = this.#orders.get(orderId);
    if (!order) throw new Error("an idempotency record points at no order");
    return order;
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
