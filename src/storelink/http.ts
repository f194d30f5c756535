import { z } from "zod";
import { type ApiKey, isSendableKey } from "../keys/api-key.js";
import { UnusableKeyError } from "../keys/provider.js";
import { opsLog } from "../logging/ops.js";
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
  type StoreLinkTrace,
} from "./client.js";
import {
  checkedCreate,
  checkedFence,
  checkedOrder,
  checkedOrderRequest,
  checkedStock,
} from "./contract.js";
import { checkId, checkIdempotencyKey } from "./ids.js";

export const STORELINK_KEY_HEADER = "X-StoreLink-Key";
/** Contract 1.1: `server` when this server made the create's Idempotency-Key (its agent sent none). */
export const KEY_SOURCE_HEADER = "Idempotency-Key-Source";

interface SharedState {
  stores: { at: number; value: Promise<Store[]> } | undefined;
  /** Connection failures already named in the ops log (see sayConnectionFailure). */
  saidCauses: Set<string>;
}

export interface HttpStoreLinkOptions {
  /** Base URL of StoreLink, e.g. http://127.0.0.1:8090 (paths are /v1/...). */
  baseUrl: string;
  /** Per-request deadline in ms, covering connect, headers and body. */
  timeoutMs?: number;
  /**
   * How long the store directory is reused. It changes rarely and is read on every stock and
   * order call, so a short cache saves one round trip per tool call; 0 disables it.
   */
  storesTtlMs?: number;
  /** Injectable for tests; defaults to the global fetch (undici, keep-alive by default). */
  fetch?: typeof fetch;
  now?: () => number;
}

const storeSchema = z.object({ store_id: z.string(), name: z.string() });
const skuSchema = z.object({
  sku: z.string(),
  name: z.string(),
  category: z.string(),
  unit: z.enum(["each", "kg"]),
});
const stockSchema = z.object({
  store_id: z.string(),
  sku: z.string(),
  on_hand: z.number().int(),
  units_sold_last_24h: z.number().int(),
  as_of: z.string(),
});
const orderSchema = z.object({
  order_id: z.string(),
  store_id: z.string(),
  sku: z.string(),
  quantity: z.number().int(),
  reason: z.string(),
  status: z.enum(["submitted", "picking", "dispatched", "delivered"]),
  created_at: z.string(),
});
// Contract 1.1's order-request answers: their fields are checked by contract.ts before use.
const orderRequestSchema = z.object({
  idempotency_key: z.string(),
  state: z.string(),
  order: orderSchema.optional(),
});
const fenceSchema = orderRequestSchema.omit({ idempotency_key: true });
// Only `code` is read from an error body: `message` is free text, and no text StoreLink sends
// ever goes into an error message or a log line (a StoreLink can echo the key it received).
const errorSchema = z.object({ error: z.object({ code: z.string() }) });

/** Every error code of the contract (openapi/storelink.yaml, components.schemas.Error). */
const CONTRACT_CODES = new Set([
  "invalid_request",
  "unauthorized",
  "unknown_store",
  "unknown_sku",
  "order_not_found",
  "not_ranged",
  "idempotency_conflict",
  "idempotency_key_fenced",
  "order_request_not_found",
  "order_request_in_progress",
  "unavailable",
  "not_found",
  "internal",
]);

/** A code from the body, if it is one of the contract's; anything else is this fixed word. */
const UNRECOGNISED = "unrecognised";
const contractCode = (code: string | undefined): string | undefined =>
  code === undefined ? undefined : CONTRACT_CODES.has(code) ? code : UNRECOGNISED;

/**
 * The order POST's refusals as the contract defines them (openapi/storelink.yaml): each status
 * with the codes that mean "refused before acting". Any other answer to the POST (a 204, a 3xx, a
 * bare 401, a 403 page, a 5xx whatever its body says) may follow a write that landed.
 */
const WRITE_REFUSALS: Readonly<Record<number, readonly string[]>> = {
  400: ["invalid_request"],
  401: ["unauthorized"],
  404: ["unknown_store", "unknown_sku"],
  409: ["idempotency_conflict", "idempotency_key_fenced"],
  422: ["not_ranged"],
  503: ["unavailable"],
};

/** Error codes of the contract that are domain errors, identical to the in-memory kinds. */
const DOMAIN_CODES = new Set<StoreLinkErrorKind>([
  "unauthorized",
  "unknown_store",
  "unknown_sku",
  "not_ranged",
  "order_not_found",
  "idempotency_conflict",
  "idempotency_key_fenced",
  "order_request_not_found",
  "order_request_in_progress",
]);

/**
 * Failure codes (from undici / libc, on `error.cause.code`) that prove the request never left:
 * no connection was made, so a write cannot have landed.
 */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EAI_NONAME",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_INVALID_ARG",
  // The TLS handshake refused StoreLink's certificate: it fails before any request byte is sent.
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_UNTRUSTED",
  "CERT_REVOKED",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/**
 * Names a connection failure in the ops log once per cause until this StoreLink answers again
 * (a missing internal CA is one line, not one per call). `said` is the client's own.
 */
function sayConnectionFailure(said: Set<string>, failure: Failure): void {
  if (said.has(failure.detail)) return;
  said.add(failure.detail);
  opsLog.warn(
    { cause: failure.detail, sent: failure.sent },
    "StoreLink could not be reached; calls fail until it answers (the cause is its connection's, never a key)",
  );
}

/**
 * Which kind of call: a write that fails after sending is uncertain, a read is just unavailable.
 * A fence is a read here: it never creates an order, and asking it again is harmless.
 */
type Mode = "read" | "write";

class Failure {
  constructor(
    readonly sent: boolean,
    readonly detail: string,
  ) {}
}

/**
 * StoreLink over HTTP, per openapi/storelink.yaml. One round trip per call on pooled keep-alive
 * connections (global fetch's default dispatcher). Never retries: the 401 reload-and-retry-once
 * policy lives in auth.ts, and a write is never repeated because it might already have loaded a
 * truck. Error messages are built here from ids, never copied from the server or containing keys.
 */
export class HttpStoreLinkClient implements StoreLinkClient {
  readonly #base: string;
  readonly #timeoutMs: number;
  readonly #storesTtlMs: number;
  readonly #fetch: typeof fetch;
  readonly #now: () => number;
  readonly #options: HttpStoreLinkOptions;
  /** What every view of this client shares: the directory cache, the causes said. */
  readonly #shared: SharedState;
  readonly #trace: StoreLinkTrace | undefined;

  constructor(
    options: HttpStoreLinkOptions,
    shared: SharedState = { stores: undefined, saidCauses: new Set() },
    trace?: StoreLinkTrace,
  ) {
    this.#options = options;
    this.#base = options.baseUrl.replace(/\/+$/, "");
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.#storesTtlMs = options.storesTtlMs ?? 30_000;
    this.#fetch = options.fetch ?? fetch;
    this.#now = options.now ?? Date.now;
    this.#shared = shared;
    this.#trace = trace;
  }

  /** This client for one traced call: its requests carry `traceparent` and report their status. */
  traced(trace: StoreLinkTrace): StoreLinkClient {
    return new HttpStoreLinkClient(this.#options, this.#shared, trace);
  }

  get #stores(): SharedState["stores"] {
    return this.#shared.stores;
  }
  set #stores(entry: SharedState["stores"]) {
    this.#shared.stores = entry;
  }
  get #saidCauses(): Set<string> {
    return this.#shared.saidCauses;
  }

  listStores(): Promise<Store[]> {
    const cached = this.#stores;
    if (cached && this.#now() - cached.at < this.#storesTtlMs) {
      return cached.value.then((stores) => stores.map((s) => ({ ...s })));
    }
    const value = this.#read("/v1/stores", undefined, z.object({ stores: z.array(storeSchema) }), {
      subject: "the store directory",
    }).then((body) => body.stores);
    const entry = { at: this.#now(), value };
    this.#stores = entry;
    // A failure is not cached: the next call tries again.
    value.catch(() => {
      if (this.#stores === entry) this.#stores = undefined;
    });
    return value.then((stores) => stores.map((s) => ({ ...s })));
  }

  async lookupSku(query: string): Promise<Sku[]> {
    const path = `/v1/skus?q=${queryText(query)}`;
    const body = await this.#read(path, undefined, z.object({ skus: z.array(skuSchema) }), {
      subject: "the catalogue",
    });
    return body.skus;
  }

  async getSku(sku: string): Promise<Sku> {
    return this.#read(`/v1/skus/${seg(sku)}`, undefined, skuSchema, { sku });
  }

  async getStock(storeId: string, sku: string, key: ApiKey): Promise<StockReading> {
    const reading = await this.#read(
      `/v1/stores/${seg(storeId)}/stock/${seg(sku)}`,
      key,
      stockSchema,
      { storeId, sku },
    );
    return checkedStock(reading, storeId, sku);
  }

  async getOrder(storeId: string, orderId: string, key: ApiKey): Promise<Order> {
    const order = await this.#read(
      `/v1/stores/${seg(storeId)}/orders/${seg(orderId)}`,
      key,
      orderSchema,
      { storeId, orderId },
    );
    return checkedOrder(order, storeId, orderId);
  }

  /** Contract 1.1; a StoreLink without the route is `unsupported`. */
  async getOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<OrderRequestRecord> {
    const answer = await this.#read(
      `/v1/stores/${seg(storeId)}/order-requests/${keySeg(idempotencyKey)}`,
      key,
      orderRequestSchema,
      { storeId, orderRequest: true },
    );
    return checkedOrderRequest(answer, storeId, idempotencyKey);
  }

  /**
   * Contract 1.1. It writes a fenced record but never creates an order: a failure of any kind is
   * `unavailable` (nothing decided as far as this caller knows; fencing again is harmless).
   */
  async fenceOrderRequest(
    storeId: string,
    idempotencyKey: string,
    key: ApiKey,
  ): Promise<FenceResult> {
    const answer = await this.#read(
      `/v1/stores/${seg(storeId)}/order-requests/${keySeg(idempotencyKey)}/fence`,
      key,
      fenceSchema,
      { storeId, orderRequest: true },
      "POST",
    );
    return checkedFence(answer, storeId);
  }

  async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    checkId(request.sku); // In the body, not the route, but the rule is the same as in-memory.
    if (request.idempotency_key !== undefined) checkIdempotencyKey(request.idempotency_key);
    const ids = { storeId: request.store_id, sku: request.sku };
    const headers: Record<string, string> = {
      "content-type": "application/json",
      [STORELINK_KEY_HEADER]: keyHeader(key, ids),
    };
    if (request.idempotency_key !== undefined) {
      headers["Idempotency-Key"] = request.idempotency_key;
      // A StoreLink with a key-less dedupe window folds it as it folds key-less orders.
      if (request.key_made_by_server === true) headers[KEY_SOURCE_HEADER] = "server";
    }
    const body = JSON.stringify({
      sku: request.sku,
      quantity: request.quantity,
      reason: request.reason,
    });
    const url = `${this.#base}/v1/stores/${seg(request.store_id)}/orders`;

    const response = await this.#send(url, { method: "POST", headers, body }, "write", ids);
    if (response.status === 201 || response.status === 200) {
      const order = await this.#parse(response, orderSchema, "write", ids);
      // Only the fields StoreLink owns are taken, each on its contract shape; an order other than
      // the one sent is no clean CREATED of what was asked: something landed, a person must look.
      return checkedCreate({ order, replayed: response.status === 200 }, request);
    }
    throw await this.#errorFrom(response, "write", ids);
  }

  async #read<T>(
    path: string,
    key: ApiKey | undefined,
    schema: z.ZodType<T>,
    ids: Ids,
    method: "GET" | "POST" = "GET",
  ): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (key) headers[STORELINK_KEY_HEADER] = keyHeader(key, ids);
    const response = await this.#send(`${this.#base}${path}`, { method, headers }, "read", ids);
    if (response.status !== 200) throw await this.#errorFrom(response, "read", ids);
    // The key sent is taken out of the answer (in every form) before any field is checked.
    const answer = await this.#parse(response, schema, "read", ids);
    return key ? key.scrub(answer) : answer;
  }

  /** fetch with a deadline; transport failures become `unavailable` or `outcome_unknown`. */
  async #send(url: string, init: RequestInit, mode: Mode, ids: Ids): Promise<Response> {
    const trace = this.#trace;
    const traceparent = trace?.onRequest();
    if (traceparent !== undefined) {
      // Optional in the contract: StoreLink's own spans join the caller's trace.
      init.headers = { ...(init.headers as Record<string, string>), traceparent };
    }
    try {
      // A redirect is off-contract and is never followed: the key must not reach another origin.
      const response = await this.#fetch(url, {
        ...init,
        redirect: "manual",
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      this.#saidCauses.clear();
      trace?.onStatus(response.status);
      return response;
    } catch (error) {
      const failure = classify(error);
      sayConnectionFailure(this.#saidCauses, failure);
      throw transportError(mode, failure, ids);
    }
  }

  async #parse<T>(response: Response, schema: z.ZodType<T>, mode: Mode, ids: Ids): Promise<T> {
    let json: unknown;
    try {
      json = await readJson(response);
    } catch (error) {
      // The status line arrived, so the request was processed; the body was cut or garbled.
      const failure = classify(error);
      throw transportError(mode, new Failure(true, `unreadable body (${failure.detail})`), ids);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      throw transportError(mode, new Failure(true, "response outside the contract"), ids);
    }
    return parsed.data;
  }

  async #errorFrom(response: Response, mode: Mode, ids: Ids): Promise<Error> {
    const status = response.status;
    if (status >= 300 && status < 400) {
      // Whatever its body says (a 303 is no "this order already existed"): a read failed, a
      // write may have landed.
      void response.body?.cancel().catch(() => {});
      return transportError(mode, new Failure(true, `redirect HTTP ${status}, not followed`), ids);
    }
    let code: string | undefined;
    try {
      const parsed = errorSchema.safeParse(await readJson(response));
      if (parsed.success) code = contractCode(parsed.data.error.code);
    } catch {
      // No usable body: decided by the status alone below.
    }
    if (mode === "write" && (code === undefined || !WRITE_REFUSALS[status]?.includes(code))) {
      return transportError(
        mode,
        new Failure(true, `off-contract answer HTTP ${status}${code ? ` (${code})` : ""}`),
        ids,
      );
    }
    // The order-request routes are contract 1.1: a StoreLink before it has no such route.
    if (ids.orderRequest === true && isMissingRoute(status, code)) {
      return new StoreLinkError("unsupported", messageFor("unsupported", ids));
    }
    if (code !== undefined && DOMAIN_CODES.has(code as StoreLinkErrorKind)) {
      const kind = code as StoreLinkErrorKind;
      return new StoreLinkError(kind, messageFor(kind, ids));
    }
    // 503 `unavailable` is StoreLink's promise that it refused before acting.
    if (response.status === 503 && code === "unavailable") {
      return transportError(mode, new Failure(false, "StoreLink answered 503 unavailable"), ids);
    }
    if (response.status >= 500 || response.status === 408 || response.status === 429) {
      // Processed or not, we cannot tell: a write is uncertain, a read simply failed.
      return transportError(mode, new Failure(true, `HTTP ${response.status}`), ids);
    }
    // Any other 4xx: StoreLink refused a request this client built, i.e. a bug here. Only the
    // status and a contract code (or "unrecognised") go into the message.
    return new Error(
      `StoreLink refused the request with HTTP ${response.status}${code ? ` (${code})` : ""}.`,
    );
  }
}

/** A size no StoreLink answer of the contract comes near; a larger body is not read further. */
export const MAX_RESPONSE_BYTES = 1024 * 1024;

class BodyTooLarge extends Error {
  override readonly name = "BodyTooLarge";
}

/**
 * The body as JSON, read up to MAX_RESPONSE_BYTES: past that the stream is cancelled and this
 * throws, so memory stays flat whatever StoreLink (or something posing as it) sends.
 */
async function readJson(response: Response): Promise<unknown> {
  const declared = Number(response.headers.get("content-length") ?? Number.NaN);
  if (declared > MAX_RESPONSE_BYTES) {
    void response.body?.cancel().catch(() => {});
    throw new BodyTooLarge(`body of ${declared} bytes`);
  }
  const reader = response.body?.getReader();
  if (!reader) return JSON.parse("");
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_RESPONSE_BYTES) {
      void reader.cancel().catch(() => {});
      throw new BodyTooLarge(`body over ${MAX_RESPONSE_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

interface Ids {
  storeId?: string;
  sku?: string;
  orderId?: string;
  subject?: string;
  /** A contract 1.1 order-request route (read or fence). */
  orderRequest?: boolean;
}

/**
 * A route StoreLink does not have: its 404 `not_found`, or a 404, 405 or 501 that carries no code
 * of the contract (a server or proxy in front of a StoreLink before 1.1).
 */
const isMissingRoute = (status: number, code: string | undefined): boolean =>
  (status === 404 && code === "not_found") ||
  ([404, 405, 501].includes(status) && (code === undefined || code === UNRECOGNISED));

/**
 * Path segments are ids from the model. Encoding alone is not enough: encodeURIComponent leaves
 * `.` and `..` as they are and URL normalisation resolves them, changing the route. So an id
 * outside the shared rule (ids.ts) is refused here, before any request is built or sent. The
 * methods calling it are async, so the refusal is a rejected promise, never a synchronous throw.
 */
const seg = (value: string): string => encodeURIComponent(checkId(value));

/** An idempotency key as a path segment, by the same reasoning (its rule excludes `.` and `..`). */
const keySeg = (value: string): string => encodeURIComponent(checkIdempotencyKey(value));

/**
 * Free text for a query string. encodeURIComponent throws on a lone surrogate, which would turn
 * a model's odd query into an internal error: replace those with U+FFFD first, as
 * URLSearchParams does.
 */
const queryText = (value: string): string =>
  encodeURIComponent(
    value.replace(
      /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
      "\uFFFD",
    ),
  );

function messageFor(kind: StoreLinkErrorKind, ids: Ids): string {
  switch (kind) {
    case "unknown_store":
      return `Unknown store ${ids.storeId}.`;
    case "unknown_sku":
      return `Unknown SKU ${ids.sku}.`;
    case "not_ranged":
      return `SKU ${ids.sku} is not ranged at store ${ids.storeId}.`;
    case "order_not_found":
      return `No order ${ids.orderId} for store ${ids.storeId}.`;
    case "unauthorized":
      return `StoreLink rejected the key for store ${ids.storeId}.`;
    case "idempotency_conflict":
      return "This idempotency key was already used for a different order.";
    case "idempotency_key_fenced":
      return "This idempotency key was fenced: it never created an order and never can; place the order with a new key.";
    case "order_request_not_found":
      return `No order request with this idempotency key at store ${ids.storeId}.`;
    case "order_request_in_progress":
      return `A create with this idempotency key is running at store ${ids.storeId}; ask again shortly.`;
    case "unsupported":
      return `StoreLink for store ${ids.storeId} does not support order requests (contract 1.1).`;
    default:
      return `StoreLink failed (${kind}).`;
  }
}

/**
 * The key as a header value, or a credentials error naming the store. Key sources refuse such a
 * key already; this keeps any other source (or a future one) from reaching fetch with it, where
 * it would fail before connecting and, worse, in an error whose text quotes the value.
 */
function keyHeader(key: ApiKey, ids: Ids): string {
  const value = key.reveal();
  if (!isSendableKey(value)) throw new UnusableKeyError(ids.storeId ?? "?", "the key");
  return value;
}

/** Decides whether a thrown fetch error happened before anything was sent. */
function classify(error: unknown): Failure {
  if (error instanceof BodyTooLarge) return new Failure(true, `answer larger than 1 MiB, not read`);
  const name = (error as { name?: string } | null)?.name;
  if (name === "TimeoutError" || name === "AbortError") {
    // The deadline may fire mid-connect or after the body left: it cannot prove "not sent".
    return new Failure(true, "timed out");
  }
  // fetch reports every network failure as TypeError("fetch failed") with the cause attached;
  // any other TypeError comes from building the request (an invalid header value, URL or
  // method) before a connection is opened. Its text can quote the header, so it is not kept.
  if (error instanceof TypeError && error.message !== "fetch failed") {
    return new Failure(false, "request refused before sending");
  }
  const code = causeCode(error);
  if (code !== undefined && NOT_SENT_CODES.has(code)) return new Failure(false, code);
  return new Failure(true, code ?? "connection failed");
}

function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current && typeof current === "object"; depth += 1) {
    const code = (current as { code?: unknown }).code;
    // Codes from undici or libc look like ECONNRESET or UND_ERR_SOCKET; anything else is not
    // trusted into a message.
    if (typeof code === "string") return /^[A-Z][A-Z0-9_]{1,39}$/.test(code) ? code : undefined;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function transportError(mode: Mode, failure: Failure, ids: Ids): StoreLinkError {
  const what = ids.subject ?? (ids.storeId ? `store ${ids.storeId}` : "StoreLink");
  if (mode === "write" && failure.sent) {
    return new StoreLinkError(
      "outcome_unknown",
      `The order for store ${ids.storeId} was sent but no usable answer came back (${failure.detail}); it may have been created.`,
    );
  }
  return new StoreLinkError(
    "unavailable",
    `StoreLink could not be reached for ${what} (${failure.detail}).`,
  );
}
