import { withStoreKey } from "../../auth.js";
import { orderFieldsOf, previewedWrite } from "../../policy/audit.js";
import type { Sku, StockReading, Store } from "../../storelink/client.js";
import { checkedStock } from "../../storelink/contract.js";
import type { ToolContext } from "../define.js";
import { gapOf } from "../gap.js";
import type { OrderInput, OrderOutput } from "./schema.js";

/** The live read, and the dry run that shows the buyer exactly what would be sent. */

/** The stock in the words the buyer reads: `on_hand 3, 11 sold in the last 24h, gap +8`. */
export const describeStock = (s: StockReading): string => {
  const { gap } = gapOf(s.on_hand, s.units_sold_last_24h);
  return `on_hand ${s.on_hand}, ${s.units_sold_last_24h} sold in the last 24h, gap ${gap > 0 ? "+" : ""}${gap}`;
};

/** `24 x Madeta butter 250g (SKU 8847291)`, or `5 kg of ...` for a SKU sold by weight. */
export const amount = (quantity: number, item: Sku): string =>
  `${quantity}${item.unit === "kg" ? " kg of" : " x"} ${item.name} (SKU ${item.sku})`;

/**
 * The live reading: proves the key works and the SKU is ranged, and gives the buyer numbers. Only
 * its counts and time are StoreLink's, checked as get_stock_position checks them.
 */
export const readStock = async (
  args: OrderInput,
  ctx: ToolContext,
  item: Sku,
): Promise<StockReading> =>
  checkedStock(
    await withStoreKey(ctx.keys, args.store_id, (key) =>
      ctx.storelink.getStock(args.store_id, item.sku, key),
    ),
    args.store_id,
    item.sku,
  );

/**
 * The live reading, for an order that would not be refused by the cap: what a preview and round 1
 * show the buyer. Holds no slot (the write itself takes one).
 */
export async function readStockUnderCap(
  args: OrderInput,
  ctx: ToolContext,
  store: Store,
  item: Sku,
): Promise<StockReading> {
  const stock = await readStock(args, ctx, item);
  await ctx.limits("peek slot", () => ctx.orderCap.refuseIfFull(store, item, args.idempotency_key));
  return stock;
}

/** dry_run: every check a real order runs, a PREVIEW audit line, and nothing submitted. */
export async function preview(
  args: OrderInput,
  ctx: ToolContext,
  store: Store,
  item: Sku,
): Promise<OrderOutput> {
  const stock = await readStockUnderCap(args, ctx, store, item);
  const { gap, reading } = gapOf(stock.on_hand, stock.units_sold_last_24h);
  await ctx.recorder.audit(previewedWrite(ctx.call, orderFieldsOf(args)), ctx.call.traceFields);
  return {
    mode: "preview",
    confirmation: `Preview only, nothing submitted: would order ${amount(args.quantity, item)} for ${store.name} (store ${store.store_id}). Live stock: ${describeStock(stock)}. Reason: ${args.reason}`,
    store_id: store.store_id,
    store_name: store.name,
    sku: item.sku,
    sku_name: item.name,
    quantity: args.quantity,
    reason: args.reason,
    stock: {
      on_hand: stock.on_hand,
      units_sold_last_24h: stock.units_sold_last_24h,
      gap,
      reading,
      as_of: stock.as_of,
    },
  };
}
