import { z } from "zod";
import { withStoreKey } from "../auth.js";
import { errorBodySchema, ToolError, toToolError } from "../errors.js";
import { checkedStock } from "../storelink/contract.js";
import { STORE_DIRECTORY_TEXT } from "../storelink/directory.js";
import { CALL_ORDER, GAP_SEMANTICS, NOT_SUPPORTED } from "./boundaries.js";
import {
  catalogueItem,
  checkAccess,
  skuSchema,
  storeDirectory,
  storeIdSchema,
  unknownStore,
} from "./common.js";
import { defineTool } from "./define.js";
import { gapOf } from "./gap.js";

const MAX_STORES = 50;

const okEntry = z.object({
  status: z.literal("ok"),
  store_id: z.string(),
  store_name: z.string(),
  on_hand: z.number().int(),
  units_sold_last_24h: z.number().int(),
  gap: z.number().int().describe("units_sold_last_24h - on_hand, computed by the server"),
  reading: z
    .enum(["shortfall", "knife_edge", "covered"])
    .describe("gap > 0 shortfall; gap = 0 knife_edge (empties in ~24h, not fine); gap < 0 covered"),
  as_of: z.string().describe("ISO-8601 time of StoreLink's reading"),
});

const errorEntry = z.object({
  status: z.literal("error"),
  store_id: z.string(),
  error: errorBodySchema,
});

type Entry = z.infer<typeof okEntry> | z.infer<typeof errorEntry>;

export const getStockPosition = defineTool({
  name: "get_stock_position",
  title: "Get stock position",
  description: [
    "Read live stock for one SKU across one or more stores: one entry per store with on_hand,",
    "units_sold_last_24h, gap and as_of. Always quote the raw numbers alongside gap so the buyer can",
    "check them.",
    STORE_DIRECTORY_TEXT,
    'Resolve a city or district to every matching store (e.g. "Brno" is 47 and 63); the same',
    "directory is the korral://stores resource.",
    GAP_SEMANTICS,
    "A store that fails (unknown store, no credentials, SKU not ranged there) gets its own error",
    "entry while the other stores still report; not_ranged means the store does not stock the",
    "product: not a typo, not retryable. An unknown SKU fails the whole call, and so does a call",
    'where every store fails: never read failures as "no gaps found".',
    CALL_ORDER,
    NOT_SUPPORTED,
  ].join(" "),
  input: z.strictObject({
    sku: skuSchema,
    store_ids: z
      .array(storeIdSchema)
      .min(1, "must list at least one store id")
      .max(MAX_STORES, `must list at most ${MAX_STORES} store ids`)
      .describe('Store ids to read, e.g. ["47", "102", "111"]'),
  }),
  output: z.object({
    sku: z.string(),
    sku_name: z.string(),
    stores: z.array(z.discriminatedUnion("status", [okEntry, errorEntry])),
  }),
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  storeIdOf: ({ store_ids }) => (store_ids.length === 1 ? (store_ids[0] ?? null) : null),
  async handler({ sku, store_ids }, ctx) {
    const [item, directory, policy] = await Promise.all([
      catalogueItem(ctx, sku),
      storeDirectory(ctx),
      ctx.policy.current(),
    ]);
    const storeIds = [...new Set(store_ids)];

    const stores = await Promise.all(
      storeIds.map(async (storeId): Promise<Entry> => {
        const store = directory.get(storeId);
        try {
          // A store this principal may not read is refused before its key is looked up.
          checkAccess(policy, ctx.call, "read", storeId, item.category);
          if (!store) throw unknownStore(storeId, directory);
          // Only the counts and the time (re-written by this server) come from the reading.
          const reading = checkedStock(
            await withStoreKey(ctx.keys, storeId, (key) =>
              ctx.storelink.getStock(storeId, item.sku, key),
            ),
            storeId,
            item.sku,
          );
          const { gap, reading: label } = gapOf(reading.on_hand, reading.units_sold_last_24h);
          return {
            status: "ok",
            store_id: storeId,
            store_name: store.name,
            on_hand: reading.on_hand,
            units_sold_last_24h: reading.units_sold_last_24h,
            gap,
            reading: label,
            as_of: reading.as_of,
          };
        } catch (error) {
          return {
            status: "error",
            store_id: storeId,
            error: toToolError(error, ctx.call.requestId).toBody(),
          };
        }
      }),
    );

    const failures = stores.filter((s) => s.status === "error");
    if (failures.length === stores.length) {
      // The first store's failure names the type; every store's reason is in the message.
      throw new ToolError(
        failures[0]?.error.type ?? "internal",
        `No stock could be read for any requested store: ${failures
          .map((f) => `store ${f.store_id}: ${f.error.message}`)
          .join(" ")}`,
        'Do not report this as "no gaps". Tell the buyer which stores failed and why; fix the store ids or access and call again.',
        failures.some((f) => f.error.retryable),
        { sku: item.sku, sku_name: item.name, stores },
      );
    }
    return { sku: item.sku, sku_name: item.name, stores };
  },
});
