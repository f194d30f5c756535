import {
  type GetPromptResult,
  ProtocolError,
  ProtocolErrorCode,
  type Server,
} from "@modelcontextprotocol/server";
import { z } from "zod";
import { STORE_DIRECTORY_TEXT } from "../storelink/directory.js";
import { GAP_SEMANTICS, NOT_SUPPORTED } from "../tools/boundaries.js";
import { LIST_PARAMS } from "./list-params.js";
import { onRequest } from "./protocol-error.js";

export const REPLENISHMENT_CHECK = "replenishment-check";

const PROMPT = {
  name: REPLENISHMENT_CHECK,
  title: "Replenishment check",
  description:
    "Check a product's stock across stores and, only with the buyer's approval, place one " +
    "replenishment order and read it back.",
  arguments: [
    {
      name: "product",
      description: 'What the buyer asked about, e.g. "Madeta butter" or a SKU code',
      required: true,
    },
    {
      name: "stores",
      description: 'Store ids or places, e.g. "47, 102, 111" or "Brno"; all stores if omitted',
      required: false,
    },
  ],
};

/** The spec's demo flow and rules as one instruction, filled with the buyer's words. */
export function replenishmentCheckText(product: string, stores: string | undefined): string {
  const where = stores?.trim() ? `at: ${stores.trim()}` : "at every Korral store";
  return [
    `The category buyer asks about "${product.trim()}" ${where}. Work through these steps in order:`,
    "1. Resolve the product with lookup_sku. If several SKUs match, ask the buyer which one; never guess.",
    `2. Resolve the stores. ${STORE_DIRECTORY_TEXT} A place name means every store there (Brno is 47 and 63).`,
    "3. Read the stock with get_stock_position across those stores in one call.",
    "4. Report per store: on_hand, units_sold_last_24h and gap, citing the raw numbers. " +
      GAP_SEMANTICS +
      " Name any store that returned an error and why; never read errors as no gap.",
    "5. If a store needs stock, ask the buyer for the exact quantity and their explicit approval " +
      "of store, SKU and quantity. Never compute or suggest a quantity from gap yourself.",
    "6. Optionally call create_replenishment_order with dry_run: true to show the buyer exactly " +
      "what would be submitted. Then write once: one create_replenishment_order call per approved " +
      "order, with a fresh idempotency_key and a reason citing the live numbers and the approval.",
    "7. If the outcome is unknown (outcome_unknown, timeout, lost answer), retry only with the " +
      "SAME idempotency_key (yours, or the one the result returned) and parameters, or check " +
      "get_replenishment_status with that idempotency_key; never with a new key.",
    "8. Read the order back with get_replenishment_status and give the buyer the order_id and the " +
      "confirmation sentence.",
    `Boundaries: ${NOT_SUPPORTED} Orders cannot be cancelled, amended or expedited here: the buyer ` +
      "contacts Korral ops. Credential or access errors go to Korral IT.",
  ].join("\n");
}

export const PROMPT_LIST = { prompts: [PROMPT] };

/** prompts/get, for both protocol eras. Throws ProtocolError for an unknown prompt or argument. */
export function getPrompt(params: {
  name: string;
  arguments?: Record<string, string> | undefined;
}): GetPromptResult {
  if (params.name !== REPLENISHMENT_CHECK) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Unknown prompt ${params.name}. Available: ${REPLENISHMENT_CHECK}`,
    );
  }
  const product = params.arguments?.product;
  if (!product?.trim()) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      'Missing required argument "product".',
    );
  }
  return {
    description: PROMPT.description,
    messages: [
      {
        role: "user",
        content: { type: "text", text: replenishmentCheckText(product, params.arguments?.stores) },
      },
    ],
  };
}

const GET_PARAMS = z.looseObject({
  name: z.string(),
  arguments: z.record(z.string(), z.string()).optional(),
});

/** Registers the workflow prompt. */
export function registerPrompts(server: Server): void {
  onRequest(server, "prompts/list", LIST_PARAMS, () => PROMPT_LIST);
  onRequest(server, "prompts/get", GET_PARAMS, getPrompt);
}
