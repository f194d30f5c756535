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
 * with telemetry on; off, the tools get the process's client itself.
 */
export function tracedStoreLink(
  inner: StoreLinkClient,
  telemetry: Telemetry,
  parent: Span,
): StoreLinkClient {
  const run = async <T>(call: Call, send: (client: StoreLinkClient) => Promise<T>) => {
    const [method, template] = ROUTES[call];
    const span = telemetry.client(parent, {
      name: `${method} ${template}`,
      system: "storelink",
      attributes: { [ATTR.httpMethod]: method, [ATTR.urlTemplate]: template },
    });
    const client =
      inner.traced?.({
        traceparent: span.traceparent,
        onStatus: (status) => span.set({ [ATTR.httpStatus]: status }),
      }) ?? inner;
    try {
      return await send(client);
    } catch (error) {
      span.fail(isStoreLinkError(error) ? error.kind : "internal");
      throw error;
    } finally {
      span.end();
    }
  };
  return {
    listStores: () => run("listStores", (c) => c.listStores()),
    lookupSku: (query: string) => run("lookupSku", (c) => c.lookupSku(query)),
    getSku: (sku: string) => run("getSku", (c) => c.getSku(sku)),
    getStock: (storeId: string, sku: string, key: ApiKey) =>
      run("getStock", (c) => c.getStock(storeId, sku, key)),
    createOrder: (request: OrderRequest, key: ApiKey) =>
      run("createOrder", (c) => c.createOrder(request, key)),
    getOrder: (storeId: string, orderId: string, key: ApiKey) =>
      run("getOrder", (c) => c.getOrder(storeId, orderId, key)),
    getOrderRequest: (storeId: string, idempotencyKey: string, key: ApiKey) =>
      run("getOrderRequest", (c) => c.getOrderRequest(storeId, idempotencyKey, key)),
    fenceOrderRequest: (storeId: string, idempotencyKey: string, key: ApiKey) =>
      run("fenceOrderRequest", (c) => c.fenceOrderRequest(storeId, idempotencyKey, key)),
  };
}
