import { z } from "zod";
import { withStoreKey } from "../auth.js";
import { SOME_CATEGORY } from "../policy/store-policy.js";
import { checkedOrder } from "../storelink/contract.js";
import { CALL_ORDER, NOT_SUPPORTED } from "./boundaries.js";
import {
  checkAccess,
  orderIdSchema,
  storeDirectory,
  storeIdSchema,
  unknownStore,
} from "./common.js";
import { defineTool } from "./define.js";

export const getReplenishmentStatus = defineTool({
  name: "get_replenishment_status",
  title: "Get replenishment order status",
  description: [
    "Read back one replenishment order by its exact order_id (RPL-<store>-<seq>) and the store it",
    "was placed for, with its current status (submitted, picking, dispatched, delivered). store_id",
    "is a scope check: an order id with the wrong store is reported as not found. Use it after",
    "create_replenishment_order to confirm the order landed, and before any retry after an",
    "outcome_unknown error. There is no list or search of orders, and no delivery ETA.",
    CALL_ORDER,
    NOT_SUPPORTED,
  ].join(" "),
  input: z.strictObject({
    store_id: storeIdSchema,
    order_id: orderIdSchema,
  }),
  output: z.object({
    order_id: z.string(),
    status: z.enum(["submitted", "picking", "dispatched", "delivered"]),
    store_id: z.string(),
    store_name: z.string(),
    sku: z.string(),
    quantity: z.number().int(),
    reason: z.string(),
    created_at: z.string(),
  }),
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  storeIdOf: ({ store_id }) => store_id,
  async handler({ store_id, order_id }, ctx) {
    // Orders of a store this principal may not read are refused before any StoreLink call.
    checkAccess(await ctx.policy.current(), ctx.call, "read", store_id, SOME_CATEGORY);
    const directory = await storeDirectory(ctx);
    const store = directory.get(store_id);
    if (!store) throw unknownStore(store_id, directory);
    // The order id and store are the ones asked for; status, time, SKU and quantity are checked
    // against the contract after the key is scrubbed out (a SKU holding an echo is off it), and
    // the reason, the one free text kept, is scrubbed of every key this process has sent.
    const order = checkedOrder(
      await withStoreKey(ctx.keys, store_id, (key) =>
        ctx.storelink.getOrder(store_id, order_id, key),
      ),
      store_id,
      order_id,
    );
    return {
      order_id,
      status: order.status,
      store_id,
      store_name: store.name,
      sku: order.sku,
      quantity: order.quantity,
      reason: order.reason,
      created_at: order.created_at,
    };
  },
});
