import type { ApiKey } from "../keys/api-key.js";

/** A store in Korral's directory. */
export interface Store {
  store_id: string;
  name: string;
}

/** A catalogue entry. Deliberately no price, cost, margin or supplier field: see README. */
export interface Sku {
  sku: string;
  name: string;
  category: string;
  unit: "each" | "kg";
}

/** StoreLink's raw stock numbers for one SKU at one store; `gap` is computed by this server. */
export interface StockReading {
  store_id: string;
  sku: string;
  on_hand: number;
  units_sold_last_24h: number;
  /** ISO-8601 time of the reading. */
  as_of: string;
}

export interface OrderRequest {
  store_id: string;
  sku: string;
  quantity: number;
  reason: string;
  /** Deduplicates retries inside StoreLink (same key + same parameters → the original order). */
  idempotency_key?: string;
}

export type OrderStatus = "submitted" | "picking" | "dispatched" | "delivered";

export interface Order {
  order_id: string;
  store_id: string;
  sku: string;
  quantity: number;
  reason: string;
  status: OrderStatus;
  /** ISO-8601 time StoreLink accepted the order. */
  created_at: string;
}

/** The result of a create: `replayed` is true when StoreLink returned an existing order. */
export interface CreatedOrder {
  order: Order;
  replayed: boolean;
}

/**
 * StoreLink as this server uses it. The in-memory seeded implementation and the HTTP client both
 * implement this, and both throw `StoreLinkError` with the same `kind` for the same situation.
 * Store-scoped calls take that store's key; catalogue and directory calls need none.
 */
export interface StoreLinkClient {
  listStores(): Promise<Store[]>;
  lookupSku(query: string): Promise<Sku[]>;
  /** Throws `unknown_sku`. */
  getSku(sku: string): Promise<Sku>;
  /** Throws `unknown_store`, `unauthorized`, `unknown_sku`, `not_ranged`, `unavailable`. */
  getStock(storeId: string, sku: string, key: ApiKey): Promise<StockReading>;
  /**
   * Throws `unknown_store`, `unauthorized`, `unknown_sku`, `not_ranged`, `idempotency_conflict`,
   * `unavailable` (nothing was sent), or `outcome_unknown` (sent; the order may have landed).
   */
  createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder>;
  /** Throws `unknown_store`, `unauthorized`, `order_not_found`. */
  getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order>;
}

export type StoreLinkErrorKind =
  | "unauthorized"
  | "unknown_store"
  | "unknown_sku"
  | "not_ranged"
  | "order_not_found"
  | "idempotency_conflict"
  | "unavailable"
  | "outcome_unknown";

/** A domain failure from StoreLink. Messages are safe to show: they name ids, never keys. */
export class StoreLinkError extends Error {
  override readonly name = "StoreLinkError";
  constructor(
    readonly kind: StoreLinkErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export function isStoreLinkError(
  error: unknown,
  kind?: StoreLinkErrorKind,
): error is StoreLinkError {
  return error instanceof StoreLinkError && (kind === undefined || error.kind === kind);
}
