import { z } from "zod";
import { withStoreKey } from "../auth.js";
import { SOME_CATEGORY } from "../policy/store-policy.js";
import { isStoreLinkError, type Order } from "../storelink/client.js";
import { checkedOrder } from "../storelink/contract.js";
import { CALL_ORDER, NOT_SUPPORTED } from "./boundaries.js";
import {
  checkAccess,
  idempotencyKeySchema,
  orderIdSchema,
  storeDirectory,
  storeIdSchema,
  unknownStore,
} from "./common.js";
import { defineTool, type ToolContext } from "./define.js";

/** What the status of a write is, asked by its order id or by its idempotency key. */
const STATES = {
  created: "the order exists (its fields are set)",
  in_progress: "StoreLink is creating an order with this key right now: ask again in a minute",
  not_created:
    "that attempt never created an order and now never can: if the buyer still wants it, place it with a new key",
  unknown: "StoreLink has no record of the key yet, or could not say: ask again shortly",
} as const;
type State = keyof typeof STATES;

export const getReplenishmentStatus = defineTool({
  name: "get_replenishment_status",
  title: "Get replenishment order status",
  description: [
    "Read back one replenishment order and the store it was placed for: by its exact order_id",
    "(RPL-<store>-<seq>), or by the exact idempotency_key its create was sent with (the one you",
    "gave, or the one an outcome_unknown result returned); exactly one of the two. state says",
    "what is known: created (with the order and its status: submitted, picking, dispatched,",
    "delivered), in_progress, not_created (that attempt never created an order and never can),",
    "or unknown (ask again shortly). store_id is a scope check: an order or key of another store",
    "is reported as not found. Use it after create_replenishment_order to confirm the order",
    "landed, and before any retry after an outcome_unknown error. There is no list or search of",
    "orders, and no delivery ETA.",
    CALL_ORDER,
    NOT_SUPPORTED,
  ].join(" "),
  input: z
    .strictObject({
      store_id: storeIdSchema,
      order_id: orderIdSchema.optional(),
      idempotency_key: idempotencyKeySchema
        .optional()
        .describe("Instead of order_id: the exact key the create was sent with"),
    })
    .refine((args) => (args.order_id === undefined) !== (args.idempotency_key === undefined), {
      message: "give exactly one of order_id and idempotency_key",
    }),
  output: z.object({
    state: z.enum(Object.keys(STATES) as [State, ...State[]]).describe(
      Object.entries(STATES)
        .map(([name, meaning]) => `${name}: ${meaning}`)
        .join("; "),
    ),
    summary: z.string().describe("One sentence saying what is known, for the buyer"),
    store_id: z.string(),
    store_name: z.string(),
    idempotency_key: z.string().optional().describe("When asked by key"),
    order_id: z.string().optional(),
    status: z.enum(["submitted", "picking", "dispatched", "delivered"]).optional(),
    sku: z.string().optional(),
    quantity: z.number().int().optional(),
    reason: z.string().optional(),
    created_at: z.string().optional(),
  }),
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  storeIdOf: ({ store_id }) => store_id,
  async handler({ store_id, order_id, idempotency_key }, ctx) {
    // Orders of a store this principal may not read are refused before any StoreLink call.
    checkAccess(await ctx.policy.current(), ctx.call, "read", store_id, SOME_CATEGORY);
    const directory = await storeDirectory(ctx);
    const store = directory.get(store_id);
    if (!store) throw unknownStore(store_id, directory);
    const scope = { store_id, store_name: store.name };
    if (idempotency_key !== undefined) {
      const state = await stateByKey(ctx, store_id, idempotency_key);
      if (state.state !== "created") {
        return {
          state: state.state,
          summary: `Idempotency key ${idempotency_key} at ${store.name} (store ${store_id}): ${STATES[state.state]}.`,
          ...scope,
          idempotency_key,
        };
      }
      return answerOf(state.order, scope, idempotency_key);
    }
    // The order id and store are the ones asked for; status, time, SKU and quantity are checked
    // against the contract after the key is scrubbed out (a SKU holding an echo is off it), and
    // the reason, the one free text kept, is scrubbed of every key this process has sent.
    const id = order_id as string;
    const order = checkedOrder(
      await withStoreKey(ctx.keys, store_id, (key) => ctx.storelink.getOrder(store_id, id, key)),
      store_id,
      id,
    );
    return answerOf(order, scope);
  },
});

function answerOf(
  order: Order,
  scope: { store_id: string; store_name: string },
  idempotencyKey?: string,
) {
  return {
    state: "created" as const,
    summary: `Order ${order.order_id} for ${scope.store_name} (store ${scope.store_id}) is ${order.status}.`,
    ...scope,
    ...(idempotencyKey === undefined ? {} : { idempotency_key: idempotencyKey }),
    order_id: order.order_id,
    status: order.status,
    sku: order.sku,
    quantity: order.quantity,
    reason: order.reason,
    created_at: order.created_at,
  };
}

/**
 * What StoreLink holds for the key, as the agent reads it: an exact key, never a search. A key
 * StoreLink cannot be asked about now (unreachable, a StoreLink without contract 1.1) is `unknown`.
 */
async function stateByKey(
  ctx: ToolContext,
  storeId: string,
  idempotencyKey: string,
): Promise<{ state: "created"; order: Order } | { state: Exclude<State, "created"> }> {
  try {
    const record = await withStoreKey(ctx.keys, storeId, (key) =>
      ctx.storelink.getOrderRequest(storeId, idempotencyKey, key),
    );
    if (record.state === "created") {
      // Checked as a read by order id is: the store asked, the contract's shapes.
      return {
        state: "created",
        order: checkedOrder(record.order, storeId, record.order.order_id),
      };
    }
    return { state: record.state === "fenced" ? "not_created" : "in_progress" };
  } catch (error) {
    if (isStoreLinkError(error, "order_request_not_found")) return { state: "unknown" };
    if (isStoreLinkError(error, "unsupported")) return { state: "unknown" };
    throw error;
  }
}
