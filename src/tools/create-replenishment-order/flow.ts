import { withStoreKey } from "../../auth.js";
import { type ToolError, toToolError } from "../../errors.js";
import type { Confirmer } from "../../logging/records.js";
import {
  failedWrite,
  mayHaveLanded,
  orderFieldsOf,
  refusedWrite,
  type Stage,
  submittedWrite,
} from "../../policy/audit.js";
import { holdSlot } from "../../policy/order-cap.js";
import { checkedCreate } from "../../storelink/contract.js";
import { catalogueItem, storeDirectory, unknownStore } from "../common.js";
import { AskBuyer, type ToolContext } from "../define.js";
import { askBuyer, confirmationRequired, confirmedByState } from "./confirmation.js";
import { amount, preview } from "./preview.js";
import type { OrderInput, OrderOutput } from "./schema.js";

/** Arguments that failed validation (or the rate limit): audited REJECTED, nothing sent. */
export async function auditRefusal(
  raw: unknown,
  error: ToolError,
  ctx: ToolContext,
): Promise<void> {
  await ctx.recorder.audit(refusedWrite(orderFieldsOf(raw), ctx.requestId, error), ctx.traceFields);
}

/**
 * One write, in order: the store and SKU, a preview if asked, who confirms (the buyer, or the
 * agent's word), a slot under the cap, the send, and exactly one audit line for whatever happened.
 */
export async function placeOrder(args: OrderInput, ctx: ToolContext): Promise<OrderOutput> {
  const auditArgs = {
    store_id: args.store_id,
    sku: args.sku,
    quantity: args.quantity,
    reason: args.reason,
  };
  let stage: Stage = "checking";
  try {
    const [directory, item] = await Promise.all([
      storeDirectory(ctx),
      catalogueItem(ctx, args.sku),
    ]);
    const store = directory.get(args.store_id);
    if (!store) throw unknownStore(args.store_id, directory);
    if (args.dry_run === true) return await preview(args, ctx, store, item);

    // Who confirms: the buyer through round 2's answer; else only the agent's word, which
    // KORRAL_REQUIRE_CONFIRMATION refuses.
    const rounds = ctx.rounds;
    if (rounds && rounds.state === undefined) {
      await askBuyer(args, ctx, rounds, store, item, (error) =>
        ctx.recorder.audit(
          failedWrite(auditArgs, ctx.requestId, error, "checking", false),
          ctx.traceFields,
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

    // Every create holds a slot; a retry joins the one its idempotency key holds.
    const slot = await holdSlot(ctx.orderCap, store, item, idempotencyKey);

    let created: Awaited<ReturnType<typeof ctx.storelink.createOrder>>;
    try {
      const request = {
        store_id: args.store_id,
        sku: item.sku,
        quantity: args.quantity,
        reason: args.reason,
        ...(idempotencyKey === undefined ? {} : { idempotency_key: idempotencyKey }),
      };
      created = await withStoreKey(ctx.keys, args.store_id, async (key) => {
        stage = "sent";
        ctx.onSend?.();
        // From the answer only the receipt (order id, status, time) on its contract shape; the
        // rest is what was sent. Off the contract, the write is uncertain (it was sent).
        return checkedCreate(await ctx.storelink.createOrder(request, key), request);
      });
    } catch (error) {
      // An order that may have landed counts against the cap; a refusal does not.
      await slot.failed(mayHaveLanded(toToolError(error, ctx.requestId), stage));
      throw error;
    }
    const { order, replayed } = created;
    await slot.answered(replayed);

    // The audit line is durable before the answer leaves: a crash now cannot lose the trail.
    // A replay is recorded as REPLAYED against the original order, never a second CREATED.
    await ctx.recorder.audit(
      submittedWrite(auditArgs, ctx.requestId, order.order_id, replayed, confirmed),
      ctx.traceFields,
    );
    // Store, SKU, quantity and reason are the ones sent (checkedCreate); StoreLink's own text
    // reaches neither the answer nor the confirmation.
    const what = `${amount(args.quantity, item)} for ${store.name} (store ${store.store_id})`;
    return {
      mode: "submitted",
      order_id: order.order_id,
      status: order.status,
      created_at: order.created_at,
      replayed,
      confirmation: replayed
        ? `Replenishment order ${order.order_id} was already submitted at ${order.created_at}: ${what}. This request was a retry; no new order was created. Reason: ${args.reason}`
        : `Replenishment order ${order.order_id} submitted: ${what}. Reason: ${args.reason}`,
      store_id: args.store_id,
      store_name: store.name,
      sku: item.sku,
      sku_name: item.name,
      quantity: args.quantity,
      reason: args.reason,
    };
  } catch (error) {
    // Asking is not an outcome: round 2 (or the buyer's silence) writes the audit line.
    if (error instanceof AskBuyer) throw error;
    const toolError = toToolError(error, ctx.requestId);
    await ctx.recorder.audit(
      failedWrite(auditArgs, ctx.requestId, toolError, stage, args.dry_run === true),
      ctx.traceFields,
    );
    throw toolError;
  }
}
