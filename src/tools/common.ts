import { z } from "zod";
import { ToolError } from "../errors.js";
import type { Store } from "../storelink/client.js";
import type { ToolContext } from "./define.js";

export const storeIdSchema = z
  .string()
  .trim()
  .min(1, "must not be empty")
  .max(32, "must be at most 32 characters")
  .describe('Korral store id, a string such as "47"');

export const skuSchema = z
  .string()
  .trim()
  .min(1, "must not be empty")
  .max(32, "must be at most 32 characters")
  .describe('SKU code from lookup_sku, e.g. "8847291"');

/** The store directory as a map, read once per call. */
export async function storeDirectory(ctx: ToolContext): Promise<Map<string, Store>> {
  const stores = await ctx.storelink.listStores();
  return new Map(stores.map((s) => [s.store_id, s]));
}

export function unknownStore(storeId: string, directory: Map<string, Store>): ToolError {
  const known = [...directory.values()].map((s) => `${s.store_id} (${s.name})`).join(", ");
  return new ToolError(
    "unknown_store",
    `Unknown store ${storeId}. Korral stores: ${known}.`,
    "Check the store id with the buyer and use one of the listed ids.",
    false,
  );
}
