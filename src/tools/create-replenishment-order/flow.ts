import { withStoreKey } from "../../auth.js";
import {
  isToolError,
  notCreated,
  outcomeUnknown,
  type ToolError,
  toToolError,
} from "../../errors.js";
import type { Confirmer, SentOrder } from "../../logging/records.js";
import {
  ANSWERED_BY_KEY_DETAIL,
  CONFIRMED_BY_KEY_DETAIL,
  failedWrite,
  intentOf,
  mayHaveLanded,
  orderFieldsOf,
  refusedWrite,
  type Stage,
  submittedWrite,
} from "../../policy/audit.js";
import { askByKey, askWithin } from "../../policy/order-by-key.js";
import type { Attempt, Reservation } from "../../policy/order-cap.js";
import { SOME_CATEGORY } from "../../policy/store-policy.js";
import {
  isStoreLinkError,
  type OrderRequest,
  type Sku,
  type Store,
} from "../../storelink/client.js";
import { checkedCreate, type OrderReceipt } from "../../storelink/contract.js";
import { catalogueItem, checkAccess, storeDirectory, unknownStore } from "../common.js";
import { AskBuyer, type ToolContext } from "../define.js";
import { askBuyer, confirmationRequired, confirmedByState } from "./confirmation.js";
import { amount, preview } from "./preview.js";
import { type OrderInput, type OrderOutput, serverMadeKey } from "./schema.js";

/** Arguments that failed validation (or the rate limit): audited REJECTED, nothing sent. */
export async function auditRefusal(error: ToolError, ctx: ToolContext): Promise<void> {
  await ctx.recorder.audit(refusedWrite(ctx.call, error), ctx.call.traceFields);
}

/**
 * One write, in order: the store and SKU, a preview if asked, who confirms (the buyer, or the
 * agent's word), a slot under the cap, the send, and exactly one audit line for whatever happened.
 */
export async function placeOrder(args: OrderInput, ctx: ToolContext): Promise<OrderOutput> {
  // The order as every line about it says it (the catalogue returns the very SKU asked for).
  const order = orderFieldsOf(args);
  /** The order with its key, once it has one: every line from then on names the key. */
  let sentOrder: SentOrder | undefined;
  let stage: Stage = "checking";
  try {
    // A store this principal may not order for is refused before anything else: no StoreLink
    // call, no key lookup, no cap slot, no question to the buyer. The SKU's category, once read,
    // is checked too.
    const policy = await ctx.policy.current();
    checkAccess(policy, ctx.call, "order", args.store_id, SOME_CATEGORY);
    const [directory, item] = await Promise.all([
      storeDirectory(ctx),
      catalogueItem(ctx, args.sku),
    ]);
    checkAccess(policy, ctx.call, "order", args.store_id, item.category);
    const store = directory.get(args.store_id);
    if (!store) throw unknownStore(args.store_id, directory);
    if (args.dry_run === true) return await preview(args, ctx, store, item);

    // Who confirms: the buyer through round 2's answer; else only the agent's word, which
    // KORRAL_REQUIRE_CONFIRMATION refuses.
    const rounds = ctx.rounds;
    if (rounds && rounds.state === undefined) {
      await askBuyer(args, ctx, rounds, store, item, (error) =>
        ctx.recorder.audit(
          failedWrite(ctx.call, order, error, "checking", false),
          ctx.call.traceFields,
        ),
      );
    }
    let idempotencyKey = args.idempotency_key;
    let confirmed: Confirmer = "agent";
    if (rounds) {
      idempotencyKey = await confirmedByState(args, ctx, rounds);
      confirmed = "buyer";
    } else if (ctx.requireConfirmation) {
      throw confirmationRequired();
    }

    // Every create carries a key: the agent's, the confirmation's, or one made here.
    const key = idempotencyKey ?? serverMadeKey();
    const sent: SentOrder = { ...order, idempotency_key: key };
    sentOrder = sent;
    const asSent = {
      store_id: args.store_id,
      sku: item.sku,
      quantity: args.quantity,
      reason: args.reason,
      idempotency_key: key,
    };
    const request: OrderRequest =
      idempotencyKey === undefined ? { ...asSent, key_made_by_server: true } : asSent;
    const submitted = (receipt: OrderReceipt, replayed: boolean, detail?: string) =>
      answerSubmitted(args, ctx, store, item, sent, confirmed, receipt, replayed, detail);

    const reserved = await reserve(
      ctx,
      store,
      item,
      { ...intentOf(ctx.call, sent), ...asSent },
      {
        agentKey: idempotencyKey !== undefined,
        answer: (known) => submitted(known, true, ANSWERED_BY_KEY_DETAIL),
      },
    );
    if (!("slot" in reserved)) return reserved.answered;
    const { slot } = reserved;

    let created: Awaited<ReturnType<typeof ctx.storelink.createOrder>>;
    try {
      created = await withStoreKey(ctx.keys, args.store_id, async (key) => {
        stage = "sent";
        ctx.onSend(sent);
        // From the answer only the receipt (order id, status, time) on its contract shape; the
        // rest is what was sent. Off the contract, the write is uncertain (it was sent).
        return checkedCreate(await ctx.storelink.createOrder(request, key), request);
      });
    } catch (error) {
      const toolError = toToolError(error, ctx.call.requestId);
      if (mayHaveLanded(toolError, stage)) {
        // The answer was lost: StoreLink is asked by the key (reads only) before answering.
        const known = await askWithin(ctx, asSent, ctx.call.signal);
        if (known.state === "created") {
          await slot.answered(slot.joined);
          return await submitted(known.order, slot.joined, CONFIRMED_BY_KEY_DETAIL);
        }
        await slot.failed(known.state !== "fenced");
        if (known.state === "fenced") throw notCreated(key);
        // An order that may have landed counts against the cap until it is resolved.
        throw outcomeUnknown(toolError, args.store_id, key);
      }
      await slot.failed(false);
      throw isStoreLinkError(error, "idempotency_key_fenced") ? notCreated(key) : error;
    }
    const { order: receipt, replayed } = created;
    await slot.answered(replayed);
    return await submitted(receipt, replayed);
  } catch (error) {
    // Asking is not an outcome: round 2 (or the buyer's silence) writes the audit line.
    if (error instanceof AskBuyer) throw error;
    const toolError = toToolError(error, ctx.call.requestId);
    await ctx.recorder.audit(
      failedWrite(ctx.call, sentOrder ?? order, toolError, stage, args.dry_run === true),
      ctx.call.traceFields,
    );
    throw toolError;
  }
}

/**
 * A slot for the write; a retry whose key already holds one, or that cannot be counted (the
 * limits store down), asks StoreLink first: an order that landed is answered REPLAYED with no
 * create and no new slot, a fenced key is refused `not_created`.
 */
async function reserve(
  ctx: ToolContext,
  store: Store,
  item: Sku,
  attempt: Attempt,
  how: { agentKey: boolean; answer: (order: OrderReceipt) => Promise<OrderOutput> },
): Promise<{ slot: Reservation } | { answered: OrderOutput }> {
  let slot: Reservation;
  try {
    slot = await ctx.limits("take slot", () => ctx.orderCap.hold(store, item, attempt));
  } catch (error) {
    if (!how.agentKey || !isToolError(error, "limits_unavailable")) throw error;
    const known = await askByKey(ctx, attempt);
    if (known.state === "created") return { answered: await how.answer(known.order) };
    if (known.state === "fenced") throw notCreated(attempt.idempotency_key);
    throw error;
  }
  if (!slot.joined) return { slot };
  const known = await askByKey(ctx, attempt);
  if (known.state === "created") {
    await slot.answered(true);
    return { answered: await how.answer(known.order) };
  }
  if (known.state === "fenced") {
    await slot.failed(false);
    throw notCreated(attempt.idempotency_key);
  }
  return { slot };
}

/**
 * The answer of a write StoreLink created (or replayed), after its audit line is durable: a
 * crash now cannot lose the trail. A replay is REPLAYED against the original order, never a
 * second CREATED.
 */
async function answerSubmitted(
  args: OrderInput,
  ctx: ToolContext,
  store: Store,
  item: Sku,
  sent: SentOrder,
  confirmed: Confirmer,
  receipt: OrderReceipt,
  replayed: boolean,
  detail?: string,
): Promise<OrderOutput> {
  await ctx.recorder.audit(
    submittedWrite(ctx.call, sent, receipt.order_id, replayed, confirmed, detail),
    ctx.call.traceFields,
  );
  // Store, SKU, quantity and reason are the ones sent (checkedCreate); StoreLink's own text
  // reaches neither the answer nor the confirmation.
  const what = `${amount(args.quantity, item)} for ${store.name} (store ${store.store_id})`;
  return {
    mode: "submitted",
    order_id: receipt.order_id,
    status: receipt.status,
    created_at: receipt.created_at,
    replayed,
    confirmation: replayed
      ? `Replenishment order ${receipt.order_id} was already submitted at ${receipt.created_at}: ${what}. This request was a retry; no new order was created. Reason: ${args.reason}`
      : `Replenishment order ${receipt.order_id} submitted: ${what}. Reason: ${args.reason}`,
    store_id: args.store_id,
    store_name: store.name,
    sku: item.sku,
    sku_name: item.name,
    quantity: args.quantity,
    reason: args.reason,
  };
}
