import { withStoreKey } from "../auth.js";
import type { StoreKeyProvider } from "../keys/provider.js";
import {
  type FenceResult,
  isStoreLinkError,
  type Order,
  type OrderRequest,
  type OrderRequestRecord,
  type StoreLinkClient,
} from "../storelink/client.js";
import { receiptOf } from "../storelink/contract.js";

/** What asking StoreLink by key needs. */
export interface KeyAsker {
  keys: StoreKeyProvider;
  storelink: StoreLinkClient;
}

/** An attempt as it was sent: the order and its key. */
export type SentByKey = Pick<OrderRequest, "store_id" | "sku" | "quantity"> & {
  idempotency_key: string;
};

/**
 * StoreLink's answer for a key, exactly: the order it created (the one sent, else `mismatch`),
 * `fenced`, `in_progress`, `not_found` (no record: not proof that nothing will land), or why it
 * could not say (`unsupported`: a StoreLink without contract 1.1; `unreachable`: anything else).
 */
export type KeyState =
  | { state: "created"; order: Order }
  | { state: "fenced" | "in_progress" | "not_found" | "mismatch" | "unsupported" | "unreachable" };

/** A created record's order if it is the one sent. */
function stateOf(answer: OrderRequestRecord | FenceResult, sent: SentByKey): KeyState {
  if (answer.state !== "created") return { state: answer.state };
  const receipt = receiptOf(answer.order, sent);
  if ("problem" in receipt) return { state: "mismatch" };
  return { state: "created", order: { ...answer.order, ...receipt } };
}

/** Why a read or fence failed, as a state; never throws. */
function failureOf(error: unknown): KeyState {
  if (isStoreLinkError(error, "order_request_not_found")) return { state: "not_found" };
  if (isStoreLinkError(error, "order_request_in_progress")) return { state: "in_progress" };
  if (isStoreLinkError(error, "unsupported")) return { state: "unsupported" };
  return { state: "unreachable" };
}

/** Reads what StoreLink holds for the key (reads only). Never throws. */
export async function readKey(ctx: KeyAsker, sent: SentByKey): Promise<KeyState> {
  try {
    const record = await withStoreKey(ctx.keys, sent.store_id, (key) =>
      ctx.storelink.getOrderRequest(sent.store_id, sent.idempotency_key, key),
    );
    return stateOf(record, sent);
  } catch (error) {
    return failureOf(error);
  }
}

/**
 * Fences the key: from now on it never creates an order. `fenced`, or `created` with the order
 * it had already created (a fence never cancels). Never throws.
 */
export async function fenceKey(ctx: KeyAsker, sent: SentByKey): Promise<KeyState> {
  try {
    const result = await withStoreKey(ctx.keys, sent.store_id, (key) =>
      ctx.storelink.fenceOrderRequest(sent.store_id, sent.idempotency_key, key),
    );
    return stateOf(result, sent);
  } catch (error) {
    return failureOf(error);
  }
}

/**
 * What StoreLink holds for a create's idempotency key, asked by reads only (contract 1.1's
 * order-request read; never a create, never a fence):
 * - `created`: the order the key created, for the store, SKU and quantity sent;
 * - `fenced`: the key never created an order and never can;
 * - `in_progress`: a create with the key is running at StoreLink;
 * - `unknown`: no record (yet), or an order for other details than these (a person must look),
 *   or StoreLink could not say (unreachable, or without contract 1.1).
 */
export type KeyAnswer =
  | { state: "created"; order: Order }
  | { state: "fenced" | "in_progress" | "unknown" };

/**
 * One read of the key, as a write uses it. Whatever stops the read (StoreLink, the key store)
 * makes the answer `unknown`, and the write goes on as it would without it.
 */
export async function askByKey(ctx: KeyAsker, sent: SentByKey): Promise<KeyAnswer> {
  const known = await readKey(ctx, sent);
  if (known.state === "created") return known;
  return known.state === "fenced" || known.state === "in_progress"
    ? { state: known.state }
    : { state: "unknown" };
}

/** The short budget a write spends asking by key before it answers UNCERTAIN. */
export const INLINE_BUDGET_MS = 3_000;
const INLINE_PAUSES_MS = [0, 250, 500, 1_000];

/**
 * Asks by key until StoreLink says `created` or `fenced`, within INLINE_BUDGET_MS (a read
 * started before the budget ends is waited for) and while `signal` is not aborted.
 */
export async function askWithin(
  ctx: KeyAsker,
  sent: SentByKey,
  signal: AbortSignal | undefined,
  budgetMs = INLINE_BUDGET_MS,
): Promise<KeyAnswer> {
  const until = Date.now() + budgetMs;
  let answer: KeyAnswer = { state: "unknown" };
  for (const pause of INLINE_PAUSES_MS) {
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    if (signal?.aborted || Date.now() >= until) break;
    answer = await askByKey(ctx, sent);
    if (answer.state === "created" || answer.state === "fenced") return answer;
  }
  return answer;
}
