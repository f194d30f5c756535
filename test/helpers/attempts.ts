import type { OrderCap } from "../../src/policy/order-cap.js";
import type { Order, StoreLinkClient } from "../../src/storelink/client.js";
import { HERO_REASON, type MapKeyProvider } from "./harness.js";

/** The write the reconciler tests hold and resolve: 24 of SKU 8847291 at store 47. */
export const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const STORE = { store_id: "47", name: "Brno" };
const ITEM = { sku: "8847291", name: "Butter", category: "Dairy", unit: "each" as const };

/** A write's attempt, as its writer records it with its slot. */
export const attemptOf = (requestId: string, idempotencyKey: string) => ({
  ts: new Date().toISOString(),
  request_id: requestId,
  by: "user:alice@korral.example",
  ...ORDER,
  idempotency_key: idempotencyKey,
});

/** A writer took the slot and recorded the attempt in `orderCap`'s book, then died unsent. */
export async function heldAttempt(orderCap: OrderCap, requestId: string, idempotencyKey: string) {
  const attempt = attemptOf(requestId, idempotencyKey);
  return { attempt, reservation: await orderCap.hold(STORE, ITEM, attempt) };
}

/** The held write's order sent to StoreLink under `idempotencyKey`, as its writer sends it. */
export async function sendOrder(
  keys: MapKeyProvider,
  storelink: StoreLinkClient,
  idempotencyKey: string,
): Promise<Order> {
  const key = await keys.getKey("47");
  if (!key) throw new Error("no key for store 47");
  return (await storelink.createOrder({ ...ORDER, idempotency_key: idempotencyKey }, key)).order;
}

/** As `heldAttempt`, but StoreLink created its order before the writer died: no answer came. */
export async function landedAttempt(
  orderCap: OrderCap,
  keys: MapKeyProvider,
  storelink: StoreLinkClient,
  requestId: string,
  idempotencyKey: string,
): Promise<{ attempt: ReturnType<typeof attemptOf>; order: Order }> {
  const { attempt } = await heldAttempt(orderCap, requestId, idempotencyKey);
  return { attempt, order: await sendOrder(keys, storelink, idempotencyKey) };
}
