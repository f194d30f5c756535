import type { ApiKey } from "../../src/keys/api-key.js";
import {
  type CreatedOrder,
  type Order,
  type OrderRequest,
  type Sku,
  type StockReading,
  type Store,
  type StoreLinkClient,
  StoreLinkError,
} from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";

/**
 * A StoreLink whose writes are "sent" and then lose their answer: the order is handed to the
 * seeded store (so it may really exist, `landed`), then `outcome_unknown` is thrown, as a
 * timeout or dropped connection after the request left would. Reads pass straight through.
 */
export class FaultyStoreLink implements StoreLinkClient {
  readonly sent: OrderRequest[] = [];
  constructor(
    readonly inner: InMemoryStoreLink = new InMemoryStoreLink(),
    readonly landed = true,
  ) {}

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
    return this.inner.getStock(storeId, sku, key);
  }
  getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order> {
    return this.inner.getOrder(storeId, orderId, key);
  }
  async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    this.sent.push(request);
    if (this.landed) await this.inner.createOrder(request, key);
    throw new StoreLinkError(
      "outcome_unknown",
      "StoreLink did not answer after the order was sent (timeout).",
    );
  }
}
