import type { ApiKey } from "../keys/api-key.js";
import {
  isStoreLinkError,
  type OrderRequest,
  type StoreLinkClient,
  type StoreLinkTrace,
} from "../storelink/client.js";
import type { ClientSpanInit, Span, Telemetry } from "../telemetry/api.js";
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

/** Each call's CLIENT span as it starts (made once: a span never changes what it is given). */
const SPANS = {} as Record<Call, ClientSpanInit>;
for (const call of Object.keys(ROUTES) as Call[]) {
  const [method, template] = ROUTES[call];
  SPANS[call] = {
    name: `${method} ${template}`,
    system: "storelink",
    attributes: Object.freeze({ [ATTR.httpMethod]: method, [ATTR.urlTemplate]: template }),
  };
}

/**
 * StoreLink for one traced tool call: every StoreLink request is a CLIENT span under the call's
 * SERVER span (explicit parent; HTTP client conventions, `url.template`, status, `error.type`),
 * and an HTTP StoreLink sends the span's `traceparent`, so StoreLink's spans join the same trace.
 * The span starts when the request is sent: a call the HTTP client answers without one (the
 * store directory from its cache) has no span and no duration in the StoreLink metric. Every
 * call of the embedded StoreLink stands for a request and has its span. Used only with telemetry
 * on; off, the tools get the process's client itself. A class, made per call: its methods are
 * shared, not closures built for every call.
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

  /**
   * `send` on the call's client, under the call's span. A client that throws instead of
   * rejecting is answered as a rejection, so the span still ends with its error.
   */
  #run<T>(call: Call, send: (client: StoreLinkClient) => Promise<T>): Promise<T> {
    const span = new CallSpan(this.telemetry, this.parent, call, this.inner);
    let sent: Promise<T>;
    try {
      sent = send(span.client);
    } catch (error) {
      sent = Promise.reject(error);
    }
    return span.settled(sent);
  }

  listStores() {
    return this.#run("listStores", (client) => client.listStores());
  }
  lookupSku(query: string) {
    return this.#run("lookupSku", (client) => client.lookupSku(query));
  }
  getSku(sku: string) {
    return this.#run("getSku", (client) => client.getSku(sku));
  }
  getStock(storeId: string, sku: string, key: ApiKey) {
    return this.#run("getStock", (client) => client.getStock(storeId, sku, key));
  }
  createOrder(request: OrderRequest, key: ApiKey) {
    return this.#run("createOrder", (client) => client.createOrder(request, key));
  }
  getOrder(storeId: string, orderId: string, key: ApiKey) {
    return this.#run("getOrder", (client) => client.getOrder(storeId, orderId, key));
  }
  getOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey) {
    return this.#run("getOrderRequest", (client) =>
      client.getOrderRequest(storeId, idempotencyKey, key),
    );
  }
  fenceOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey) {
    return this.#run("fenceOrderRequest", (client) =>
      client.fenceOrderRequest(storeId, idempotencyKey, key),
    );
  }
}

/** The CLIENT span of one call: started at its first request, ended when the call settles. */
class CallSpan implements StoreLinkTrace {
  #span: Span | undefined;
  /** The client that makes the call: one that reports its requests here, if it makes any. */
  readonly client: StoreLinkClient;

  constructor(
    private readonly telemetry: Telemetry,
    private readonly parent: Span,
    private readonly call: Call,
    inner: StoreLinkClient,
  ) {
    if (inner.traced !== undefined) {
      this.client = inner.traced(this);
    } else {
      this.#start();
      this.client = inner;
    }
  }

  #start(): Span {
    this.#span ??= this.telemetry.client(this.parent, SPANS[this.call]);
    return this.#span;
  }

  onRequest(): string | undefined {
    return this.#start().traceparent;
  }

  onStatus(status: number): void {
    this.#span?.set({ [ATTR.httpStatus]: status });
  }

  /** `sent`, ending the span (if a request was sent) when it settles; a failure named by kind. */
  settled<T>(sent: Promise<T>): Promise<T> {
    return sent.then(
      (value) => {
        this.#span?.end();
        return value;
      },
      (error: unknown) => {
        this.#span?.fail(isStoreLinkError(error) ? error.kind : "internal");
        this.#span?.end();
        throw error;
      },
    );
  }
}
