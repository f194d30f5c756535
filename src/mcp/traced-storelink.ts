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

  /** The CLIENT span of one call, started. */
  #span(call: Call): Span {
    const [method, template] = ROUTES[call];
    return this.telemetry.client(this.parent, {
      name: `${method} ${template}`,
      system: "storelink",
      attributes: { [ATTR.httpMethod]: method, [ATTR.urlTemplate]: template },
    });
  }

  /** The client that makes the call: one that sends the span's context, if it makes requests. */
  #via(span: Span): StoreLinkClient {
    if (this.inner.traced === undefined) return this.inner;
    return this.inner.traced({
      traceparent: span.traceparent,
      onStatus: (status) => span.set({ [ATTR.httpStatus]: status }),
    });
  }

  listStores() {
    const span = this.#span("listStores");
    return ended(span, this.#via(span).listStores());
  }
  lookupSku(query: string) {
    const span = this.#span("lookupSku");
    return ended(span, this.#via(span).lookupSku(query));
  }
  getSku(sku: string) {
    const span = this.#span("getSku");
    return ended(span, this.#via(span).getSku(sku));
  }
  getStock(storeId: string, sku: string, key: ApiKey) {
    const span = this.#span("getStock");
    return ended(span, this.#via(span).getStock(storeId, sku, key));
  }
  createOrder(request: OrderRequest, key: ApiKey) {
    const span = this.#span("createOrder");
    return ended(span, this.#via(span).createOrder(request, key));
  }
  getOrder(storeId: string, orderId: string, key: ApiKey) {
    const span = this.#span("getOrder");
    return ended(span, this.#via(span).getOrder(storeId, orderId, key));
  }
  getOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey) {
    const span = this.#span("getOrderRequest");
    return ended(span, this.#via(span).getOrderRequest(storeId, idempotencyKey, key));
  }
  fenceOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey) {
    const span = this.#span("fenceOrderRequest");
    return ended(span, this.#via(span).fenceOrderRequest(storeId, idempotencyKey, key));
  }
}

/** `sent`, ending `span` when it settles: a failure is named by its kind, and passed on. */
function ended<T>(span: Span, sent: Promise<T>): Promise<T> {
  return sent.then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      span.fail(isStoreLinkError(error) ? error.kind : "internal");
      span.end();
      throw error;
    },
  );
}
