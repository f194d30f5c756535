import {
  type CreatedOrder,
  type FenceResult,
  type Order,
  type OrderRequest,
  type OrderRequestRecord,
  type OrderStatus,
  type Sku,
  type StockReading,
  type Store,
  StoreLinkError,
} from "./client.js";
import { isValidId } from "./ids.js";

/**
 * The shapes of the fields StoreLink owns in its answers (openapi/storelink.yaml), checked before
 * any of them is used. Everything else in an answer (store, SKU, quantity, reason of a create;
 * store and SKU of a stock reading; store and order id of a status read) this server sent itself
 * and answers from what it sent. A field off its shape is an off-contract answer: a StoreLink that
 * echoes the key it received finds no field that carries text through to a result or a log.
 */

export const ORDER_STATUSES: readonly OrderStatus[] = [
  "submitted",
  "picking",
  "dispatched",
  "delivered",
];

/**
 * An RFC 3339 date-time (the contract's `format: date-time`): digits and separators only, the
 * fraction at most 9 digits. Parsed and written back by this server (toISOString), so not even
 * its digits are StoreLink's text.
 */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;

/** `value` as this server writes a time, or undefined if it is not a contract date-time. */
export function contractTime(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  // Most times already come as this server writes them: checked digit by digit, no Date made.
  if (isWrittenForm(value)) return value;
  if (!DATE_TIME.test(value)) return undefined;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/**
 * Whether `value` is exactly what toISOString writes for a real instant: `YYYY-MM-DDTHH:MM:SS.mmmZ`
 * with a day the month has, the hour below 24 and the second below 60. Anything else (an offset,
 * another fraction, 24:00, a leap second) goes the long way, through Date.
 */
function isWrittenForm(value: string): boolean {
  if (value.length !== 24) return false;
  if (
    value[4] !== "-" ||
    value[7] !== "-" ||
    value[10] !== "T" ||
    value[13] !== ":" ||
    value[16] !== ":" ||
    value[19] !== "." ||
    value[23] !== "Z"
  ) {
    return false;
  }
  const year = digitsAt(value, 0, 4);
  const month = digitsAt(value, 5, 2);
  const day = digitsAt(value, 8, 2);
  // digitsAt's -1 (not digits) fails every comparison here.
  return (
    year >= 0 &&
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= daysIn(year, month) &&
    isBelow(value, 11, 24) &&
    isBelow(value, 14, 60) &&
    isBelow(value, 17, 60) &&
    digitsAt(value, 20, 3) >= 0
  );
}

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Whether the two digits at `at` are a number below `limit`. */
const isBelow = (value: string, at: number, limit: number): boolean => {
  const n = digitsAt(value, at, 2);
  return n >= 0 && n < limit;
};

/** The number written in `value[at, at + count)`, or -1 if a character there is not a digit. */
function digitsAt(value: string, at: number, count: number): number {
  let out = 0;
  for (let i = at; i < at + count; i++) {
    const digit = value.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return -1;
    out = out * 10 + digit;
  }
  return out;
}

/**
 * The order-id rule: the contract's `RPL-<store>-<seq>` for the store the order was placed for,
 * the sequence 3 to 12 digits (the contract sets no upper bound; a trillion orders at one store is
 * beyond any real sequence, and the bound keeps a long run of digits from carrying anything).
 */
export const isOrderIdOf = (storeId: string, value: unknown): value is string =>
  typeof value === "string" &&
  isValidId(value) &&
  value.startsWith(`RPL-${storeId}-`) &&
  /^\d{3,12}$/.test(value.slice(`RPL-${storeId}-`.length));

export const isOrderStatus = (value: unknown): value is OrderStatus =>
  ORDER_STATUSES.includes(value as OrderStatus);

/** What a create's answer may contribute: the fields StoreLink owns, each on its contract shape. */
export interface OrderReceipt {
  order_id: string;
  status: OrderStatus;
  created_at: string;
}

/**
 * The receipt of a create, or why the answer is off the contract: an order id, status or time off
 * its shape, or an order other than the one sent (store, SKU, quantity). The answer's reason is
 * not read: the reason is the one this server sent.
 */
export function receiptOf(
  order: Order,
  request: Pick<OrderRequest, "store_id" | "sku" | "quantity">,
): OrderReceipt | { problem: string } {
  const differs = (["store_id", "sku", "quantity"] as const).filter(
    (field) => order[field] !== request[field],
  );
  // The order id is named only on its shape: it is the one text of the answer a person needs.
  const named = isOrderIdOf(request.store_id, order.order_id) ? ` ${order.order_id}` : "";
  if (differs.length > 0) return { problem: `order${named} with another ${differs.join(", ")}` };
  const createdAt = contractTime(order.created_at);
  const fields = [
    isOrderIdOf(request.store_id, order.order_id) ? undefined : "order_id",
    isOrderStatus(order.status) ? undefined : "status",
    createdAt === undefined ? "created_at" : undefined,
  ].filter((field) => field !== undefined);
  if (fields.length > 0 || createdAt === undefined) {
    return { problem: `${fields.join(", ")} outside the contract` };
  }
  return { order_id: order.order_id, status: order.status, created_at: createdAt };
}

/**
 * A status read's record, or undefined if it is off the contract. The order id and store are the
 * ones asked for (an answer naming others is off-contract); status and time are checked; the SKU
 * must be an id and the quantity a whole number of units. The reason is StoreLink's stored copy of
 * the text a create sent: it is the one free text kept, and the caller scrubs it of keys.
 */
export function orderRecordOf(order: Order, storeId: string, orderId: string): Order | undefined {
  const createdAt = contractTime(order.created_at);
  const onContract =
    order.order_id === orderId &&
    order.store_id === storeId &&
    isOrderStatus(order.status) &&
    createdAt !== undefined &&
    typeof order.sku === "string" &&
    isValidId(order.sku) &&
    Number.isSafeInteger(order.quantity) &&
    order.quantity >= 1 &&
    typeof order.reason === "string";
  if (!onContract) return undefined;
  return {
    order_id: orderId,
    store_id: storeId,
    sku: order.sku,
    quantity: order.quantity,
    reason: order.reason,
    status: order.status,
    created_at: createdAt,
  };
}

/**
 * A stock reading for the store and SKU asked for, or undefined if it is off the contract: another
 * store or SKU, counts that are not whole numbers, a time that is not a date-time.
 */
export function stockReadingOf(
  reading: StockReading,
  storeId: string,
  sku: string,
): StockReading | undefined {
  const asOf = contractTime(reading.as_of);
  const onContract =
    reading.store_id === storeId &&
    reading.sku === sku &&
    Number.isSafeInteger(reading.on_hand) &&
    Number.isSafeInteger(reading.units_sold_last_24h) &&
    asOf !== undefined;
  if (!onContract) return undefined;
  return {
    store_id: storeId,
    sku,
    on_hand: reading.on_hand,
    units_sold_last_24h: reading.units_sold_last_24h,
    as_of: asOf,
  };
}

/**
 * A create's answer as this server answers it: what it sent, plus the receipt. Throws
 * `outcome_unknown` for an answer off the contract (the request was sent: the order may exist).
 */
export function checkedCreate(created: CreatedOrder, request: OrderRequest): CreatedOrder {
  const receipt = receiptOf(created.order, request);
  if ("problem" in receipt) {
    throw new StoreLinkError(
      "outcome_unknown",
      `The order for store ${request.store_id} was sent but StoreLink answered ${receipt.problem}; it may have been created.`,
    );
  }
  return {
    order: {
      ...receipt,
      store_id: request.store_id,
      sku: request.sku,
      quantity: request.quantity,
      reason: request.reason,
    },
    replayed: created.replayed === true,
  };
}

/** A read's answer off the contract: the read failed (`unavailable`), naming only what was asked. */
export const offContractRead = (what: string): StoreLinkError =>
  new StoreLinkError(
    "unavailable",
    `StoreLink could not be reached for ${what} (response outside the contract).`,
  );

/** orderRecordOf, throwing offContractRead. */
export function checkedOrder(order: Order, storeId: string, orderId: string): Order {
  const record = orderRecordOf(order, storeId, orderId);
  if (record === undefined) throw offContractRead(`store ${storeId}`);
  return record;
}

/**
 * An order StoreLink names by itself (an order request's or a fence's), or undefined if off the
 * contract: its id `RPL-<the store asked for>-<seq>`, then the checks of a status read.
 */
const namedOrderOf = (order: Order | undefined, storeId: string): Order | undefined =>
  order !== undefined && isOrderIdOf(storeId, order.order_id)
    ? orderRecordOf(order, storeId, order.order_id)
    : undefined;

/** An order request's answer, the caller having scrubbed it of the key it sent. */
export interface OrderRequestAnswer {
  idempotency_key: string;
  state: string;
  order?: Order | undefined;
}

/**
 * The record of the key asked for at the store asked for, or offContractRead: the key echoed
 * must be the one asked, the state one of the contract's, and `order` present exactly when the
 * state is `created`, on its shape for this store (its reason the one free text, scrubbed).
 */
export function checkedOrderRequest(
  answer: OrderRequestAnswer,
  storeId: string,
  idempotencyKey: string,
): OrderRequestRecord {
  const off = offContractRead(`store ${storeId}`);
  if (answer.idempotency_key !== idempotencyKey) throw off;
  if (answer.state === "in_progress" || answer.state === "fenced") {
    if (answer.order !== undefined) throw off;
    return { idempotency_key: idempotencyKey, state: answer.state };
  }
  const order = answer.state === "created" ? namedOrderOf(answer.order, storeId) : undefined;
  if (order === undefined) throw off;
  return { idempotency_key: idempotencyKey, state: "created", order };
}

/**
 * A fence's answer, or offContractRead: `fenced` without an order, or `created` with the order
 * on its shape for this store. (A fence decides nothing it could not decide again: it is asked
 * again later, so an answer off the contract is simply unavailable.)
 */
export function checkedFence(
  answer: Omit<OrderRequestAnswer, "idempotency_key">,
  storeId: string,
): FenceResult {
  const off = offContractRead(`store ${storeId}`);
  if (answer.state === "fenced" && answer.order === undefined) return { state: "fenced" };
  const order = answer.state === "created" ? namedOrderOf(answer.order, storeId) : undefined;
  if (order === undefined) throw off;
  return { state: "created", order };
}

/** stockReadingOf, throwing offContractRead. */
export function checkedStock(reading: StockReading, storeId: string, sku: string): StockReading {
  const checked = stockReadingOf(reading, storeId, sku);
  if (checked === undefined) throw offContractRead(`store ${storeId}`);
  return checked;
}

const UNITS: readonly Sku["unit"][] = ["each", "kg"];

/**
 * Directory and catalogue answers (sent without a key), after the caller has scrubbed them of
 * every key this process has sent: ids must still be ids (an id that held an echo no longer is),
 * units one of the contract's; names and categories are free text and stay as scrubbed.
 */
export function checkedStores(stores: readonly Store[]): Store[] {
  const ok = stores.every(
    (s) => typeof s.store_id === "string" && isValidId(s.store_id) && typeof s.name === "string",
  );
  if (!ok) throw offContractRead("the store directory");
  return stores.map(({ store_id, name }) => ({ store_id, name }));
}

export function checkedSkus(skus: readonly Sku[]): Sku[] {
  const ok = skus.every(
    (s) =>
      typeof s.sku === "string" &&
      isValidId(s.sku) &&
      typeof s.name === "string" &&
      typeof s.category === "string" &&
      UNITS.includes(s.unit),
  );
  if (!ok) throw offContractRead("the catalogue");
  return skus.map(({ sku, name, category, unit }) => ({ sku, name, category, unit }));
}

/** One catalogue entry, which must be the SKU asked for. */
export function checkedSku(item: Sku, sku: string): Sku {
  const [checked] = checkedSkus([item]);
  if (checked === undefined || checked.sku !== sku) throw offContractRead("the catalogue");
  return checked;
}
