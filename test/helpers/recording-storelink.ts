import type { ApiKey } from "../../src/keys/api-key.js";
import type {
  CreatedOrder,
  Order,
  OrderRequest,
  Sku,
  StockReading,
  Store,
  StoreLinkClient,
} from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";

export interface SentCall {
  method: keyof StoreLinkClient;
  storeId?: string;
  /** The key value presented, so tests can assert which key was sent. */
  key?: string;
}

/**
 * Wraps a real StoreLinkClient and records what was sent to it, so tests assert on the request
 * (e.g. that a second 401 causes no third attempt), not just on the result.
 */
export class RecordingStoreLink implements StoreLinkClient {
  readonly sent: SentCall[] = [];
  constructor(readonly inner: StoreLinkClient = new InMemoryStoreLink()) {}

  calls(method: keyof StoreLinkClient): SentCall[] {
    return this.sent.filter((c) => c.method === method);
  }

  listStores(): Promise<Store[]> {
    this.sent.push({ method: "listStores" });
    return this.inner.listStores();
  }
  lookupSku(query: string): Promise<Sku[]> {
    this.sent.push({ method: "lookupSku" });
    return this.inner.lookupSku(query);
  }
  getSku(sku: string): Promise<Sku> {
    this.sent.push({ method: "getSku" });
    return this.inner.getSku(sku);
  }
  getStock(storeId: string, sku: string, key: ApiKey): Promise<StockReading> {
    this.sent.push({ method: "getStock", storeId, key: key.reveal() });
    return this.inner.getStock(storeId, sku, key);
  }
  createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    this.sent.push({ method: "createOrder", storeId: request.store_id, key: key.reveal() });
    return this.inner.createOrder(request, key);
  }
  getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order> {
    this.sent.push({ method: "getOrder", storeId, key: key.reveal() });
    return this.inner.getOrder(storeId, orderId, key);
  }
}
