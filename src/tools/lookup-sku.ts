import { z } from "zod";
import { CALL_ORDER, NOT_SUPPORTED } from "./boundaries.js";
import { catalogueMatches, querySchema } from "./common.js";
import { defineTool } from "./define.js";

const skuShape = z.object({
  sku: z.string().describe('Korral SKU code, e.g. "8847291"'),
  name: z.string(),
  category: z.string(),
  unit: z.enum(["each", "kg"]),
});

export const lookupSku = defineTool({
  name: "lookup_sku",
  title: "Look up a SKU",
  description: [
    "Find Korral SKUs by product name or code. Matches a case-insensitive substring of the name",
    '("butter" finds Madeta butter 250g) or an exact or prefix match on the SKU code ("8847").',
    "Use it first to turn what the buyer said into a SKU code; if several match, ask the buyer which.",
    "No match returns an empty list and a hint, not an error.",
    CALL_ORDER,
    NOT_SUPPORTED,
  ].join(" "),
  input: z.strictObject({
    query: querySchema,
  }),
  output: z.object({
    query: z.string(),
    matches: z.array(skuShape),
    hint: z.string().optional(),
  }),
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    openWorldHint: false,
  },
  storeIdOf: () => null,
  async handler({ query }, ctx) {
    const matches = await catalogueMatches(ctx, query);
    if (matches.length > 0) return { query, matches };
    return {
      query,
      matches,
      hint: `No SKU matches "${query}". Try a shorter or different word from the product name (e.g. "butter", "milk"), or the first digits of the SKU code; ask the buyer if unsure.`,
    };
  },
});
