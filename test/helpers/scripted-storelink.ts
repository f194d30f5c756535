import type { ApiKey } from "../../src/keys/api-key.js";
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
  type StoreLinkErrorKind,
} from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";

/** What a faulted call does instead of (or before) reaching the real StoreLink. */
export type Fault =
  /** Throw a StoreLinkError of this kind without calling through. */
  | { kind: StoreLinkErrorKind }
  /** Call through (the write lands), then throw this kind: "sent, answer lost". */
  | { after: StoreLinkErrorKind }
  /** Never answer until `release()` is called (a hung connection), then call through. */
  | { hang: Gate }
  /** Throw a plain Error (a bug in a client), with this message. */
  | { crash: string };

type Method = keyof StoreLinkClient;

/** A promise a test opens when it decides to: no timers, so nothing here depends on speed. */
export class Gate {
  readonly #opened: Promise<void>;
  #open!: () => void;
  constructor() {
    this.#opened = new Promise((resolve) => {
      this.#open = resolve;
    });
  }
  release(): void {
    this.#open();
  }
  wait(): Promise<void> {
    return this.#opened;
  }
}

/** One call as it reached StoreLink: store and the key value presented, where the call has them. */
export interface SentCall {
  method: Method;
  storeId?: string;
  key?: string;
}

/**
 * The StoreLinkClient seam with scripted faults: each method has a queue of faults consumed one
 * per call (an empty queue calls through to the wrapped client). Records every call as sent
 * (store, key) and every order that really landed, so tests assert on the request, and prove
 * "nothing was written" rather than assume it.
 */
export class ScriptedStoreLink implements StoreLinkClient {
  readonly #queues = new Map<Method, Fault[]>();
  readonly attempts = new Map<Method, number>();
  readonly sent: SentCall[] = [];
  readonly landed: Order[] = [];

  constructor(readonly inner: StoreLinkClient = new InMemoryStoreLink()) {}

  /** Queues faults for the next calls of `method`, in order. */
  fail(method: Method, ...faults: Fault[]): this {
    this.#queues.set(method, [...(this.#queues.get(method) ?? []), ...faults]);
    return this;
  }

  attemptsOf(method: Method): number {
    return this.attempts.get(method) ?? 0;
  }

  /** The calls of `method` as sent, in order. */
  calls(method: Method): SentCall[] {
    return this.sent.filter((c) => c.method === method);
  }

  async #run<T>(
    method: Method,
    through: () => Promise<T>,
    scope: { storeId?: string; key?: ApiKey } = {},
  ): Promise<T> {
    this.attempts.set(method, this.attemptsOf(method) + 1);
    this.sent.push({ method, storeId: scope.storeId, key: scope.key?.reveal() });
    const fault = this.#queues.get(method)?.shift();
    if (!fault) return through();
    if ("kind" in fault) throw new StoreLinkError(fault.kind, `injected ${fault.kind}`);
    if ("crash" in fault) throw new Error(fault.crash);
    if ("hang" in fault) {
      await fault.hang.wait();
      return through();
    }
    await through();
    throw new StoreLinkError(fault.after, `injected ${fault.after} after the call went through`);
  }

  listStores(): Promise<Store[]> {
    return this.#run("listStores", () => this.inner.listStores());
  }
  lookupSku(query: string): Promise<Sku[]> {
    return this.#run("lookupSku", () => this.inner.lookupSku(query));
  }
  getSku(sku: string): Promise<Sku> {
    return this.#run("getSku", () => this.inner.getSku(sku));
  }
  getStock(storeId: string, sku: string, key: ApiKey): Promise<StockReading> {
    return this.#run("getStock", () => this.inner.getStock(storeId, sku, key), { storeId, key });
  }
  createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    return this.#run(
      "createOrder",
      async () => {
        const created = await this.inner.createOrder(request, key);
        if (!created.replayed) this.landed.push(created.order);
        return created;
      },
      { storeId: request.store_id, key },
    );
  }
  getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order> {
    return this.#run("getOrder", () => this.inner.getOrder(storeId, orderId, key), {
      storeId,
      key,
    });
  }
  getOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<OrderRequestRecord> {
    return this.#run(
      "getOrderRequest",
      () => this.inner.getOrderRequest(storeId, idempotencyKey, key),
      { storeId, key },
    );
  }
  fenceOrderRequest(storeId: string, idempotencyKey: string, key: ApiKey): Promise<FenceResult> {
    return this.#run(
      "fenceOrderRequest",
      () => this.inner.fenceOrderRequest(storeId, idempotencyKey, key),
      { storeId, key },
    );
  }
}
