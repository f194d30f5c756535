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
import { SOME_CATEGORY } from "../../policy/store-policy.js";
import { checkedCreate } from "../../storelink/contract.js";
import { catalogueItem, checkAccess, storeDirectory, unknownStore } from "../common.js";
import { AskBuyer, type ToolContext } from "../define.js";
import { askBuyer, confirmationRequired, confirmedByState } from "./confirmation.js";
import { amount, preview } from "./preview.js";
import type { OrderInput, OrderOutput } from "./schema.js";

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

    // Every create holds a slot; a retry joins the one its idempotency key holds.
    const slot = await ctx.orderCap.hold(store, item, idempotencyKey);

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
        ctx.onSend(order);
        // From the answer only the receipt (order id, status, time) on its contract shape; the
        // rest is what was sent. Off the contract, the write is uncertain (it was sent).
        return checkedCreate(await ctx.storelink.createOrder(request, key), request);
      });
    } catch (error) {
      // An order that may have landed counts against the cap; a refusal does not.
      await slot.failed(mayHaveLanded(toToolError(error, ctx.call.requestId), stage));
      throw error;
    }
    const { order: receipt, replayed } = created;
    await slot.answered(replayed);

    // The audit line is durable before the answer leaves: a crash now cannot lose the trail.
    // A replay is recorded as REPLAYED against the original order, never a second CREATED.
    await ctx.recorder.audit(
      submittedWrite(ctx.call, order, receipt.order_id, replayed, confirmed),
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
  } catch (error) {
    // Asking is not an outcome: round 2 (or the buyer's silence) writes the audit line.
    if (error instanceof AskBuyer) throw error;
    const toolError = toToolError(error, ctx.call.requestId);
    await ctx.recorder.audit(
      failedWrite(ctx.call, order, toolError, stage, args.dry_run === true),
      ctx.call.traceFields,
    );
    throw toolError;
  }
}
