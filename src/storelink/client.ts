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
  /**
   * Deduplicates retries inside StoreLink (same key + same parameters → the original order), and
   * names the request so it can be asked after (getOrderRequest) and fenced. Optional in the
   * contract; every create this server sends carries one (tools/create-replenishment-order).
   */
  idempotency_key?: string;
  /**
   * The key was made by this server because the agent gave none: a StoreLink with a key-less
   * dedupe window (the embedded one, the emulator) folds an identical such order within it, as it
   * folds key-less ones. Over HTTP it is the `Idempotency-Key-Source: server` header (1.1).
   */
  key_made_by_server?: boolean;
}

/** What StoreLink did with an idempotency key (contract 1.1). */
export type OrderRequestState = "in_progress" | "created" | "fenced";

/** StoreLink's record of an idempotency key: `order` exactly when `state` is `created`. */
export type OrderRequestRecord =
  | { idempotency_key: string; state: "in_progress" | "fenced" }
  | { idempotency_key: string; state: "created"; order: Order };

/** A fence's answer: the key can never create an order now, or it already had (the order). */
export type FenceResult = { state: "fenced" } | { state: "created"; order: Order };

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
   * `idempotency_key_fenced`, `unavailable` (nothing was sent), or `outcome_unknown` (sent; the
   * order may have landed).
   */
  createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder>;
  /** Throws `unknown_store`, `unauthorized`, `order_not_found`. */
  getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order>;
  /**
   * What StoreLink did with a create's idempotency key (reads only). Throws `unknown_store`,
   * `unauthorized`, `order_request_not_found` (no record: not proof that nothing will land),
   * `unavailable`, `unsupported` (a StoreLink without contract 1.1).
   */
  getOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<OrderRequestRecord>;
  /**
   * Makes sure the key never creates an order; never cancels one it created. Throws
   * `unknown_store`, `unauthorized`, `order_request_in_progress` (a create with the key is
   * running: ask again), `unavailable` (nothing decided), `unsupported`.
   */
  fenceOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey): Promise<FenceResult>;
  /**
   * This client for one traced call, where it makes requests (HTTP): they carry `traceparent`
   * and report their status. A client without requests (the embedded one) has none.
   */
  traced?(trace: StoreLinkTrace): StoreLinkClient;
}

/**
 * A traced call's hooks into the requests it makes. A call answered without a request (the
 * directory from the client's cache) calls neither, so it is traced as no request at all.
 */
export interface StoreLinkTrace {
  /** A request is being sent: the W3C traceparent it carries, if the call's span has one. */
  onRequest(): string | undefined;
  /** The HTTP status of each answer. */
  onStatus(status: number): void;
}

export type StoreLinkErrorKind =
  | "unauthorized"
  | "unknown_store"
  | "unknown_sku"
  | "not_ranged"
  | "order_not_found"
  | "idempotency_conflict"
  /** A create whose key was fenced: nothing was created, and with this key nothing ever can be. */
  | "idempotency_key_fenced"
  | "order_request_not_found"
  | "order_request_in_progress"
  /** StoreLink lacks contract 1.1's order-request endpoints (its 404 `not_found` route answer). */
  | "unsupported"
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
