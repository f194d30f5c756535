import type { ApiKey } from "../../src/keys/api-key.js";
import type {
  CreatedOrder,
  FenceResult,
  Order,
  OrderRequest,
  OrderRequestRecord,
  Sku,
  StockReading,
  Store,
  StoreLinkClient,
} from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";

/**
 * The seeded StoreLink, with store-scoped calls delayed by `delayOf(storeId, sku)` ms, so that
 * concurrent calls overlap and finish in a different order than they started.
 */
export class SlowStoreLink implements StoreLinkClient {
  inFlight = 0;
  maxInFlight = 0;
  constructor(
    private readonly delayOf: (storeId: string, sku: string) => number,
    private readonly inner: StoreLinkClient = new InMemoryStoreLink(),
  ) {}

  private async slow<T>(storeId: string, sku: string, work: () => Promise<T>): Promise<T> {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await new Promise((resolve) => setTimeout(resolve, this.delayOf(storeId, sku)));
      return await work();
    } finally {
      this.inFlight--;
    }
  }

  listStores(): Promise<Store[]> {
    return this.inner.listStores();
  }
  lookupSku(query: string): Promise<Sku[]> {
    return this.inner.lookupSku(query);
  }
  getSku(sku: string): Promise<Sku> {
    return this.inner.getSku(sku);
  }
  getStock(storeId: string, sku: string, key: ApiKey): Promise<StockReading> {
    return this.slow(storeId, sku, () => this.inner.getStock(storeId, sku, key));
  }
  createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    return this.slow(request.store_id, request.sku, () => this.inner.createOrder(request, key));
  }
  getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order> {
    return this.slow(storeId, orderId, () => this.inner.getOrder(storeId, orderId, key));
  }
  getOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<OrderRequestRecord> {
    return this.slow(storeId, idempotencyKey, () =>
      this.inner.getOrderRequest(storeId, idempotencyKey, key),
    );
  }
  fenceOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey): Promise<FenceResult> {
    return this.slow(storeId, idempotencyKey, () =>
      this.inner.fenceOrderRequest(storeId, idempotencyKey, key),
    );
  }
}
