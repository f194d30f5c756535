import type { ApiKey } from "../keys/api-key.js";
import { isStoreLinkError, type OrderRequest, type StoreLinkClient } from "../storelink/client.js";
import type { Span, Telemetry } from "../telemetry/api.js";
import { ATTR } from "../telemetry/conventions.js";

/** Each call of the contract as its CLIENT span names it: method and route template. */
const ROUTES = {
  listStores: ["GET", "/v1/stores"],
  lookupSku: ["GET", "/v1/skus"],
  getSku: ["GET", "/v1/skus/{sku}"],
  getStock: ["GET", "/v1/stores/{store_id}/stock/{sku}"],
  createOrder: ["POST", "/v1/stores/{store_id}/orders"],
  getOrder: ["GET", "/v1/stores/{store_id}/orders/{order_id}"],
  getOrderRequest: ["GET", "/v1/stores/{store_id}/order-requests/{idempotency_key}"],
  fenceOrderRequest: ["POST", "/v1/stores/{store_id}/order-requests/{idempotency_key}/fence"],
} as const satisfies Record<Exclude<keyof StoreLinkClient, "traced">, readonly [string, string]>;
type Call = keyof typeof ROUTES;

/**
 * StoreLink for one traced tool call: every call is a CLIENT span under the call's SERVER span
 * (explicit parent; HTTP client conventions, `url.template`, status, `error.type`), and an HTTP
 * StoreLink sends the span's `traceparent`, so StoreLink's spans join the same trace. Used only
 * with telemetry on; off, the tools get the process's client itself. A class, made per call:
 * its methods are shared, not closures built for every call.
 */
export function tracedStoreLink(
  inner: StoreLinkClient,
  telemetry: Telemetry,
  parent: Span,
): StoreLinkClient {
  return new TracedStoreLink(inner, telemetry, parent);
}

class TracedStoreLink implements StoreLinkClient {
  constructor(
    private readonly inner: StoreLinkClient,
    private readonly telemetry: Telemetry,
    private readonly parent: Span,
  ) {}

  async #run<T>(call: Call, send: (client: StoreLinkClient) => Promise<T>): Promise<T> {
    const [method, template] = ROUTES[call];
    const span = this.telemetry.client(this.parent, {
      name: `${method} ${template}`,
      system: "storelink",
      attributes: { [ATTR.httpMethod]: method, [ATTR.urlTemplate]: template },
    });
    const client =
      this.inner.traced?.({
        traceparent: span.traceparent,
        onStatus: (status) => span.set({ [ATTR.httpStatus]: status }),
      }) ?? this.inner;
    try {
      return await send(client);
    } catch (error) {
      span.fail(isStoreLinkError(error) ? error.kind : "internal");
      throw error;
    } finally {
      span.end();
    }
  }

  listStores() {
    return this.#run("listStores", (c) => c.listStores());
  }
  lookupSku(query: string) {
    return this.#run("lookupSku", (c) => c.lookupSku(query));
  }
  getSku(sku: string) {
    return this.#run("getSku", (c) => c.getSku(sku));
  }
  getStock(storeId: string, sku: string, key: ApiKey) {
    return this.#run("getStock", (c) => c.getStock(storeId, sku, key));
  }
  createOrder(request: OrderRequest, key: ApiKey) {
    return this.#run("createOrder", (c) => c.createOrder(request, key));
  }
  getOrder(storeId: string, orderId: string, key: ApiKey) {
    return this.#run("getOrder", (c) => c.getOrder(storeId, orderId, key));
  }
  getOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey) {
    return this.#run("getOrderRequest", (c) => c.getOrderRequest(storeId, idempotencyKey, key));
  }
  fenceOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey) {
    return this.#run("fenceOrderRequest", (c) => c.fenceOrderRequest(storeId, idempotencyKey, key));
  }
}
